"""One lane: a consumer feeding the writer (one producer per target); commits only what every target acknowledged.

The loop runs in one thread. Delivery callbacks and rebalance callbacks run inside that
thread's poll calls, so lane state needs no locks; other threads only read snapshots.
"""

from __future__ import annotations

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
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from transcoder.config import Config
from transcoder.errors import TranscoderError
from transcoder.evaluate.live_scoring import Scorer
from transcoder.kafka.clients import client_config, start_threads
from transcoder.kafka.fetcher import Fetcher
from transcoder.kafka.retries import KAFKA_ERRORS, in_flight_summary
from transcoder.kafka.topic_ids import TopicIds
from transcoder.kafka.watermarks import EndOffsets
from transcoder.kafka.writer import Sink as Writer
from transcoder.kafka.writer import build_sink
from transcoder.metrics.cpu import ThreadLedger
from transcoder.metrics.registry import LaneMetrics
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.catch_up import CatchUp
from transcoder.pipeline.commits import release_offsets, transactional_id
from transcoder.pipeline.partitions import Partition, show
from transcoder.pipeline.routes import LaneSpec
from transcoder.service.checkpoint import AtLeastOnce, Checkpoint, ExactlyOnce
from transcoder.service.copy_paths import CopyPath, Records, RecordSets
from transcoder.service.source_watch import SourceWatch
from transcoder.service.transaction_drain import TransactionDrain

log = structlog.get_logger("transcoder.lane")

