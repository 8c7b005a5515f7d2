"""One lane: a consumer feeding the writer (one producer per target); commits only what every target acknowledged.

The loop runs in one thread. Delivery callbacks and rebalance callbacks run inside that
thread's poll calls, so lane state needs no locks; other threads only read snapshots.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from transcoder.config import Config
from transcoder.errors import TopicError, TranscoderError
from transcoder.kafka import offset_map_topic as offset_map
from transcoder.kafka.batch_producer import Delivered
from transcoder.kafka.clients import client_config, start_threads
from transcoder.kafka.fetcher import Fetcher, SourceLoss
from transcoder.kafka.statistics import consumer_lag, stable_offsets
from transcoder.kafka.topic_ids import GONE, TopicIds
from transcoder.kafka.watermarks import EndOffsets
from transcoder.kafka.writer import Writer
from transcoder.metrics.cpu import ThreadLedger
from transcoder.metrics.registry import LaneMetrics
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.partitions import Partition, show
from transcoder.pipeline.routes import LaneSpec
from transcoder.service.checkpoint import AtLeastOnce, Checkpoint, ExactlyOnce
from transcoder.service.scoring import Scorer

log = structlog.get_logger("transcoder.lane")

_CONSUME_BATCH = 2000
#: The batched path's Fetch waits up to this long for records (fetch.wait.max.ms): the loop's other duties
#: (linger, commits, reports) come round at least this often.
FETCH_WAIT_MS = 100
#: Readiness: records in flight without any acknowledgement for this long (or twice the longest linger) mean
#: the lane cannot produce.
STALL_S = 15.0
#: One read of the group's committed offsets on assignment waits this long; while they cannot be read (Kafka
#: unreachable, or unstable: a transaction still open) the lane says so (readiness) and asks again.
COMMITTED_READ_S = 10.0
#: exactly-once on record sets: what a transaction's batches may hold unacknowledged at least (record bytes), and at
#: first what the slowest codec (zstd 22 on a busy core: a few hundred kB/s) drains in half the drain limit; the
#: lane then sizes it by how long its drains take (Lane._size_transactions).
TXN_MIN_BYTES = 64 << 10
SLOWEST_CODEC_BYTES_PER_S = 128 << 10


#: How often a lane's consumer looks for partitions added to its sources (librdkafka's default: 5 min), unless
#: cluster.config sets topic.metadata.refresh.interval.ms: a partition added is then copied or named sooner.
METADATA_REFRESH_MS = 30_000


def consumer_config(config: Config, lane: LaneSpec) -> dict[str, Any]:
    start = config.start if isinstance(config.start, str) else "earliest"
    return client_config({"topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS, **config.cluster.librdkafka()},
                         **{
        "group.id": lane.group_id,
        "client.id": f"transcoder-{lane.name}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Never reset silently: a position whose records are gone (retention, DeleteRecords, a recreated topic) is
        # an error the lane reports (on_source_loss); partitions never committed start where `start` says, assigned
        # explicitly (Lane._assign). The batched path's consumer fetches nothing.
        "auto.offset.reset": start if config.batched else "error",
        # exactly-once: eager rebalancing, so every assignment is whole and names the transactional id
        "partition.assignment.strategy": "roundrobin" if config.guarantee == "exactly-once" else "cooperative-sticky",
        # Aborted transactions are not copied; what the source's readers see is what is copied.
        "isolation.level": "read_committed",
        # Bounded prefetch: memory stays bounded even when every target is slow.
        "queued.max.messages.kbytes": 32 * 1024,
        # Once the prefetch queue is full (queued.min.messages or the bytes above), the next fetch
        # waits this long; librdkafka's default (1000 ms) left a lane idle half of the time (bench/).
        "fetch.queue.backoff.ms": 20,
        "statistics.interval.ms": config.metrics.stats_interval_ms,
    })


def transactional_id(group_id: str, partitions: Iterable[Partition]) -> str:
    """exactly-once: a lane's transactional id for an assignment (the group's, and the partitions')."""
    parts = ",".join(f"{t}:{p}" for t, p in sorted(partitions))
    return f"transcoder-{group_id}-{hashlib.sha256(parts.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class LaneClients:
    """A lane's Kafka clients: built by `lane_clients`, or fakes handed in by a unit test."""

    writer: Writer
    consumer: Consumer
    #: the sources' topic ids (a topic deleted and recreated: a new id)
    topic_ids: TopicIds
    #: the partitions' ends, asked of the broker each statistics emission
    ends: EndOffsets
    #: record sets: the raw Fetches; None: records are consumed through librdkafka
    fetcher: Fetcher | None


def lane_clients(spec: LaneSpec, config: Config, metrics: LaneMetrics, threads: ThreadLedger,
                 consumer_conf: dict[str, Any]) -> LaneClients:
    """A lane's clients, each thread they start counted as the lane's (ThreadLedger)."""
    writer = Writer(config, spec.name, spec.targets, metrics, batched=config.batched,
                    create=lambda part, make, start: threads.create((spec.name, part), make, start))
    topic_ids = TopicIds(config.cluster.librdkafka(), f"transcoder-{spec.name}-ids",
                         lambda make: threads.create((spec.name, "consume"), make))
    consumer = threads.create((spec.name, "consume"), lambda: Consumer(consumer_conf), start_threads)
    ends = EndOffsets(config.cluster.librdkafka(), f"transcoder-{spec.name}-ends",
                      lambda make: threads.create((spec.name, "consume"), make))
    # the Fetcher's I/O thread (socket reads) counts as the lane's consuming, as librdkafka's consumer threads do on
    # the records path
    fetcher: Fetcher | None = threads.create(  # type: ignore[assignment]
        (spec.name, "consume"), lambda: Fetcher(
            config.cluster.librdkafka(), f"transcoder-{spec.name}-fetch",
            reset=config.start if isinstance(config.start, str) else "earliest", max_wait_ms=FETCH_WAIT_MS,
            past_loss=config.on_source_loss == "continue"),
        lambda f: f.connect()) if config.batched else None  # type: ignore[attr-defined]
    return LaneClients(writer, consumer, topic_ids, ends, fetcher)


