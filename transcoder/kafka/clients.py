"""Building confluent-kafka clients: logging wired to ours, connection errors made plain."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kafka.errors
import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from transcoder.errors import KafkaUnavailableError
from transcoder.logs import RDKAFKA_LOGGER

#: librdkafka's logs go to this stdlib logger; it is quiet below WARNING unless asked.


class ErrorTracker:
    """`error_cb` for a client: remembers the last global error so a failure can say why."""

    def __init__(self) -> None:
        self.last: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        self.last = err


def retriable(err: KafkaError) -> bool:
    """Whether Kafka says trying again may succeed: librdkafka's flag, else Kafka's own error table.

    librdkafka flags request-level errors itself, but builds per-partition errors of admin results
    (list_offsets, describe_configs) from the bare code with the flag unset. Broker error codes are
    Kafka's protocol codes, whose `retriable` flag kafka-python's table carries (the Java client's).
    """
    if err.retriable():
        return True
    code = err.code()
    if code > 0:
        return bool(kafka.errors.for_code(code).retriable)
    return code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)  # librdkafka's own: no answer in time


def client_config(base: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A librdkafka config with our logger and an error tracker under `error_cb`."""
    conf: dict[str, Any] = {**base, **extra}
    conf.setdefault("logger", logging.getLogger(RDKAFKA_LOGGER))
    conf.setdefault("error_cb", ErrorTracker())
    return conf


def _why(conf: Mapping[str, Any], exc: BaseException | None) -> str:
    tracker = conf.get("error_cb")
    if isinstance(tracker, ErrorTracker) and tracker.last is not None:
        return tracker.last.str()
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        return err.str() if isinstance(err, KafkaError) else str(err)
    return str(exc) if exc else "no answer"


def connect_admin(base: Mapping[str, Any], *, timeout: float = 10.0) -> tuple[AdminClient, ClusterMetadata]:
    """An AdminClient that has answered a metadata request, or KafkaUnavailableError saying why."""
    conf = client_config(base)
    bootstrap = conf.get("bootstrap.servers", "<unset>")
    admin = AdminClient(conf)
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap} within {timeout:g}s: {_why(conf, exc)}"
        ) from exc
    return admin, md


def start_threads(client: Any) -> None:
    """A metadata request makes a librdkafka client start its broker threads, so they can be attributed
    to it (metrics.cpu); a client that cannot reach the cluster yet says so later, where it matters."""
    try:
        client.list_topics(timeout=10)
    except KafkaException as exc:
        structlog.get_logger("transcoder.clients").warning("metadata_request_failed", error=str(exc.args[0]))
