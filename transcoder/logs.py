"""Logging set-up: structlog, JSON lines when the output is not a terminal, human-readable lines when it is (or
as `--log-format` says); every line, in either form, with the process's secrets redacted."""

from __future__ import annotations

import base64
import faulthandler
import json
import logging
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TextIO, cast

import structlog
from structlog.typing import EventDict, Processor

#: The logger librdkafka's own log lines go to (kafka.clients hands it to every client).
RDKAFKA_LOGGER = "transcoder.rdkafka"


#: A secret shorter than this is not searched for in output: it would blank out common text (and is guessed
#: faster than read).
MIN_REDACTED_LENGTH = 4

#: What a known secret is replaced with in anything the process writes.
REDACTED = "***"


def _escaped(text: str) -> set[str]:
    """`text` as it shows inside a repr of str or bytes, and those inside JSON (a log line of a repr)."""
    forms = {text, repr(text)[1:-1], repr(text.encode())[2:-1], json.dumps(text)[1:-1],
             json.dumps(text, ensure_ascii=False)[1:-1]}
    return forms | {json.dumps(f)[1:-1] for f in list(forms)}


def encoded_forms(secret: str) -> set[str]:
    """The forms a secret takes in a log line or an error: itself, escaped as Python and JSON show it, in
    base64 (standard and URL-safe, padded or not) and hex (lower and upper case)."""
    raw = secret.encode()
    b64 = base64.b64encode(raw).decode()
    url = base64.urlsafe_b64encode(raw).decode()
    return {*_escaped(secret), b64, b64.rstrip("="), url, url.rstrip("="), raw.hex(), raw.hex().upper()}


class Redactor:
    """Replaces every known secret, in each of its encoded forms, by REDACTED: the last net under all output."""

    def __init__(self) -> None:
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, secrets: Iterable[str]) -> None:
        """Learn secrets (transcoder.config.secrets.remember learns those of a client config)."""
        forms = {f for s in secrets if len(s) >= MIN_REDACTED_LENGTH for f in encoded_forms(s)
                 if len(f) >= MIN_REDACTED_LENGTH}
        if not forms <= self._forms:
            self._forms |= forms
            # Longest first: a secret's base64 may hold a shorter secret's.
            self._pattern = re.compile("|".join(re.escape(f) for f in sorted(self._forms, key=len, reverse=True)))

    def redact(self, text: str) -> str:
        pattern = self._pattern
        return text if pattern is None else pattern.sub(REDACTED, text)

    def __bool__(self) -> bool:
        return self._pattern is not None


#: The process's redactor: every config with secrets that is loaded or given on the command line adds to it
#: (transcoder.config.secrets.remember); every log line and the CLI's errors pass through it.
REDACTOR = Redactor()


def redact(text: str) -> str:
    """`text` with every secret learnt so far replaced by REDACTED."""
    return REDACTOR.redact(text)


#: A secret in a client's config as kafka-python logs it at debug level ('sasl_plain_password': '...').
_SECRET_VALUE = re.compile(r"""(['"]?[\w.]*(?:password|secret|token|jaas|private_key|key_pem)[\w.]*['"]?\s*[:=]\s*)"""
                           r"""(?:'[^']*'|"[^"]*"|b'[^']*')""", re.IGNORECASE)

#: Other libraries' log lines are cut to this many characters (with a note of how many were cut).
MAX_CLIENT_LINE = 1024

#: librdkafka's debug contexts turned on by `--debug-clients`: connections, requests, authentication, groups,
#: transactions, metadata; never `msg` (one line per record) or `all`.
RDKAFKA_DEBUG_CONTEXTS = "broker,protocol,security,cgrp,eos,topic,metadata"

#: The clients' own debug lines (kafka-python, librdkafka `debug=`): set by `configure(debug_clients=True)`.
_client_debug = False


def client_debug_contexts() -> str | None:
    """librdkafka's `debug` property for a new client: RDKAFKA_DEBUG_CONTEXTS with `--debug-clients`, else None."""
    return RDKAFKA_DEBUG_CONTEXTS if _client_debug else None


class _Summary(str):
    """A summary in place of a log argument: the same under %s and %r."""

    def __repr__(self) -> str:
        return str(self)


def _summary(arg: object) -> object:
    """A log argument of kafka-python as a line may show it: bytes as their length, a protocol message (a
    request, a response: record sets, SASL credentials) as its type, anything else as it is."""
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return _Summary(f"<{len(arg)} bytes>")
    module = type(arg).__module__ or ""
    if module.startswith(("kafka.protocol", "kafka.record")):
        version = getattr(arg, "API_VERSION", None)
        return _Summary(type(arg).__name__ + (f" v{version}" if isinstance(version, int) else ""))
    return arg


def client_line(record: logging.LogRecord) -> str:
    """The message of another library's log record, safe to write: kafka-python's wire dumps (raw bytes, whole
    requests and responses) summarised before they are formatted, secrets of its config as '***', every
    secret the process knows redacted, cut to MAX_CLIENT_LINE characters."""
    if record.name.startswith("kafka"):
        if isinstance(record.args, tuple):
            record.args = tuple(_summary(a) for a in record.args)
        elif record.args is not None:
            record.args = _summary(record.args)  # type: ignore[assignment]
        message = _SECRET_VALUE.sub(r"\1'***'", record.getMessage())
    else:
        message = record.getMessage()
    if len(message) > MAX_CLIENT_LINE:
        message = f"{message[:MAX_CLIENT_LINE]}... ({len(message) - MAX_CLIENT_LINE} more characters)"
    return redact(message)


