"""The writer: a producer per destination, delivery reports into the ledger, refused batches re-sent
record by record, and the dead-letter topic. Every engine writes through it; it never consumes.

The caller hands it records (confluent_kafka.Message, or anything with the same accessors) and asks
the ledger, `writer.ledger.committable`, what is safe to commit. Delivery callbacks run inside
`poll`/`drain`, on the caller's thread, so its state needs no locks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog
from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from transcoder.codecs import Rebatcher, built_here
from transcoder.config import Batch, Config
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.kafka.batch_producer import (
    BatchProducer,
    Delivered,
    FailureLog,
    Transactions,
)
from transcoder.kafka.clients import client_config, start_threads
from transcoder.kafka.offset_map_topic import OffsetMapRecorder
from transcoder.kafka.statistics import TopicProduce, Window, producer_topics
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target

log = structlog.get_logger("transcoder.writer")

#: Headers a dead-letter record carries, after its own (named like Kafka Connect's __connect.errors.*).
DLQ_HEADERS = ("__transcoder.errors.topic", "__transcoder.errors.partition", "__transcoder.errors.offset",
               "__transcoder.errors.destination", "__transcoder.errors.reason")

LARGEST_RECORD = 64 * 1024 * 1024  # producer-side bound; the broker's max.message.bytes applies to the batch

#: Errors with which a broker refuses a whole batch for what may be one record in it (a record over the
#: topic's max.message.bytes, a null key on a compacted topic). librdkafka reports every record of the
#: batch failed; as Kafka's Java producer splits such a batch, the writer sends each record again alone,
#: and only a record refused alone is at fault.
BATCH_REFUSALS = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE,
                            KafkaError.INVALID_RECORD})

Record = Message | Delivered

#: Errors with which Kafka tells a transactional producer that a newer one with its transactional.id took over.
_FENCED = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})


#: One transaction call (commit, abort) waits at most this long before it is asked again (up to the deadline of
#: the call's whole retry): a lane whose commit waits on an unreachable coordinator says so (readiness 503) within
#: seconds, not after shutdown_timeout_s.
TXN_CALL_TIMEOUT_S = 2.0


class WriterMetrics(Protocol):
    """What the writer reports (metrics.registry.LaneMetrics has it); declared here so kafka imports no metrics."""

    def acked(self, destination: str, codec: str, n: int) -> None: ...
    def produced(self, destination: str, codec: str, batch_bytes: Window, batch_records: Window,
                 record_bytes_total: int) -> None: ...
    def latency(self, destination: str, seconds: float, weight: float = 1.0) -> None: ...
    def backfill(self, destination: str) -> None: ...
    def error(self, reason: str) -> None: ...
    def dead_lettered(self) -> None: ...


#: Builds a client: (part, make, start) -> client. An engine passes one that attributes the client's
#: threads to (lane, part) for CPU accounting; `start` makes the client start its threads.
ClientFactory = Callable[[str, Callable[[], Any], Callable[[Any], None] | None], Any]


def _build(part: str, make: Callable[[], Any], start: Callable[[Any], None] | None) -> Any:
    client = make()
    if start is not None:
        start(client)
    return client


@dataclass(frozen=True)
class Failure:
    """A source record one destination did not take."""

    source: Partition
    offset: int
    destination: str
    code: str  # Kafka's error name, e.g. MSG_SIZE_TOO_LARGE: the metrics label
    reason: str
    message: Record | None  # the record as produced: re-sent alone, or copied to the DLQ

    @property
    def where(self) -> str:
        return f"{self.source[0]} [{self.source[1]}] offset {self.offset}"


def producer_config(config: Config, client_id: str, target: Target,
                    on_delivery: Callable[[KafkaError | None, Message], None],
                    stats_cb: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The librdkafka producer of one destination: its codec, level and batching, idempotent."""
    d = target.destination
    extra: dict[str, Any] = {
        "client.id": client_id,
        "enable.idempotence": True,  # order within a partition holds across retries
        "compression.type": d.codec,
        "linger.ms": d.batch.linger_ms,
        "batch.size": d.batch.max_bytes,
        "batch.num.messages": d.batch.max_records,
        "message.max.bytes": max(LARGEST_RECORD, d.batch.max_bytes + Batch.PRODUCER_MARGIN_BYTES),
        # The engine stops reading at max_in_flight_bytes; the queue only has to be larger.
        "queue.buffering.max.kbytes": min(2 * config.max_in_flight_bytes // 1024 + 1024, 2**31 - 1),
        "queue.buffering.max.messages": 10_000_000,
        "on_delivery": on_delivery,
    }
    if stats_cb is not None:
        extra["statistics.interval.ms"] = config.metrics.stats_interval_ms
        extra["stats_cb"] = stats_cb
    if d.level is not None:
        extra["compression.level"] = d.level
    return client_config(config.target_cluster.librdkafka(), **extra)


def batch_producer(config: Config, client_id: str, target: Target,
                   on_delivery: Callable[[KafkaError | None, Any], None],
                   on_stats: Callable[[dict[str, TopicProduce]], None],
                   on_batch: Callable[[KafkaError | None, str, int, int, Any], None] | None = None,
                   transactions: Transactions | None = None) -> BatchProducer:
    """The producer of a destination whose batches transcoder builds itself: every destination of a lane that
    fetches raw batches (`on_batch`: their reports; `transactions`: exactly-once), and zstd 13-22 (librdkafka
    refuses them) otherwise."""
    d = target.destination
    return BatchProducer(
        config.target_cluster.librdkafka(), codec=d.codec, level=d.level, client_id=client_id,
        linger_ms=d.batch.linger_ms, max_bytes=d.batch.max_bytes, max_records=d.batch.max_records,
        on_delivery=on_delivery, on_stats=on_stats, stats_interval_ms=config.metrics.stats_interval_ms,
        queue_max_bytes=2 * config.max_in_flight_bytes + (1 << 20), on_batch=on_batch, transactions=transactions,
    )


#: A batch's latency is sampled from this many of its records at most (one per stratum of equal size, each weighted
#: by its share of the batch's 1-in-LATENCY_SAMPLING samples): every record has the same chance, whatever its batch.
BATCH_LATENCY_STRATA = 16
LATENCY_SAMPLING = 16


def batch_latencies(section: Any, n: int, acked_ms: float) -> list[tuple[float, float]]:
    """(age in ms at `acked_ms`, weight) of the records sampled from a delivered batch of `n` records: the middle
    record of each of up to BATCH_LATENCY_STRATA runs of equal size, weighted by its run's records / LATENCY_SAMPLING.
    A batch's records waited from their own timestamps: its newest one alone says what the oldest waited least."""
    k = min(n, BATCH_LATENCY_STRATA)
    out = []
    for j in range(k):
        lo, hi = j * n // k, (j + 1) * n // k
        ts = section.record((lo + hi - 1) // 2)[1]
        out.append((acked_ms - ts, (hi - lo) / LATENCY_SAMPLING))
    return out


class Writer:
    """Writes the records of some source topics to their destinations (the targets of one lane)."""

    def __init__(self, config: Config, name: str, targets: Sequence[Target], metrics: WriterMetrics, *,
                 create: ClientFactory = _build, start_ms: float | None = None, batched: bool = False) -> None:
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
        self.dead_lettered = 0
        self.stats_emissions = 0
        self.failures: list[Failure] = []
        #: A failure that must stop the engine (a record in neither its destination nor the DLQ).
        self.fatal: TranscoderError | None = None
        self._refused: list[Failure] = []  # records of refused batches, to send again alone
        self._create = create
        #: Failed records so far (dead-lettered or fatal), and when the last one was (epoch ms): the cutover gate.
        self.errors_total = 0
        self.last_error_ms: int | None = None
        #: exactly-once: the one target's producer is transactional; it is made by `begin_transactions`, with the
        #: transactional id of the partitions assigned, and the offset map is written in its transactions.
        self.transactional = config.guarantee == "exactly-once"
        #: commits and aborts asked again while Kafka is unreachable: logged at once, then once per 30 s with a count
        self._txn_retries = FailureLog(name, logger=log)
        if self.transactional and len(targets) != 1:
            raise TranscoderError(f"lane {name}: exactly-once needs one destination per lane, not {len(targets)}")
        #: fed raw record sets (`write_stored`): every destination re-batches them (native Rebatcher) and sends
        #: its batches through a BatchProducer, acknowledged batch by batch (exactly-once: a transactional one)
        self.batched = batched
        #: source topic -> [(producer, destination topic, target)] of the batched path
        self.batch_routes: dict[str, list[tuple[BatchProducer, str, Target]]] = {}
        #: (destination topic, partition) -> its Rebatcher and producer, and when its open section got its first record
        self._rebatchers: dict[Partition, tuple[Any, BatchProducer]] = {}
        self._opened: dict[Partition, float] = {}
        self.transactional_id: str | None = None
        self._txn_errors: Any = None  # the transactional producer's error_cb (an ErrorTracker): why it failed
        #: the librdkafka producers' error_cb (ErrorTracker): whether the destination cluster can be reached
        self.error_trackers: list[Any] = []
        #: With a `migration:` section, where each delivered record came from (the offset map); else None.
        self.offset_map = OffsetMapRecorder(config, f"transcoder-{name}-offset-map", make=lambda conf: create(
            "offset-map", lambda: Producer(conf), start_threads), external=self.transactional) \
            if config.migration is not None else None
        self._isolators: dict[str, Producer] = {}  # target name -> a producer that sends one record per batch
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
        self.dlq: Producer | None = None
        if config.errors.tolerance == "all":
            self.dlq = Producer(client_config(config.target_cluster.librdkafka(), **{
                "client.id": f"transcoder-{name}-dlq", "enable.idempotence": True,
                "compression.type": "zstd", "message.max.bytes": LARGEST_RECORD + 65536,
                "linger.ms": 50,
            }))

    # ------------------------------------------------------------------ exactly-once
    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None:
        """Make the transactional producer of `transactional_id` (the lane's partitions), fence any earlier
        holder of that id (init_transactions aborts what it left open) and begin a transaction whose offsets are
        `group_id`'s.

        Called on every assignment; the previous producer has committed or aborted (no transaction is open)."""
        target, cb, client_id = self._txn_target
        for old in self.producers:
            old.flush(timeout)
            if isinstance(old, BatchProducer):
                old.close(0)
        self.producers = []
        for routes in self.routes.values():
            routes.clear()
        self.batch_routes.clear()
        self._rebatchers.clear()
        self._opened.clear()
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
            self._txn_errors = conf["error_cb"]
            self.error_trackers = [self._txn_errors]
            p = self._create("produce", lambda: Producer(conf), None)
        try:
            p.init_transactions(timeout)
            p.begin_transaction()
        except KafkaException as exc:
            raise self._transaction_error("could not start transactions", exc.args[0], transactional_id) from None
        self.transactional_id = transactional_id
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
        if self.offset_map is not None:
            for dest in self.source_of:
                self.offset_map.health(dest, self.errors_total, self.last_error_ms)
            self.offset_map.flush(timeout)
        # A retriable error (a timeout: the coordinator unreachable): the same call again, as librdkafka and the Java
        # producer ask (a commit whose EndTxn may have been sent cannot be aborted instead), as long as the broker
        # could still settle the transaction itself: it aborts it after transaction_timeout_ms, and the next EndTxn
        # is then refused (fenced: aborted here, and read again from the last commit). Each call waits at most
        # TXN_CALL_TIMEOUT_S, so that the lane says within seconds that it waits on Kafka.
        deadline = time.monotonic() + max(timeout, self.config.transaction_timeout_ms / 1000 + 30)
        steps = [lambda left: p.send_offsets_to_transaction(offsets, group, left)] if offsets else []
        steps.append(p.commit_transaction)
        for step in steps:
            while True:
                try:
                    step(max(1.0, min(timeout, TXN_CALL_TIMEOUT_S, deadline - time.monotonic())))
                    break
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.txn_requires_abort():
                        raise
                    if not err.retriable() or time.monotonic() >= deadline:
                        raise self._transaction_error("could not commit", err, self.transactional_id) from None
                    self._txn_retries.failed("transaction_commit_retried", time.monotonic(), error=err.str())
                    if retrying is not None:
                        retrying(f"committing a transaction: {err.str()}")
        self._txn_retries.succeeded("transaction_commit_retried", time.monotonic())
        p.begin_transaction()

    def transaction_doomed(self) -> bool:
        """Whether the open transaction can no longer commit (transcoder's batch producer knows it before the
        commit: a batch it could not deliver within the transaction)."""
        return any(isinstance(p, BatchProducer) and p.doomed for p in self.producers)

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
        self._rebatchers.clear()
        self._opened.clear()
        # Kafka unreachable: the abort times out with a retriable error, and the same call resumes it. It is
        # retried as long as the broker could still abort it for us (transaction_timeout_ms), then given up.
        deadline = time.monotonic() + max(timeout, self.config.transaction_timeout_ms / 1000 + 30)
        while True:
            try:
                p.abort_transaction(max(1.0, min(timeout, TXN_CALL_TIMEOUT_S, deadline - time.monotonic())))
                self._txn_retries.succeeded("transaction_abort_retried", time.monotonic())
                break
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() >= deadline:
                    raise self._transaction_error("could not abort", err, self.transactional_id) from None
                self._txn_retries.failed("transaction_abort_retried", time.monotonic(), error=err.str())
                if retrying is not None:
                    retrying(f"aborting a transaction: {err.str()}")
        self._txn_call(p.poll, 0)  # the aborted records' reports: their ledger entries are dropped below
        self.failures.clear()
        self._refused.clear()
        self.ledger.reset()
        if self.offset_map is not None:
            self.offset_map.discard()
        p.begin_transaction()

    def release_group_offsets(self, partitions: list[TopicPartition], group: Any, timeout: float) -> str | None:
        """exactly-once: end any offset commit this transactional id's producer left pending on the group.

        A transaction that holds only offsets for the group (`partitions` at 0: never committed), aborted: the
        coordinator's abort marker ends every pending offset commit of this producer id on the group's
        partition, whatever epoch made it. A broker killed at the wrong moment can leave one pending that no
        transaction owns any more; the group's offsets then stay unstable for good, and every read of them
        (require_stable, KIP-447) times out. None when done, else why not (Kafka unreachable: ask again later);
        TranscoderError when this producer is fenced or failed for good."""
        p = self.producers[0]
        not_added = None
        try:
            p.send_offsets_to_transaction([TopicPartition(tp.topic, tp.partition, 0) for tp in partitions],
                                          group, timeout)
        except KafkaException as exc:  # the group's partition may not be in the transaction: no marker for it
            err = exc.args[0]
            if err.fatal() or err.name() in _FENCED:
                raise self._transaction_error("could not release the group's offsets in", err,
                                              self.transactional_id) from None
            not_added = f"adding the group's offsets to a transaction: {err.str()}"
        try:
            self.abort_transaction(timeout)
        except TranscoderError as exc:
            if not exc.retriable:  # fenced, or failed for good
                raise
            return str(exc)
        return not_added

    def _txn_call(self, call: Callable[[float], int], timeout: float) -> int:
        """flush or poll of the transactional producer. Once it is fenced (or failed otherwise for good),
        confluent-kafka raises from inside its delivery callbacks (KafkaException or SystemError): one error
        that says why instead."""
        try:
            return call(timeout)
        except (KafkaException, SystemError) as exc:
            raise self._txn_fatal(exc) from None

    def _txn_fatal(self, exc: BaseException | None = None) -> TranscoderError:
        # The error raised from the callback says why itself (a SystemError carries it as its cause); the error
        # callback may not have been served yet.
        cause = exc
        while cause is not None and not isinstance(cause, KafkaException):
            cause = cause.__cause__ or cause.__context__
        raised = cause.args[0] if cause is not None and cause.args else None
        if isinstance(raised, KafkaError) and (raised.fatal() or raised.name() in _FENCED):
            return self._transaction_error("stopped", raised, self.transactional_id)
        last = self._txn_errors.last if self._txn_errors is not None else None
        if last is not None and last.fatal():
            return self._transaction_error("stopped", last, self.transactional_id)
        fenced = next((f for f in self.failures if f.code in _FENCED), None)
        if fenced is not None:
            return self._transaction_error("stopped", KafkaError(KafkaError._FENCED, fenced.reason),
                                           self.transactional_id)
        return DeliveryError(f"lane {self.name}: the transactional producer failed: {exc}")

    def _transaction_error(self, what: str, err: KafkaError, transactional_id: str | None) -> TranscoderError:
        fenced = err.name() in _FENCED
        why = ("another instance took over transactional.id " + str(transactional_id) +
               " (it was assigned the same partitions): this one stops") if fenced else err.str()
        return DeliveryError(f"lane {self.name}: {what} a transaction: {why}", kafka_error=err.name(),
                             retriable=err.retriable() and not fenced)

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
                entry = (offset, size)
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
        for producer, dest, target in routes:
            key = (dest, partition)
            if key not in self._rebatchers:
                b = target.destination.batch
                self._rebatchers[key] = (Rebatcher(b.max_bytes, b.max_records), producer)
            rb = self._rebatchers[key][0]
            rb.add(records, now_ms, start, stop)
            if rb.ready:
                producer.produce_sections(dest, partition, rb.take())
                if rb.records:
                    self._opened[key] = now  # what is left arrived now
                else:
                    self._opened.pop(key, None)
            elif key not in self._opened:
                self._opened[key] = now
        return n, size

    def tick(self, now: float, *, flush: bool = False) -> None:
        """Send the open batches whose linger is over (all of them with `flush`)."""
        if not self._opened:
            return
        for key, since in list(self._opened.items()):
            dest, partition = key
            target = self.target_of[dest]
            if flush or now - since >= target.destination.batch.linger_ms / 1000:
                rb, producer = self._rebatchers[key]
                sections = rb.take(flush=True)
                del self._opened[key]
                if sections:
                    producer.produce_sections(dest, partition, sections)

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
        ts = section.max_timestamp
        self.acked_ts[(dest, partition)] = ts
        if ts >= self.start_ms:
            producer = next(p for p, d, _ in self.batch_routes[source] if d == dest)
            acked_at = producer.reported_at or time.time()
            for age, weight in batch_latencies(section, n, acked_at * 1000):
                self.metrics.latency(dest, max(0.0, age / 1000), weight)
        else:  # backlog: its age is not the pipeline's latency
            self.metrics.backfill(dest)
        if self.offset_map is not None:
            add = self.offset_map.add
            for i, offset in enumerate(section.offsets):
                add(source, dest, partition, offset, base + i)

    def write_partition(self, topic: str, partition: int, offsets: Sequence[int], keys: Sequence[bytes | None],
                        values: Sequence[bytes | None], headers: Sequence[list[tuple[str, bytes | None]] | None],
                        stamps: Sequence[int], sizes: Sequence[int], record_at: Callable[[int], Record]
                        ) -> None:
        """Produce a run of one source partition's records, given as columns (in offset order), to every
        destination of `topic`: what `write` does per record, without a record object per record (the
        Spark engine's executors hold Arrow columns). `record_at(i)` builds record i where one is needed:
        a record the producer refuses at once, for the dead-letter topic or the error.
        """
        ledger = self.ledger
        dests = self.routes[topic]
        entries = list(zip(offsets, sizes, strict=True))
        n = len(entries)
        done = [0] * len(dests)  # per destination: entries[:done[d]] are registered with the ledger
        failed: set[tuple[int, int]] = set()  # (destination index, record index) the producer refused

        def register(upto: list[int]) -> None:
            chunk, nbytes = {}, 0
            for d, (_, dest) in enumerate(dests):
                part = [e for i, e in enumerate(entries[done[d]:upto[d]], done[d]) if (d, i) not in failed] \
                    if failed else entries[done[d]:upto[d]]
                if part:
                    chunk[(dest, partition)] = part
                    nbytes += sum(size for _, size in part)
                done[d] = upto[d]
            ledger.sent(chunk, nbytes)

        at = (0, 0)  # (record, destination) being produced: what precedes it is produced
        complete = False
        try:
            for i in range(n):
                value, key, hdrs, ts = values[i], keys[i], headers[i], stamps[i]
                for d, (produce, dest) in enumerate(dests):
                    at = (i, d)
                    while True:
                        try:
                            produce(dest, value, key, partition, timestamp=ts, headers=hdrs)
                        except BufferError:
                            # The local queue is full: register what was produced, then wait for deliveries.
                            register([i + 1 if e < d else i for e in range(len(dests))])
                            self.poll(0.05)
                            continue
                        except KafkaException as exc:
                            e = exc.args[0]
                            ledger.hold((topic, partition), offsets[i])
                            failed.add((d, i))
                            self.failures.append(Failure((topic, partition), offsets[i], dest, e.name(), e.str(),
                                                         record_at(i)))
                        break
            complete = True
        finally:  # also on an error: reports of what was produced must find it
            i, d = at
            register([n] * len(dests) if complete else [i + 1 if e < d else i for e in range(len(dests))])
            last = n if complete else i
            if last:
                ledger.consumed({(topic, partition): offsets[last - 1]})

    def _delivery_callback(self, only: str | None, *, resend_refused: bool
                           ) -> Callable[[KafkaError | None, Record], None]:
        """The delivery callback of one producer; `only`: the one destination topic it writes, if so.

        One call per record and destination: a producer with one destination topic never asks a
        report for its topic (a str decoded and hashed per record), and latency is sampled.
        """
        acked_report = self.ledger.acked
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
            offset = acked_report(dest, partition)
            if err is None:
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
                failed(Failure((source_of[dest], partition), offset, dest, err.name(), err.str(), msg),
                       resend_refused and err.code() in BATCH_REFUSALS)

        return delivered

    def _failed(self, f: Failure, resend: bool) -> None:
        self.ledger.hold(f.source, f.offset)  # never commit past a record that failed
        (self._refused if resend else self.failures).append(f)

    # ------------------------------------------------------------------ refused batches
    def _isolator(self, target: Target) -> Producer:
        """A producer like the target's, sending each record as a batch of its own."""
        p = self._isolators.get(target.name)
        if p is None:
            conf = producer_config(self.config, self._client_id(target) + "-alone", target, lambda e, m: None)
            del conf["on_delivery"]
            conf.update({"batch.num.messages": 1, "linger.ms": 0})
            p = self._isolators[target.name] = self._create("produce", lambda: Producer(conf), None)
        return p

    def _resend_refused(self) -> None:
        """Send each record of a refused batch again, alone: only a record refused alone has failed."""
        if not self._refused:
            return
        refused, self._refused = self._refused, []
        log.warning("batch_refused_records_resent_alone", writer=self.name, records=len(refused),
                    destinations=sorted({f.destination for f in refused}), reason=refused[0].reason,
                    note="they land after records produced meanwhile")
        for i, f in enumerate(refused):
            m = f.message
            assert m is not None
            ts_type, ts = m.timestamp()

            def delivered(err: KafkaError | None, _m: Message, f: Failure = f) -> None:
                if err is None:
                    if self.offset_map is not None:
                        self.offset_map.add(f.source[0], f.destination, f.source[1], f.offset, _m.offset())
                    self.ledger.release(f.source, f.offset)
                    self._acked[f.destination] += 1
                else:
                    self.failures.append(replace(f, code=err.name(), reason=err.str()))

            try:
                self._isolator(self.target_of[f.destination]).produce(
                    f.destination, m.value(), m.key(), m.partition(),
                    timestamp=ts if ts_type != TIMESTAMP_NOT_AVAILABLE else 0, headers=m.headers(),
                    on_delivery=delivered)
            except BufferError:  # its local queue is full: the rest go at the next poll, in order
                self._refused[:0] = refused[i:]
                return
            except KafkaException as exc:
                self.failures.append(replace(f, code=exc.args[0].name(), reason=exc.args[0].str()))

    # ------------------------------------------------------------------ failures
    def handle_failures(self) -> None:
        """Dead-letter each failed record (errors.tolerance=all), or raise DeliveryError naming it."""
        if self.fatal is not None:
            raise self.fatal
        if self.transactional and any(f.code in _FENCED for f in self.failures):
            raise self._txn_fatal()  # fenced: every record of the transaction failed for that one reason
        while self.failures:
            f = self.failures.pop(0)
            self.metrics.error(f.code)
            self.errors_total += 1
            self.last_error_ms = int(time.time() * 1000)
            if self.dlq is None:
                raise DeliveryError(f"lane {self.name}: record {f.where} could not be written to "
                                    f"{f.destination}: {f.reason} (errors.tolerance=none)",
                                    topic=f.source[0], partition=f.source[1], offset=f.offset, kafka_error=f.code)
            self._dead_letter(f)

    def _dead_letter(self, f: Failure) -> None:
        assert self.dlq is not None and self.config.errors.dlq_topic
        dlq_topic = self.config.errors.dlq_topic
        msg = f.message
        headers = list(msg.headers() or []) if msg is not None else []
        headers += list(zip(DLQ_HEADERS, (f.source[0].encode(), str(f.source[1]).encode(), str(f.offset).encode(),
                                          f.destination.encode(), f.reason.encode()), strict=True))
        ts_type, ts = msg.timestamp() if msg is not None else (TIMESTAMP_NOT_AVAILABLE, 0)

        def delivered(err: KafkaError | None, _m: Message) -> None:
            if err is not None:
                # The record is in neither its destination nor the DLQ: stop, and never commit past it.
                self.fatal = DeliveryError(
                    f"lane {self.name}: record {f.where} failed for {f.destination} ({f.reason}) and could not "
                    f"be written to the DLQ {dlq_topic}: {err.str()}",
                    topic=f.source[0], partition=f.source[1], offset=f.offset, kafka_error=err.name())
                return
            self.ledger.release(f.source, f.offset)
            self.dead_lettered += 1
            self.metrics.dead_lettered()

        self.dlq.produce(dlq_topic, msg.value() if msg else None, msg.key() if msg else None,
                         timestamp=ts if ts_type != TIMESTAMP_NOT_AVAILABLE else 0, headers=headers,
                         on_delivery=delivered)
        log.warning("record_dead_lettered", lane=self.name, record=f.where, destination=f.destination,
                    reason=f.reason, dlq_topic=dlq_topic)

    # ------------------------------------------------------------------ polling, draining, closing
    def poll(self, timeout: float) -> None:
        """Serve delivery reports (waiting up to `timeout` per producer), and send refused records again."""
        for p in self.producers:
            if self.transactional:
                self._txn_call(p.poll, timeout)
            else:
                p.poll(timeout)
        for p in self._isolators.values():
            p.poll(0)
        if self.dlq is not None:
            self.dlq.poll(0)
        self._resend_refused()

    def drain(self, timeout: float) -> None:
        """Wait for every produced record's delivery report (bounded by `timeout`), failures handled."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.tick(time.monotonic(), flush=True)
        for p in self.producers:
            p.flush(left())
        self._resend_refused()
        for p in self._isolators.values():
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
        """Wait (a statistics interval at most) for one more statistics emission per producer: the last batches."""
        seen = self.stats_emissions
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
