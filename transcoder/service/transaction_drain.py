"""exactly-once on record sets: the drain before a transaction commits, and how much a transaction may hold.

Before committing, the lane waits for the open transaction's batches to be acknowledged (the open ones sent first),
handing the writer nothing new meanwhile; its loop keeps turning (the group's callbacks, readiness) instead of
blocking in a flush. It waits at most half the transaction's life (transaction_timeout_ms), the rest left for the
commit. What a transaction's batches may hold unacknowledged at once follows the drains, so that a drain takes about
the commit interval: a codec slower than that commits smaller transactions instead of missing the drain limit,
aborting, and reading the same records again.

`NoDrain` stands in everywhere else (at-least-once, exactly-once on records): nothing waits before a commit, and the
writer may be handed what max_in_flight_bytes leaves. service.assembly chooses one of the two for the lane.
"""

from __future__ import annotations

from typing import Protocol

import structlog

log = structlog.get_logger("transcoder.lane")

#: What a transaction's batches may hold unacknowledged at least (record bytes), and at first what the slowest codec
#: (zstd 22 on a busy core: a few hundred kB/s) drains in half the drain limit.
TXN_MIN_BYTES = 64 << 10
SLOWEST_CODEC_BYTES_PER_S = 128 << 10


class Ledger(Protocol):
    in_flight_bytes: int


class Writer(Protocol):
    def tick(self, now: float, *, flush: bool = False) -> None: ...
    def transaction_doomed(self) -> bool: ...


class NoDrain:
    """at-least-once, or exactly-once on records: nothing waits before a commit; the writer may be handed what
    max_in_flight_bytes leaves."""

    draining = False
    limit_s = 0.0

    def __init__(self, max_in_flight_bytes: int, ledger: Ledger) -> None:
        self.max_bytes = max_in_flight_bytes
        self.ledger = ledger

    def room(self) -> int:
        return self.max_bytes - self.ledger.in_flight_bytes

    def forget(self) -> None: ...

    def step(self, now: float) -> bool | None:
        return True


class TransactionDrain:
    """One lane's drains (`step`) and its transactions' size (`budget`, record bytes)."""

    def __init__(self, lane: str, transaction_timeout_ms: int, commit_interval_ms: int, max_in_flight_bytes: int,
                 ledger: Ledger, writer: Writer) -> None:
        self.lane = lane
        self.ledger = ledger  # what is in flight
        self.writer = writer  # sends the open batches (tick), knows a transaction that cannot commit
        self.limit_s = transaction_timeout_ms / 2000
        #: a drain should take about this long: the commit interval, at most an eighth of the transaction's life
        self.target_s = min(commit_interval_ms / 1000, self.limit_s / 4)
        self.max_bytes = max_in_flight_bytes
        self.budget = min(max_in_flight_bytes, max(TXN_MIN_BYTES, int(SLOWEST_CODEC_BYTES_PER_S * self.limit_s / 2)))
        #: since when the lane drains (None: not draining), and what was in flight when it began
        self.since: float | None = None
        self._from = 0

    @property
    def draining(self) -> bool:
        """A transaction waits for its batches to be acknowledged before it commits: the writer is handed nothing
        new meanwhile."""
        return self.since is not None

    def room(self) -> int:
        """Record bytes the writer may be handed now: what max_in_flight_bytes leaves, and what the open transaction
        may hold unacknowledged (`budget`)."""
        return min(self.max_bytes, self.budget) - self.ledger.in_flight_bytes

    def forget(self) -> None:
        """The transaction waiting to commit went with partitions revoked or lost (committed or aborted)."""
        self.since = None

    def step(self, now: float) -> bool | None:
        """True once the open transaction's batches are all acknowledged; False when it cannot commit (a batch
        failed in it, or they were not acknowledged within the limit); None meanwhile."""
        if self.since is None:
            self.writer.tick(now, flush=True)
            self.since = now
            self._from = self.ledger.in_flight_bytes
        doomed = self.writer.transaction_doomed()
        if self.ledger.in_flight_bytes > 0 and not doomed and now - self.since < self.limit_s:
            return None
        since, self.since = self.since, None
        if not doomed:
            self.resize(now - since)
        return self.ledger.in_flight_bytes == 0 and not doomed

    def resize(self, took: float) -> None:
        """After a drain that took `took` seconds: scaled to the target after a slow drain (the codec or the
        destination is slower than the bytes held need), doubled after a quick one that held at least half of it,
        up to max_in_flight_bytes."""
        was, target, held = self.budget, self.target_s, self._from
        if took > target and held > 0:
            self.budget = max(min(TXN_MIN_BYTES, self.max_bytes), int(held * target / took))
        elif took <= target / 2 and held >= was // 2:
            self.budget = min(self.max_bytes, 2 * was)
        if self.budget != was:
            log.debug("transaction_sized", lane=self.lane, bytes=self.budget, drained_bytes=held,
                      drain_s=round(took, 3), target_s=target)
