"""How a lane reads its source partitions and hands their records to the writer: one of two copy paths, chosen once
when the lane is built (`hot_path`, service.assembly), behind one interface (`CopyPath`).

- `RecordSets` (service.record_sets; hot_path: batches, the default): raw Fetches (kafka.fetcher) read each
  partition's stored record sets, handed to the writer with no Python per record; the consumer only keeps the group
  (its partitions stay paused) and commits.
- `Records` (hot_path: records): librdkafka's consumer reads records one by one, handed to the writer as they come.

Both run on the lane's thread with the collaborators they are handed (`Reading`): the consumer, the writer, the
partition book (each path pushes where it has read into it), the source watch (losses), the group's assignment
style; what differs between the paths lives in them only, so the lane never asks which path it is on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from transcoder.errors import TranscoderError
from transcoder.kafka.fetcher import SourceLoss
from transcoder.pipeline.partition_book import PartitionBook
from transcoder.pipeline.partitions import Partition

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from transcoder.kafka.writer import Sink
    from transcoder.service.group import Group

log = structlog.get_logger("transcoder.lane")

_CONSUME_BATCH = 2000


class Losses(Protocol):
    """What a copy path reports to the lane's source watch (source_watch.SourceWatch)."""

    def fetch_loss(self, loss: SourceLoss) -> None: ...
    def recreated(self, topics: list[str], at: dict[Partition, int]) -> set[Partition]: ...
    def lost(self, loss: SourceLoss) -> None: ...
    def consumer_error(self, err: KafkaError) -> None: ...


class Sampling(Protocol):
    """Live scoring's capture (evaluate.live_windows.Sampler), or a no-op when it is off."""

    capturing: bool
    due: float

    def offer(self, msgs: Sequence[Any]) -> None: ...
    def tick(self, now: float) -> None: ...


class Flow(Protocol):
    """What the writer may be handed now (transaction_drain: TransactionDrain or NoDrain)."""

    @property
    def draining(self) -> bool: ...
    def room(self) -> int: ...


@dataclass(frozen=True)
class Reading:
    """What either copy path is handed, on the lane's thread."""

    lane: str
    #: where partitions never committed start (config.start)
    start: str | datetime
    consumer: Consumer
    writer: Sink
    #: where each partition stands: the path pushes its read positions into it
    book: PartitionBook
    #: the guarantee's assignment style (service.group)
    group: Group
    losses: Losses
    sampler: Sampling
    #: records (and their bytes) handed to the writer
    counted: Callable[[int, int], None]
    #: after a poll: raises what a rebalance callback of it could not (confluent-kafka would swallow it)
    raise_callback_error: Callable[[], None]


def start_time_offsets(consumer: Consumer, committed: list[TopicPartition], start: datetime) -> dict[Partition, int]:
    """Where partitions this group never committed start: the first offset at the configured time
    (OFFSET_END, -1: no record since)."""
    fresh = [TopicPartition(p.topic, p.partition, int(start.timestamp() * 1000))
             for p in committed if p.offset == OFFSET_INVALID]
    if not fresh:
        return {}
    return {(p.topic, p.partition): p.offset for p in consumer.offsets_for_times(fresh, timeout=30)}


class CopyPath(Protocol):
    """What a lane asks of its copy path."""

    def assign(self, consumer: Consumer, partitions: list[TopicPartition], committed: list[TopicPartition],
               recreated: set[Partition]) -> None:
        """Start reading newly assigned partitions where `committed` says (a negative offset: never committed;
        `recreated`: from the new topic's start)."""

    def step(self) -> None:
        """One turn of the loop: the group's callbacks, what was read handed to the writer."""

    def lags(self, stats: dict[str, Any], committed: Mapping[Partition, int]) -> dict[Partition, int]:
        """Records behind each partition's end, from a consumer statistics emission."""

    def hold(self, tps: set[Partition], hold: bool) -> None:
        """Stop reading these partitions, or read them again (unless backpressure holds all)."""

    def pause_all(self, paused: bool) -> None:
        """Backpressure: stop reading every assigned partition, or read them all again."""

    def rewind(self, offsets: Mapping[Partition, int | None]) -> None:
        """Read partitions again from their offsets (None: where the assignment began, if the path knows)."""

    def restart(self, tp: Partition) -> None:
        """Read a partition again from its start (its topic was recreated)."""

    def release(self, tps: list[Partition]) -> None:
        """Partitions revoked or lost: forget what was read of them."""

    def nothing_to_copy(self, tp: Partition, high: int) -> bool:
        """Whether a partition started at or past `high` with nothing read."""

    def unknown_topics(self) -> set[str]:
        """Source topics a read found unknown since the source watch last cleared them (it asks for ids sooner)."""

    def close(self) -> None: ...


