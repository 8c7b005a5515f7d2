"""Which source offsets a checkpoint commits, per guarantee: pure decisions over where each partition stands.

No Kafka: the lane's checkpoint (transcoder.service.checkpoint) asks these with the read positions, the ledger and
the last commits, and commits what they return.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition


def acknowledged_offsets(partitions: Iterable[Partition], positions: Mapping[Partition, int | None], ledger: Ledger,
                         committed: Mapping[Partition, int], withheld: AbstractSet[Partition] = frozenset()
                         ) -> dict[Partition, int]:
    """at-least-once: per partition, the offset before which every destination acknowledged every record
    (`Ledger.committable`; the read position counts where nothing is outstanding), where it is past the last
    commit. A negative or unknown position is no position. Nothing for `withheld` partitions."""
    offsets: dict[Partition, int] = {}
    for tp in partitions:
        if tp in withheld:
            continue
        pos = positions.get(tp)
        off = ledger.committable(tp, pos if pos is not None and pos >= 0 else None)
        if off is not None and off > committed.get(tp, -1):
            offsets[tp] = off
    return offsets


def read_offsets(partitions: Iterable[Partition], positions: Mapping[Partition, int | None],
                 committed: Mapping[Partition, int], withheld: AbstractSet[Partition] = frozenset()
                 ) -> dict[Partition, int]:
    """exactly-once: per partition, the read position where it is past the last commit. The transaction holds
    every record read before it, and commits with these offsets or not at all. Nothing for `withheld`
    partitions (read past records of an aborted transaction, or of a recreated topic)."""
    offsets: dict[Partition, int] = {}
    for tp in partitions:
        off = positions.get(tp)
        if off is not None and off >= 0 and off > committed.get(tp, -1) and tp not in withheld:
            offsets[tp] = off
    return offsets


def rewind_offset(tp: Partition, committed: Mapping[Partition, int], first_read: Mapping[Partition, int]) -> int | None:
    """Where a partition is read again after an aborted transaction: its last commit, else the first offset this
    assignment read of it; None: neither is known (nothing read yet)."""
    off = committed.get(tp)
    return off if off is not None else first_read.get(tp)


def release_offsets(partitions: Iterable[Partition], known: Mapping[Partition, int]) -> dict[Partition, int] | None:
    """exactly-once: the offsets with which a transaction releases the group's pending offset commits of its
    producer id, or None: release them with an abort.

    A transaction's commit marker lost by the broker (seen: a broker SIGKILLed right after it acknowledged EndTxn,
    then fenced and re-elected while it wrote the markers) leaves that transaction's offsets pending for good,
    though its records are committed. An abort ends them, and the group rewinds to the commit before: every
    record of that transaction is copied again. A commit of the same offsets ends them as they were meant. So:
    where this process knows the last commit of every partition (`known`: what it committed or read back),
    those; a partition it does not know (never committed, or another process's) cannot be committed blind: abort."""
    tps = list(partitions)
    if not tps or any(tp not in known for tp in tps):
        return None
    return {tp: known[tp] for tp in tps}


def transactional_id(group_id: str, partitions: Iterable[Partition]) -> str:
    """exactly-once: the transactional id of a set of source partitions copied for a group: a service lane's
    assignment, or a Spark task's one partition. Whoever copies the same partitions for the group next takes the
    id over, fencing the one before (its open transaction aborted)."""
    parts = ",".join(f"{t}:{p}" for t, p in sorted(partitions))
    return f"transcoder-{group_id}-{hashlib.sha256(parts.encode()).hexdigest()[:16]}"


def first_uncommitted(offsets: Sequence[int], committed: int | None) -> int:
    """exactly-once, a replayed run of one partition's records (in offset order): the index of its first record at
    or past the group's committed offset, the next to copy; len(offsets) when a committed transaction already
    holds every one of them."""
    return 0 if committed is None else bisect_left(offsets, committed)
