"""The record-sets sinks (`hot_path: batches`): fed raw record sets (`write_stored`), every destination re-batches
them (Batching: the native Rebatcher per destination partition) and sends its batches through transcoder's
BatchProducer, acknowledged batch by batch (`BatchReports`). At least once (`RecordSetsSink`): a producer per target;
exactly once (`TransactionalRecordSetsSink`): the one target's transactional BatchProducer, made per assignment."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, Message

from transcoder.codecs import stored_from_columns
from transcoder.errors import TranscoderError
from transcoder.kafka.producer import BatchProducer, Transactions
from transcoder.kafka.writer.batching import Batching, BatchSink
from transcoder.kafka.writer.failures import Record
from transcoder.kafka.writer.parts import SinkFront, SinkParts, one_destination
from transcoder.kafka.writer.producers import batch_producer
from transcoder.kafka.writer.sink import ColumnRun
from transcoder.kafka.writer.transactional import TransactionalFront
from transcoder.kafka.writer.transactions import WriterTransactions
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target


class BatchReports:
    """The reports of the batches of one lane's record-sets sink, into its Deliveries (the producers' `on_batch`)."""

    def __init__(self, parts: SinkParts, batching: Batching) -> None:
        self.deliveries = parts.deliveries
        self.failed = parts.failures.failed
        self.batching = batching

    def delivered(self, err: KafkaError | None, dest: str, partition: int, base: int, section: Any) -> None:
        """One batch delivered (its records at destination offsets base, base + 1, ...), or failed."""
        self.deliveries.batch(err, dest, partition, base, section, self._reported_at, self.failed)

    def _reported_at(self, dest: str) -> float:
        return self.batching.producer_of(self.deliveries.source_of[dest], dest).reported_at or time.time()


class RecordSetWrites:
    """What the copy loop hands a record-sets sink, the same at least and exactly once: fetched record sets
    (`write_stored`) and Spark's columns framed natively into one, re-batched per destination (`batching`)."""

    name: str
    batching: Batching

    @property
    def batch_routes(self) -> dict[str, list[tuple[BatchSink, str, Target]]]:
        """Source topic -> [(producer, destination topic, target)]."""
        return self.batching.routes

    def write(self, msgs: Iterable[Record | Message], on_error: Callable[[KafkaError], None]) -> tuple[int, int]:
        raise TranscoderError(f"lane {self.name}: hot_path batches takes record sets (write_stored), not records")

    def write_stored(self, source: Partition, records: Any, now: float, start: int = 0,
                     stop: int | None = None) -> tuple[int, int]:
        return self.batching.write_stored(source, records, now, start, stop)

    def write_columns(self, run: ColumnRun, start: int) -> tuple[int, int]:
        """A run of columns (Spark) framed natively into a StoredRecords and handed on as fetched record sets are:
        no Python per record. (records, source bytes)."""
        if start >= len(run.offsets):
            return 0, 0
        stored = stored_from_columns(run.offsets, run.keys, run.values, run.headers, run.stamps)
        return self.write_stored((run.topic, run.partition), stored, time.monotonic(), start)

    def linger_due(self) -> float | None:
        return self.batching.linger_due()

    def tick(self, now: float, *, flush: bool = False) -> None:
        self.batching.tick(now, flush=flush)


class RecordSetsSink(RecordSetWrites, SinkFront):
    """The record-sets path at least once: a BatchProducer per target, made here."""

    def __init__(self, parts: SinkParts) -> None:
        super().__init__(parts)
        self.batching = Batching(parts.ledger)
        self.batch_reports = BatchReports(parts, self.batching)
        self.producers: list[BatchProducer] = []
        self.error_trackers: list[Any] = []  # transcoder's producers say nothing of the cluster's reach
        for target in parts.targets:
            p = self._producer(target)
            self.producers.append(p)
            self.batching.route(p, target)

    def _producer(self, target: Target) -> BatchProducer:
        parts = self.parts
        # Its batches are split until they fit: a failure is already one record's.
        cb = parts.deliveries.record_reports(one_destination(target), parts.failures.failed)
        p: BatchProducer = parts.create("produce", lambda: batch_producer(
            parts.config, parts.client_id(target), target, cb, parts.deliveries.produced,
            self.batch_reports.delivered), lambda c: c.start())
        return p

    def poll(self, timeout: float) -> None:
        """Serve delivery reports (waiting up to `timeout` per producer)."""
        for p in self.producers:
            p.poll(timeout)
        self.parts.dead_letters.poll()

    def handle_failures(self) -> None:
        self.parts.failures.handle()

    def drain(self, timeout: float) -> None:
        """Send the open batches and wait for every delivery report (bounded by `timeout`), failures handled."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.tick(time.monotonic(), flush=True)
        for p in self.producers:
            p.flush(left())
        self.parts.settle(left, timeout, self.handle_failures)

    def final_statistics(self) -> None:
        self.parts.final_statistics(self.producers, len(self.producers), self.poll)

    def close(self, timeout: float) -> None:
        self.parts.close(self.producers, timeout)


class TransactionalRecordSetsSink(RecordSetWrites, TransactionalFront[BatchProducer]):
    """The record-sets path exactly once: the lane's one target, written by a transactional BatchProducer."""

    def __init__(self, parts: SinkParts, target: Target, transactions: WriterTransactions) -> None:
        super().__init__(parts, target, transactions)
        self.batching = Batching(parts.ledger)
        self.batch_reports = BatchReports(parts, self.batching)
        # A refused batch fails the transaction: nothing is re-sent outside it.
        self._reports = parts.deliveries.record_reports(one_destination(target), parts.failures.failed)
        self.error_trackers: list[Any] = []

    def _make(self, transactional_id: str, group_id: str) -> BatchProducer:
        parts = self.parts
        txns = Transactions(transactional_id, group_id, parts.config.transaction_timeout_ms)
        p: BatchProducer = parts.create("produce", lambda: batch_producer(
            parts.config, parts.client_id(self.target), self.target, self._reports, parts.deliveries.produced,
            self.batch_reports.delivered, txns), None)
        return p

    def _route(self, producer: BatchProducer) -> None:
        self.batching.route(producer, self.target)

    def _unroute(self) -> None:
        self.batching.routes.clear()
        self.batching.batchers.clear()

    def _retire(self, producer: BatchProducer, timeout: float) -> None:
        producer.flush(timeout)
        producer.close(0)

    def _before_abort(self, producer: BatchProducer, timeout: float) -> None:
        self.batching.batchers.clear()  # the open batches hold records of this transaction: they are read again

    def _next_after_abort(self, producer: BatchProducer, timeout: float) -> None:
        producer.begin_transaction()  # its abort bumped the epoch already (KIP-588): nothing of it can land later

    def _abandon(self, producer: BatchProducer) -> None:
        pass  # transcoder's producer keeps its timeouts: never stuck in a call

    def _own(self) -> list[BatchProducer]:
        return self.producers

    def transaction_doomed(self) -> bool:
        """Whether the open transaction can no longer commit (a batch it could not deliver within it)."""
        return self.producer is not None and self.producer.doomed