class Lane:
    """One consumer group's copy: the loop, the group's rebalances, backpressure and source changes. What may be
    committed, and in which order, is its checkpoint's (`checkpoint`: at-least-once or exactly-once); its Kafka
    clients are `LaneClients` (fakes in its unit tests)."""

    def __init__(self, spec: LaneSpec, config: Config, metrics: LaneMetrics,
                 end_offsets: dict[Partition, tuple[int, int]] | None = None,
                 threads: ThreadLedger | None = None, scorer: Scorer | None = None,
                 destination_partitions: dict[str, int] | None = None,
                 extend_destination: Callable[[str, int], None] | None = None,
                 own_destinations: set[str] | None = None, clients: LaneClients | None = None) -> None:
        self.spec = spec
        #: destination topic -> its partition count (pre-flight's): a source partition at or past it cannot be copied
        self.destination_partitions = dict(destination_partitions or {})
        #: destinations transcoder created, and how to give one more partitions: a source partition added while the
        #: lane runs is copied there; any other destination stops the lane (_check_destination_partitions)
        self._extend_destination = extend_destination
        self._own_destinations = set(own_destinations or ())
        self.config = config
        self.metrics = metrics
        #: source partition -> (low, high) watermarks seen at start, for --until-caught-up
        self.end_offsets = end_offsets
        self._revoke_error: BaseException | None = None
        self._stop = threading.Event()  # run()'s
        self.threads = threads or ThreadLedger()
        #: hot_path batches (the default): the lane reads raw record sets (Fetcher) and writes batches built from
        #: them, with no Python per record; the consumer only keeps the group (its partitions stay paused) and
        #: commits. Otherwise records are consumed and produced one by one through librdkafka.
        self._batched = config.batched
        conf = {**consumer_config(config, spec), "stats_cb": self._on_consumer_stats}
        clients = clients or lane_clients(spec, config, metrics, self.threads, conf)
        self.writer = clients.writer
        self.ledger = self.writer.ledger
        self.status = LaneStatus(name=spec.name, group_id=spec.group_id, acked=self.writer.acked_total,
                                 destinations={d: (s, self.writer.codec_of[d])
                                               for d, s in self.writer.source_of.items()})
        self._error_trackers = [conf["error_cb"], *self.writer.error_trackers]
        #: the sources' topic ids (a topic deleted and recreated: a new id, _check_topic_ids), asked on assignment, at
        #: each metadata refresh interval, and at once where a Fetch or the consumer finds a topic unknown
        self._topic_ids = clients.topic_ids
        self._source_ids: dict[str, str] = {}
        self._ids_every = int(conf.get("topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS)) / 1000
        self._ids_due = 0.0
        #: each source partition's highest end seen (for a recreated topic: the old topic's last end seen) and,
        #: once released, where the lane was in it
        self._max_end: dict[Partition, int] = {}
        self._released_at: dict[Partition, int] = {}
        #: partitions of a source found deleted: not read (by name: a topic recreated meanwhile would be read from
        #: the old one's position) until its id is known again
        self._gone: set[Partition] = set()
        self.consumer = clients.consumer
        #: readiness: (records read + acknowledged, when that last changed); see _check_progress
        self._progress = (0, time.monotonic())
        self._stall_s = max(STALL_S, 2 * max(t.destination.batch.linger_ms for t in spec.targets) / 1000)
        self._assigned: set[Partition] = set()
        self._paused = False
        #: the partitions' ends, asked of the broker each statistics emission (librdkafka's learns them from fetches)
        self._ends = clients.ends
        #: batched: the raw Fetches
        self.fetcher = clients.fetcher
        #: batched: each partition's read_committed end as the last Fetch answered
        self._fetched_ends: dict[Partition, int] = {}
        #: batched: records fetched and not yet handed to the writer (no room under max_in_flight_bytes for them
        #: yet), as (StoredRecords, index of the first one left); such a partition is not fetched meanwhile
        self._pending: dict[Partition, tuple[Any, int]] = {}
        self._stray_logged = False
        #: on_source_loss: stop: the loss that stops the lane (raised once it has committed what it copied)
        self._loss_error: TranscoderError | None = None
        self._closed = False
        self._eos = config.guarantee == "exactly-once"
        #: exactly-once on record sets: since when the lane waits for its transaction's batches to be acknowledged
        #: before committing it (it hands the writer nothing new meanwhile); None: not waiting
        self._draining_since: float | None = None
        #: ... and for how long at most before it aborts the transaction: half the transaction's life
        #: (transaction_timeout_ms), the rest left for the commit. A slow destination (a quota) takes its time;
        #: aborting sooner would throw the transaction's work away and start the same one again.
        self._drain_limit_s = config.transaction_timeout_ms / 2000
        #: ... and what its batches may hold unacknowledged at once (record bytes; the writer is handed no more), so
        #: that the drain takes about `_drain_target_s` (the commit interval, at most an eighth of the transaction's
        #: life): a codec slower than the commit interval commits smaller transactions instead of missing the drain
        #: limit, aborting, and reading the same records again. Follows the drains (_size_transactions).
        self._drain_target_s = min(config.commit_interval_ms / 1000, self._drain_limit_s / 4)
        self._txn_bytes = min(config.max_in_flight_bytes,
                              max(TXN_MIN_BYTES, int(SLOWEST_CODEC_BYTES_PER_S * self._drain_limit_s / 2)))
        self._drain_from = 0  # bytes in flight when the current drain began
        self._down_since = 0.0
        #: what may be committed and in which order (one variant per guarantee); where each partition's commit stands
        self.checkpoint: Checkpoint = ExactlyOnce(
            spec.name, self.writer, self.consumer, self.status, config.shutdown_timeout_s, self._positions,
            group_id=spec.group_id, transactional_id=lambda tps: transactional_id(spec.group_id, tps),
            rewind=self._rewind, waiting=self._waiting_on_kafka, drained=self._drain if self._batched else None,
            drain_limit_s=self._drain_limit_s) if self._eos else AtLeastOnce(
            spec.name, self.writer, self.consumer, self.status, config.shutdown_timeout_s, self._positions)
        #: live scoring's capture (evaluate: in the config); None: off, and the loop does not look further
        self.sampler = scorer.sampler({d: (s, self.writer.target_of[d].destination)
                                       for d, s in self.writer.source_of.items()}, time.monotonic()) \
            if scorer is not None else None

    # ------------------------------------------------------------------ callbacks (loop thread)
    def _on_consumer_stats(self, raw: str) -> None:
        now_ms = time.time() * 1000
        stats = json.loads(raw)
        committed = self.checkpoint.committed
        if self._batched:  # the consumer never fetches: the ends are the fetcher's and the broker's
            lags = {tp: max(0, end - committed[tp]) for tp, end in self._fetched_ends.items()
                    if tp in committed and tp in self._assigned}
        elif self._eos:  # the offsets are committed in transactions, which the consumer's own figure does not see
            lags = {tp: max(0, end - committed[tp]) for tp, end in stable_offsets(stats).items()
                    if tp in committed}
        else:
            lags = consumer_lag(stats)
        # librdkafka learns a partition's end from its fetches, which stop while the lane is paused or its prefetch
        # queue is full (the destination behind): the broker's answer, asked each emission, counts too.
        self._ends.refresh(self._assigned)
        for tp, end in self._ends.known.items():
            if tp in self._assigned:
                self._max_end[tp] = max(self._max_end.get(tp, -1), end)
            if tp in committed and tp in self._assigned:
                lags[tp] = max(lags.get(tp, 0), end - committed[tp])
        for (topic, partition), lag in lags.items():
            ts = self.checkpoint.committed_ts.get((topic, partition))
            seconds = 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000)
            self._set_lag((topic, partition), lag, seconds)

    def _set_lag(self, tp: Partition, records: int, seconds: float) -> None:
        self.status.lag[tp] = (records, seconds)
        self.metrics.lag(tp[0], tp[1], records, seconds)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Nothing may leave a rebalance callback: confluent-kafka raises a failure in it from poll() as a bare
        # KafkaError, which is no exception class (no `except` catches it, the lane's thread dies with a raw
        # traceback). It is raised again from the loop instead, as the other callbacks' are.
        if self._revoke_error is not None:
            # An earlier callback of the same poll failed (a fenced producer found on losing its partitions): the
            # loop raises it next. Nothing of this assignment is begun: no transactional id taken back, no
            # "partitions_assigned" for a lane that is about to stop.
            log.warning("assignment_skipped", lane=self.spec.name, partitions=show((p.topic, p.partition)
                                                                                  for p in partitions),
                        reason=str(self._revoke_error))
            return
        try:
            self._assign(consumer, partitions)
        except BaseException as exc:  # noqa: BLE001 - raised again from the loop
            self._revoke_error = exc

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._closed:
            # Handed partitions while leaving the group (another member left first): they go back at
            # once, unread. Asking for their committed offsets here only times out (the consumer is
            # closing) and fails the close.
            log.info("partitions_assigned_while_closing", lane=self.spec.name,
                     partitions=show((p.topic, p.partition) for p in partitions))
            return
        tps = [(p.topic, p.partition) for p in partitions]
        self._assigned.update(tps)
        if not partitions:
            return
        self._check_destination_partitions(consumer, tps)
        recreated = self._check_topic_ids(self._topic_ids.now({t for t, _ in tps}), assigning=tps)
        # exactly-once, first: taking the transactional id aborts what an earlier holder of it left open (its offsets
        # among it), instead of waiting for the broker to time that transaction out.
        self.checkpoint.begin(self._assigned)
        # What the group already committed counts as done: a partition fully copied by an
        # earlier run is caught up without a record of this run.
        committed = self._committed(consumer, partitions)
        if self.config.migration is not None:
            recreated |= self._recreated_by_map(consumer, [(p.topic, p.partition) for p in committed if p.offset < 0
                                                           and (p.topic, p.partition) not in recreated])
        if recreated:  # the new topic from its start, whatever was committed meanwhile (the old topic's position)
            committed = [TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) if (p.topic, p.partition) in recreated
                         else p for p in committed]
        for p in committed:
            if p.offset >= 0:
                self.checkpoint.committed[(p.topic, p.partition)] = p.offset
        if self.fetcher is not None:
            starts: dict[Partition, int | str | None] = {
                (p.topic, p.partition): p.offset if p.offset >= 0 else "earliest" if p.offset == OFFSET_BEGINNING
                else None for p in committed}
            if isinstance(self.config.start, datetime):  # no record since that time: the end
                starts.update({tp: off if off >= 0 else "latest"
                               for tp, off in self._start_time_offsets(consumer, committed).items()})
            self.fetcher.assign(starts)
            if self._paused:
                self.fetcher.paused.update(tps)
            self.fetcher.paused.update(self.checkpoint.withheld.intersection(tps))
            # librdkafka never fetches them: the fetcher does. Assigned here (confluent-kafka then skips its own
            # assignment) so that the pause lands on the assigned partitions; exactly-once rebalances eagerly, where
            # each assignment is whole.
            (consumer.assign if self._eos else consumer.incremental_assign)(partitions)
            consumer.pause(partitions)
        else:
            if isinstance(self.config.start, datetime):
                self._seek_to_start_time(consumer, partitions, committed)
            elif any(p.offset < 0 for p in committed) or recreated:
                # auto.offset.reset is `error` (consumer_config): partitions never committed start where `start`
                # says, assigned here (confluent-kafka then skips its own assignment, as _seek_to_start_time).
                fresh = OFFSET_BEGINNING if self.config.start == "earliest" else OFFSET_END
                (consumer.assign if self._eos else consumer.incremental_assign)(
                    [TopicPartition(p.topic, p.partition, p.offset if p.offset >= 0 or p.offset == OFFSET_BEGINNING
                                    else fresh) for p in committed])
            # librdkafka keeps a partition's pause across assignments: one paused by backpressure before it was
            # lost would stay paused for good once assigned again. It follows the lane's state instead.
            (consumer.pause if self._paused else consumer.resume)(partitions)
            stopped = [p for p in partitions if (p.topic, p.partition) in self.checkpoint.withheld]
            if stopped:
                consumer.pause(stopped)
        self.status.assigned = sorted(self._assigned)
        log.info("partitions_assigned", lane=self.spec.name, partitions=show(tps))

    def _check_destination_partitions(self, consumer: Consumer, tps: list[Partition]) -> None:
        """A source partition assigned that a destination does not have (partitions added to a running source):
        its records could never land in the same partition of the copy. The lane stops, naming both counts."""
        for topic, partition in sorted(tps):
            for dest in self.ledger.destinations_of.get(topic, ()):
                have = self.destination_partitions.get(dest)
                if have is None or partition < have:
                    continue
                try:
                    now = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
                except (KafkaException, KeyError):
                    now = partition + 1
                now = max(now, partition + 1)
                if self._extend_destination is not None and dest in self._own_destinations:
                    self._extend_destination(dest, now)
                    self.destination_partitions[dest] = now
                    for producer in self.writer.producers:  # librdkafka's learn the new partitions now, not in 5 min
                        if isinstance(producer, Producer):
                            producer.list_topics(dest, timeout=10)
                    log.warning("source_partitions_added", lane=self.spec.name, topic=topic, destination=dest,
                                partitions=now, was=have, note=f"{dest} (created by transcoder) extended to match: "
                                "the new partitions are copied")
                    continue
                raise TranscoderError(
                    f"source {topic} has {now} partitions now but its destination {dest} has {have}: partition "
                    f"{partition} was added to the running source and cannot be copied (records of partition p land "
                    f"in p); add partitions to {dest} (kafka-topics --alter --topic {dest} --partitions {now}) and "
                    "run again", topic=topic, partition=partition)

    def _committed(self, consumer: Consumer, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The group's committed offsets of `partitions`, asked again while they cannot be read and the lane runs.

        exactly-once: offsets committed in a transaction still open are unstable until it ends; librdkafka waits
        for them (KIP-447), and so does this call. Another member's transaction ends when it commits, or when the
        broker times it out (transaction_timeout_ms). One of this lane's own transactional id was aborted by
        `Checkpoint.begin`; one pending with no transaction left (a broker killed at the wrong moment) ends
        only with a marker of this producer id: after the first read that fails, `release_group_offsets`."""
        parts = show((p.topic, p.partition) for p in partitions)
        released = not self._eos
        failed_releases = 0
        since = time.monotonic()
        while True:
            try:
                return consumer.committed(partitions, timeout=COMMITTED_READ_S)
            except KafkaException as exc:
                err = exc.args[0]
                if not (err.retriable() or err.code() == KafkaError._TIMED_OUT) or self._stop.is_set():
                    raise TranscoderError(f"lane {self.spec.name}: could not read group {self.spec.group_id}'s "
                                          f"committed offsets of {parts}: {err.str()}") from None
                why = err.str()
            self._cannot_copy(f"group {self.spec.group_id}'s committed offsets of {parts} unreadable: {why}", since)
            if released:
                continue
            why_not = self.writer.release_group_offsets(partitions, consumer.consumer_group_metadata(),
                                                        self.config.shutdown_timeout_s)
            if why_not is not None:  # Kafka unreachable: the reads go on, and it is tried again after each
                failed_releases += 1
                if failed_releases == 1:  # once, as lane_cannot_copy is
                    log.warning("group_offsets_not_released", lane=self.spec.name, partitions=parts, error=why_not,
                                note="tried again after each read that fails")
            else:
                released = True
                log.warning("group_offsets_released", lane=self.spec.name, partitions=parts,
                            transactional_id=self.writer.transactional_id,
                            note="an aborted transaction of the group's offsets only: it ends any this producer id "
                                 "left pending")

    def _start_time_offsets(self, consumer: Consumer, committed: list[TopicPartition]) -> dict[Partition, int]:
        """Where partitions this group never committed start: the first offset at the configured time
        (OFFSET_END, -1: no record since)."""
        assert isinstance(self.config.start, datetime)
        fresh = [TopicPartition(p.topic, p.partition, int(self.config.start.timestamp() * 1000))
                 for p in committed if p.offset == OFFSET_INVALID]
        if not fresh:
            return {}
        return {(p.topic, p.partition): p.offset for p in consumer.offsets_for_times(fresh, timeout=30)}

    def _seek_to_start_time(self, consumer: Consumer, partitions: list[TopicPartition],
                            committed: list[TopicPartition]) -> None:
        """Partitions this group never committed start at the configured timestamp.

        The callback assigns them itself, with those offsets: confluent-kafka then skips its own
        assignment of the unchanged list (changing the list's offsets in place has no effect).
        """
        found = self._start_time_offsets(consumer, committed)
        if not found:
            return
        consumer.incremental_assign([
            TopicPartition(p.topic, p.partition, found.get((p.topic, p.partition), p.offset)) for p in partitions
        ])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        try:
            self.checkpoint.revoke(tps, self._assigned)
        except BaseException as exc:  # noqa: BLE001 - raised again from the loop, never lost inside librdkafka
            self._revoke_error = exc
        self._release(tps)
        log.info("partitions_revoked", lane=self.spec.name, partitions=show(tps))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        try:  # another member owns them now: what a transaction holds must not be committed
            self.checkpoint.lost()
        except BaseException as exc:  # noqa: BLE001 - raised again from the loop
            self._revoke_error = exc
        self._release(tps)  # another member owns them now: nothing may be committed for them
        log.warning("partitions_lost", lane=self.spec.name, partitions=show(tps))

    def _release(self, tps: list[Partition]) -> None:
        self._gone.difference_update(tps)
        for tp in tps:  # where the lane was: a topic recreated meanwhile is reported from there (_check_topic_ids)
            at = self._position(tp)
            if at is not None:
                self._released_at[tp] = at
        if self.fetcher is not None:
            self.fetcher.revoke(tps)
        for tp in tps:
            self._fetched_ends.pop(tp, None)
            self._pending.pop(tp, None)
        self.ledger.forget(tps)
        self._draining_since = None  # a transaction waiting to commit went with them (committed or aborted)
        self._assigned.difference_update(tps)
        self._ends.forget(tps)
        self.checkpoint.forget(tps)
        self.status.assigned = sorted(self._assigned)

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> None:
        """Copy until `stop` is set (or, with until_caught_up, until every start end offset is committed)."""
        self._stop = stop
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
                if self.fetcher is not None:
                    self._fetch()
                else:
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
                self._watch_topic_ids(time.monotonic())
                if self._loss_error is not None:  # on_source_loss: stop; what was copied is committed first
                    break
                self.writer.poll(0)
                self.writer.handle_failures()
                self._backpressure()
                now = time.monotonic()
                self.status.last_loop = now
                if self.sampler is not None and now >= self.sampler.due:
                    self.sampler.tick(now)
                if self._draining_since is not None and now < next_commit:
                    self._commit(self._assigned)  # the transaction's batches may all be acknowledged now
                if now >= next_commit:
                    self.status.loop_cpu_seconds = time.thread_time() - cpu0
                    self._commit(self._assigned)
                    self._check_progress(now)
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
            if self._loss_error is not None:
                raise self._loss_error
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

    def _check_progress(self, now: float) -> None:
        """Readiness: the lane cannot copy while records wait and nothing was acknowledged for `_stall_s`, or
        while a client reports Kafka unreachable and nothing moved since. Logged once when it starts and ends."""
        mark = self.status.records + sum(self.writer.acked_total.values())
        last_mark, since = self._progress
        if mark != last_mark:
            self._progress = (mark, now)
            if self.status.unreachable is not None:
                log.info("lane_copying_again", lane=self.spec.name, after_s=round(now - self._down_since, 1))
                self.status.unreachable = None
            return
        why = None
        if self.ledger.in_flight_bytes > 0 and now - since >= self._stall_s:
            why = (f"no acknowledgement for {now - since:.0f} s with {self.ledger.outstanding(self._assigned)} "
                   "records in flight")
        else:
            after = max(since, now - self._stall_s)  # errors keep coming (reconnect attempts) while it lasts
            err = next((e for t in self._error_trackers if (e := t.unreachable_since(after)) is not None), None)
            if err is not None:
                why = f"Kafka unreachable: {err.str()}"
        if why is not None:
            self._cannot_copy(why, since)
        elif self.status.unreachable is not None:
            log.info("lane_copying_again", lane=self.spec.name, after_s=round(now - self._down_since, 1))
            self.status.unreachable = None

    def _cannot_copy(self, why: str, since: float) -> None:
        """Readiness answers 503 with `why`; logged once when it starts (`since`: when the lane last moved)."""
        if self.status.unreachable is None:
            self._down_since = since
            log.warning("lane_cannot_copy", lane=self.spec.name, reason=why,
                        note="retrying; /readyz answers 503 until it can copy again")
        self.status.unreachable = why

    def _fetch(self) -> None:
        """The batched path's step: the group's callbacks (the consumer fetches nothing), one round of raw
        Fetches, each partition's records handed to the writer, batches whose linger is over sent."""
        assert self.fetcher is not None
        draining = self._draining_since is not None  # a transaction waits to commit: nothing new joins it
        idle = not self._assigned or len(self.fetcher.paused) >= len(self._assigned) or draining
        m = self.consumer.poll(0.2 if not self._assigned else 0.02 if draining else 0)
        if self._revoke_error is not None:
            raise self._revoke_error
        if m is not None:
            err = m.error()
            if err is not None:
                self._consumer_error(err)
            elif not self._stray_logged:  # fetched before its pause landed: the fetcher reads it, not this
                self._stray_logged = True
                log.info("consumer_record_dropped", lane=self.spec.name, topic=m.topic(), partition=m.partition(),
                         offset=m.offset(), note="the lane's fetcher copies it; the consumer only keeps the group")
        # A round fetches no more than the room left under max_in_flight_bytes (stored bytes; the broker still
        # returns a first batch larger than that), and hands the writer records up to the room in record bytes
        # (at least one), as a paused librdkafka consumer would. Compressed source batches hold more record
        # bytes than they take: what does not fit waits here, and its partition is not fetched meanwhile.
        room = self._room()
        fetched = self.fetcher.fetch(budget=max(room, 1), skip=self._pending) if not idle else {}
        for loss in self.fetcher.take_losses():
            if loss.records is None and self._check_topic_ids(self._topic_ids.now([loss.topic]),
                                                              at={(loss.topic, loss.partition): loss.offset}):
                continue  # the topic was recreated: reported as such
            self._source_lost(loss)
        now = time.monotonic()
        for tp, f in fetched.items():
            self._fetched_ends[tp] = f.end
            # the broker's answers between Fetches (_ends) count too, at each emission
            self._max_end[tp] = max(self._max_end.get(tp, -1), f.end)
            if len(f.records):
                self._pending[tp] = (f.records, 0)
                if self.checkpoint.unstarted(tp):
                    self.checkpoint.started(tp, int(f.records.span(0, 1)[0]))
        for tp, (records, start) in list(self._pending.items()):
            room = self._room()
            if room <= 0 or draining:
                break
            stop = records.fit(start, room)
            if stop < len(records):
                self._pending[tp] = (records, stop)
            else:
                del self._pending[tp]
            n, nbytes = self.writer.write_stored(tp, records, now, start, stop)
            if self.sampler is not None and self.sampler.capturing:  # live scoring: a window is open
                self.sampler.offer([Delivered(tp[0], tp[1], o, (k, v, h, ts, 0))
                                    for o, ts, k, v, h in map(records.record, range(start, stop))])
            self.status.records += n
            self.status.source_bytes += nbytes
            self.metrics.records(n, nbytes)
        self.writer.tick(now)

    def _copy(self, msgs: list[Any]) -> None:
        reset = [m for m in msgs if m.error() is not None and m.error().code() == KafkaError._AUTO_OFFSET_RESET]
        if reset:  # auto.offset.reset=error: the position's records are gone (or the partition ends before it)
            msgs = [m for m in msgs if m not in reset]
            for m in reset:
                self._reset_error(m)
        checkpoint = self.checkpoint
        if checkpoint.rewinds and len(checkpoint.first_read) + len(checkpoint.committed) < len(self._assigned):
            for m in msgs:
                tp = (m.topic(), m.partition())
                if m.error() is None and checkpoint.unstarted(tp):
                    checkpoint.started(tp, m.offset())
        n, nbytes = self.writer.write(msgs, self._consumer_error)
        if self.sampler is not None and self.sampler.capturing:  # live scoring: a window is open
            self.sampler.offer(msgs)
        self.status.records += n
        self.status.source_bytes += nbytes
        self.metrics.records(n, nbytes)

    def _reset_error(self, m: Any) -> None:
        """The records path: librdkafka found the position of m's partition out of range (auto.offset.reset is
        `error`): a loss, or a position moved meanwhile (then read again from where it is)."""
        tp = TopicPartition(m.topic(), m.partition())
        offset = m.offset()
        try:
            first, end = self.consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as exc:
            raise TranscoderError(f"lane {self.spec.name}: {m.topic()} [{m.partition()}] offset {offset} is out of "
                                  f"range and its offsets cannot be read: {exc.args[0].str()}", topic=m.topic(),
                                  partition=m.partition(), offset=offset) from None
        if self._check_topic_ids(self._topic_ids.now([m.topic()]), at={(m.topic(), m.partition()): offset}):
            return  # the topic was recreated: reported as such
        if offset < 0 or first <= offset <= end:  # not a loss (a position moved meanwhile): read on
            self.consumer.seek(TopicPartition(m.topic(), m.partition(), max(offset, first)))
            return
        self._source_lost(SourceLoss(m.topic(), m.partition(), offset, first, end))
        if self.config.on_source_loss == "continue":
            self._restart_at(m.topic(), m.partition(), first)

    def _restart_at(self, topic: str, partition: int, offset: int) -> None:
        """The records path: read a partition on from `offset` after librdkafka stopped it on an offset reset
        error (a seek is refused in that state): assigned again at that offset."""
        tp = TopicPartition(topic, partition, offset)
        if self._eos:  # eager: the whole assignment again, the others where they are
            others = [p for p in self.consumer.position([TopicPartition(t, q) for t, q in sorted(self._assigned)
                                                         if (t, q) != (topic, partition)])]
            self.consumer.assign([*others, tp])
        else:
            self.consumer.incremental_unassign([TopicPartition(topic, partition)])
            self.consumer.incremental_assign([tp])
        if self._paused:
            self.consumer.pause([TopicPartition(topic, partition)])

    def _source_lost(self, loss: SourceLoss) -> None:
        """Records the lane needs are gone from the source: one line naming them, the counter, the offset map's
        gap (verify and cutover see it), and on_source_loss: stop ends the lane once it committed what it copied."""
        n = loss.records
        where = f"{loss.topic} [{loss.partition}]"
        if loss.recreated:
            self._recreated_lost(loss)
            return
        what = (f"source records {loss.offset}..{loss.first - 1} of {where} ({n}) were deleted before they were "
                "copied (retention or DeleteRecords overtook the lane)" if n is not None else
                f"{where} ends at offset {loss.end}, before the lane's position {loss.offset} (truncated, or the "
                f"topic deleted and recreated): records from {loss.offset} on were lost before they were copied")
        stop = self.config.on_source_loss == "stop"
        log.error("source_records_lost", lane=self.spec.name, topic=loss.topic, partition=loss.partition,
                  offset=loss.offset, first_offset=loss.first, end_offset=loss.end, records_lost=n,
                  on_source_loss=self.config.on_source_loss,
                  note=what + ("; the lane stops (on_source_loss: stop)" if stop else
                               f"; copying on from offset {loss.first} (on_source_loss: continue)"))
        if n:
            self.metrics.source_records_lost(loss.topic, loss.partition, n)
        if self.config.migration is not None:  # the offset map's gap: verify and cutover see it
            hi = loss.first if n is not None else loss.offset + 1
            offset_map.store_lost(self.config, [(loss.topic, d, loss.partition, loss.offset, hi)
                                                for d in self.ledger.destinations_of.get(loss.topic, ())],
                                  self.config.shutdown_timeout_s)
        if stop and self._loss_error is None:
            self._loss_error = TranscoderError(
                f"lane {self.spec.name}: {what}; stopped (on_source_loss: stop): to copy on from offset {loss.first}, "
                "run once with on_source_loss: continue", topic=loss.topic, partition=loss.partition,
                offset=loss.offset)

    def _position(self, tp: Partition) -> int | None:
        """Where the lane is in a partition it holds: the next record it would hand the writer."""
        if self.fetcher is not None:
            at = self._read_position(tp)
        else:
            at = self.ledger.next_offset.get(tp)
        if at is None:
            at = self.checkpoint.committed.get(tp)
        return at

    def _watch_topic_ids(self, now: float) -> None:
        """From the loop: the sources' ids asked each metadata refresh interval (sooner, at most once a second,
        after a Fetch found a topic unknown), the answers taken without waiting."""
        answers = self._topic_ids.answers()
        if answers:
            self._check_topic_ids(answers)
        hint = self.fetcher is not None and self.fetcher.unknown_topics
        if now >= self._ids_due or (hint and now >= self._ids_due - self._ids_every + 1):
            if self.fetcher is not None:
                self.fetcher.unknown_topics.clear()
            self._topic_ids.ask({t for t, _ in self._assigned})
            self._ids_due = now + self._ids_every

    def _check_topic_ids(self, ids: dict[str, str], assigning: Iterable[Partition] = (),
                         at: dict[Partition, int] | None = None) -> set[Partition]:
        """Topics whose id changed since the lane first saw them (deleted and recreated): each partition the lane
        holds (or is being assigned: `assigning`) is a loss, reported through the loss path. Returns them. `at`:
        the lane's position in a partition, where it is known better than now (an offset found out of range)."""
        lost: set[Partition] = set()
        assigning = set(assigning)
        for topic, new in sorted(ids.items()):
            old = self._source_ids.get(topic)
            if new == GONE:  # deleted: whether it comes back under a new id is seen at the next check (1 s)
                gone = {tp for tp in self._assigned if tp[0] == topic} - self._gone
                if old is not None and gone:
                    self._gone.update(gone)
                    self._hold(gone, True)
                    log.warning("source_topic_deleted", lane=self.spec.name, topic=topic, topic_id=old,
                                partitions=show(sorted(gone)), note="not read until the topic is back: a topic "
                                "recreated under the same name is a loss (source_records_lost)")
                self._ids_due = min(self._ids_due, time.monotonic() + 1)
                continue
            self._source_ids[topic] = new
            back = {tp for tp in self._gone if tp[0] == topic}
            if back:
                self._gone -= back
                if old == new:
                    self._hold(back & self._assigned, False)
            if old is None or old == new:
                continue
            for tp in sorted(tp for tp in self._assigned | assigning if tp[0] == topic):
                pos = (at or {}).get(tp)
                if pos is None and tp not in assigning:
                    pos = self._position(tp)
                if pos is None:
                    pos = self._released_at.get(tp)
                seen = max(self._max_end.pop(tp, -1), pos if pos is not None else -1)  # what it read, at least
                self._released_at.pop(tp, None)
                loss = SourceLoss(topic, tp[1], pos if pos is not None else 0, 0, 0, topic_id=old, new_topic_id=new,
                                  seen_end=seen if pos is not None else -1)
                self._source_lost(loss)
                lost.add(tp)
                if self.config.on_source_loss == "stop":
                    self.checkpoint.withheld.add(tp)
                    if self.fetcher is not None:
                        self.fetcher.paused.add(tp)
                    elif tp in self._assigned:
                        self.consumer.pause([TopicPartition(*tp)])
                elif tp not in assigning:
                    self._restart_recreated(tp)
        return lost

    def _recreated_by_map(self, consumer: Consumer, fresh: list[Partition]) -> set[Partition]:
        """Partitions the group never committed (Kafka deletes a group's offsets with the topic) whose offset map
        holds a source offset at or past the partition's end now: the topic was recreated since they were copied
        (the lane that copied them stopped before it saw that). A loss, its count unknown; returns them."""
        lost: set[Partition] = set()
        maps: dict[str, dict[int, Any]] = {}
        for tp in sorted(fresh):
            for dest in self.ledger.destinations_of.get(tp[0], ()):
                if dest not in maps:
                    try:
                        maps[dest] = offset_map.read(self.config, dest, timeout=30)[0]
                    except TopicError:  # no map topic yet: nothing copied to compare with
                        maps[dest] = {}
                pm = maps[dest].get(tp[1])
                end = pm.source_end if pm else None
                if end is None:
                    continue
                high = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10)[1]
                if end - 1 < high:
                    continue
                self._source_lost(SourceLoss(tp[0], tp[1], end, 0, high, topic_id="(not recorded)",
                                             new_topic_id=self._source_ids.get(tp[0], "(unknown)"), by_map=True))
                lost.add(tp)
                if self.config.on_source_loss == "stop":
                    self.checkpoint.withheld.add(tp)
                break
        return lost

    def _hold(self, tps: set[Partition], hold: bool) -> None:
        """Stop reading these partitions (a deleted source), or read them again (unless backpressure holds all)."""
        if not tps:
            return
        if self.fetcher is not None:
            if hold:
                self.fetcher.paused.update(tps)
            elif not self._paused:
                self.fetcher.paused.difference_update(tps)
        elif hold:
            self.consumer.pause([TopicPartition(*tp) for tp in sorted(tps)])
        elif not self._paused:
            self.consumer.resume([TopicPartition(*tp) for tp in sorted(tps)])

    def _restart_recreated(self, tp: Partition) -> None:
        """on_source_loss: continue, a partition the lane holds whose topic was recreated: what was read of the
        old topic is delivered, and the new topic is read from its start (nothing of the old one committed to it)."""
        if not self._eos:
            self.writer.drain(self.config.shutdown_timeout_s)
        self.ledger.forget([tp])
        self.checkpoint.restart(tp)
        if self.fetcher is not None:
            self._pending.pop(tp, None)
            self.fetcher.assign({tp: "earliest"})
            if not self._paused:
                self.fetcher.paused.discard(tp)
        else:
            self._restart_at(tp[0], tp[1], OFFSET_BEGINNING)

    def _recreated_lost(self, loss: SourceLoss) -> None:
        """_source_lost for a topic deleted and recreated (a new topic id)."""
        n = loss.records
        where = f"{loss.topic} [{loss.partition}]"
        stop = self.config.on_source_loss == "stop"
        what = (f"source topic recreated: its earlier records were not all known to be copied: the offset map of "
                f"{where} holds source offsets up to {loss.offset - 1}, at or past its end now ({loss.end}), and the "
                "group has no committed offset (Kafka deleted it with the topic)" if loss.by_map else
                f"source topic {loss.topic} was deleted and recreated (topic id {loss.topic_id} is now "
                f"{loss.new_topic_id}): {where} was at offset {loss.offset}; "
                + (f"the old topic's last end seen was {loss.seen_end}: records {loss.offset}..{loss.seen_end - 1} "
                   f"({n}) were lost before they were copied (and any written after that end)" if n else
                   f"the old topic's last end seen was {loss.seen_end}: no record seen was left uncopied (any written "
                   "after that end were lost)" if n == 0 else
                   "its end was never seen: how many records were lost is unknown"))
        log.error("source_records_lost", lane=self.spec.name, topic=loss.topic, partition=loss.partition,
                  offset=loss.offset, topic_id=loss.topic_id, new_topic_id=loss.new_topic_id,
                  last_end_offset=loss.seen_end if loss.seen_end >= 0 else None,
                  records_lost=n if n is not None else "unknown", on_source_loss=self.config.on_source_loss,
                  note=what + ("; the lane stops (on_source_loss: stop)" if stop else
                               "; copying the new topic from its start (on_source_loss: continue)"))
        if n:
            self.metrics.source_records_lost(loss.topic, loss.partition, n)
        if self.config.migration is not None and n != 0:  # the offset map's gap: verify and cutover see it
            hi = loss.seen_end if n is not None else loss.offset + 1
            offset_map.store_lost(self.config, [(loss.topic, d, loss.partition, loss.offset, hi)
                                                for d in self.ledger.destinations_of.get(loss.topic, ())],
                                  self.config.shutdown_timeout_s)
        if stop and self._loss_error is None:
            self._loss_error = TranscoderError(
                f"lane {self.spec.name}: {what}; stopped (on_source_loss: stop), nothing committed for the new "
                "topic: to copy it from its start, run once with on_source_loss: continue", topic=loss.topic,
                partition=loss.partition, offset=loss.offset)

    def _consumer_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            gone = [t for t in self._source_ids if t in err.str()]
            if gone:  # a source deleted under the lane: recreated or not, the topic id checks (soon) tell
                log.warning("source_topic_unknown", lane=self.spec.name, topics=gone, error=err.str(),
                            note="deleted? a topic recreated under the same name is a loss (source_records_lost)")
                self._ids_due = 0.0
                return
        if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                         KafkaError.GROUP_AUTHORIZATION_FAILED):
            raise TranscoderError(f"lane {self.spec.name}: consumer error: {err.str()}", kafka_error=err.name())
        log.warning("consumer_error", lane=self.spec.name, error=err.str())

    def _backpressure(self) -> None:
        limit = self.config.max_in_flight_bytes
        inflight = self.ledger.in_flight_bytes
        if not self._paused and inflight > limit:
            if self.fetcher is not None:
                self.fetcher.paused.update(self._assigned)
            else:
                self.consumer.pause([TopicPartition(t, p) for t, p in self._assigned])
            self._paused = True
            self.metrics.backpressure()
        elif self._paused and inflight <= limit // 2:
            if self.fetcher is not None:
                self.fetcher.paused.clear()
            else:
                self.consumer.resume([TopicPartition(t, p) for t, p in self._assigned])
            self._paused = False
        if self._paused:
            self.writer.poll(0.05)

    # ------------------------------------------------------------------ commits
    def _waiting_on_kafka(self, why: str) -> None:
        """A transaction call asked again (the coordinator unreachable: a broker outage): the loop waits in it, not
        stuck. Readiness says why (503) until the lane copies again; liveness sees the loop turn."""
        now = time.monotonic()
        self.status.last_loop = now
        self._cannot_copy(f"Kafka unreachable: {why}", now)

    def _drain(self) -> bool | None:
        """exactly-once on record sets, from the loop: True once the open transaction's batches are all
        acknowledged (the open ones sent first); False when it cannot commit (a batch failed in it, or they were
        not acknowledged within half of transaction_timeout_ms); None meanwhile. Meanwhile the lane's loop keeps
        turning (the group's callbacks, readiness) instead of blocking in a flush, and hands the writer nothing new."""
        now = time.monotonic()
        if self._draining_since is None:
            self.writer.tick(now, flush=True)
            self._draining_since = now
            self._drain_from = self.ledger.in_flight_bytes
        doomed = self.writer.transaction_doomed()
        if self.ledger.in_flight_bytes > 0 and not doomed and now - self._draining_since < self._drain_limit_s:
            return None
        since, self._draining_since = self._draining_since, None
        if not doomed:
            self._size_transactions(now - since)
        return self.ledger.in_flight_bytes == 0 and not doomed

    def _room(self) -> int:
        """Record bytes the writer may be handed now: what max_in_flight_bytes leaves, and exactly-once on record
        sets what the open transaction may hold unacknowledged (`_txn_bytes`)."""
        room = self.config.max_in_flight_bytes - self.ledger.in_flight_bytes
        if self._eos and self._batched:
            room = min(room, self._txn_bytes - self.ledger.in_flight_bytes)
        return room

    def _size_transactions(self, took: float) -> None:
        """After a drain of `_drain_from` bytes that took `took` seconds: what a transaction may hold from now on.
        Scaled to the drain target after a slow drain (the codec or the destination is slower than the bytes held
        need), doubled after a quick one that held at least half of it, up to max_in_flight_bytes."""
        was, target, held = self._txn_bytes, self._drain_target_s, self._drain_from
        if took > target and held > 0:
            self._txn_bytes = max(min(TXN_MIN_BYTES, self.config.max_in_flight_bytes), int(held * target / took))
        elif took <= target / 2 and held >= was // 2:
            self._txn_bytes = min(self.config.max_in_flight_bytes, 2 * was)
        if self._txn_bytes != was:
            log.debug("transaction_sized", lane=self.spec.name, bytes=self._txn_bytes, drained_bytes=held,
                      drain_s=round(took, 3), target_s=target)

    def _rewind(self, tps: list[Partition]) -> None:
        """Seek each partition back to its last commit (or where this assignment began reading)."""
        for t, p in tps:
            off = self.checkpoint.rewind_offset((t, p))
            if self.fetcher is not None:
                self._pending.pop((t, p), None)
                if off is not None:
                    self.fetcher.assign({(t, p): off})
                continue
            if off is None and self.config.start == "earliest":
                off = OFFSET_BEGINNING
            if off is not None:
                self.consumer.seek(TopicPartition(t, p, off))
        log.info("partitions_rewound", lane=self.spec.name, partitions=show(tps))

    def _commit(self, tps: Iterable[Partition]) -> None:
        """From the loop: commit what may be committed of `tps` (the checkpoint's order, per guarantee)."""
        self.checkpoint.commit(tps)

    def _positions(self, tps: list[Partition]) -> dict[Partition, int | None]:
        """Where the lane has read in partitions it holds: the next offset it would hand the writer (record sets),
        or the consumer's position (records)."""
        if self.fetcher is not None:
            return {tp: self._read_position(tp) for tp in tps}
        return {(p.topic, p.partition): p.offset
                for p in self.consumer.position([TopicPartition(t, p) for t, p in tps])} if tps else {}

    def _final_figures(self) -> None:
        """Before closing: one more statistics emission (the last batches), and lag from the watermarks."""
        self.writer.final_statistics()
        now_ms = time.time() * 1000
        for tp in sorted(self._assigned):
            committed = self.checkpoint.committed.get(tp)
            if committed is None:
                continue
            try:
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), timeout=5)[1]
            except KafkaException:
                continue
            lag = max(0, high - committed)
            ts = self.checkpoint.committed_ts.get(tp)
            self._set_lag(tp, lag, 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000))

    def _caught_up(self) -> bool:
        if not self.end_offsets:
            return False
        for tp, (low, high) in self.end_offsets.items():
            if high > low and self.checkpoint.committed.get(tp, -1) < high and not self._nothing_to_copy(tp, high):
                return False
        return True

    def _read_position(self, tp: Partition) -> int | None:
        """Batched: the offset of the next record not yet handed to the writer (fetched records wait in
        _pending until there is room for them)."""
        assert self.fetcher is not None
        if tp in self._pending:
            records, start = self._pending[tp]
            return int(records.span(start, start + 1)[0])
        return self.fetcher.positions.get(tp)

    def _nothing_to_copy(self, tp: Partition, high: int) -> bool:
        """A partition started at or past `high` (`start` at a time it has no record since, or latest) with
        nothing read: nothing of it is to be copied, though nothing of it is committed. The batched path knows
        its fetch position; librdkafka's consumer has none before its first record."""
        if self.fetcher is None or tp not in self._assigned or self.ledger.next_offset.get(tp) is not None:
            return False
        pos = self._read_position(tp)
        return pos is not None and pos >= high

    def _shutdown(self, failed: bool = False) -> None:
        """Stop consuming, deliver what is in flight, commit what was acknowledged, leave the group."""
        if self._closed:
            return
        try:
            self.checkpoint.close(self._assigned, failed=failed)
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
            try:
                self.writer.close(0 if failed else self.config.shutdown_timeout_s)
                self.consumer.close()
                if self.fetcher is not None:
                    self.fetcher.close()
            finally:  # here, on the lane's thread, never left to the garbage collector (OwnedAdmin)
                self._ends.close()
                self._topic_ids.close()