class Records:
    """hot_path: records: librdkafka's consumer reads records, each handed to the writer (auto.offset.reset is
    `error`: a position whose records are gone is reported, never reset silently). Its read positions are the
    consumer's, pushed into the book after each call that moves them."""

    def __init__(self, reading: Reading, *, continue_past_loss: bool) -> None:
        self.r = reading
        self.book = reading.book
        self.consumer = reading.consumer
        #: on_source_loss: continue: a partition whose records are gone is read on from its first offset
        self.continue_past_loss = continue_past_loss

    def assign(self, consumer: Consumer, partitions: list[TopicPartition], committed: list[TopicPartition],
               recreated: set[Partition]) -> None:
        if isinstance(self.r.start, datetime):
            self._seek_to_start_time(consumer, partitions, committed, self.r.start)
        elif any(p.offset < 0 for p in committed) or recreated:
            # auto.offset.reset is `error` (assembly.consumer_config): partitions never committed start where
            # `start` says, assigned here (confluent-kafka then skips its own assignment, as _seek_to_start_time).
            fresh = OFFSET_BEGINNING if self.r.start == "earliest" else OFFSET_END
            self.r.group.assign(consumer, [
                TopicPartition(p.topic, p.partition, p.offset if p.offset >= 0 or p.offset == OFFSET_BEGINNING
                               else fresh) for p in committed])
        # librdkafka keeps a partition's pause across assignments: one paused by backpressure before it was
        # lost would stay paused for good once assigned again. It follows the lane's state instead.
        (consumer.pause if self.book.paused else consumer.resume)(partitions)
        stopped = [p for p in partitions if (p.topic, p.partition) in self.book.withheld]
        if stopped:
            consumer.pause(stopped)
        for p in partitions:  # the consumer's position is its last record's + 1: none before the first (librdkafka)
            self.book.read_to((p.topic, p.partition), None)

    def _seek_to_start_time(self, consumer: Consumer, partitions: list[TopicPartition],
                            committed: list[TopicPartition], start: datetime) -> None:
        """Partitions this group never committed start at the configured timestamp.

        The callback assigns them itself, with those offsets: confluent-kafka then skips its own
        assignment of the unchanged list (changing the list's offsets in place has no effect).
        """
        found = start_time_offsets(consumer, committed, start)
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
        self.r.raise_callback_error()
        if msgs:
            copied = self._copy(msgs)
            self._push({(m.topic(), m.partition()) for m in copied})  # where the consumer is now in them

    def _copy(self, msgs: list[Any]) -> list[Any]:
        """Hands the records of `msgs` to the writer; returns what was handed (an offset reset error is handled
        apart: its partition is read again from elsewhere, or reported lost)."""
        r = self.r
        reset = [m for m in msgs if m.error() is not None and m.error().code() == KafkaError._AUTO_OFFSET_RESET]
        if reset:  # auto.offset.reset=error: the position's records are gone (or the partition ends before it)
            msgs = [m for m in msgs if m not in reset]
            for m in reset:
                self._reset_error(m)
        if self.book.first_reads_due:
            for m in msgs:
                if m.error() is None:
                    self.book.read_from((m.topic(), m.partition()), m.offset())
        n, nbytes = r.writer.write(msgs, r.losses.consumer_error)
        if r.sampler.capturing:  # live scoring: a window is open
            r.sampler.offer(msgs)
        r.counted(n, nbytes)
        return msgs

    def _push(self, tps: Iterable[Partition]) -> None:
        """The consumer's positions of `tps` (the next record it hands out), into the book; of those still held
        (records handed out before a rebalance callback of the same step revoked their partition are not)."""
        held = [TopicPartition(t, q) for t, q in sorted(tps) if (t, q) in self.book.assigned]
        for p in self.consumer.position(held) if held else ():
            self.book.read_to((p.topic, p.partition), p.offset)

    def _reset_error(self, m: Any) -> None:
        """librdkafka found the position of m's partition out of range (auto.offset.reset is `error`): a loss, or a
        position moved meanwhile (then read again from where it is)."""
        tp = TopicPartition(m.topic(), m.partition())
        offset = m.offset()
        try:
            first, end = self.consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as exc:
            raise TranscoderError(f"lane {self.r.lane}: {m.topic()} [{m.partition()}] offset {offset} is out of "
                                  f"range and its offsets cannot be read: {exc.args[0].str()}", topic=m.topic(),
                                  partition=m.partition(), offset=offset) from None
        if self.r.losses.recreated([m.topic()], at={(m.topic(), m.partition()): offset}):
            return  # the topic was recreated: reported as such
        if offset < 0 or first <= offset <= end:  # not a loss (a position moved meanwhile): read on
            self._seek((m.topic(), m.partition()), max(offset, first))
            return
        self.r.losses.lost(SourceLoss(m.topic(), m.partition(), offset, first, end))
        if self.continue_past_loss:
            self._restart_at(m.topic(), m.partition(), first)

    def _restart_at(self, topic: str, partition: int, offset: int) -> None:
        """Read a partition on from `offset` after librdkafka stopped it on an offset reset error (a seek is
        refused in that state): assigned again at that offset."""
        self.r.group.reassign(self.consumer, TopicPartition(topic, partition, offset), self.book.assigned)
        if self.book.paused:
            self.consumer.pause([TopicPartition(topic, partition)])
        self.book.read_to((topic, partition), None)  # assigned anew: no position before its first record

    def lags(self, stats: dict[str, Any], committed: Mapping[Partition, int]) -> dict[Partition, int]:
        return self.r.group.lags(stats, committed)

    def hold(self, tps: set[Partition], hold: bool) -> None:
        if hold:
            self.consumer.pause([TopicPartition(*tp) for tp in sorted(tps)])
        elif not self.book.paused:
            self.consumer.resume([TopicPartition(*tp) for tp in sorted(tps)])

    def pause_all(self, paused: bool) -> None:
        tps = [TopicPartition(t, p) for t, p in self.book.assigned]
        (self.consumer.pause if paused else self.consumer.resume)(tps)

    def rewind(self, offsets: Mapping[Partition, int | None]) -> None:
        for tp, offset in offsets.items():
            if offset is None and self.r.start == "earliest":
                offset = OFFSET_BEGINNING
            if offset is not None:
                self._seek(tp, offset)

    def _seek(self, tp: Partition, offset: int) -> None:
        """Read `tp` on from `offset`: the next record the lane hands the writer (a logical offset: not known)."""
        self.consumer.seek(TopicPartition(*tp, offset))
        self.book.read_to(tp, offset)

    def restart(self, tp: Partition) -> None:
        self._restart_at(tp[0], tp[1], OFFSET_BEGINNING)

    def release(self, tps: list[Partition]) -> None:
        pass  # librdkafka forgets them itself

    def nothing_to_copy(self, tp: Partition, high: int) -> bool:
        return False  # librdkafka's consumer has no position before its first record

    def unknown_topics(self) -> set[str]:
        return set()  # the consumer reports an unknown topic as an error (SourceWatch.consumer_error)

    def close(self) -> None:
        pass  # the consumer is the lane's
