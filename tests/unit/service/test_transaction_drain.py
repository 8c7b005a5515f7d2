"""transcoder.service.transaction_drain: the drain before a commit and the transaction's size, with fakes."""

from __future__ import annotations

from transcoder.service.transaction_drain import TXN_MIN_BYTES, TransactionDrain


class Ledger:
    in_flight_bytes = 0


class Writer:
    def __init__(self) -> None:
        self.doomed = False
        self.flushed: list[float] = []

    def tick(self, now: float, *, flush: bool = False) -> None:
        assert flush
        self.flushed.append(now)

    def transaction_doomed(self) -> bool:
        return self.doomed


def drain(max_bytes: int = 64 << 20) -> tuple[TransactionDrain, Ledger, Writer]:
    ledger, writer = Ledger(), Writer()
    # 60 s transactions: a 30 s limit; 1 s commits: a 1 s target
    return TransactionDrain("l", 60_000, 1_000, max_bytes, ledger, writer), ledger, writer


def test_waits_while_batches_are_unacknowledged_then_commits_and_doubles_after_a_quick_drain():
    d, ledger, writer = drain()
    ledger.in_flight_bytes = d.budget
    assert d.step(10.0) is None and d.draining and writer.flushed == [10.0]
    assert d.step(10.2) is None and writer.flushed == [10.0]  # the open batches are sent once
    was = d.budget
    ledger.in_flight_bytes = 0
    assert d.step(10.4) is True and not d.draining
    assert d.budget == 2 * was


def test_a_slow_drain_scales_the_transaction_to_the_target():
    d, ledger, _ = drain()
    ledger.in_flight_bytes = 4 << 20
    d.step(0.0)
    ledger.in_flight_bytes = 0
    assert d.step(4.0) is True
    assert d.budget == (4 << 20) // 4  # 4 s for 4 MiB, 1 s wanted
    assert d.budget >= TXN_MIN_BYTES


def test_past_the_limit_or_doomed_it_cannot_commit_and_a_doomed_one_sizes_nothing():
    d, ledger, writer = drain()
    ledger.in_flight_bytes = 1 << 20
    d.step(0.0)
    assert d.step(30.0) is False and not d.draining
    was = d.budget
    writer.doomed = True
    d.step(31.0)
    assert d.step(31.1) is False and d.budget == was
