"""How a lane reads its source partitions and hands their records to the writer: one of two copy paths, chosen once
when the lane is built (`hot_path`), behind one interface (`CopyPath`).

- `RecordSets` (hot_path: batches, the default): raw Fetches (kafka.fetcher) read each partition's stored record sets,
  handed to the writer with no Python per record; the consumer only keeps the group (its partitions stay paused)
  and commits.
- `Records` (hot_path: records): librdkafka's consumer reads records one by one, handed to the writer as they come.

Both run on the lane's thread and read the lane's state (its assignment, backpressure, checkpoint, source watch);
what differs between the paths lives here only, so the lane never asks which path it is on.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from transcoder.errors import TranscoderError
from transcoder.kafka.fetcher import Fetcher, SourceLoss
from transcoder.kafka.producer import Delivered
from transcoder.kafka.statistics import consumer_lag, stable_offsets
from transcoder.pipeline.partitions import Partition

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from transcoder.config import Config
    from transcoder.evaluate.live_windows import Sampler
    from transcoder.kafka.writer import Sink as Writer
    from transcoder.pipeline.ledger import Ledger
    from transcoder.pipeline.routes import LaneSpec
    from transcoder.service.checkpoint import Checkpoint

log = structlog.get_logger("transcoder.lane")

_CONSUME_BATCH = 2000


class Losses(Protocol):
    """What a copy path reports to the lane's source watch (source_watch.SourceWatch)."""

    def fetch_loss(self, loss: SourceLoss) -> None: ...
    def seen_end(self, tp: Partition, end: int) -> None: ...
    def recreated(self, topics: list[str], at: dict[Partition, int]) -> set[Partition]: ...
    def lost(self, loss: SourceLoss) -> None: ...


class Lane(Protocol):
    """What a copy path reads of its lane (service.lane.Lane), on the lane's thread."""

    spec: LaneSpec
    config: Config
    consumer: Consumer
    writer: Writer
    ledger: Ledger
    checkpoint: Checkpoint
    sampler: Sampler | None
    watch: Losses
    #: the partitions the group assigned the lane
    assigned: set[Partition]
    #: backpressure holds every assigned partition
    paused: bool
    eos: bool

    @property
    def draining(self) -> bool: ...
    def room(self) -> int: ...
    def raise_callback_error(self) -> None: ...
    def consumer_error(self, err: KafkaError) -> None: ...
    def counted(self, n: int, nbytes: int) -> None: ...
    def start_time_offsets(self, consumer: Consumer, committed: list[TopicPartition]) -> dict[Partition, int]: ...


class CopyPath(Protocol):
    """What a lane asks of its copy path."""

    def assign(self, consumer: Consumer, partitions: list[TopicPartition], committed: list[TopicPartition],
               recreated: set[Partition]) -> None:
        """Start reading newly assigned partitions where `committed` says (a negative offset: never committed;
        `recreated`: from the new topic's start)."""

    def step(self) -> None:
        """One turn of the loop: the group's callbacks, what was read handed to the writer."""

    def lags(self, stats: dict[str, Any], committed: dict[Partition, int]) -> dict[Partition, int]:
        """Records behind each partition's end, from a consumer statistics emission."""

    def position(self, tp: Partition) -> int | None:
        """The next record the lane would hand the writer (None: not known on this path)."""

    def positions(self, tps: list[Partition]) -> dict[Partition, int | None]:
        """Where the lane has read in partitions it holds, as its checkpoint commits them."""

    def hold(self, tps: set[Partition], hold: bool) -> None:
        """Stop reading these partitions, or read them again (unless backpressure holds all)."""

    def pause_all(self, paused: bool) -> None:
        """Backpressure: stop reading every assigned partition, or read them all again."""

    def rewind(self, tp: Partition, offset: int | None) -> None:
        """Read a partition again from `offset` (None: where the assignment began, if the path knows)."""

    def restart(self, tp: Partition) -> None:
        """Read a partition again from its start (its topic was recreated)."""

    def release(self, tps: list[Partition]) -> None:
        """Partitions revoked or lost: forget what was read of them."""

    def nothing_to_copy(self, tp: Partition, high: int) -> bool:
        """Whether a partition started at or past `high` with nothing read."""

    def unknown_topics(self) -> set[str]:
        """Source topics a read found unknown since the source watch last cleared them (it asks for ids sooner)."""

    def close(self) -> None: ...


