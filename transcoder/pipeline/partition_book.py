"""Where each source partition of one lane's assignment stands: the one owner of that fact (pure, no Kafka).

The copy path pushes where it has read (`read_to`, `read_from`), the checkpoint what it committed (`committed_at`,
`found`), the source watch what it saw of the sources (`saw_end`, `withhold`); the lane what the group assigned
(`assign`, `release`) and what backpressure holds (`hold_all`). Everyone reads it through read-only views. It all
runs on the lane's thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from transcoder.pipeline.commits import rewind_offset
from transcoder.pipeline.partitions import Partition


class PartitionBook:
    """One lane's partitions: assigned, read to, committed, and what may never be committed.

    `first_reads`: note the first offset read of each partition never committed (exactly-once: where an aborted
    transaction is read again from)."""

    def __init__(self, *, first_reads: bool = False) -> None:
        self._first_reads = first_reads
        self._assigned: set[Partition] = set()
        #: backpressure holds every assigned partition (max_in_flight_bytes reached)
        self._paused = False
        #: the next offset the lane would hand the writer, as the copy path last pushed it
        self._read: dict[Partition, int] = {}
        #: the offset last committed (or found committed on assignment)
        self._committed: dict[Partition, int] = {}
        #: the group's commit as this process last knew it (committed or read back), kept when the partition goes:
        #: what a later assignment releases a lost commit marker's pending offsets with
        self._known: dict[Partition, int] = {}
        #: when the last committed record was acknowledged (ms; lag in seconds)
        self._committed_ts: dict[Partition, int] = {}
        #: exactly-once: per partition never committed, the first offset read (where an aborted transaction rewinds to)
        self._first_read: dict[Partition, int] = {}
        #: nothing is committed for these: a recreated topic's under on_source_loss: stop (the old topic's position
        #: is no offset of the new one)
        self._withheld: set[Partition] = set()
        #: exactly-once: read past records of an aborted transaction that were not read again (they were leaving);
        #: never committed: the next owner, or the next run, reads them again from the last commit
        self._abandoned: set[Partition] = set()
        #: the highest end seen of each partition (a recreated topic: the old topic's last end seen) and, once
        #: released, where the lane was in it
        self._max_end: dict[Partition, int] = {}
        self._released_at: dict[Partition, int] = {}

    # ------------------------------------------------------------------ views
    @property
    def assigned(self) -> AbstractSet[Partition]:
        return self._assigned

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def committed(self) -> Mapping[Partition, int]:
        return self._committed

    @property
    def known(self) -> Mapping[Partition, int]:
        return self._known

    @property
    def committed_ts(self) -> Mapping[Partition, int]:
        return self._committed_ts

    @property
    def first_read(self) -> Mapping[Partition, int]:
        return self._first_read

    @property
    def withheld(self) -> AbstractSet[Partition]:
        return self._withheld

    @property
    def abandoned(self) -> AbstractSet[Partition]:
        return self._abandoned

    def read_positions(self, tps: Iterable[Partition]) -> dict[Partition, int | None]:
        """Where the lane has read in `tps` (None: not known), as its checkpoint commits them."""
        return {tp: self._read.get(tp) for tp in tps}

    def position(self, tp: Partition) -> int | None:
        """Where the lane is in a partition it holds: the next record it would hand the writer (else its commit)."""
        at = self._read.get(tp)
        return self._committed.get(tp) if at is None else at

    def rewind_offset(self, tp: Partition) -> int | None:
        """Where a partition is read again after an abort (None: not known)."""
        return rewind_offset(tp, self._committed, self._first_read)

    @property
    def first_reads_due(self) -> bool:
        """Whether some partition held still waits for its first offset read to be noted (`read_from`)."""
        return self._first_reads and len(self._first_read) + len(self._committed) < len(self._assigned)

    def unstarted(self, tp: Partition) -> bool:
        """Whether the first offset read of `tp` is still to be noted (`read_from`)."""
        return self._first_reads and tp not in self._committed and tp not in self._first_read

    # ------------------------------------------------------------------ the group's
    def assign(self, tps: Iterable[Partition]) -> None:
        self._assigned.update(tps)

    def release(self, tps: Iterable[Partition]) -> None:
        """Partitions the lane lets go (revoked or lost): where it was is kept (a topic recreated meanwhile is
        reported from there), and so is what it knew committed."""
        for tp in tps:
            at = self.position(tp)
            if at is not None:
                self._released_at[tp] = at
            self._assigned.discard(tp)
            self._read.pop(tp, None)
            self._committed.pop(tp, None)
            self._abandoned.discard(tp)

    def hold_all(self, paused: bool) -> None:
        """Backpressure holds every assigned partition, or lets them go on."""
        self._paused = paused

    # ------------------------------------------------------------------ the copy path's
    def read_to(self, tp: Partition, offset: int | None) -> None:
        """The next record the lane would hand the writer of `tp` (None or negative: not known)."""
        if offset is None or offset < 0:
            self._read.pop(tp, None)
        else:
            self._read[tp] = offset

    def read_from(self, tp: Partition, offset: int) -> None:
        """The first offset read of a partition (noted where `unstarted`)."""
        if self.unstarted(tp):
            self._first_read[tp] = offset

    # ------------------------------------------------------------------ the checkpoint's
    def found(self, tp: Partition, offset: int) -> None:
        """The group's committed offset of `tp`, read on assignment."""
        self._committed[tp] = offset
        self._known[tp] = offset

    def committed_at(self, offsets: Mapping[Partition, int], acked_ts: Mapping[Partition, int | None]) -> None:
        """Offsets committed; `acked_ts`: when each one's last record was acknowledged (None: not known)."""
        for tp, off in offsets.items():
            self._committed[tp] = off
            self._known[tp] = off
            self._first_read.pop(tp, None)
            ts = acked_ts.get(tp)
            if ts is not None:
                self._committed_ts[tp] = ts

    def begin(self) -> None:
        """A new exactly-once assignment: its first reads are noted again."""
        self._first_read.clear()

    def abandon(self, tps: Iterable[Partition]) -> None:
        self._abandoned.update(tps)

    def restart(self, tp: Partition) -> None:
        """A partition read again from the start of a new topic (recreated): its old commit is no offset of it."""
        self._committed.pop(tp, None)
        self._known.pop(tp, None)
        self._first_read.pop(tp, None)

    # ------------------------------------------------------------------ the source watch's
    def saw_end(self, tp: Partition, end: int) -> None:
        self._max_end[tp] = max(self._max_end.get(tp, -1), end)

    def withhold(self, tp: Partition) -> None:
        self._withheld.add(tp)

    def take_last_seen(self, tp: Partition) -> tuple[int, int | None]:
        """A recreated topic's partition: the old topic's highest end seen (-1: none) and where the lane was when
        it released the partition (None: it did not), both forgotten."""
        return self._max_end.pop(tp, -1), self._released_at.pop(tp, None)
