"""Logging set-up: structlog, JSON when the output is not a terminal, console renderer when it is."""

from __future__ import annotations

import logging
import re
import sys
from typing import TextIO

import structlog

#: The logger librdkafka's own log lines go to (kafka.clients hands it to every client).
RDKAFKA_LOGGER = "transcoder.rdkafka"


#: A secret in a client's config as kafka-python logs it at debug level ('sasl_plain_password': '...').
_SECRET_VALUE = re.compile(r"""(['"]?[\w.]*(?:password|secret|token|jaas|private_key|key_pem)[\w.]*['"]?\s*[:=]\s*)"""
                           r"""(?:'[^']*'|"[^"]*"|b'[^']*')""", re.IGNORECASE)


def _redact_client_config(record: logging.LogRecord) -> bool:
    """kafka-python logs its whole config (passwords included) when a client starts: secrets become '***'."""
    if record.name.startswith("kafka"):
        message = record.getMessage()
        redacted = _SECRET_VALUE.sub(r"\1'***'", message)
        if redacted != message:
            record.msg, record.args = redacted, ()
    return True


def configure(level: str = "info", *, stream: TextIO | None = None, json: bool | None = None) -> None:
    """Configure structlog and stdlib logging once, from the CLI; never at import time."""
    stream = stream or sys.stderr
    if json is None:
        json = not stream.isatty()
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
    # librdkafka's own log lines arrive through stdlib logging (see clients.py); render them alike.
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[
        structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer,
    ], foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name]))
    handler.addFilter(_redact_client_config)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # librdkafka reports every failed connection attempt; kafka.clients surfaces the same errors
    # once, through error_cb, in the error that stops us. Its raw lines are for debugging only.
    # kafka-python (DescribeLogDirs, raw Fetch and Produce) narrates every connection at INFO and logs every failed
    # attempt at WARNING/ERROR: ten lines a second while a broker is unreachable. Its failures reach us as
    # exceptions, which the caller logs (the batch producer with back-off and a count); its own lines are for
    # debugging only, rendered like ours.
    logging.getLogger("kafka").setLevel(logging.DEBUG if numeric <= logging.DEBUG else logging.CRITICAL)
    logging.getLogger(RDKAFKA_LOGGER).setLevel(logging.DEBUG if numeric <= logging.DEBUG else logging.CRITICAL)