class RecordSets:
    """hot_path: batches: the lane's Fetcher reads stored record sets; each partition's records are handed to the
    writer as sets, up to the room under max_in_flight_bytes."""

    def __init__(self, lane: Lane, fetcher: Fetcher) -> None:
        self.lane = lane
        self.fetcher = fetcher
        #: each partition's read_committed end as the last Fetch answered
        self.fetched_ends: dict[Partition, int] = {}
        #: records fetched and not yet handed to the writer (no room under max_in_flight_bytes for them yet), as
        #: (StoredRecords, index of the first one left); such a partition is not fetched meanwhile
        self.pending: dict[Partition, tuple[Any, int]] = {}
        self._stray_logged = False

    def assign(self, consumer: Consumer, partitions: list[TopicPartition], committed: list[TopicPartition],
               recreated: set[Partition]) -> None:
        lane = self.lane
        tps = [(p.topic, p.partition) for p in partitions]
        starts: dict[Partition, int | str | None] = {
            (p.topic, p.partition): p.offset if p.offset >= 0 else "earliest" if p.offset == OFFSET_BEGINNING
            else None for p in committed}
        if isinstance(lane.config.start, datetime):  # no record since that time: the end
            starts.update({tp: off if off >= 0 else "latest"
                           for tp, off in lane.start_time_offsets(consumer, committed).items()})
        self.fetcher.assign(starts)
        if lane.paused:
            self.fetcher.paused.update(tps)
        self.fetcher.paused.update(lane.checkpoint.withheld.intersection(tps))
        # librdkafka never fetches them: the fetcher does. Assigned here (confluent-kafka then skips its own
        # assignment) so that the pause lands on the assigned partitions; exactly-once rebalances eagerly, where
        # each assignment is whole.
        (consumer.assign if lane.eos else consumer.incremental_assign)(partitions)
        consumer.pause(partitions)

    def step(self) -> None:
        """The group's callbacks (the consumer fetches nothing), one round of raw Fetches, each partition's records
        handed to the writer, batches whose linger is over sent."""
        lane = self.lane
        draining = lane.draining  # a transaction waits to commit: nothing new joins it
        assigned = lane.assigned
        idle = not assigned or len(self.fetcher.paused) >= len(assigned) or draining
        m = lane.consumer.poll(0.2 if not assigned else 0.02 if draining else 0)
        lane.raise_callback_error()
        if m is not None:
            err = m.error()
            if err is not None:
                lane.consumer_error(err)
            elif not self._stray_logged:  # fetched before its pause landed: the fetcher reads it, not this
                self._stray_logged = True
                log.info("consumer_record_dropped", lane=lane.spec.name, topic=m.topic(), partition=m.partition(),
                         offset=m.offset(), note="the lane's fetcher copies it; the consumer only keeps the group")
        # A round fetches no more than the room left under max_in_flight_bytes (stored bytes; the broker still
        # returns a first batch larger than that), and hands the writer records up to the room in record bytes
        # (at least one), as a paused librdkafka consumer would. Compressed source batches hold more record
        # bytes than they take: what does not fit waits here, and its partition is not fetched meanwhile.
        room = lane.room()
        # the Fetches wait no later than the first open batch's linger end, so `tick` sends it on time
        fetched = self.fetcher.fetch(budget=max(room, 1), skip=self.pending,
                                     until=lane.writer.linger_due()) if not idle else {}
        for loss in self.fetcher.take_losses():
            lane.watch.fetch_loss(loss)
        now = time.monotonic()
        for tp, f in fetched.items():
            self.fetched_ends[tp] = f.end
            lane.watch.seen_end(tp, f.end)  # the broker's answers between Fetches count too, at each emission
            if len(f.records):
                self.pending[tp] = (f.records, 0)
                if lane.checkpoint.unstarted(tp):
                    lane.checkpoint.started(tp, int(f.records.span(0, 1)[0]))
        for tp, (records, start) in list(self.pending.items()):
            room = lane.room()
            if room <= 0 or draining:
                break
            stop = records.fit(start, room)
            if stop < len(records):
                self.pending[tp] = (records, stop)
            else:
                del self.pending[tp]
            n, nbytes = lane.writer.write_stored(tp, records, now, start, stop)
            if lane.sampler is not None and lane.sampler.capturing:  # live scoring: a window is open
                lane.sampler.offer([Delivered(tp[0], tp[1], o, (k, v, h, ts, 0))
                                    for o, ts, k, v, h in map(records.record, range(start, stop))])
            lane.counted(n, nbytes)
        lane.writer.tick(now)

    def lags(self, stats: dict[str, Any], committed: dict[Partition, int]) -> dict[Partition, int]:
        # the consumer never fetches: the ends are the fetcher's and the broker's
        return {tp: max(0, end - committed[tp]) for tp, end in self.fetched_ends.items()
                if tp in committed and tp in self.lane.assigned}

    def position(self, tp: Partition) -> int | None:
        """The offset of the next record not yet handed to the writer (fetched records wait in `pending` until
        there is room for them)."""
        if tp in self.pending:
            records, start = self.pending[tp]
            return int(records.span(start, start + 1)[0])
        return self.fetcher.positions.get(tp)

    def positions(self, tps: list[Partition]) -> dict[Partition, int | None]:
        return {tp: self.position(tp) for tp in tps}

    def hold(self, tps: set[Partition], hold: bool) -> None:
        if hold:
            self.fetcher.paused.update(tps)
        elif not self.lane.paused:
            self.fetcher.paused.difference_update(tps)

    def pause_all(self, paused: bool) -> None:
        if paused:
            self.fetcher.paused.update(self.lane.assigned)
        else:
            self.fetcher.paused.clear()

    def rewind(self, tp: Partition, offset: int | None) -> None:
        self.pending.pop(tp, None)
        if offset is not None:
            self.fetcher.assign({tp: offset})

    def restart(self, tp: Partition) -> None:
        self.pending.pop(tp, None)
        self.fetcher.assign({tp: "earliest"})
        if not self.lane.paused:
            self.fetcher.paused.discard(tp)

    def release(self, tps: list[Partition]) -> None:
        self.fetcher.revoke(tps)
        for tp in tps:
            self.fetched_ends.pop(tp, None)
            self.pending.pop(tp, None)

    def nothing_to_copy(self, tp: Partition, high: int) -> bool:
        """The fetcher knows its position before the first record (librdkafka's consumer has none)."""
        if tp not in self.lane.assigned or self.lane.ledger.next_offset.get(tp) is not None:
            return False
        pos = self.position(tp)
        return pos is not None and pos >= high

    def unknown_topics(self) -> set[str]:
        return self.fetcher.unknown_topics

    def close(self) -> None:
        self.fetcher.close()


