"""Which source offsets are safe to commit: every destination has acknowledged every record before them.

Pure bookkeeping, no Kafka. It relies on one property of idempotent producers: delivery
reports of one destination partition arrive in the order the records were produced. So each
(destination topic, partition) keeps a FIFO of the source offsets it still owes, and an
acknowledgement pops its head.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from transcoder.pipeline.partitions import Partition


class Ledger:
    """The engine-free bookkeeping of a copy: the writer calls `sent` and `consumed` once per
    written chunk of records and `acked` once per delivery report; the engine asks `committable`."""

    def __init__(self, destinations_of: dict[str, tuple[str, ...]]) -> None:
        #: source topic -> destination topics it is copied to
        self.destinations_of = destinations_of
        #: (destination topic, partition) -> what was produced and not yet acknowledged, in order: (source offset,
        #: size) per record, or (first offset, last offset, records, size) per run handed to a batching destination
        self.pending: dict[Partition, deque[tuple[int, ...]]] = {}
        #: source (topic, partition) -> the offset after the last record consumed
        self.next_offset: dict[Partition, int] = {}
        #: source (topic, partition) -> offsets held by side deliveries (dead-letter records, re-sends)
        self.held: dict[Partition, dict[int, int]] = {}
        self.in_flight_bytes = 0

    def sent(self, produced: Mapping[Partition, Sequence[tuple[int, ...]]], nbytes: int) -> None:
        """Records produced, per destination partition in produce order: (source offset, size) each, or (source
        offset, size, timestamp) where a failed report must name the timestamp (`acked_failed`).

        `nbytes`: the sizes of all entries added up (a record sent to two destinations counts twice,
        as each acknowledgement gives its size back). Called once per written chunk, not per record.
        """
        pending = self.pending
        for dest, entries in produced.items():
            q = pending.get(dest)
            if q is None:
                q = pending[dest] = deque()
            q.extend(entries)
        self.in_flight_bytes += nbytes

    def acked(self, dest_topic: str, partition: int) -> int:
        """Record one delivery report (success or failure) of a destination partition; return its
        source offset. Reports of one destination partition come in produce order (idempotence)."""
        entry = self.pending[(dest_topic, partition)].popleft()
        self.in_flight_bytes -= entry[1]
        return entry[0]

    def acked_failed(self, dest_topic: str, partition: int) -> tuple[int, int | None]:
        """`acked` for a failed report: (source offset, the record's timestamp as `sent` gave it, or None). A failed
        report of librdkafka's carries no timestamp; the record sent again or dead-lettered keeps its own."""
        entry = self.pending[(dest_topic, partition)].popleft()
        self.in_flight_bytes -= entry[1]
        return entry[0], (entry[2] if len(entry) == 3 else None)

    def sent_runs(self, produced: Mapping[Partition, tuple[int, int, int, int]]) -> None:
        """Runs of records handed to a batching destination, one per destination partition: (first source offset,
        last source offset, records, sizes added up). They are acknowledged batch by batch (`acked_through`),
        in the order they were handed over, whatever batches they end up in."""
        pending = self.pending
        for dest, run in produced.items():
            q = pending.get(dest)
            if q is None:
                q = pending[dest] = deque()
            q.append(run)
            self.in_flight_bytes += run[3]

    def acked_through(self, dest_topic: str, partition: int, last: int, records: int) -> int:
        """A batch of `records` records ending at source offset `last` was acknowledged (or failed) by a
        destination partition fed by `sent_runs`: the runs it covers are done, and the one it ends inside keeps
        its rest. Returns the source offset of the batch's first record."""
        q = self.pending[(dest_topic, partition)]
        first = q[0][0]
        left = records
        while left:
            r_first, r_last, r_n, r_size = q[0]
            if r_n <= left:
                q.popleft()
                self.in_flight_bytes -= r_size
                left -= r_n
                continue
            done = r_size * left // r_n
            q[0] = (last + 1, r_last, r_n - left, r_size - done)
            self.in_flight_bytes -= done
            break
        return first

    def consumed(self, last: Mapping[Partition, int]) -> None:
        """The last source offset consumed per source partition (the chunk's; offsets only grow)."""
        next_offset = self.next_offset
        for tp, offset in last.items():
            next_offset[tp] = offset + 1

    def hold(self, source: Partition, offset: int) -> None:
        """Keep `offset` uncommitted until `release` (e.g. while its dead-letter copy is in flight)."""
        h = self.held.setdefault(source, {})
        h[offset] = h.get(offset, 0) + 1

    def release(self, source: Partition, offset: int) -> None:
        """The side delivery of `offset` is done. A partition forgotten meanwhile (revoked, lost) has
        nothing to release: its new owner copies the record again from its last commit."""
        h = self.held.get(source)
        if h is None or offset not in h:
            return
        h[offset] -= 1
        if not h[offset]:
            del h[offset]

    def committable(self, source: Partition, position: int | None = None) -> int | None:
        """The offset to commit for `source`: the oldest unacknowledged record, or the consumed end.

        `position` (the consumer's own next offset) may be past the last record seen, when the
        log has transaction markers or compacted gaps; it is used when nothing is outstanding.
        """
        nxt = self.next_offset.get(source)
        if nxt is None:
            return None
        candidates = [nxt if position is None else max(nxt, position)]
        topic, partition = source
        for dest in self.destinations_of.get(topic, ()):
            q = self.pending.get((dest, partition))
            if q:
                candidates.append(q[0][0])
        held = self.held.get(source)
        if held:
            candidates.append(min(held))
        return min(candidates)

    def outstanding(self, sources: Iterable[Partition]) -> int:
        """Records of these source partitions not yet acknowledged by every destination."""
        n = 0
        for topic, partition in sources:
            for dest in self.destinations_of.get(topic, ()):
                for entry in self.pending.get((dest, partition), ()):
                    n += entry[2] if len(entry) == 4 else 1  # a run of records, or one record
            n += sum(self.held.get((topic, partition), {}).values())
        return n

    def reset(self) -> None:
        """Forget everything (an aborted transaction: its records are read and produced again)."""
        self.pending.clear()
        self.next_offset.clear()
        self.held.clear()
        self.in_flight_bytes = 0

    def forget(self, sources: Iterable[Partition]) -> None:
        """Drop the state of partitions this consumer no longer owns (revoked or lost).

        Queues that still owe acknowledgements are kept: their delivery reports are still to
        come, in order, and must pop these entries, not those of a later assignment of the same
        partition (which append behind them). Until they drain, `committable` stays at or below
        their oldest offset, so nothing unacknowledged is ever committed.
        """
        for topic, partition in sources:
            self.next_offset.pop((topic, partition), None)
            self.held.pop((topic, partition), None)
            for dest in self.destinations_of.get(topic, ()):
                q = self.pending.get((dest, partition))
                if q is not None and not q:
                    del self.pending[(dest, partition)]
