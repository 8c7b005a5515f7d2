"""One lane: a consumer feeding one producer per target; commits only what every target acknowledged.

The loop runs in one thread. Delivery callbacks and rebalance callbacks run inside that
thread's poll calls, so lane state needs no locks; other threads only read snapshots.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog
from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from transcoder import routes
from transcoder.batchproducer import BatchProducer, Delivered
from transcoder.clients import client_config
from transcoder.codecs import built_here
from transcoder.config import Config
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.ledger import Ledger
from transcoder.metrics import LaneMetrics
from transcoder.stats import TopicProduce, consumer_lag, producer_topics
from transcoder.threads import ThreadLedger

log = structlog.get_logger("transcoder.lane")

#: Headers a dead-letter record carries, after its own (named like Kafka Connect's __connect.errors.*).
DLQ_HEADERS = ("__transcoder.errors.topic", "__transcoder.errors.partition", "__transcoder.errors.offset",
               "__transcoder.errors.destination", "__transcoder.errors.reason")

_CONSUME_BATCH = 2000
_LARGEST_RECORD = 64 * 1024 * 1024  # producer-side bound; the broker's max.message.bytes applies to the batch


def consumer_config(config: Config, lane: routes.Lane) -> dict[str, Any]:
    start = config.start if isinstance(config.start, str) else "earliest"
    return client_config(config.cluster.librdkafka(), **{
        "group.id": lane.group_id,
        "client.id": f"transcoder-{lane.name}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": start,
        "partition.assignment.strategy": "cooperative-sticky",
        # Aborted transactions are not copied; what the source's readers see is what is copied.
        "isolation.level": "read_committed",
        # Bounded prefetch: memory stays bounded even when every target is slow.
        "queued.max.messages.kbytes": 32 * 1024,
        # Once the prefetch queue is full (queued.min.messages or the bytes above), the next fetch
        # waits this long; librdkafka's default (1000 ms) left a lane idle half of the time (bench/).
        "fetch.queue.backoff.ms": 20,
        "statistics.interval.ms": config.metrics.stats_interval_ms,
    })


def producer_config(config: Config, lane: routes.Lane, target: routes.Target,
                    on_delivery: Callable[[KafkaError | None, Message], None],
                    stats_cb: Callable[[str], None] | None = None) -> dict[str, Any]:
    d = target.destination
    extra: dict[str, Any] = {
        "client.id": f"transcoder-{lane.name}-{target.name}" if lane.name != target.name else f"transcoder-{target.name}",
        "enable.idempotence": True,  # order within a partition holds across retries
        "compression.type": d.codec,
        "linger.ms": d.batch.linger_ms,
        "batch.size": d.batch.max_bytes,
        "batch.num.messages": d.batch.max_records,
        "message.max.bytes": max(_LARGEST_RECORD, d.batch.max_bytes + 65536),
        # The lane pauses its consumer at max_in_flight_bytes; the queue only has to be larger.
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


def batch_producer(config: Config, lane: routes.Lane, target: routes.Target,
                   on_delivery: Callable[[KafkaError | None, Any], None],
                   on_stats: Callable[[dict[str, TopicProduce]], None]) -> BatchProducer:
    """The producer of a destination librdkafka cannot compress (zstd 13-22), batching alike."""
    d = target.destination
    return BatchProducer(
        config.target_cluster.librdkafka(), codec=d.codec, level=d.level,
        client_id=f"transcoder-{lane.name}-{target.name}" if lane.name != target.name else f"transcoder-{target.name}",
        linger_ms=d.batch.linger_ms, max_bytes=d.batch.max_bytes, max_records=d.batch.max_records,
        on_delivery=on_delivery, on_stats=on_stats, stats_interval_ms=config.metrics.stats_interval_ms,
        queue_max_bytes=2 * config.max_in_flight_bytes + (1 << 20),
    )


@dataclass
class LaneStatus:
    """A snapshot for health checks and /status; written by the lane thread, read by others."""

    name: str
    state: str = "starting"  # starting | running | caught-up | stopped | failed
    error: str | None = None
    assigned: list[tuple[str, int]] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    records: int = 0
    dead_lettered: int = 0
    loop_cpu_seconds: float = 0.0  # CPU of the lane's own (Python) thread; librdkafka threads excluded
    acked: dict[str, int] = field(default_factory=dict)  # destination topic -> records acknowledged
    source_bytes: int = 0  # key + value + headers of the records consumed
    lag: dict[tuple[str, int], tuple[int, float]] = field(default_factory=dict)  # -> (records, seconds)
    last_loop: float = field(default_factory=time.monotonic)


@dataclass
class _Failure:
    source: tuple[str, int]
    offset: int
    destination: str
    code: str  # Kafka's error name, e.g. MSG_SIZE_TOO_LARGE: the metrics label
    reason: str
    message: Message | Delivered | None  # the record as produced, for the dead-letter copy


class Lane:
    def __init__(self, spec: routes.Lane, config: Config, metrics: LaneMetrics,
                 end_offsets: dict[tuple[str, int], tuple[int, int]] | None = None,
                 threads: ThreadLedger | None = None) -> None:
        self.spec = spec
        self.config = config
        self.metrics = metrics
        self.status = LaneStatus(name=spec.name)
        #: source partition -> (low, high) watermarks seen at start, for --until-caught-up
        self.end_offsets = end_offsets
        self.ledger = Ledger({s: tuple(t.topic_for(s) for t in spec.targets_for(s)) for s in spec.sources})
        self.source_of = {t.topic_for(s): s for t in spec.targets for s in t.sources}
        self.codec_of = {t.topic_for(s): t.destination.label for t in spec.targets for s in t.sources}
        self._failures: list[_Failure] = []
        self._revoke_error: BaseException | None = None
        #: destination topic -> records acknowledged since the last flush into the metrics
        self._acked = dict.fromkeys(self.source_of, 0)
        #: (destination topic, partition) -> source timestamp (ms) of the last acknowledged record
        self._acked_ts: dict[tuple[str, int], int] = {}
        self._committed_ts: dict[tuple[str, int], int] = {}
        self.threads = threads or ThreadLedger()
        warm = self._warm
        self.consumer = self.threads.create(
            (spec.name, "consume"),
            lambda: Consumer({**consumer_config(config, spec), "stats_cb": self._on_consumer_stats}), warm)
        self.producers: list[Producer | BatchProducer] = []
        #: source topic -> [(produce, destination topic)]
        self.routes: dict[str, list[tuple[Callable[..., None], str]]] = {s: [] for s in spec.sources}
        for target in spec.targets:
            dests = {target.topic_for(s) for s in target.sources}
            delivered = self._delivery_callback(next(iter(dests)) if len(dests) == 1 else None)
            if built_here(target.destination.codec, target.destination.level):
                p = self.threads.create(
                    (spec.name, "produce"),
                    lambda t=target, cb=delivered: batch_producer(config, spec, t, cb, self._produced),
                    lambda c: c.start())
            else:
                p = self.threads.create(
                    (spec.name, "produce"),
                    lambda t=target, cb=delivered: Producer(producer_config(config, spec, t, cb,
                                                                            self._on_producer_stats)),
                    warm)
            self.producers.append(p)
            for s in target.sources:
                self.routes[s].append((p.produce, target.topic_for(s)))
        self.dlq: Producer | None = None
        if config.errors.tolerance == "all":
            self.dlq = Producer(client_config(config.target_cluster.librdkafka(), **{
                "client.id": f"transcoder-{spec.name}-dlq", "enable.idempotence": True,
                "compression.type": "zstd", "message.max.bytes": _LARGEST_RECORD + 65536,
                "linger.ms": 50,
            }))
        self._assigned: set[tuple[str, int]] = set()
        self._last_committed: dict[tuple[str, int], int] = {}
        self._paused = False
        self._closed = False
        self._stats_emissions = 0

    @staticmethod
    def _warm(client: Any) -> None:
        """A metadata request makes a client start its broker threads, so they can be attributed."""
        try:
            client.list_topics(timeout=10)
        except KafkaException as exc:
            log.warning("metadata_request_failed", error=str(exc.args[0]))

    # ------------------------------------------------------------------ callbacks (loop thread)
    def _delivery_callback(self, only: str | None) -> Callable[[KafkaError | None, Message | Delivered], None]:
        """The delivery callback of one producer; `only`: the one destination topic it writes, if so.

        A delivery report is the other half of the hot path (one per record and destination), so
        it does Ledger.acked's bookkeeping inline, and a producer with one destination topic never
        asks a report for its topic (a str decoded and hashed per record).
        """
        ledger = self.ledger
        pending = ledger.pending
        acked = self._acked
        acked_ts = self._acked_ts
        latency = self.metrics.latency
        source_of = self.source_of
        failures = self._failures

        def delivered(err: KafkaError | None, msg: Message | Delivered) -> None:
            dest = only or msg.topic()
            partition = msg.partition()
            offset, size = pending[(dest, partition)].popleft()  # Ledger.acked: reports come in order
            ledger.in_flight_bytes -= size
            if err is None:
                n = acked[dest] = acked[dest] + 1
                ts = msg.timestamp()[1]
                acked_ts[(dest, partition)] = ts
                if not n & 15:  # sampled: an observation costs more than the rest of this callback
                    latency(dest, max(0.0, time.time() - ts / 1000))
            else:
                source = (source_of[dest], partition)
                ledger.hold(source, offset)  # never commit past a record that failed
                failures.append(_Failure(source, offset, dest, err.name(), err.str(), msg))

        return delivered

    def _on_producer_stats(self, raw: str) -> None:
        self._produced(producer_topics(json.loads(raw)))

    def _produced(self, topics: dict[str, TopicProduce]) -> None:
        """One statistics emission of a destination producer (librdkafka's, or a BatchProducer's)."""
        self._stats_emissions += 1
        for topic, t in topics.items():
            if topic in self.codec_of:
                self.metrics.produced(topic, self.codec_of[topic], t.batch_bytes, t.batch_records,
                                      t.record_bytes_total)

    def _on_consumer_stats(self, raw: str) -> None:
        now_ms = time.time() * 1000
        for (topic, partition), lag in consumer_lag(json.loads(raw)).items():
            ts = self._committed_ts.get((topic, partition))
            seconds = 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000)
            self._set_lag((topic, partition), lag, seconds)

    def _set_lag(self, tp: tuple[str, int], records: int, seconds: float) -> None:
        self.status.lag[tp] = (records, seconds)
        self.metrics.lag(tp[0], tp[1], records, seconds)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._closed:
            # Handed partitions while leaving the group (another member left first): they go back at
            # once, unread. Asking for their committed offsets here only times out (the consumer is
            # closing) and fails the close.
            log.info("partitions_assigned_while_closing", lane=self.spec.name,
                     partitions=_fmt((p.topic, p.partition) for p in partitions))
            return
        tps = [(p.topic, p.partition) for p in partitions]
        self._assigned.update(tps)
        if not partitions:
            return
        # What the group already committed counts as done: a partition fully copied by an
        # earlier run is caught up without a record of this run.
        committed = consumer.committed(partitions, timeout=30)
        for p in committed:
            if p.offset >= 0:
                self._last_committed[(p.topic, p.partition)] = p.offset
        if isinstance(self.config.start, datetime):
            self._seek_to_start_time(consumer, partitions, committed)
        self.status.assigned = sorted(self._assigned)
        log.info("partitions_assigned", lane=self.spec.name, partitions=_fmt(tps))

    def _seek_to_start_time(self, consumer: Consumer, partitions: list[TopicPartition],
                            committed: list[TopicPartition]) -> None:
        """Partitions this group never committed start at the configured timestamp.

        The callback assigns them itself, with those offsets: confluent-kafka then skips its own
        assignment of the unchanged list (changing the list's offsets in place has no effect).
        """
        assert isinstance(self.config.start, datetime)
        fresh = [TopicPartition(p.topic, p.partition, int(self.config.start.timestamp() * 1000))
                 for p in committed if p.offset == OFFSET_INVALID]
        if not fresh:
            return
        found = {(p.topic, p.partition): p.offset for p in consumer.offsets_for_times(fresh, timeout=30)}
        consumer.incremental_assign([
            TopicPartition(p.topic, p.partition, found.get((p.topic, p.partition), p.offset)) for p in partitions
        ])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        try:
            self._drain(self.config.shutdown_timeout_s)
            self._commit(tps)
        except BaseException as exc:  # raised again from the loop, never lost inside librdkafka
            self._revoke_error = exc
        self._release(tps)
        log.info("partitions_revoked", lane=self.spec.name, partitions=_fmt(tps))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        self._release(tps)  # another member owns them now: nothing may be committed for them
        log.warning("partitions_lost", lane=self.spec.name, partitions=_fmt(tps))

    def _release(self, tps: list[tuple[str, int]]) -> None:
        self.ledger.forget(tps)
        self._assigned.difference_update(tps)
        for tp in tps:
            self._last_committed.pop(tp, None)
        self.status.assigned = sorted(self._assigned)

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> None:
        """Copy until `stop` is set (or, with until_caught_up, until every start end offset is committed)."""
        log.info("lane_started", lane=self.spec.name, group_id=self.spec.group_id, sources=list(self.spec.sources),
                 destinations=[f"{t.name} ({t.destination.label})" for t in self.spec.targets])
        self.status.state = "running"
        self.threads.claim((self.spec.name, "loop"), {threading.get_native_id()})
        self.metrics.running(True)
        cpu0 = time.thread_time()
        interval = self.config.commit_interval_ms / 1000
        next_commit = time.monotonic() + interval
        next_progress = time.monotonic() + 30
        try:
            self.consumer.subscribe(list(self.spec.sources), on_assign=self._on_assign,
                                    on_revoke=self._on_revoke, on_lost=self._on_lost)
            while not stop.is_set():
                # What is queued, without waiting; else wait for the first record only (a batch
                # call waits for all _CONSUME_BATCH or the timeout: up to 200 ms added latency),
                # with what arrived along with it.
                msgs = self.consumer.consume(_CONSUME_BATCH, timeout=0)
                if not msgs:
                    msgs = self.consumer.consume(1, timeout=0.2)
                    if msgs:
                        msgs += self.consumer.consume(_CONSUME_BATCH - 1, timeout=0)
                if self._revoke_error is not None:
                    raise self._revoke_error
                if msgs:
                    self._copy(msgs)
                self._poll_producers(0)
                self._handle_failures()
                self._backpressure()
                now = time.monotonic()
                self.status.last_loop = now
                if now >= next_commit:
                    self.status.loop_cpu_seconds = time.thread_time() - cpu0
                    self._commit(self._assigned)
                    self.threads.cpu_by_owner()  # read /proc while this lane's threads live
                    next_commit = now + interval
                    if until_caught_up and self._caught_up():
                        self.status.state = "caught-up"
                        log.info("lane_caught_up", lane=self.spec.name, records=self.status.records)
                        break
                if now >= next_progress:
                    log.info("lane_progress", lane=self.spec.name, records=self.status.records,
                             in_flight_bytes=self.ledger.in_flight_bytes, paused=self._paused)
                    next_progress = now + 30
            self._shutdown()
            self.status.loop_cpu_seconds = time.thread_time() - cpu0
        except BaseException as exc:
            self.status.state = "failed"
            self.status.error = str(exc)
            self.metrics.running(False)
            self._shutdown(failed=True)
            raise
        if self.status.state == "running":
            self.status.state = "stopped"
        self.metrics.running(False)
        log.info("lane_stopped", lane=self.spec.name, state=self.status.state, records=self.status.records)

    def _copy(self, msgs: list[Message]) -> None:
        """The hot path: a few C calls per record and destination, no per-record Python method calls.

        It does Ledger.sent and Ledger.consumed's bookkeeping inline (same fields, same meaning):
        a method call per record and destination costs more than the rest of the loop body.
        """
        ledger = self.ledger
        pending = ledger.pending
        next_offset = ledger.next_offset
        routes_of = self.routes
        sent_bytes = in_bytes = 0
        n = 0
        for m in msgs:
            if m.error() is not None:
                self._consumer_error(m.error())
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
                q = pending.get((dest, partition))
                if q is None:
                    q = ledger.queue(dest, partition)
                while True:
                    try:
                        produce(dest, value, key, partition, timestamp=ts, headers=headers)
                    except BufferError:
                        self._poll_producers(0.05)  # the local queue is full: wait for deliveries
                        continue
                    except KafkaException as exc:
                        ledger.hold((topic, partition), offset)
                        e = exc.args[0]
                        self._failures.append(_Failure((topic, partition), offset, dest, e.name(), e.str(), m))
                    else:
                        q.append(entry)
                        sent_bytes += size
                    break
            next_offset[(topic, partition)] = offset + 1
            n += 1
        ledger.in_flight_bytes += sent_bytes
        self.status.records += n
        self.status.source_bytes += in_bytes
        self.metrics.records(n, in_bytes)

    def _consumer_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                         KafkaError.GROUP_AUTHORIZATION_FAILED):
            raise TranscoderError(f"lane {self.spec.name}: consumer error: {err.str()}")
        log.warning("consumer_error", lane=self.spec.name, error=err.str())

    def _poll_producers(self, timeout: float) -> None:
        for p in self.producers:
            p.poll(timeout)
        if self.dlq is not None:
            self.dlq.poll(0)

    def _backpressure(self) -> None:
        limit = self.config.max_in_flight_bytes
        inflight = self.ledger.in_flight_bytes
        if not self._paused and inflight > limit:
            self.consumer.pause([TopicPartition(t, p) for t, p in self._assigned])
            self._paused = True
            self.metrics.backpressure()
        elif self._paused and inflight <= limit // 2:
            self.consumer.resume([TopicPartition(t, p) for t, p in self._assigned])
            self._paused = False
        if self._paused:
            self._poll_producers(0.05)

    # ------------------------------------------------------------------ failures
    def _handle_failures(self) -> None:
        while self._failures:
            f = self._failures.pop(0)
            where = f"{f.source[0]} [{f.source[1]}] offset {f.offset}"
            self.metrics.error(f.code)
            if self.dlq is None:
                raise DeliveryError(f"lane {self.spec.name}: record {where} could not be written to "
                                    f"{f.destination}: {f.reason} (errors.tolerance=none)")
            self._dead_letter(f, where)

    def _dead_letter(self, f: _Failure, where: str) -> None:
        assert self.dlq is not None and self.config.errors.dlq_topic
        msg = f.message
        headers = list(msg.headers() or []) if msg is not None else []
        headers += list(zip(DLQ_HEADERS, (f.source[0].encode(), str(f.source[1]).encode(), str(f.offset).encode(),
                                          f.destination.encode(), f.reason.encode()), strict=True))
        ts_type, ts = msg.timestamp() if msg is not None else (TIMESTAMP_NOT_AVAILABLE, 0)

        def delivered(err: KafkaError | None, _m: Message) -> None:
            if err is not None:
                # The record is in neither its destination nor the DLQ: stop, and never commit past it.
                self._revoke_error = DeliveryError(f"lane {self.spec.name}: record {where} failed for "
                                                   f"{f.destination} ({f.reason}) and could not be written to "
                                                   f"the DLQ {self.config.errors.dlq_topic}: {err.str()}")
                return
            self.ledger.release(f.source, f.offset)
            self.status.dead_lettered += 1
            self.metrics.dead_lettered()

        self.dlq.produce(self.config.errors.dlq_topic, msg.value() if msg else None, msg.key() if msg else None,
                         timestamp=ts if ts_type != TIMESTAMP_NOT_AVAILABLE else 0, headers=headers,
                         on_delivery=delivered)
        log.warning("record_dead_lettered", lane=self.spec.name, record=where, destination=f.destination,
                    reason=f.reason, dlq_topic=self.config.errors.dlq_topic)

    # ------------------------------------------------------------------ commits
    def _commit(self, tps: Iterable[tuple[str, int]]) -> None:
        self._flush_acked()
        tps = list(tps)
        if not tps:
            return
        positions = {(p.topic, p.partition): p.offset
                     for p in self.consumer.position([TopicPartition(t, p) for t, p in tps])}
        offsets = []
        for tp in tps:
            pos = positions.get(tp)
            off = self.ledger.committable(tp, pos if pos is not None and pos >= 0 else None)
            if off is not None and off > self._last_committed.get(tp, -1):
                offsets.append(TopicPartition(tp[0], tp[1], off))
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise
            # A rebalance in progress or a coordinator move: the next commit covers these offsets.
            log.warning("commit_failed", lane=self.spec.name, error=err.str())
            return
        for p in offsets:
            tp = (p.topic, p.partition)
            self._last_committed[tp] = p.offset
            acked = [self._acked_ts.get((d, p.partition)) for d in self.ledger.destinations_of.get(p.topic, ())]
            if acked and None not in acked:
                self._committed_ts[tp] = min(acked)  # type: ignore[type-var]
        self.status.committed = dict(self._last_committed)

    def _flush_acked(self) -> None:
        for dest, n in self._acked.items():
            if n:
                self.metrics.acked(dest, self.codec_of[dest], n)
                self.status.acked[dest] = self.status.acked.get(dest, 0) + n
                self._acked[dest] = 0

    def _final_figures(self) -> None:
        """Before closing: one more statistics emission (the last batches), and lag from the watermarks."""
        seen = self._stats_emissions
        deadline = time.monotonic() + self.config.metrics.stats_interval_ms / 1000 + 1
        while self._stats_emissions < seen + len(self.producers) and time.monotonic() < deadline:
            self._poll_producers(0.1)
        now_ms = time.time() * 1000
        for tp in sorted(self._assigned):
            committed = self._last_committed.get(tp)
            if committed is None:
                continue
            try:
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), timeout=5)[1]
            except KafkaException:
                continue
            lag = max(0, high - committed)
            ts = self._committed_ts.get(tp)
            self._set_lag(tp, lag, 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000))

    def _caught_up(self) -> bool:
        if not self.end_offsets:
            return False
        for tp, (low, high) in self.end_offsets.items():
            if high > low and self._last_committed.get(tp, -1) < high:
                return False
        return True

    def _drain(self, timeout: float) -> None:
        """Wait for every produced record's delivery report (bounded by `timeout`)."""
        deadline = time.monotonic() + timeout
        for p in self.producers:
            p.flush(max(0.0, deadline - time.monotonic()))
        if self.dlq is not None:
            self.dlq.flush(max(0.0, deadline - time.monotonic()))
        self._handle_failures()
        if self.dlq is not None:
            self.dlq.flush(max(0.0, deadline - time.monotonic()))

    def _shutdown(self, failed: bool = False) -> None:
        """Stop consuming, deliver what is in flight, commit what was acknowledged, leave the group."""
        if self._closed:
            return
        try:
            if not failed:
                self._drain(self.config.shutdown_timeout_s)
            else:
                for p in self.producers:
                    p.flush(self.config.shutdown_timeout_s)
            self._commit(self._assigned)
            self._final_figures()
        except TranscoderError:
            if not failed:
                raise
        finally:
            self.threads.cpu_by_owner()  # last reading before the clients' threads exit
            outstanding = self.ledger.outstanding(self._assigned)
            if outstanding:
                log.warning("lane_stopped_with_records_in_flight", lane=self.spec.name, records=outstanding,
                            note="not committed: they are copied again on restart")
            self._closed = True
            for p in self.producers:
                if isinstance(p, BatchProducer):
                    p.close(0 if failed else self.config.shutdown_timeout_s)
            self.consumer.close()


def _fmt(tps: Iterable[tuple[str, int]]) -> list[str]:
    return [f"{t}[{p}]" for t, p in tps]
