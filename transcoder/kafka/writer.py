"""The writer: a producer per destination, delivery reports into the ledger, refused batches re-sent
record by record, and the dead-letter topic. Every engine writes through it; it never consumes.

The caller hands it records (confluent_kafka.Message, or anything with the same accessors) and asks
the ledger, `writer.ledger.committable`, what is safe to commit. Delivery callbacks run inside
`poll`/`drain`, on the caller's thread, so its state needs no locks.

Its parts have modules of their own: the producers it builds (writer_producers), the batches of the batched path
(destination_batcher), refused records and the dead-letter topic (writer_failures), exactly-once
(writer_transactions), and what it reports (writer_metrics).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Producer, TopicPartition

from transcoder.codecs import built_here
from transcoder.config import Config
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.kafka.clients import start_threads
from transcoder.kafka.destination_batcher import DestinationBatcher
from transcoder.kafka.offset_map_topic import OffsetMapRecorder
from transcoder.kafka.producer import BatchProducer, Delivered, Transactions
from transcoder.kafka.statistics import TopicProduce, producer_topics
from transcoder.kafka.writer_failures import (
    BATCH_REFUSALS,
    DLQ_HEADERS,
    DeadLetters,
    Failure,
    Record,
    RefusedRecords,
)
from transcoder.kafka.writer_metrics import (
    BATCH_LATENCY_STRATA,
    LATENCY_SAMPLING,
    WriterMetrics,
    batch_latencies,
    new_and_backlog,
)
from transcoder.kafka.writer_producers import (
    LARGEST_RECORD,
    ClientFactory,
    batch_producer,
    build_client,
    dlq_producer_config,
    isolating_producer_config,
    producer_config,
)
from transcoder.kafka.writer_transactions import FENCED, WriterTransactions
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target

log = structlog.get_logger("transcoder.writer")

#: Names of the writer's parts, importable from here as they were before they had modules of their own.
__all__ = ["BATCH_LATENCY_STRATA", "BATCH_REFUSALS", "DLQ_HEADERS", "LARGEST_RECORD", "LATENCY_SAMPLING",
           "ClientFactory", "Failure", "Record", "Writer", "WriterMetrics", "batch_latencies", "batch_producer",
           "build_client", "producer_config"]


class Writer:
    """Writes the records of some source topics to their destinations (the targets of one lane)."""

    def __init__(self, config: Config, name: str, targets: Sequence[Target], metrics: WriterMetrics, *,
                 create: ClientFactory = build_client, start_ms: float | None = None, batched: bool = False) -> None:
        self.config = config
        self.name = name
        self.metrics = metrics
        sources = tuple(dict.fromkeys(s for t in targets for s in t.sources))
        self.ledger = Ledger({s: tuple(t.topic_for(s) for t in targets if s in t.sources) for s in sources})
        self.target_of = {t.topic_for(s): t for t in targets for s in t.sources}
        self.source_of = {t.topic_for(s): s for t in targets for s in t.sources}
        self.codec_of = {dest: t.destination.label for dest, t in self.target_of.items()}
        #: Records older than this (epoch ms) were backlog when the engine started: no latency for them.
        self.start_ms = time.time() * 1000 if start_ms is None else start_ms
        #: destination topic -> records acknowledged since start, and since the last flush into the metrics
        self.acked_total = dict.fromkeys(self.source_of, 0)
        self._acked = dict.fromkeys(self.source_of, 0)
        #: (destination topic, partition) -> source timestamp (ms) of the last acknowledged record
        self.acked_ts: dict[Partition, int] = {}
        self.stats_emissions = 0
        self.failures: list[Failure] = []
        self._create = create
        #: Failed records so far (dead-lettered or fatal), and when the last one was (epoch ms): the cutover gate.
        self.errors_total = 0
        self.last_error_ms: int | None = None
        #: exactly-once: the one target's producer is transactional; it is made by `begin_transactions`, with the
        #: transactional id of the partitions assigned, and the offset map is written in its transactions.
        self.transactional = config.guarantee == "exactly-once"
        #: its transactional calls, and their state (the transactional id, the retries logged)
        self.transactions = WriterTransactions(name, config.transaction_timeout_ms, logger=log)
        self._group_id = ""  # the group whose offsets the transactions commit (begin_transactions)
        if self.transactional and len(targets) != 1:
            raise TranscoderError(f"lane {name}: exactly-once needs one destination per lane, not {len(targets)}")
        #: fed raw record sets (`write_stored`): every destination re-batches them (native Rebatcher) and sends
        #: its batches through a BatchProducer, acknowledged batch by batch (exactly-once: a transactional one)
        self.batched = batched
        #: source topic -> [(producer, destination topic, target)] of the batched path
        self.batch_routes: dict[str, list[tuple[BatchProducer, str, Target]]] = {}
        #: (destination topic, partition) -> its batcher, for those holding records, in the order their sections opened
        self._batchers: dict[Partition, DestinationBatcher] = {}
        #: the librdkafka producers' error_cb (ErrorTracker): whether the destination cluster can be reached
        self.error_trackers: list[Any] = []
        #: With a `migration:` section, where each delivered record came from (the offset map); else None.
        self.offset_map = OffsetMapRecorder(config, f"transcoder-{name}-offset-map", make=lambda conf: create(
            "offset-map", lambda: Producer(conf), start_threads), external=self.transactional) \
            if config.migration is not None else None
        #: records of refused batches, sent again alone by producers of their own
        self.refused = RefusedRecords(name, self.target_of, self._isolator, self._resent, self.failures.append)
        self.producers: list[Producer | BatchProducer] = []
        #: source topic -> [(produce, destination topic)]
        self.routes: dict[str, list[tuple[Callable[..., None], str]]] = {s: [] for s in sources}
        for target in targets:
            dests = {target.topic_for(s) for s in target.sources}
            only = next(iter(dests)) if len(dests) == 1 else None
            client_id = self._client_id(target)
            if self.transactional:
                # A refused batch fails the transaction: nothing is re-sent outside it.
                self._txn_target = (target, self._delivery_callback(only, resend_refused=False), client_id)
                continue
            if self.batched or built_here(target.destination.codec, target.destination.level):
                # Its batches are split until they fit: a failure is already one record's.
                cb = self._delivery_callback(only, resend_refused=False)
                on_batch = self._batch_delivered if self.batched else None
                p = create("produce", lambda t=target, cb=cb, c=client_id, ob=on_batch: batch_producer(
                    config, c, t, cb, self._produced, ob), lambda c: c.start())
                for s in target.sources:
                    self.batch_routes.setdefault(s, []).append((p, target.topic_for(s), target))
            else:
                cb = self._delivery_callback(only, resend_refused=True)
                conf = producer_config(config, client_id, target, cb, self._on_producer_stats)
                self.error_trackers.append(conf["error_cb"])
                p = create("produce", lambda conf=conf: Producer(conf), start_threads)
            self.producers.append(p)
            for s in target.sources:
                self.routes[s].append((p.produce, target.topic_for(s)))
        #: errors.tolerance=all: the dead-letter topic, and its producer
        self.dead_letters: DeadLetters | None = None
        self.dlq: Producer | None = None
        if config.errors.tolerance == "all":
            self.dlq = Producer(dlq_producer_config(config, name))
            self.dead_letters = DeadLetters(self.dlq, config.errors.dlq_topic, name, self.ledger,
                                            metrics.dead_lettered)

    @property
    def dead_lettered(self) -> int:
        """Records copied to the dead-letter topic (acknowledged there)."""
        return self.dead_letters.count if self.dead_letters is not None else 0

    @property
    def fatal(self) -> TranscoderError | None:
        """A failure that must stop the engine (a record in neither its destination nor the DLQ)."""
        return self.dead_letters.fatal if self.dead_letters is not None else None

    # ------------------------------------------------------------------ exactly-once (the calls: writer_transactions)
    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None:
        """Make the transactional producer of `transactional_id` (the lane's partitions), fence any earlier
        holder of that id (init_transactions aborts what it left open) and begin a transaction whose offsets are
        `group_id`'s. Called on every assignment; the previous producer has committed or aborted."""
        self._group_id = group_id
        target, cb, client_id = self._txn_target
        for old in self.producers:
            old.flush(timeout)
            if isinstance(old, BatchProducer):
                old.close(0)
        self.producers = []
        for routes in self.routes.values():
            routes.clear()
        self.batch_routes.clear()
        self._batchers.clear()
        p: Producer | BatchProducer
        if self.batched:
            txns = Transactions(transactional_id, group_id, self.config.transaction_timeout_ms)
            p = self._create("produce", lambda: batch_producer(self.config, client_id, target, cb, self._produced,
                                                               self._batch_delivered, txns), None)
            self.error_trackers = []
            for s in target.sources:
                self.batch_routes.setdefault(s, []).append((p, target.topic_for(s), target))
        else:
            conf = producer_config(self.config, client_id, target, cb, self._on_producer_stats)
            conf.update({"transactional.id": transactional_id,
                         "transaction.timeout.ms": self.config.transaction_timeout_ms})
            self.transactions.errors = conf["error_cb"]
            self.error_trackers = [self.transactions.errors]
            p = self._create("produce", lambda: Producer(conf), None)
        self.transactions.begin(p, transactional_id, timeout)
        self.producers.append(p)
        for s in target.sources if not self.batched else ():  # the batched path hands it sections (batch_routes)
            self.routes[s].append((p.produce, target.topic_for(s)))
        if self.offset_map is not None:
            self.offset_map.write_through(p)

    def commit_transaction(self, offsets: list[TopicPartition], group: Any, timeout: float,
                           retrying: Callable[[str], None] | None = None) -> None:
        """Deliver what the transaction holds, add its offset map and the consumer's `offsets`, commit, and
        begin the next transaction. KafkaException when the transaction must be aborted (`abort_transaction`);
        TranscoderError when this producer is fenced or a record failed. `retrying` is told why each time a
        call is asked again (the lane says so in its readiness: it waits on Kafka, it is not stuck)."""
        p = self.producers[0]
        self.tick(time.monotonic(), flush=True)  # the batched path's open batches belong to this transaction
        if self._txn_call(p.flush, timeout):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"records not delivered within {timeout:.0f} s",
                                            txn_requires_abort=True))
        self.handle_failures()
        self.flush_map(timeout)  # the offset map, written by the transactional producer (write_through)
        self.transactions.commit(p, offsets, group, timeout, retrying)

    def transaction_doomed(self) -> bool:
        """Whether the open transaction can no longer commit (WriterTransactions.doomed)."""
        return self.transactions.doomed(self.producers)

    def abort_transaction(self, timeout: float, retrying: Callable[[str], None] | None = None) -> None:
        """Abort the open transaction, forget what it held (its records' reports, failures and map entries:
        the caller reads them again from the last commit) and begin the next one. `retrying`: as for
        commit_transaction."""
        p = self.producers[0]
        if not self.batched:
            # What can still be delivered is, first: an abort racing the partitions' AddPartitionsToTxn fails
            # with INVALID_TXN_STATE (librdkafka issue 4849). The abort purges the rest.
            self._txn_call(p.flush, min(timeout, 5.0))
        # the batched path's open batches hold records of this transaction: they are read again
        self._batchers.clear()
        self.transactions.abort(p, timeout, retrying)
        self._txn_call(p.poll, 0)  # the aborted records' reports: their ledger entries are dropped below
        self._forget_transaction()
        p.begin_transaction()

    def replace_producer(self, timeout: float) -> None:
        """A producer stuck in a call (TransactionStuck): its records purged, what its transaction held forgotten
        (read again from the last commit), and a new producer takes its transactional id over (fencing it)."""
        self.transactions.abandon(self.producers[0])
        self._forget_transaction()
        self.producers = []  # neither flushed nor destroyed: its call still holds it
        self.begin_transactions(self.transactions.transactional_id or "", timeout, self._group_id)

    def _forget_transaction(self) -> None:
        """What an aborted transaction held: its records' reports, failures and map entries."""
        self.failures.clear()
        self.refused.waiting.clear()
        self.ledger.reset()
        if self.offset_map is not None:
            self.offset_map.discard()

    def release_group_offsets(self, partitions: list[TopicPartition], group: Any, timeout: float,
                              known: Mapping[Partition, int] | None = None) -> str | None:
        """exactly-once: end the group's offset commits this producer id left pending: committed with `known`,
        else aborted (WriterTransactions.release_group_offsets). None when done, else why not."""
        return self.transactions.release_group_offsets(self.producers[0], partitions, group, timeout,
                                                       self.abort_transaction, self.replace_producer, known)

    @property
    def transactional_id(self) -> str | None:
        """The transactional id of the partitions assigned (exactly-once, once `begin_transactions` started)."""
        return self.transactions.transactional_id

    @transactional_id.setter
    def transactional_id(self, value: str | None) -> None:
        self.transactions.transactional_id = value

    def _txn_call(self, call: Callable[[float], int], timeout: float) -> int:
        return self.transactions.call(call, timeout, self.failures)

    def _txn_fatal(self, exc: BaseException | None = None) -> TranscoderError:
        return self.transactions.fatal(exc, self.failures)

    def _client_id(self, target: Target) -> str:
        return f"transcoder-{self.name}-{target.name}" if self.name != target.name else f"transcoder-{target.name}"

    # ------------------------------------------------------------------ the hot path
    def write(self, msgs: Iterable[Record], on_error: Callable[[KafkaError], None]) -> tuple[int, int]:
        """Produce each record to every destination of its topic; return (records, bytes) taken.

        A few C calls per record and destination; the ledger is told once per call (`sent`,
        `consumed`), and before any delivery report can run (a full local queue is polled).
        Records carrying a consumer error go to `on_error` instead.
        """
        ledger = self.ledger
        routes_of = self.routes
        chunk: dict[Partition, list[tuple[int, int]]] = {}
        last: dict[Partition, int] = {}
        sent_bytes = in_bytes = n = 0
        try:
            for m in msgs:
                if m.error() is not None:
                    on_error(m.error())
                    continue
                topic = m.topic()
                partition = m.partition()
                offset = m.offset()
                key = m.key()
                value = m.value()
                headers = m.headers()
                ts_type, ts = m.timestamp()
                if ts_type == TIMESTAMP_NOT_AVAILABLE:
                    ts = 0
                size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
                if headers:
                    for h_key, h_value in headers:
                        size += len(h_key) + (len(h_value) if h_value is not None else 0)
                in_bytes += size
                entry = (offset, size, ts)  # the timestamp: a failed report carries none (_delivery_callback)
                for produce, dest in routes_of[topic]:
                    while True:
                        try:
                            produce(dest, value, key, partition, timestamp=ts, headers=headers)
                        except BufferError:
                            # The local queue is full: wait for deliveries, whose reports pop what was sent.
                            ledger.sent(chunk, sent_bytes)
                            chunk = {}
                            sent_bytes = 0
                            self.poll(0.05)
                            continue
                        except KafkaException as exc:
                            e = exc.args[0]
                            ledger.hold((topic, partition), offset)
                            self.failures.append(Failure((topic, partition), offset, dest, e.name(), e.str(), m))
                        else:
                            q = chunk.get((dest, partition))
                            if q is None:
                                q = chunk[(dest, partition)] = []
                            q.append(entry)
                            sent_bytes += size
                        break
                last[(topic, partition)] = offset
                n += 1
        finally:  # also when on_error raises: reports of what was produced must find it
            ledger.sent(chunk, sent_bytes)
            ledger.consumed(last)
        return n, in_bytes

    # ------------------------------------------------------------------ the batched path
    def write_stored(self, source: Partition, records: Any, now: float, start: int = 0,
                     stop: int | None = None) -> tuple[int, int]:
        """Hand fetched records `start..stop` (of a transcoder_native StoredRecords, in offset order) of one
        source partition to every destination of its topic: re-batched there, sent as their batches close (size,
        count) or linger ends (`tick`). Returns (records, bytes). No Python per record."""
        stop = len(records) if stop is None else min(stop, len(records))
        n = stop - start
        if n <= 0:
            return 0, 0
        topic, partition = source
        first, last, size = records.span(start, stop)
        now_ms = int(time.time() * 1000)
        routes = self.batch_routes[topic]
        runs = {}
        for _, dest, _ in routes:
            runs[(dest, partition)] = (first, last, n, size)
        self.ledger.sent_runs(runs)
        self.ledger.consumed({source: last})
        batchers = self._batchers
        for producer, dest, target in routes:
            key = (dest, partition)
            b = batchers.get(key)
            if b is None:
                b = batchers[key] = DestinationBatcher(producer, dest, partition, target.destination.batch)
            b.add(records, now_ms, start, stop, now)
            if b.opened is None:  # all sent
                del batchers[key]
        return n, size

    def linger_due(self) -> float | None:
        """When (monotonic s) the first open batch's linger is over; None when no batch is open. The lane's Fetch
        waits no longer, so `tick` sends that batch in time."""
        return min((d for b in self._batchers.values() if (d := b.due_at) is not None), default=None)

    def tick(self, now: float, *, flush: bool = False) -> None:
        """Send the open batches whose linger is over (all of them with `flush`)."""
        batchers = self._batchers
        if not batchers:
            return
        for key, b in list(batchers.items()):
            if flush or b.due(now):
                del batchers[key]
                b.send()

    def _batch_delivered(self, err: KafkaError | None, dest: str, partition: int, base: int, section: Any) -> None:
        """The report of one batch of the batched path: the ledger's runs it covers, the metrics, the offset map;
        or a failure per record (the batch producer split it down first where its size was refused)."""
        n = len(section)
        self.ledger.acked_through(dest, partition, section.last_offset, n)
        source = self.source_of[dest]
        if err is not None:
            for i in range(n):
                offset, ts, key, value, headers = section.record(i)
                self._failed(Failure((source, partition), offset, dest, err.name(), err.str(),
                                     Delivered(dest, partition, -1, (key, value, headers, ts, 0))), False)
            return
        self._acked[dest] += n
        self.acked_ts[(dest, partition)] = section.max_timestamp
        producer = next(p for p, d, _ in self.batch_routes[source] if d == dest)
        acked_at = producer.reported_at or time.time()
        # each record new or backlog by its own timestamp: a batch mixing both is not timed (or left out) whole
        samples, backlog = new_and_backlog(section, n, acked_at * 1000, self.start_ms)
        for age, weight in samples:
            self.metrics.latency(dest, max(0.0, age / 1000), weight)
        if backlog:  # its age is not the pipeline's latency
            self.metrics.backfill(dest, backlog)
        if self.offset_map is not None:
            add = self.offset_map.add
            for i, offset in enumerate(section.offsets):
                add(source, dest, partition, offset, base + i)

    def _delivery_callback(self, only: str | None, *, resend_refused: bool
                           ) -> Callable[[KafkaError | None, Record], None]:
        """The delivery callback of one producer; `only`: the one destination topic it writes, if so.

        One call per record and destination: a producer with one destination topic never asks a
        report for its topic (a str decoded and hashed per record), and latency is sampled.
        """
        acked_report = self.ledger.acked
        acked_failed = self.ledger.acked_failed
        acked = self._acked
        acked_ts = self.acked_ts
        latency = self.metrics.latency
        backfill = self.metrics.backfill
        start_ms = self.start_ms
        source_of = self.source_of
        failed = self._failed
        mapped = self.offset_map.add if self.offset_map is not None else None

        def delivered(err: KafkaError | None, msg: Record) -> None:
            dest = only or msg.topic()
            partition = msg.partition()
            if err is None:
                offset = acked_report(dest, partition)
                if mapped is not None:
                    mapped(source_of[dest], dest, partition, offset, msg.offset())
                n = acked[dest] = acked[dest] + 1
                ts = msg.timestamp()[1]
                acked_ts[(dest, partition)] = ts
                if not n & 15:  # sampled: an observation costs more than the rest of this callback
                    if ts >= start_ms:
                        latency(dest, max(0.0, time.time() - ts / 1000))
                    else:  # backlog: its age is not the pipeline's latency
                        backfill(dest)
            else:
                offset, ts = acked_failed(dest, partition)
                if ts is not None and not isinstance(msg, Delivered):
                    # librdkafka's failed report carries no timestamp: the record's own, as `write` produced it
                    msg = Delivered(dest, partition, -1, (msg.key(), msg.value(), msg.headers() or (), ts, 0))
                failed(Failure((source_of[dest], partition), offset, dest, err.name(), err.str(), msg),
                       resend_refused and err.code() in BATCH_REFUSALS)

        return delivered

    def _failed(self, f: Failure, resend: bool) -> None:
        self.ledger.hold(f.source, f.offset)  # never commit past a record that failed
        (self.refused.waiting if resend else self.failures).append(f)

    # ------------------------------------------------------------------ refused batches
    def _isolator(self, target: Target) -> Producer:
        """A producer like the target's, sending each record as a batch of its own (RefusedRecords makes one per
        target, at first use)."""
        conf = isolating_producer_config(self.config, self._client_id(target) + "-alone", target)
        return self._create("produce", lambda: Producer(conf), None)

    def _resent(self, f: Failure, offset: int) -> None:
        """A refused record sent again alone was acknowledged, at `offset` in its destination."""
        if self.offset_map is not None:
            self.offset_map.add(f.source[0], f.destination, f.source[1], f.offset, offset)
        self.ledger.release(f.source, f.offset)
        self._acked[f.destination] += 1

    # ------------------------------------------------------------------ failures
    def handle_failures(self) -> None:
        """Dead-letter each failed record (errors.tolerance=all), or raise DeliveryError naming it."""
        if self.fatal is not None:
            raise self.fatal
        if self.transactional and any(f.code in FENCED for f in self.failures):
            raise self._txn_fatal()  # fenced: every record of the transaction failed for that one reason
        while self.failures:
            f = self.failures.pop(0)
            self.metrics.error(f.code)
            self.errors_total += 1
            self.last_error_ms = int(time.time() * 1000)
            if self.dead_letters is None:
                raise DeliveryError(f"lane {self.name}: record {f.where} could not be written to "
                                    f"{f.destination}: {f.reason} (errors.tolerance=none)",
                                    topic=f.source[0], partition=f.source[1], offset=f.offset, kafka_error=f.code)
            self.dead_letters.send(f)

    # ------------------------------------------------------------------ polling, draining, closing
    def poll(self, timeout: float) -> None:
        """Serve delivery reports (waiting up to `timeout` per producer), and send refused records again."""
        for p in self.producers:
            if self.transactional:
                self._txn_call(p.poll, timeout)
            else:
                p.poll(timeout)
        for p in self.refused.producers.values():
            p.poll(0)
        if self.dlq is not None:
            self.dlq.poll(0)
        self.refused.resend()  # each record of a refused batch again, alone

    def drain(self, timeout: float) -> None:
        """Wait for every produced record's delivery report (bounded by `timeout`), failures handled."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.tick(time.monotonic(), flush=True)
        for p in self.producers:
            p.flush(left())
        self.refused.resend()  # each record of a refused batch again, alone
        for p in self.refused.producers.values():
            p.flush(left())
        if self.dlq is not None:
            self.dlq.flush(left())
        self.handle_failures()
        if self.dlq is not None:
            self.dlq.flush(left())
        if not self.flush_map(left()):
            raise DeliveryError(f"lane {self.name}: the offset map was not acknowledged by "
                                f"{self.config.offset_map_topic} within {timeout:.0f} s: nothing is committed past it",
                                topic=self.config.offset_map_topic)

    def flush_map(self, timeout: float) -> bool:
        """Store the offset map of every record acknowledged so far; True when it is durable (or there is none).

        The engine calls it before committing source offsets: a committed offset never outruns its map.
        """
        if self.offset_map is None:
            return True
        for dest in self.source_of:
            self.offset_map.health(dest, self.errors_total, self.last_error_ms)
        return self.offset_map.flush(timeout)

    def flush_acked(self) -> None:
        """Acknowledgements since the last call, into the metrics and `acked_total` (not per record)."""
        for dest, n in self._acked.items():
            if n:
                self.metrics.acked(dest, self.codec_of[dest], n)
                self.acked_total[dest] += n
                self._acked[dest] = 0

    def final_statistics(self) -> None:
        """One more statistics emission per producer: the last batches. transcoder's own producers emit at once;
        librdkafka's are waited for (a statistics interval at most), as it emits on its own clock."""
        seen = self.stats_emissions
        for p in self.producers:
            if isinstance(p, BatchProducer):
                p.emit_statistics()
        deadline = time.monotonic() + self.config.metrics.stats_interval_ms / 1000 + 1
        while self.stats_emissions < seen + len(self.producers) and time.monotonic() < deadline:
            self.poll(0.1)

    def close(self, timeout: float) -> None:
        """Stop the producers transcoder runs itself (librdkafka's are closed by the garbage collector)."""
        for p in self.producers:
            if isinstance(p, BatchProducer):
                p.close(timeout)
        if self.offset_map is not None:
            self.offset_map.close(timeout)

    # ------------------------------------------------------------------ statistics
    def _on_producer_stats(self, raw: str) -> None:
        self._produced(producer_topics(json.loads(raw)))

    def _produced(self, topics: dict[str, TopicProduce]) -> None:
        """One statistics emission of a destination producer (librdkafka's, or a BatchProducer's)."""
        self.stats_emissions += 1
        for topic, t in topics.items():
            if topic in self.codec_of:
                self.metrics.produced(topic, self.codec_of[topic], t.batch_bytes, t.batch_records,
                                      t.record_bytes_total)
