"""What an engine's copy loop may ask of a lane's writer: the `Sink` Protocol, and `TransactionalSink`, what
exactly-once adds. The service's lane, checkpoint and copy paths and the Spark engine's tasks call these and nothing
else; the test fakes implement them (mypy holds them to it).

The sinks themselves (kafka.writer.records, kafka.writer.record_sets) are one class per mode, built by
`kafka.writer.factory.build_sink`, the one place that reads the guarantee and the copy path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from transcoder.config import Config
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.writer.failures import Record
from transcoder.kafka.writer.offset_map import OffsetMap
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target


class ColumnRun(Protocol):
    """A run of one source partition's records as columns, in offset order (the Spark engine's Arrow batches)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offsets(self) -> Sequence[int]: ...
    @property
    def keys(self) -> Sequence[bytes | None]: ...
    @property
    def values(self) -> Sequence[bytes | None]: ...
    @property
    def headers(self) -> Sequence[Sequence[tuple[str, bytes | None]] | None]: ...
    @property
    def stamps(self) -> Sequence[int]: ...
    @property
    def sizes(self) -> Sequence[int]: ...

    def record(self, i: int) -> Record:
        """Record i, where one is needed (a record refused at once, for the dead-letter topic or the error)."""


class Sink(Protocol):
    """A lane's writer: a producer per destination, delivery reports into `ledger`, failed records dead-lettered
    or raised. Delivery callbacks run inside `poll`/`drain` and the other calls, on the caller's thread."""

    @property
    def config(self) -> Config: ...
    @property
    def ledger(self) -> Ledger:
        """What is safe to commit (`ledger.committable`): every destination acknowledged the records before it."""
    @property
    def producers(self) -> Sequence[Producer | BatchProducer]:
        """The destinations' producers (exactly-once: the transactional one, once begun; none before)."""
    @property
    def offset_map(self) -> OffsetMap: ...
    @property
    def acked_total(self) -> dict[str, int]:
        """Destination topic -> records acknowledged since start (as of the last `flush_acked`); one dict, kept."""
    @property
    def acked_ts(self) -> Mapping[Partition, int]:
        """(destination topic, partition) -> source timestamp (ms) of the last acknowledged record."""
    @property
    def codec_of(self) -> Mapping[str, str]: ...
    @property
    def source_of(self) -> Mapping[str, str]: ...
    @property
    def target_of(self) -> Mapping[str, Target]: ...
    @property
    def error_trackers(self) -> Sequence[Any]:
        """The librdkafka producers' error callbacks (clients.ErrorTracker): whether the destination answers."""
    @property
    def dead_lettered(self) -> int: ...
    @property
    def start_ms(self) -> float:
        """Records older than this (epoch ms) were backlog when the engine started: no latency for them."""

    def write(self, msgs: Iterable[Record | Message], on_error: Callable[[KafkaError], None]) -> tuple[int, int]:
        """The records path: produce each record to every destination of its topic; (records, bytes) taken."""

    def write_stored(self, source: Partition, records: Any, now: float, start: int = 0,
                     stop: int | None = None) -> tuple[int, int]:
        """The record-sets path: records start..stop of a transcoder_native StoredRecords, re-batched."""

    def write_columns(self, run: ColumnRun, start: int) -> tuple[int, int]:
        """A run of columns (Spark) from its record `start` on, as this sink takes records; (records, bytes)."""

    def linger_due(self) -> float | None:
        """When (monotonic s) the first open batch's linger is over; None when none is open."""

    def tick(self, now: float, *, flush: bool = False) -> None:
        """Send the open batches whose linger is over (all with `flush`)."""

    def poll(self, timeout: float) -> None: ...
    def handle_failures(self) -> None: ...
    def drain(self, timeout: float) -> None: ...
    def flush_map(self, timeout: float) -> bool: ...
    def flush_acked(self) -> None: ...
    def final_statistics(self) -> None: ...
    def close(self, timeout: float) -> None: ...


@runtime_checkable
class TransactionalSink(Sink, Protocol):
    """exactly-once: the lane's one destination written in transactions that also hold the consumer's offsets."""

    @property
    def transactional_id(self) -> str | None: ...

    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None: ...
    def commit_transaction(self, offsets: list[TopicPartition], group: Any, timeout: float,
                           retrying: Callable[[str], None] | None = None) -> None: ...
    def abort_transaction(self, timeout: float, retrying: Callable[[str], None] | None = None) -> None: ...
    def transaction_doomed(self) -> bool: ...
    def replace_producer(self, timeout: float) -> None: ...
    def release_group_offsets(self, partitions: list[TopicPartition], group: Any, timeout: float,
                              known: Mapping[Partition, int] | None = None) -> str | None: ...