#: The batched path's Fetch waits up to this long for records (fetch.wait.max.ms): the loop's other duties
#: (linger, commits, reports) come round at least this often.
FETCH_WAIT_MS = 100
#: Readiness: records in flight without any acknowledgement for this long (or twice the longest linger) mean
#: the lane cannot produce.
STALL_S = 15.0
#: One read of the group's committed offsets on assignment waits this long; while they cannot be read (Kafka
#: unreachable, or unstable: a transaction still open) the lane says so (readiness) and asks again.
COMMITTED_READ_S = 10.0


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
    writer = build_sink(config, spec.name, spec.targets, metrics, batched=config.batched,
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
    """One consumer group's copy: the loop, the group's rebalances and backpressure. How records are read and handed
    to the writer is its copy path's (`path`: record sets or records, copy_paths); what may be committed, and in
    which order, its checkpoint's (`checkpoint`: at-least-once or exactly-once); topics recreated and records lost
    its source watch's (`watch`); its Kafka clients are `LaneClients` (fakes in its unit tests)."""

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
        #: --until-caught-up: the source partitions' end offsets when the run started
        self.catch_up = CatchUp(end_offsets) if end_offsets is not None else None
        self._revoke_error: BaseException | None = None
        #: what failed the lane (run() raises it once its stop returned)
        self.failure: BaseException | None = None
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
        #: the consumer's error_cb (an ErrorTracker): its outages end on its brokers' answers (_on_consumer_stats)
        self._consumer_errors = conf["error_cb"]
        self.consumer = clients.consumer
        #: readiness: (records read + acknowledged, when that last changed); see _check_progress
        self._progress = (0, time.monotonic())
        #: records acknowledged at the last check, and when it was: acknowledgements since are the destination's answer
        self._acked_mark = (0, time.monotonic())
        self._stall_s = max(STALL_S, 2 * max(t.destination.batch.linger_ms for t in spec.targets) / 1000)
        self.assigned: set[Partition] = set()
        #: backpressure holds every assigned partition (max_in_flight_bytes reached)
        self.paused = False
        #: the partitions' ends, asked of the broker each statistics emission (librdkafka's learns them from fetches)
        self._ends = clients.ends
        #: record sets: the raw Fetches (the copy path's); None: records are consumed through librdkafka
        self.fetcher = clients.fetcher
        #: how the lane reads and hands records to the writer, chosen once (copy_paths)
        self.path: CopyPath = RecordSets(self, clients.fetcher) if clients.fetcher is not None else Records(self)
        #: the sources' topic ids (a topic deleted and recreated), asked on assignment, at each metadata refresh
        #: interval, and at once where a read finds a topic unknown; records lost before they were copied
        self._topic_ids = clients.topic_ids
        self.watch = SourceWatch(self, clients.topic_ids,
                                 int(conf.get("topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS)) / 1000)
        self._closed = False
        self.eos = config.guarantee == "exactly-once"
        #: exactly-once on record sets: the drain before each commit, and what a transaction may hold
        self.txn = TransactionDrain(spec.name, config.transaction_timeout_ms, config.commit_interval_ms,
                                    config.max_in_flight_bytes, self.ledger, self.writer)
        self._down_since = 0.0
        #: what may be committed and in which order (one variant per guarantee); where each partition's commit stands
        self.checkpoint: Checkpoint = ExactlyOnce(
            spec.name, self.writer, self.consumer, self.status, config.shutdown_timeout_s, self.path.positions,
            group_id=spec.group_id, transactional_id=lambda tps: transactional_id(spec.group_id, tps),
            rewind=self._rewind, waiting=self._waiting_on_kafka, drained=self._drain if self._batched else None,
            drain_limit_s=self.txn.limit_s) if self.eos else AtLeastOnce(
            spec.name, self.writer, self.consumer, self.status, config.shutdown_timeout_s, self.path.positions)
        #: live scoring's capture (evaluate: in the config); None: off, and the loop does not look further
        self.sampler = scorer.sampler({d: (s, self.writer.target_of[d].destination)
                                       for d, s in self.writer.source_of.items()}, time.monotonic()) \
            if scorer is not None else None

    # ------------------------------------------------------------------ callbacks (loop thread)
    def _on_consumer_stats(self, raw: str) -> None:
        now_ms = time.time() * 1000
        stats = json.loads(raw)
        self._consumer_errors.statistics(stats, time.monotonic())  # the brokers that answered end an outage
        committed = self.checkpoint.committed
        lags = self.path.lags(stats, committed)
        # librdkafka learns a partition's end from its fetches, which stop while the lane is paused or its prefetch
        # queue is full (the destination behind): the broker's answer, asked each emission, counts too.
        self._ends.refresh(self.assigned)
        for tp, end in self._ends.known.items():
            if tp in self.assigned:
                self.watch.seen_end(tp, end)
            if tp in committed and tp in self.assigned:
                lags[tp] = max(lags.get(tp, 0), end - committed[tp])
        for (topic, partition), lag in lags.items():
            ts = self.checkpoint.committed_ts.get((topic, partition))
            seconds = 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000)
            self._set_lag((topic, partition), lag, seconds)

    # ------------------------------------------------------------------ what the copy path asks of the lane
    @property
    def draining(self) -> bool:
        """exactly-once on record sets: a transaction waits for its batches to be acknowledged before it commits;
        the writer is handed nothing new meanwhile."""
        return self.txn.draining

    def raise_callback_error(self) -> None:
        """After a poll: what a rebalance callback of it could not raise (confluent-kafka would swallow it)."""
        if self._revoke_error is not None:
            raise self._revoke_error

    def counted(self, n: int, nbytes: int) -> None:
        """Records (and their bytes) handed to the writer."""
        self.status.records += n
        self.status.source_bytes += nbytes
        self.metrics.records(n, nbytes)

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
        self.assigned.update(tps)
        if not partitions:
            return
        self._check_destination_partitions(tps)
        recreated = self.watch.assigning(tps)
        # exactly-once, first: taking the transactional id aborts what an earlier holder of it left open (its offsets
        # among it), instead of waiting for the broker to time that transaction out.
        self.checkpoint.begin(self.assigned)
        # What the group already committed counts as done: a partition fully copied by an
        # earlier run is caught up without a record of this run.
        committed = self._committed(consumer, partitions)
        if self.config.migration is not None:
            fresh = [(p.topic, p.partition) for p in committed if p.offset < 0]
            recreated |= self.watch.recreated_by_map([tp for tp in fresh if tp not in recreated])
        if recreated:  # the new topic from its start, whatever was committed meanwhile (the old topic's position)
            committed = [TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) if (p.topic, p.partition) in recreated
                         else p for p in committed]
        for p in committed:
            if p.offset >= 0:
                self.checkpoint.found((p.topic, p.partition), p.offset)
        self.path.assign(consumer, partitions, committed, recreated)
        self.status.assigned = sorted(self.assigned)
        log.info("partitions_assigned", lane=self.spec.name, partitions=show(tps))

    def _check_destination_partitions(self, tps: list[Partition]) -> None:
        """A source partition assigned that a destination does not have (partitions added to a running source):
        its records could never land in the same partition of the copy. The lane stops, naming both counts.

        The source's partition count is asked of the topic-id client, never of the consumer: this runs inside the
        consumer's rebalance callback, and a metadata call on the consumer there aborts the process
        (confluent-kafka's CallState_get assertion, once another callback follows in the same poll)."""
        for topic, partition in sorted(tps):
            for dest in self.ledger.destinations_of.get(topic, ()):
                have = self.destination_partitions.get(dest)
                if have is None or partition < have:
                    continue
                now = max(self._topic_ids.partition_count(topic) or 0, partition + 1)
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
        released = not self.eos
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
            known = release_offsets([(p.topic, p.partition) for p in partitions], self.checkpoint.known)
            why_not = self.writer.release_group_offsets(partitions, consumer.consumer_group_metadata(),
                                                        self.config.shutdown_timeout_s, known)
            if why_not is not None:  # Kafka unreachable: the reads go on, and it is tried again after each
                failed_releases += 1
                if failed_releases == 1:  # once, as lane_cannot_copy is
                    log.warning("group_offsets_not_released", lane=self.spec.name, partitions=parts, error=why_not,
                                note="tried again after each read that fails")
            else:
                released = True
                log.warning("group_offsets_released", lane=self.spec.name, partitions=parts, how="committed" if
                            known else "aborted", offsets=known and dict(zip(show(known), known.values(), strict=True)),
                            transactional_id=self.writer.transactional_id, note="what this producer id left pending")

    def start_time_offsets(self, consumer: Consumer, committed: list[TopicPartition]) -> dict[Partition, int]:
        """Where partitions this group never committed start: the first offset at the configured time
        (OFFSET_END, -1: no record since)."""
        assert isinstance(self.config.start, datetime)
        fresh = [TopicPartition(p.topic, p.partition, int(self.config.start.timestamp() * 1000))
                 for p in committed if p.offset == OFFSET_INVALID]
        if not fresh:
            return {}
        return {(p.topic, p.partition): p.offset for p in consumer.offsets_for_times(fresh, timeout=30)}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        try:
            self.checkpoint.revoke(tps, self.assigned)
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
        self.watch.release(tps)
        self.path.release(tps)
        self.ledger.forget(tps)
        self.txn.forget()
        self.assigned.difference_update(tps)
        self._ends.forget(tps)
        self.checkpoint.forget(tps)
        self.status.assigned = sorted(self.assigned)

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
                self.path.step()
                self.checkpoint.settle(self.assigned)  # what the group's callbacks of that poll left to the loop
                self.watch.tick(time.monotonic())
                if self.watch.error is not None:  # on_source_loss: stop; what was copied is committed first
                    break
                self.writer.poll(0)
                self.writer.handle_failures()
                self._backpressure()
                now = time.monotonic()
                self.status.last_loop = now
                if self.sampler is not None and now >= self.sampler.due:
                    self.sampler.tick(now)
                if self.txn.draining and now < next_commit:
                    self._commit(self.assigned)  # the transaction's batches may all be acknowledged now
                if until_caught_up and now < next_commit and self.catch_up is not None \
                        and self.catch_up.read_to_the_end(self.ledger.next_offset, self.checkpoint.committed,
                                                          self.ledger.in_flight_bytes,
                                                          sum(self.writer.acked_total.values()),
                                                          self.path.nothing_to_copy):
                    next_commit = now  # committed and checked now, not up to commit_interval_ms later
                if now >= next_commit:
                    self.status.loop_cpu_seconds = time.thread_time() - cpu0
                    self._commit(self.assigned)
                    self._check_progress(now)
                    self.threads.cpu_by_owner()  # read /proc while this lane's threads live
                    next_commit = now + interval
                    if until_caught_up and self._caught_up():
                        self.status.state = "caught-up"
                        log.info("lane_caught_up", lane=self.spec.name, records=self.status.records)
                        break
                if now >= next_progress:
                    log.info("lane_progress", lane=self.spec.name, records=self.status.records,
                             in_flight_bytes=self.ledger.in_flight_bytes, paused=self.paused)
                    next_progress = now + 30
            self._shutdown()
            self.status.loop_cpu_seconds = time.thread_time() - cpu0
            if self.watch.error is not None:
                raise self.watch.error
        except BaseException as exc:
            self.failure = exc  # the runner raises it itself if this stop never returns
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
        """Readiness: the lane cannot copy while records wait and nothing was acknowledged for `_stall_s`, or while
        a client's outage is not over: an "unreachable" error and no broker answered since (acknowledgements, the
        consumer's statistics). Logged once when it starts and once when it ends, with how long it lasted: from
        the first failure to the first success."""
        trackers = [self._consumer_errors, *self.writer.error_trackers]
        one_cluster = self.config.destination_cluster is None
        acked = sum(self.writer.acked_total.values())
        last_acked, checked_at = self._acked_mark
        self._acked_mark = (acked, now)
        if acked != last_acked:  # the destination answered since the last check
            for t in trackers if one_cluster else self.writer.error_trackers:
                t.answered(now, checked_at)
        if one_cluster:  # a broker's answer to one client of the lane is the cluster's answer to all
            latest = max((t.last_answer for t in trackers if t.last_answer is not None), default=None)
            if latest is not None:
                for t in trackers:
                    t.answered(latest[1], latest[0])
        mark = self.status.records + acked
        last_mark, since = self._progress
        if mark != last_mark:
            self._progress = (mark, now)
            since = now
        why = None
        if self.ledger.in_flight_bytes > 0 and now - since >= self._stall_s:
            why = (f"no acknowledgement for {now - since:.0f} s with {self.ledger.outstanding(self.assigned)} "
                   f"records in flight: {in_flight_summary(self.ledger.pending, KAFKA_ERRORS.last(since=since))}")
        else:
            down = [(t.streak_start, err) for t in trackers
                    if t.streak_start is not None and (err := t.unreachable()) is not None]
            if down:
                # since the outage's first failure, not since the lane last moved (it may have had nothing to copy
                # for hours)
                since, err = min(down, key=lambda d: d[0])
                why = f"Kafka unreachable: {err.str()}"
        if why is not None:
            self._cannot_copy(why, since)
        elif self.status.unreachable is not None:
            ended = max((t.recovered[1] for t in trackers
                         if t.recovered is not None and t.recovered[1] >= self._down_since), default=now)
            log.info("lane_copying_again", lane=self.spec.name, after_s=round(ended - self._down_since, 1))
            self.status.unreachable = None

    def _cannot_copy(self, why: str, since: float) -> None:
        """Readiness answers 503 with `why`; logged once when it starts (`since`: when the lane last moved)."""
        if self.status.unreachable is None:
            self._down_since = since
            log.warning("lane_cannot_copy", lane=self.spec.name, reason=why,
                        note="retrying; /readyz answers 503 until it can copy again")
        self.status.unreachable = why

    def position(self, tp: Partition) -> int | None:
        """Where the lane is in a partition it holds: the next record it would hand the writer (else its commit)."""
        at = self.path.position(tp)
        return self.checkpoint.committed.get(tp) if at is None else at

    def consumer_error(self, err: KafkaError) -> None:
        """An error the consumer reports (or a record carries): end of partition and a source deleted are not."""
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and self.watch.unknown_topic(err):
            return
        if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                         KafkaError.GROUP_AUTHORIZATION_FAILED):
            raise TranscoderError(f"lane {self.spec.name}: consumer error: {err.str()}", kafka_error=err.name())
        log.warning("consumer_error", lane=self.spec.name, error=err.str())

    def _backpressure(self) -> None:
        limit = self.config.max_in_flight_bytes
        inflight = self.ledger.in_flight_bytes
        if not self.paused and inflight > limit:
            self.path.pause_all(True)
            self.paused = True
            self.metrics.backpressure()
        elif self.paused and inflight <= limit // 2:
            self.path.pause_all(False)
            self.paused = False
        if self.paused:
            self.writer.poll(0.05)

    # ------------------------------------------------------------------ commits
    def _waiting_on_kafka(self, why: str) -> None:
        """A transaction call asked again (the coordinator unreachable: a broker outage): the loop waits in it, not
        stuck. Readiness says why (503) until the lane copies again; liveness sees the loop turn."""
        now = time.monotonic()
        self.status.last_loop = now
        self._cannot_copy(f"Kafka unreachable: {why}", now)

    def _drain(self) -> bool | None:
        """exactly-once on record sets, from the loop: whether the open transaction can commit (TransactionDrain)."""
        return self.txn.step(time.monotonic())

    def room(self) -> int:
        """Record bytes the writer may be handed now: what max_in_flight_bytes leaves, and exactly-once on record
        sets what the open transaction may hold unacknowledged (TransactionDrain.budget)."""
        room = self.config.max_in_flight_bytes - self.ledger.in_flight_bytes
        if self.eos and self._batched:
            room = min(room, self.txn.budget - self.ledger.in_flight_bytes)
        return room

    def _rewind(self, tps: list[Partition]) -> None:
        """Seek each partition back to its last commit (or where this assignment began reading)."""
        for tp in tps:
            self.path.rewind(tp, self.checkpoint.rewind_offset(tp))
        log.info("partitions_rewound", lane=self.spec.name, partitions=show(tps))

    def _commit(self, tps: Iterable[Partition]) -> None:
        """From the loop: commit what may be committed of `tps` (the checkpoint's order, per guarantee)."""
        self.checkpoint.commit(tps)

    def _final_figures(self) -> None:
        """Before closing: one more statistics emission (the last batches), and lag from the watermarks."""
        self.writer.final_statistics()
        now_ms = time.time() * 1000
        for tp in sorted(self.assigned):
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
        return self.catch_up is not None and self.catch_up.done(self.checkpoint.committed, self.path.nothing_to_copy)

    def _shutdown(self, failed: bool = False) -> None:
        """Stop consuming, deliver what is in flight, commit what was acknowledged, leave the group."""
        if self._closed:
            return
        try:
            self.checkpoint.close(self.assigned, failed=failed)
            self._final_figures()
        except TranscoderError:
            if not failed:
                raise
        finally:
            self.threads.cpu_by_owner()  # last reading before the clients' threads exit
            outstanding = self.ledger.outstanding(self.assigned)
            if outstanding:
                log.warning("lane_stopped_with_records_in_flight", lane=self.spec.name, records=outstanding,
                            note="not committed: they are copied again on restart")
            self._closed = True
            try:
                self.writer.close(0 if failed else self.config.shutdown_timeout_s)
                self.consumer.close()
                self.path.close()
            finally:  # here, on the lane's thread, never left to the garbage collector (OwnedAdmin)
                self._ends.close()
                self.watch.close()
