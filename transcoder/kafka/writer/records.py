"""The records sinks (`hot_path: records`). At least once (`RecordsSink`): each record produced to every
destination of its topic by the destination's librdkafka producer, acknowledged record by record; a batch a broker
refused whole is sent again record by record (RefusedRecords). A destination whose level librdkafka refuses (zstd
13-22) gets transcoder's BatchProducer instead, chosen once here, when the producers are made. Exactly once
(`TransactionalRecordsSink`): the one destination's transactional librdkafka producer, made per assignment; nothing
is sent again outside a transaction (a refused batch fails it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from transcoder.codecs import built_here
from transcoder.errors import TranscoderError
from transcoder.kafka.clients import start_threads
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.writer.failures import BATCH_REFUSALS, Failure, Record, RefusedRecords
from transcoder.kafka.writer.parts import SinkFront, SinkParts, one_destination
from transcoder.kafka.writer.producers import batch_producer, isolating_producer_config, producer_config
from transcoder.kafka.writer.record_routes import RecordRoutes
from transcoder.kafka.writer.sink import ColumnRun
from transcoder.kafka.writer.transactional import TransactionalFront
from transcoder.kafka.writer.transactions import WriterTransactions
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target


class RecordWrites:
    """What the copy loop hands a records sink, the same at least and exactly once: records (or Spark's columns),
    produced one by one through librdkafka (`records`); librdkafka lingers on its own."""

    name: str
    records: RecordRoutes

    def write(self, msgs: Iterable[Record | Message], on_error: Callable[[KafkaError], None]) -> tuple[int, int]:
        return self.records.write(msgs, on_error)

    def write_columns(self, run: ColumnRun, start: int) -> tuple[int, int]:
        """A run of columns from its record `start` on, produced record by record (`RecordRoutes.write_columns`):
        (records, source bytes)."""
        if start >= len(run.offsets):
            return 0, 0
        self.records.write_columns(run.topic, run.partition, run.offsets[start:], run.keys[start:],
                                   run.values[start:], run.headers[start:], run.stamps[start:], run.sizes[start:],
                                   lambda i: run.record(start + i))
        return len(run.offsets) - start, sum(run.sizes[start:])

    def write_stored(self, source: Partition, records: Any, now: float, start: int = 0,
                     stop: int | None = None) -> tuple[int, int]:
        raise TranscoderError(f"lane {self.name}: hot_path records takes records, not record sets")

    def linger_due(self) -> float | None:
        return None  # librdkafka lingers on its own

    def tick(self, now: float, *, flush: bool = False) -> None:
        pass


class RecordsSink(RecordWrites, SinkFront):
    """The records path at least once: a producer per target, made here."""

    def __init__(self, parts: SinkParts) -> None:
        super().__init__(parts)
        #: records of refused batches, sent again alone by producers of their own
        self.refused = RefusedRecords(parts.name, self.target_of, self._isolator, parts.deliveries.resent,
                                      parts.failures.records.append)
        self.records = RecordRoutes(parts.sources, parts.ledger, parts.failures, self.poll)
        self.producers: list[Producer | BatchProducer] = []
        #: the producers transcoder runs itself (zstd 13-22): their statistics are asked for, and they are closed
        self.own: list[BatchProducer] = []
        #: the librdkafka producers' error_cb (ErrorTracker): whether the destination cluster can be reached
        self.error_trackers: list[Any] = []
        for target in parts.targets:
            p = self._batch_producer(target) if built_here(target.destination.codec, target.destination.level) \
                else self._producer(target)
            self.producers.append(p)
            for s in target.sources:
                self.records.routes[s].append((p.produce, target.topic_for(s)))

    def _producer(self, target: Target) -> Producer:
        parts = self.parts
        cb = parts.deliveries.record_reports(one_destination(target), self.failed_or_refused)
        conf = producer_config(parts.config, parts.client_id(target), target, cb, parts.deliveries.on_producer_stats)
        self.error_trackers.append(conf["error_cb"])
        p: Producer = parts.create("produce", lambda: Producer(conf), start_threads)
        return p

    def _batch_producer(self, target: Target) -> BatchProducer:
        """zstd 13-22: transcoder's producer. Its batches are split until they fit: a failure is already one
        record's."""
        parts = self.parts
        cb = parts.deliveries.record_reports(one_destination(target), parts.failures.failed)
        p: BatchProducer = parts.create("produce", lambda: batch_producer(
            parts.config, parts.client_id(target), target, cb, parts.deliveries.produced), lambda c: c.start())
        self.own.append(p)
        return p

    def failed_or_refused(self, f: Failure, code: int) -> None:
        """A librdkafka producer's failed report: a record of a batch refused whole is sent again alone."""
        if code in BATCH_REFUSALS:
            self.parts.ledger.hold(f.source, f.offset)  # never commit past a record that failed
            self.refused.waiting.append(f)
        else:
            self.parts.failures.failed(f, code)

    def _isolator(self, target: Target) -> Producer:
        """A producer like the target's, sending each record as a batch of its own (RefusedRecords makes one per
        target, at first use)."""
        parts = self.parts
        conf = isolating_producer_config(parts.config, parts.client_id(target) + "-alone", target)
        p: Producer = parts.create("produce", lambda: Producer(conf), None)
        return p

    # ------------------------------------------------------------------ what the copy loop calls
    def poll(self, timeout: float) -> None:
        """Serve delivery reports (waiting up to `timeout` per producer), and send refused records again."""
        for p in self.producers:
            p.poll(timeout)
        for r in self.refused.producers.values():
            r.poll(0)
        self.parts.dead_letters.poll()
        self.refused.resend()  # each record of a refused batch again, alone

    def handle_failures(self) -> None:
        self.parts.failures.handle()

    def drain(self, timeout: float) -> None:
        """Wait for every produced record's delivery report (bounded by `timeout`), failures handled."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        for p in self.producers:
            p.flush(left())
        self.refused.resend()  # each record of a refused batch again, alone
        for r in self.refused.producers.values():
            r.flush(left())
        self.parts.settle(left, timeout, self.handle_failures)

    def final_statistics(self) -> None:
        self.parts.final_statistics(self.own, len(self.producers), self.poll)

    def close(self, timeout: float) -> None:
        self.parts.close(self.own, timeout)


class TransactionalRecordsSink(RecordWrites, TransactionalFront[Producer]):
    """The records path exactly once: the lane's one target, written by librdkafka's transactional producer."""

    def __init__(self, parts: SinkParts, target: Target, transactions: WriterTransactions) -> None:
        super().__init__(parts, target, transactions)
        self.records = RecordRoutes(parts.sources, parts.ledger, parts.failures, self.poll)
        # A refused batch fails the transaction: nothing is re-sent outside it.
        self._reports = parts.deliveries.record_reports(one_destination(target), parts.failures.failed)
        self.error_trackers: list[Any] = []

    def _make(self, transactional_id: str, group_id: str) -> Producer:
        parts = self.parts
        conf = producer_config(parts.config, parts.client_id(self.target), self.target, self._reports,
                               parts.deliveries.on_producer_stats)
        conf.update({"transactional.id": transactional_id,
                     "transaction.timeout.ms": parts.config.transaction_timeout_ms})
        self.transactions.errors = conf["error_cb"]
        self.error_trackers = [self.transactions.errors]
        p: Producer = parts.create("produce", lambda: Producer(conf), None)
        return p

    def _route(self, producer: Producer) -> None:
        for s in self.target.sources:
            self.records.routes[s].append((producer.produce, self.target.topic_for(s)))

    def _unroute(self) -> None:
        self.records.clear()

    def _retire(self, producer: Producer, timeout: float) -> None:
        producer.flush(timeout)

    def _before_abort(self, producer: Producer, timeout: float) -> None:
        # What can still be delivered is, first: an abort racing the partitions' AddPartitionsToTxn fails
        # with INVALID_TXN_STATE (librdkafka issue 4849). The abort purges the rest.
        self._txn_call(producer.flush, min(timeout, 5.0))

    def _next_after_abort(self, producer: Producer, timeout: float) -> None:
        # librdkafka keeps its producer id and epoch across an abort (it has no KIP-890 epoch bump per transaction:
        # confluentinc/librdkafka#5423). A Produce of the aborted transaction that timed out here (a broker
        # restarting, loading its partitions) can still reach the broker after the abort: once the next transaction
        # of the same epoch has added that partition, the broker takes it in, and the next commit commits it - the
        # records twice to read_committed readers. A new producer's InitProducerId bumps the epoch: such a request
        # is refused (INVALID_PRODUCER_EPOCH), as transcoder's own producer's epoch bump after an abort does.
        self.begin_transactions(self.transactions.transactional_id or "", timeout, self._group_id)

    def _abandon(self, producer: Producer) -> None:
        # its call still holds it: never destroyed under it; what it holds is purged, its reports served
        producer.purge()
        producer.poll(0)

    def _own(self) -> list[BatchProducer]:
        return []

    def transaction_doomed(self) -> bool:
        """librdkafka's producer says so only when the commit fails."""
        return False
