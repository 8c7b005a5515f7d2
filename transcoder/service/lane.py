"""One lane: a consumer feeding the writer (one producer per target); commits only what every target acknowledged.

The loop runs in one thread. Delivery callbacks and rebalance callbacks run inside that
thread's poll calls, so lane state needs no locks; other threads only read snapshots. The lane is built from its
parts by service.assembly (`build_lane`), which alone chooses them by guarantee and copy path.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from transcoder.config import Config
from transcoder.errors import TranscoderError
from transcoder.kafka.watermarks import EndOffsets
from transcoder.kafka.writer import Sink
from transcoder.metrics.cpu import ThreadLedger
from transcoder.metrics.registry import LaneMetrics
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.catch_up import CatchUp
from transcoder.pipeline.partition_book import PartitionBook
from transcoder.pipeline.partitions import Partition, show
from transcoder.pipeline.routes import LaneSpec
from transcoder.service.checkpoint import Checkpoint
from transcoder.service.copy_paths import CopyPath, Sampling
from transcoder.service.destinations import DestinationPartitions
from transcoder.service.readiness import Readiness
from transcoder.service.source_watch import SourceWatch

log = structlog.get_logger("transcoder.lane")


class CallbackErrors:
    """What a rebalance callback could not raise (confluent-kafka would swallow it, or abort on a bare KafkaError):
    kept here and raised from the loop, after the poll that ran the callback."""

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def keep(self, exc: BaseException) -> None:
        self.error = exc

    def raise_pending(self) -> None:
        if self.error is not None:
            raise self.error


@dataclass(frozen=True)
class LaneParts:
    """A lane's parts, chosen once by service.assembly: how it reads (`path`), what it commits and in which order
    (`checkpoint`, owning the partition `book`), its sources' watch, its readiness, live scoring's capture."""

    status: LaneStatus
    book: PartitionBook
    path: CopyPath
    checkpoint: Checkpoint
    watch: SourceWatch
    readiness: Readiness
    sampler: Sampling
    destinations: DestinationPartitions
    callback_errors: CallbackErrors
    #: --until-caught-up: the source partitions' end offsets when the run started (None: not asked)
    catch_up: CatchUp | None = None


class Lane:
    """One consumer group's copy: the loop, the group's rebalances and backpressure. How records are read and handed
    to the writer is its copy path's (`path`: record sets or records, copy_paths); what may be committed, and in
    which order, its checkpoint's (`checkpoint`: at-least-once or exactly-once), which owns where each partition
    stands (`book`); topics recreated and records lost its source watch's (`watch`)."""

    def __init__(self, spec: LaneSpec, config: Config, metrics: LaneMetrics, *, writer: Sink, consumer: Consumer,
                 ends: EndOffsets, parts: LaneParts, threads: ThreadLedger) -> None:
        self.spec = spec
        self.config = config
        self.metrics = metrics
        self.threads = threads
        self.writer = writer
        self.ledger = writer.ledger
        self.consumer = consumer
        #: the partitions' ends, asked of the broker each statistics emission (librdkafka's learns them from fetches)
        self._ends = ends
        self.status = parts.status
        self.book = parts.book
        self.path = parts.path
        self.checkpoint = parts.checkpoint
        self.watch = parts.watch
        self.readiness = parts.readiness
        self.sampler = parts.sampler
        self.catch_up = parts.catch_up
        #: the destinations' partition counts: a source partition assigned must exist in each
        self.destinations = parts.destinations
        self._callback_errors = parts.callback_errors
        #: what failed the lane (run() raises it once its stop returned)
        self.failure: BaseException | None = None
        self._stop = threading.Event()  # run()'s
        self._closed = False

    @property
    def assigned(self) -> AbstractSet[Partition]:
        """The partitions the group assigned the lane (the book's)."""
        return self.book.assigned

    # ------------------------------------------------------------------ callbacks (loop thread)
    def on_consumer_stats(self, raw: str) -> None:
        now_ms = time.time() * 1000
        stats = json.loads(raw)
        self.readiness.consumer_errors.statistics(stats, time.monotonic())  # the brokers that answered end an outage
        committed = self.book.committed
        lags = self.path.lags(stats, committed)
        # librdkafka learns a partition's end from its fetches, which stop while the lane is paused or its prefetch
        # queue is full (the destination behind): the broker's answer, asked each emission, counts too.
        assigned = self.book.assigned
        self._ends.refresh(assigned)
        for tp, end in self._ends.known.items():
            if tp in assigned:
                self.book.saw_end(tp, end)
            if tp in committed and tp in assigned:
                lags[tp] = max(lags.get(tp, 0), end - committed[tp])
        for (topic, partition), lag in lags.items():
            ts = self.book.committed_ts.get((topic, partition))
            seconds = 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000)
            self._set_lag((topic, partition), lag, seconds)

    def _set_lag(self, tp: Partition, records: int, seconds: float) -> None:
        self.status.lag[tp] = (records, seconds)
        self.metrics.lag(tp[0], tp[1], records, seconds)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Nothing may leave a rebalance callback: confluent-kafka raises a failure in it from poll() as a bare
        # KafkaError, which is no exception class (no `except` catches it, the lane's thread dies with a raw
        # traceback). It is raised again from the loop instead, as the other callbacks' are.
        if self._callback_errors.error is not None:
            # An earlier callback of the same poll failed (a fenced producer found on losing its partitions): the
            # loop raises it next. Nothing of this assignment is begun: no transactional id taken back, no
            # "partitions_assigned" for a lane that is about to stop.
            log.warning("assignment_skipped", lane=self.spec.name, partitions=show((p.topic, p.partition)
                                                                                  for p in partitions),
                        reason=str(self._callback_errors.error))
            return
        try:
            self._assign(consumer, partitions)
        except BaseException as exc:  # noqa: BLE001 - raised again from the loop
            self._callback_errors.keep(exc)

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._closed:
            # Handed partitions while leaving the group (another member left first): they go back at
            # once, unread. Asking for their committed offsets here only times out (the consumer is
            # closing) and fails the close.
            log.info("partitions_assigned_while_closing", lane=self.spec.name,
                     partitions=show((p.topic, p.partition) for p in partitions))
            return
        tps = [(p.topic, p.partition) for p in partitions]
        self.book.assign(tps)
        if not partitions:
            return
        self.destinations.check(tps)
        recreated = self.watch.assigning(tps)
        # exactly-once, first: taking the transactional id aborts what an earlier holder of it left open (its offsets
        # among it), instead of waiting for the broker to time that transaction out.
        self.checkpoint.begin(self.assigned)
        # What the group already committed counts as done: a partition fully copied by an
        # earlier run is caught up without a record of this run.
        committed = self.checkpoint.read_committed(consumer, partitions, self._stop.is_set, self.spec.group_id)
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

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        try:
            self.checkpoint.revoke(tps, self.assigned)
        except BaseException as exc:  # noqa: BLE001 - raised again from the loop, never lost inside librdkafka
            self._callback_errors.keep(exc)
        left = self._uncommitted(tps)
        if left:  # the drain ran out, or the commit failed: the next owner reads these again
            log.warning("partitions_revoked_with_records_uncommitted", lane=self.spec.name,
                        records=sum(left.values()), partitions=left,
                        note="read and not committed: their next owner reads them again (copied twice where they "
                             "were written); shutdown_timeout_s bounds the drain of a revoke")
        self._release(tps)
        log.info("partitions_revoked", lane=self.spec.name, partitions=show(tps))

    def _uncommitted(self, tps: list[Partition]) -> dict[str, int]:
        """topic[partition] -> records handed to the writer past the partition's last commit (where that is not
        known: those not acknowledged)."""
        out = {}
        for tp, at in self.book.read_positions(tps).items():
            committed = self.book.committed.get(tp)
            n = at - committed if at is not None and committed is not None else self.ledger.outstanding([tp])
            if n > 0:
                out[show([tp])[0]] = n
        return out

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        try:  # another member owns them now: what a transaction holds must not be committed
            self.checkpoint.lost()
        except BaseException as exc:  # noqa: BLE001 - raised again from the loop
            self._callback_errors.keep(exc)
        self._release(tps)  # another member owns them now: nothing may be committed for them
        log.warning("partitions_lost", lane=self.spec.name, partitions=show(tps))

    def _release(self, tps: list[Partition]) -> None:
        self.watch.release(tps)
        self.path.release(tps)
        self.ledger.forget(tps)
        self._ends.forget(tps)
        self.checkpoint.forget(tps)  # the book lets them go (where the lane was in each kept)
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
                if now >= self.sampler.due:
                    self.sampler.tick(now)
                if self.checkpoint.draining and now < next_commit:
                    self._commit(self.assigned)  # the transaction's batches may all be acknowledged now
                if until_caught_up and now < next_commit and self.catch_up is not None \
                        and self.catch_up.read_to_the_end(self.ledger.next_offset, self.book.committed,
                                                          self.ledger.in_flight_bytes,
                                                          sum(self.writer.acked_total.values()),
                                                          self.path.nothing_to_copy):
                    next_commit = now  # committed and checked now, not up to commit_interval_ms later
                if now >= next_commit:
                    self.status.loop_cpu_seconds = time.thread_time() - cpu0
                    self._commit(self.assigned)
                    self.readiness.check(now)
                    self.threads.cpu_by_owner()  # read /proc while this lane's threads live
                    next_commit = now + interval
                if until_caught_up and self._caught_up():  # the commit's answer may come with any poll
                    self.status.state = "caught-up"
                    log.info("lane_caught_up", lane=self.spec.name, records=self.status.records)
                    break
                if now >= next_progress:
                    log.info("lane_progress", lane=self.spec.name, records=self.status.records,
                             in_flight_bytes=self.ledger.in_flight_bytes, paused=self.book.paused)
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

    def _backpressure(self) -> None:
        limit = self.config.max_in_flight_bytes
        inflight = self.ledger.in_flight_bytes
        if not self.book.paused and inflight > limit:
            self.path.pause_all(True)
            self.book.hold_all(True)
            self.metrics.backpressure()
        elif self.book.paused and inflight <= limit // 2:
            self.path.pause_all(False)
            self.book.hold_all(False)
        if self.book.paused:
            self.writer.poll(0.05)

    def _commit(self, tps: Iterable[Partition]) -> None:
        """From the loop: commit what may be committed of `tps` (the checkpoint's order, per guarantee)."""
        self.checkpoint.commit(tps)

    def _final_figures(self) -> None:
        """Before closing: one more statistics emission (the last batches), and lag from the watermarks."""
        self.writer.final_statistics()
        now_ms = time.time() * 1000
        for tp in sorted(self.assigned):
            committed = self.book.committed.get(tp)
            if committed is None:
                continue
            try:
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), timeout=5)[1]
            except KafkaException:
                continue
            lag = max(0, high - committed)
            ts = self.book.committed_ts.get(tp)
            self._set_lag(tp, lag, 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000))

    def _caught_up(self) -> bool:
        return self.catch_up is not None and self.catch_up.done(self.book.committed, self.path.nothing_to_copy)

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