def _client_lines(record: logging.LogRecord) -> bool:
    """Handler filter: each stdlib record made safe (client_line) before anything formats it."""
    record.msg, record.args = client_line(record), ()
    return True


def _redact_rendered(_logger: object, _method: str, rendered: EventDict | str) -> EventDict | str:
    """The last processor: no secret the process knows leaves in a rendered line (tracebacks included)."""
    return redact(rendered) if isinstance(rendered, str) else rendered


def _redacting_excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Uncaught exceptions are printed with every known secret redacted."""
    sys.stderr.write(redact("".join(traceback.format_exception(exc_type, exc, tb))))


def _redacting_thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    sys.stderr.write(redact(f"Exception in thread {name}:\n"
                            + "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))))


def stacks_on_signal(signum: int = signal.SIGUSR1) -> None:
    """`kill -USR1 <pid>` writes every thread's Python stack to the process's stderr, as jstack does for a JVM:
    faulthandler answers from the signal handler itself, with no lock and no GIL, so even a process whose threads
    all wait (a deadlock in a client library) says where. Frames only (file, line, function): never a value."""
    assert sys.__stderr__ is not None  # the process's own stderr: None only without a console (pythonw)
    faulthandler.register(signum, file=sys.__stderr__, all_threads=True, chain=False)


#: `--log-format` (TRANSCODER_LOG_FORMAT): auto (console on a terminal, JSON otherwise), or either forced.
LOG_FORMATS = ("auto", "json", "console")


def renders_json(log_format: str, isatty: bool) -> bool:
    """Whether lines are JSON: `json`, or `auto` when the output is not a terminal (piped, a file, Kubernetes)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    return log_format == "json" or (log_format == "auto" and not isatty)


def colours(isatty: bool, environ: Mapping[str, str]) -> bool:
    """Whether human-readable lines are coloured: on a terminal, unless NO_COLOR is set to anything but the empty
    string (no-color.org)."""
    return isatty and not environ.get("NO_COLOR")


class _ProcessStderr:
    """The process's stderr as it is when a line is written, not when logging was configured: a progress bar
    (rich.progress, transcoder.cli.progress) swaps sys.stderr while it draws, and lines written through the swap
    are printed above the bar instead of through it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure(level: str = "info", *, stream: TextIO | None = None, json: bool | None = None,
              log_format: str = "auto", debug_clients: bool = False) -> None:
    """Configure structlog and stdlib logging once, from the CLI; never at import time.

    Lines go to `stream` (default: the process's stderr), as JSON or human-readable (structlog's ConsoleRenderer,
    coloured on a terminal unless NO_COLOR is set, tracebacks plain) as `json` says, else as `log_format` does
    (`renders_json`).

    `debug` shows transcoder's own events and the clients' lines of INFO and above; `debug_clients` adds the
    clients' own debug lines (kafka-python's requests and responses by type, librdkafka's debug contexts),
    each summarised, redacted and cut to MAX_CLIENT_LINE characters: never a record's contents nor a secret.
    Every line, ours or theirs, passes through the process's redactor (transcoder.config.secrets).
    """
    global _client_debug
    _client_debug = debug_clients
    out = stream if stream is not None else cast(TextIO, _ProcessStderr())
    isatty = out.isatty()
    if json is None:
        json = renders_json(log_format, isatty)
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # Tracebacks as plain text: the console renderer's default (rich's) shows each frame's local variables (record
    # contents, a client's config) and wraps long values across lines, where the redactor could not find a secret.
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(
        colors=colours(isatty, os.environ), exception_formatter=structlog.dev.plain_traceback)
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer, _redact_rendered],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    # librdkafka's own log lines arrive through stdlib logging (see clients.py); render them alike.
    handler = logging.StreamHandler(out)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[
        structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer, _redact_rendered,
    ], foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name]))
    handler.addFilter(_client_lines)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    sys.excepthook, threading.excepthook = _redacting_excepthook, _redacting_thread_excepthook
    # librdkafka reports every failed connection attempt; kafka.clients surfaces the same errors
    # once, through error_cb, in the error that stops us. Its raw lines are for debugging only.
    # kafka-python (DescribeLogDirs, raw Fetch and Produce) narrates every connection at INFO and logs every failed
    # attempt at WARNING/ERROR: ten lines a second while a broker is unreachable. Its failures reach us as
    # exceptions, which the caller logs (the batch producer with back-off and a count); its own lines are for
    # debugging only, rendered like ours. Their debug lines (each request and response, every read and write of
    # a socket: at debug, the copy stalled behind megabytes of Fetch answers rendered on kafka-python's I/O
    # thread) only with debug_clients.
    clients = logging.DEBUG if debug_clients else logging.INFO if numeric <= logging.DEBUG else logging.CRITICAL
    logging.getLogger("kafka").setLevel(clients)
    logging.getLogger(RDKAFKA_LOGGER).setLevel(clients)
