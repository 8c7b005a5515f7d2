"""The batch producer's one error vocabulary: ProduceError, a transcoder error carrying Kafka's error name, code and
`retriable` (and, in a transaction, whether it must be aborted or the producer stops), and Kafka's error table.

Inside the batch producer every failure is a ProduceError. Its callers (the writer, the lane) drive it and
confluent_kafka.Producer alike, so at that boundary, and only there, a ProduceError becomes confluent_kafka's
KafkaError (a delivery report) or KafkaException (a transaction call), with the same flags: `as_kafka_error`.
kafka-python is read here only for what it publishes: its table of Kafka's error codes (`kafka.errors.for_code`:
retriable, invalid metadata) and the error its raw client raises when a request got no answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import kafka.errors
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import TranscoderError

#: What the raw client raises when a request got no answer (not sent, connection lost, timed out).
NoAnswer = kafka.errors.KafkaError
#: A request not sent: the connection is paused (the broker throttles this client) or backing off.
NotSent = kafka.errors.NodeNotReadyError

# Kafka's codes the producer reads by number (the transaction's, PRODUCER_FENCED among them, are pipeline.batching's),
# and librdkafka's own (negative) ones its reports carry.
NETWORK_EXCEPTION = 13
OPERATION_NOT_ATTEMPTED = 55  # AddPartitionsToTxn: not added because another partition of the request failed
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
#: Refusals of a batch for some of its records (a timestamp out of the topic's range, a null key on a compacted
#: topic); the answer names them by index (record_errors, Produce v8+): the batch is cut until each is alone.
RECORD_REFUSALS = frozenset({INVALID_TIMESTAMP, INVALID_RECORD})
TRANSPORT = KafkaError._TRANSPORT
TIMED_OUT = KafkaError._TIMED_OUT
MSG_TIMED_OUT = KafkaError._MSG_TIMED_OUT
FAILED = KafkaError._FAIL


def error_name(code: int) -> str:
    """Kafka's name for `code`, as librdkafka spells it (MSG_SIZE_TOO_LARGE)."""
    return KafkaError(code).name()


def error_text(code: int) -> str:
    """What `code` means, in librdkafka's words ("Broker: Message size too large")."""
    return KafkaError(code).str()


def is_retriable(code: int) -> bool:
    """Kafka's flag: the same request may succeed later (a leader moving, a coordinator loading)."""
    return bool(code) and kafka.errors.for_code(code).retriable


def is_invalid_metadata(code: int) -> bool:
    """Kafka's flag: the partition's leader must be looked up again."""
    return bool(code) and kafka.errors.for_code(code).invalid_metadata


class ProduceError(TranscoderError):
    """A batch not delivered, or a transaction request refused: Kafka's `code` (and its name), and in a transaction
    whether it must be aborted (`txn_requires_abort`) or the producer stops (`fatal`)."""

    def __init__(self, code: int, message: str, *, retriable: bool = False, txn_requires_abort: bool = False,
                 fatal: bool = False) -> None:
        super().__init__(message, kafka_error=error_name(code), retriable=retriable)
        self.code = code
        self.txn_requires_abort = txn_requires_abort
        self.fatal = fatal

    def as_kafka_error(self) -> KafkaError:
        """The same, as confluent_kafka.Producer reports it (what the batch producer's callers read)."""
        return KafkaError(self.code, str(self), fatal=self.fatal, retriable=self.retriable,
                          txn_requires_abort=self.txn_requires_abort)


P = ParamSpec("P")
R = TypeVar("R")


def raises_kafka_exception(call: Callable[P, R]) -> Callable[P, R]:
    """A transaction call of the batch producer's: a ProduceError leaves it as confluent_kafka's KafkaException."""

    @functools.wraps(call)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return call(*args, **kwargs)
        except ProduceError as exc:
            raise KafkaException(exc.as_kafka_error()) from exc

    return wrapped