class Records:
    """hot_path: records: librdkafka's consumer reads records, each handed to the writer (auto.offset.reset is
    `error`: a position whose records are gone is reported, never reset silently)."""

    def __init__(self, lane: Lane) -> None:
        self.lane = lane
        self.consumer = lane.consumer

    def assign(self, consumer: Consumer, partitions: list[TopicPartition], committed: list[TopicPartition],
               recreated: set[Partition]) -> None:
        lane = self.lane
        if isinstance(lane.config.start, datetime):
            self._seek_to_start_time(consumer, partitions, committed)
        elif any(p.offset < 0 for p in committed) or recreated:
            # auto.offset.reset is `error` (consumer_config): partitions never committed start where `start`
            # says, assigned here (confluent-kafka then skips its own assignment, as _seek_to_start_time).
            fresh = OFFSET_BEGINNING if lane.config.start == "earliest" else OFFSET_END
            (consumer.assign if lane.eos else consumer.incremental_assign)(
                [TopicPartition(p.topic, p.partition, p.offset if p.offset >= 0 or p.offset == OFFSET_BEGINNING
                                else fresh) for p in committed])
        # librdkafka keeps a partition's pause across assignments: one paused by backpressure before it was
        # lost would stay paused for good once assigned again. It follows the lane's state instead.
        (consumer.pause if lane.paused else consumer.resume)(partitions)
        stopped = [p for p in partitions if (p.topic, p.partition) in lane.checkpoint.withheld]
        if stopped:
            consumer.pause(stopped)

    def _seek_to_start_time(self, consumer: Consumer, partitions: list[TopicPartition],
                            committed: list[TopicPartition]) -> None:
        """Partitions this group never committed start at the configured timestamp.

        The callback assigns them itself, with those offsets: confluent-kafka then skips its own
        assignment of the unchanged list (changing the list's offsets in place has no effect).
        """
        found = self.lane.start_time_offsets(consumer, committed)
        if not found:
            return
        consumer.incremental_assign([
            TopicPartition(p.topic, p.partition, found.get((p.topic, p.partition), p.offset)) for p in partitions
        ])

    def step(self) -> None:
        # What is queued, without waiting; else wait for the first record only (a batch call waits for all
        # _CONSUME_BATCH or the timeout: up to 200 ms added latency), with what arrived along with it.
        msgs = self.consumer.consume(_CONSUME_BATCH, timeout=0)
        if not msgs:
            msgs = self.consumer.consume(1, timeout=0.2)
            if msgs:
                msgs += self.consumer.consume(_CONSUME_BATCH - 1, timeout=0)
        self.lane.raise_callback_error()
        if msgs:
            self._copy(msgs)

    def _copy(self, msgs: list[Any]) -> None:
        lane = self.lane
        reset = [m for m in msgs if m.error() is not None and m.error().code() == KafkaError._AUTO_OFFSET_RESET]
        if reset:  # auto.offset.reset=error: the position's records are gone (or the partition ends before it)
            msgs = [m for m in msgs if m not in reset]
            for m in reset:
                self._reset_error(m)
        checkpoint = lane.checkpoint
        if checkpoint.rewinds and len(checkpoint.first_read) + len(checkpoint.committed) < len(lane.assigned):
            for m in msgs:
                tp = (m.topic(), m.partition())
                if m.error() is None and checkpoint.unstarted(tp):
                    checkpoint.started(tp, m.offset())
        n, nbytes = lane.writer.write(msgs, lane.consumer_error)
        if lane.sampler is not None and lane.sampler.capturing:  # live scoring: a window is open
            lane.sampler.offer(msgs)
        lane.counted(n, nbytes)

    def _reset_error(self, m: Any) -> None:
        """librdkafka found the position of m's partition out of range (auto.offset.reset is `error`): a loss, or a
        position moved meanwhile (then read again from where it is)."""
        lane = self.lane
        tp = TopicPartition(m.topic(), m.partition())
        offset = m.offset()
        try:
            first, end = self.consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as exc:
            raise TranscoderError(f"lane {lane.spec.name}: {m.topic()} [{m.partition()}] offset {offset} is out of "
                                  f"range and its offsets cannot be read: {exc.args[0].str()}", topic=m.topic(),
                                  partition=m.partition(), offset=offset) from None
        if lane.watch.recreated([m.topic()], at={(m.topic(), m.partition()): offset}):
            return  # the topic was recreated: reported as such
        if offset < 0 or first <= offset <= end:  # not a loss (a position moved meanwhile): read on
            self.consumer.seek(TopicPartition(m.topic(), m.partition(), max(offset, first)))
            return
        lane.watch.lost(SourceLoss(m.topic(), m.partition(), offset, first, end))
        if lane.config.on_source_loss == "continue":
            self._restart_at(m.topic(), m.partition(), first)

    def _restart_at(self, topic: str, partition: int, offset: int) -> None:
        """Read a partition on from `offset` after librdkafka stopped it on an offset reset error (a seek is
        refused in that state): assigned again at that offset."""
        lane = self.lane
        tp = TopicPartition(topic, partition, offset)
        if lane.eos:  # eager: the whole assignment again, the others where they are
            others = [p for p in self.consumer.position([TopicPartition(t, q) for t, q in sorted(lane.assigned)
                                                         if (t, q) != (topic, partition)])]
            self.consumer.assign([*others, tp])
        else:
            self.consumer.incremental_unassign([TopicPartition(topic, partition)])
            self.consumer.incremental_assign([tp])
        if lane.paused:
            self.consumer.pause([TopicPartition(topic, partition)])

    def lags(self, stats: dict[str, Any], committed: dict[Partition, int]) -> dict[Partition, int]:
        if self.lane.eos:  # the offsets are committed in transactions, which the consumer's own figure does not see
            return {tp: max(0, end - committed[tp]) for tp, end in stable_offsets(stats).items() if tp in committed}
        return consumer_lag(stats)

    def position(self, tp: Partition) -> int | None:
        return self.lane.ledger.next_offset.get(tp)

    def positions(self, tps: list[Partition]) -> dict[Partition, int | None]:
        return {(p.topic, p.partition): p.offset
                for p in self.consumer.position([TopicPartition(t, p) for t, p in tps])} if tps else {}

    def hold(self, tps: set[Partition], hold: bool) -> None:
        if hold:
            self.consumer.pause([TopicPartition(*tp) for tp in sorted(tps)])
        elif not self.lane.paused:
            self.consumer.resume([TopicPartition(*tp) for tp in sorted(tps)])

    def pause_all(self, paused: bool) -> None:
        tps = [TopicPartition(t, p) for t, p in self.lane.assigned]
        (self.consumer.pause if paused else self.consumer.resume)(tps)

    def rewind(self, tp: Partition, offset: int | None) -> None:
        if offset is None and self.lane.config.start == "earliest":
            offset = OFFSET_BEGINNING
        if offset is not None:
            self.consumer.seek(TopicPartition(*tp, offset))

    def restart(self, tp: Partition) -> None:
        self._restart_at(tp[0], tp[1], OFFSET_BEGINNING)

    def release(self, tps: list[Partition]) -> None:
        pass  # librdkafka forgets them itself

    def nothing_to_copy(self, tp: Partition, high: int) -> bool:
        return False  # librdkafka's consumer has no position before its first record

    def unknown_topics(self) -> set[str]:
        return set()  # the consumer reports an unknown topic as an error (Lane.consumer_error)

    def close(self) -> None:
        pass  # the consumer is the lane's
