"""The record-sets copy path (hot_path: batches, the default): raw Fetches (kafka.fetcher) read each partition's
stored record sets, handed to the writer with no Python per record; the consumer only keeps the group (its
partitions stay paused) and commits. One of the two `CopyPath`s (copy_paths), chosen once by service.assembly.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from transcoder.kafka.fetcher import Fetcher
from transcoder.kafka.producer import Delivered
from transcoder.pipeline.partitions import Partition
from transcoder.service.copy_paths import Flow, Reading, start_time_offsets

if TYPE_CHECKING:
    from confluent_kafka import Consumer

log = structlog.get_logger("transcoder.lane")


class RecordSets:
    """hot_path: batches: the lane's Fetcher reads stored record sets; each partition's records are handed to the
    writer as sets, up to the room under max_in_flight_bytes (`flow`)."""

    def __init__(self, reading: Reading, fetcher: Fetcher, flow: Flow) -> None:
        self.r = reading
        self.book = reading.book
        self.fetcher = fetcher
        self.flow = flow
        #: each partition's read_committed end as the last Fetch answered
        self.fetched_ends: dict[Partition, int] = {}
        #: records fetched and not yet handed to the writer (no room under max_in_flight_bytes for them yet), as
        #: (StoredRecords, index of the first one left); such a partition is not fetched meanwhile
        self.pending: dict[Partition, tuple[Any, int]] = {}
        #: partitions held whose position the fetcher does not know yet (an "earliest" or "latest" start it has
        #: still to ask Kafka for): pushed into the book each step until it does
        self._unknown: set[Partition] = set()
        self._stray_logged = False

    def assign(self, consumer: Consumer, partitions: list[TopicPartition], committed: list[TopicPartition],
               recreated: set[Partition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        starts: dict[Partition, int | str | None] = {
            (p.topic, p.partition): p.offset if p.offset >= 0 else "earliest" if p.offset == OFFSET_BEGINNING
            else None for p in committed}
        if isinstance(self.r.start, datetime):  # no record since that time: the end
            starts.update({tp: off if off >= 0 else "latest"
                           for tp, off in start_time_offsets(consumer, committed, self.r.start).items()})
        self.fetcher.assign(starts)
        if self.book.paused:
            self.fetcher.paused.update(tps)
        self.fetcher.paused.update(tp for tp in tps if tp in self.book.withheld)
        # librdkafka never fetches them: the fetcher does. Assigned here (confluent-kafka then skips its own
        # assignment) so that the pause lands on the assigned partitions; exactly-once rebalances eagerly, where
        # each assignment is whole.
        self.r.group.assign(consumer, partitions)
        consumer.pause(partitions)
        self._push(tps)

    def step(self) -> None:
        """The group's callbacks (the consumer fetches nothing), one round of raw Fetches, each partition's records
        handed to the writer, batches whose linger is over sent; where each partition is read to, into the book."""
        r = self.r
        draining = self.flow.draining  # a transaction waits to commit: nothing new joins it
        assigned = self.book.assigned
        idle = not assigned or len(self.fetcher.paused) >= len(assigned) or draining
        m = r.consumer.poll(0.2 if not assigned else 0.02 if draining else 0)
        r.raise_callback_error()
        if m is not None:
            err = m.error()
            if err is not None:
                r.losses.consumer_error(err)
            elif not self._stray_logged:  # fetched before its pause landed: the fetcher reads it, not this
                self._stray_logged = True
                log.info("consumer_record_dropped", lane=r.lane, topic=m.topic(), partition=m.partition(),
                         offset=m.offset(), note="the lane's fetcher copies it; the consumer only keeps the group")
        # A round fetches no more than the room left under max_in_flight_bytes (stored bytes; the broker still
        # returns a first batch larger than that), and hands the writer records up to the room in record bytes
        # (at least one), as a paused librdkafka consumer would. Compressed source batches hold more record
        # bytes than they take: what does not fit waits here, and its partition is not fetched meanwhile.
        # The Fetches wait no later than the first open batch's linger end, so `tick` sends it on time.
        fetched = self.fetcher.fetch(budget=max(self.flow.room(), 1), skip=self.pending,
                                     until=r.writer.linger_due()) if not idle else {}
        moved = set(fetched)  # the fetcher's positions moved past what it fetched
        for loss in self.fetcher.take_losses():
            moved.add((loss.topic, loss.partition))  # on_source_loss: continue: moved on to the first offset left
            r.losses.fetch_loss(loss)
        now = time.monotonic()
        for tp, f in fetched.items():
            self.fetched_ends[tp] = f.end
            self.book.saw_end(tp, f.end)  # the broker's answers between Fetches count too, at each emission
            if len(f.records):
                self.pending[tp] = (f.records, 0)
                if self.book.unstarted(tp):
                    self.book.read_from(tp, int(f.records.span(0, 1)[0]))
        if not draining:
            moved.update(self._hand(now))
        r.writer.tick(now)
        self._push(moved | self._unknown)

    def _hand(self, now: float) -> list[Partition]:
        """Each partition's records waiting here, handed to the writer up to the room; returns the partitions
        handed some."""
        r = self.r
        handed = []
        for tp, (records, start) in list(self.pending.items()):
            room = self.flow.room()
            if room <= 0:
                break
            stop = records.fit(start, room)
            if stop < len(records):
                self.pending[tp] = (records, stop)
            else:
                del self.pending[tp]
            n, nbytes = r.writer.write_stored(tp, records, now, start, stop)
            handed.append(tp)
            if r.sampler.capturing:  # live scoring: a window is open
                r.sampler.offer([Delivered(tp[0], tp[1], o, (k, v, h, ts, 0))
                                 for o, ts, k, v, h in map(records.record, range(start, stop))])
            r.counted(n, nbytes)
        return handed

    def _push(self, tps: Iterable[Partition]) -> None:
        """Where the lane has read in `tps` (partitions it holds), into the book."""
        for tp in tps:
            if tp not in self.book.assigned:
                continue
            at = self.position(tp)
            self.book.read_to(tp, at)
            if at is None:
                self._unknown.add(tp)
            else:
                self._unknown.discard(tp)

    def lags(self, stats: dict[str, Any], committed: Mapping[Partition, int]) -> dict[Partition, int]:
        # the consumer never fetches: the ends are the fetcher's and the broker's
        return {tp: max(0, end - committed[tp]) for tp, end in self.fetched_ends.items()
                if tp in committed and tp in self.book.assigned}

    def position(self, tp: Partition) -> int | None:
        """The offset of the next record not yet handed to the writer (fetched records wait in `pending` until
        there is room for them)."""
        if tp in self.pending:
            records, start = self.pending[tp]
            return int(records.span(start, start + 1)[0])
        return self.fetcher.positions.get(tp)

    def hold(self, tps: set[Partition], hold: bool) -> None:
        if hold:
            self.fetcher.paused.update(tps)
        elif not self.book.paused:
            self.fetcher.paused.difference_update(tps)

    def pause_all(self, paused: bool) -> None:
        if paused:
            self.fetcher.paused.update(self.book.assigned)
        else:
            self.fetcher.paused.clear()

    def rewind(self, offsets: Mapping[Partition, int | None]) -> None:
        for tp, offset in offsets.items():
            self.pending.pop(tp, None)
            if offset is not None:
                self.fetcher.assign({tp: offset})
        self._push(offsets)

    def restart(self, tp: Partition) -> None:
        self.pending.pop(tp, None)
        self.fetcher.assign({tp: "earliest"})
        if not self.book.paused:
            self.fetcher.paused.discard(tp)
        self._push([tp])

    def release(self, tps: list[Partition]) -> None:
        self.fetcher.revoke(tps)
        for tp in tps:
            self.fetched_ends.pop(tp, None)
            self.pending.pop(tp, None)
            self._unknown.discard(tp)

    def nothing_to_copy(self, tp: Partition, high: int) -> bool:
        """The fetcher knows its position before the first record (librdkafka's consumer has none)."""
        if tp not in self.book.assigned or self.r.writer.ledger.next_offset.get(tp) is not None:
            return False
        pos = self.position(tp)
        return pos is not None and pos >= high

    def unknown_topics(self) -> set[str]:
        return self.fetcher.unknown_topics

    def close(self) -> None:
        self.fetcher.close()
