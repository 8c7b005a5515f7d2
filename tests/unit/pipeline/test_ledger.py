"""transcoder.pipeline.ledger.Ledger: which source offsets are committable as destinations acknowledge records."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from transcoder.pipeline.ledger import Ledger

SRC = ("src", 0)


def produce(ledger: Ledger, source: tuple[str, int], offsets: range | list[int], dests: tuple[str, ...],
            size: int = 10) -> None:
    """Consume `offsets` of `source` and send each record to every destination, as the writer does:
    one chunk, one `sent` and one `consumed` call."""
    _, partition = source
    offsets = list(offsets)
    ledger.sent({(dest, partition): [(off, size) for off in offsets] for dest in dests},
                size * len(offsets) * len(dests))
    if offsets:
        ledger.consumed({source: offsets[-1]})


def ack(ledger: Ledger, dest: str, partition: int, n: int) -> list[int]:
    return [ledger.acked(dest, partition) for _ in range(n)]


def test_nothing_consumed_is_none():
    ledger = Ledger({"src": ("a",)})
    assert ledger.committable(SRC) is None
    assert ledger.committable(SRC, position=42) is None


def test_one_destination():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, range(10), ("a",))
    assert ledger.committable(SRC) == 0
    assert ack(ledger, "a", 0, 5) == [0, 1, 2, 3, 4]
    assert ledger.committable(SRC) == 5
    ack(ledger, "a", 0, 5)
    assert ledger.committable(SRC) == 10


def test_slowest_destination_holds_the_commit():
    ledger = Ledger({"src": ("a", "b")})
    produce(ledger, SRC, range(10), ("a", "b"))
    assert ack(ledger, "a", 0, 5) == [0, 1, 2, 3, 4]
    assert ledger.committable(SRC) == 0  # b has acknowledged nothing
    ack(ledger, "b", 0, 8)
    assert ledger.committable(SRC) == 5  # now a is the slowest
    ack(ledger, "a", 0, 5)
    assert ledger.committable(SRC) == 8
    ack(ledger, "b", 0, 2)
    assert ledger.committable(SRC) == 10


def test_partitions_are_independent():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, ("src", 0), range(3), ("a",))
    produce(ledger, ("src", 1), range(100, 104), ("a",))
    ack(ledger, "a", 1, 4)
    assert ledger.committable(("src", 0)) == 0
    assert ledger.committable(("src", 1)) == 104
    assert ledger.committable(("src", 2)) is None


def test_sources_sharing_a_destination_name_space_do_not_mix():
    ledger = Ledger({"s1": ("s1.z",), "s2": ("s2.z",)})
    produce(ledger, ("s1", 0), range(3), ("s1.z",))
    produce(ledger, ("s2", 0), range(3), ("s2.z",))
    ack(ledger, "s2.z", 0, 3)
    assert (ledger.committable(("s1", 0)), ledger.committable(("s2", 0))) == (0, 3)


def test_source_without_destinations_commits_what_it_consumed():
    ledger = Ledger({})
    ledger.consumed({("other", 0): 6})
    assert ledger.committable(("other", 0)) == 7


@pytest.mark.parametrize("position,expected", [(None, 10), (10, 10), (15, 15), (3, 10)])
def test_position_used_when_nothing_pending(position, expected):
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, range(10), ("a",))
    ack(ledger, "a", 0, 10)
    assert ledger.committable(SRC, position) == expected


def test_position_ignored_while_something_pending():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, range(10), ("a",))
    ack(ledger, "a", 0, 7)
    assert ledger.committable(SRC, 15) == 7


def test_gaps_in_offsets():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, [0, 5, 9], ("a",))
    assert ack(ledger, "a", 0, 1) == [0]
    assert ledger.committable(SRC) == 5
    ack(ledger, "a", 0, 2)
    assert ledger.committable(SRC) == 10


def test_hold_and_release():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, range(5), ("a",))
    ack(ledger, "a", 0, 5)
    ledger.hold(SRC, 2)
    ledger.hold(SRC, 2)
    ledger.hold(SRC, 4)
    assert ledger.committable(SRC, 9) == 2
    ledger.release(SRC, 2)
    assert ledger.committable(SRC) == 2  # held twice, released once
    ledger.release(SRC, 2)
    assert ledger.committable(SRC) == 4
    ledger.release(SRC, 4)
    assert ledger.committable(SRC) == 5
    assert ledger.held[SRC] == {}


def test_hold_below_pending():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, range(10), ("a",))
    ack(ledger, "a", 0, 6)
    ledger.hold(SRC, 3)
    assert ledger.committable(SRC) == 3


def test_hold_alone_is_not_committable():
    ledger = Ledger({"src": ("a",)})
    ledger.hold(SRC, 3)
    assert ledger.committable(SRC) is None


def test_in_flight_bytes_and_forget():
    ledger = Ledger({"src": ("a", "b")})
    produce(ledger, ("src", 0), range(4), ("a", "b"), size=100)
    produce(ledger, ("src", 1), range(2), ("a", "b"), size=7)
    assert ledger.in_flight_bytes == 4 * 2 * 100 + 2 * 2 * 7
    ack(ledger, "a", 0, 3)
    assert ledger.in_flight_bytes == 828 - 300
    ledger.hold(("src", 0), 1)
    ledger.forget([("src", 0)])
    # Queues that still owe acknowledgements stay, with their bytes, for the late delivery reports.
    assert ledger.in_flight_bytes == 828 - 300
    assert ledger.committable(("src", 0)) is None
    assert ("src", 0) not in ledger.next_offset
    assert ("src", 0) not in ledger.held
    assert [o for o, _ in ledger.pending[("a", 0)]] == [3]
    assert [o for o, _ in ledger.pending[("b", 0)]] == [0, 1, 2, 3]
    assert ledger.committable(("src", 1)) == 0
    assert ledger.outstanding([("src", 1)]) == 4


def test_late_acks_after_forget_pop_the_old_entries_not_a_new_assignments():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, ("src", 0), range(0, 3), ("a",), size=10)
    ack(ledger, "a", 0, 1)
    ledger.forget([("src", 0)])  # revoked with offsets 1 and 2 still in flight
    produce(ledger, ("src", 0), range(5, 7), ("a",), size=10)  # assigned again, resumed at 5
    # The oldest entry still in flight (offset 1) holds commits back, even behind the new ones.
    assert ledger.committable(("src", 0)) == 1
    assert ledger.acked("a", 0) == 1 and ledger.acked("a", 0) == 2  # the late reports
    assert ledger.committable(("src", 0)) == 5
    assert ledger.acked("a", 0) == 5 and ledger.acked("a", 0) == 6
    assert ledger.committable(("src", 0)) == 7
    assert ledger.in_flight_bytes == 0
    ledger.forget([("src", 0)])
    assert ("a", 0) not in ledger.pending  # empty queues are dropped


def test_forget_unknown_partition_is_harmless():
    ledger = Ledger({"src": ("a",)})
    produce(ledger, SRC, range(2), ("a",), size=5)
    ledger.forget([("src", 9), ("nope", 0)])
    assert (ledger.in_flight_bytes, ledger.committable(SRC)) == (10, 0)


def test_outstanding_counts_pending_and_held():
    ledger = Ledger({"src": ("a", "b"), "other": ("c",)})
    assert ledger.outstanding([SRC]) == 0
    produce(ledger, SRC, range(3), ("a", "b"))
    produce(ledger, ("other", 0), range(2), ("c",))
    assert ledger.outstanding([SRC]) == 6
    ack(ledger, "b", 0, 3)
    ledger.hold(SRC, 1)
    ledger.hold(SRC, 1)
    assert ledger.outstanding([SRC]) == 5
    assert ledger.outstanding([SRC, ("other", 0)]) == 7
    assert ledger.outstanding([("other", 3)]) == 0


def test_chunks_append_behind_each_other():
    ledger = Ledger({"src": ("a",)})
    ledger.sent({("a", 0): [(1, 1)]}, 1)
    ledger.sent({("a", 0): [(2, 1)], ("a", 1): [(9, 4)]}, 5)
    assert ledger.pending == {("a", 0): deque([(1, 1), (2, 1)]), ("a", 1): deque([(9, 4)])}
    assert ledger.in_flight_bytes == 6


def test_consumed_keeps_the_offset_after_the_last_record():
    ledger = Ledger({"src": ("a",)})
    ledger.consumed({("src", 0): 4, ("src", 1): 0})
    ledger.consumed({("src", 0): 9})
    assert ledger.next_offset == {("src", 0): 10, ("src", 1): 1}


def test_acked_pops_in_fifo_order_and_returns_offset():
    ledger = Ledger({"src": ("a",)})
    ledger.sent({("a", 0): [(7, 1), (3, 2)]}, 3)
    assert [ledger.acked("a", 0), ledger.acked("a", 0)] == [7, 3]
    assert ledger.in_flight_bytes == 0


# ------------------------------------------------------------------------------------------- property

class LedgerMachine(RuleBasedStateMachine):
    """Random sends (to every destination) and in-order acks over 1-3 destinations and 1-3 partitions."""

    @initialize(n_dest=st.integers(1, 3), n_part=st.integers(1, 3))
    def setup(self, n_dest: int, n_part: int) -> None:
        self.dests = tuple(f"d{i}" for i in range(n_dest))
        self.parts = list(range(n_part))
        self.ledger = Ledger({"src": self.dests})
        self.model: dict[tuple[str, int], deque[tuple[int, int]]] = {(d, p): deque() for d in self.dests
                                                                       for p in self.parts}
        self.next: dict[int, int] = {}
        self.last: dict[int, int] = {}

    @rule(data=st.data(), gap=st.integers(0, 3), size=st.integers(0, 1000))
    def consume(self, data: st.DataObject, gap: int, size: int) -> None:
        p = data.draw(st.sampled_from(self.parts))
        off = self.next.get(p, 0) + gap
        self.ledger.sent({(d, p): [(off, size)] for d in self.dests}, size * len(self.dests))
        self.ledger.consumed({("src", p): off})
        for d in self.dests:
            self.model[(d, p)].append((off, size))
        self.next[p] = off + 1

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(k for k, q in self.model.items() if q)))
        assert self.ledger.acked(*key) == self.model[key].popleft()[0]

    @invariant()
    def committable_is_min_and_monotone(self) -> None:
        for p in self.parts:
            got = self.ledger.committable(("src", p))
            if p not in self.next:
                assert got is None
                continue
            heads = [q[0][0] for (d, pp), q in self.model.items() if pp == p and q]
            assert got == min([self.next[p], *heads])
            assert got >= self.last.get(p, 0)
            self.last[p] = got

    @invariant()
    def bytes_and_outstanding_match(self) -> None:
        assert self.ledger.in_flight_bytes == sum(s for q in self.model.values() for _, s in q)
        assert self.ledger.outstanding(("src", p) for p in self.parts) == sum(len(q) for q in self.model.values())


LedgerMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None, database=None)
TestLedgerMachine = LedgerMachine.TestCase


def test_release_of_a_forgotten_partition_is_a_no_op():
    # a dead-letter or re-send report that arrives after its partition was revoked or lost
    ledger = Ledger({"src": ("a",)})
    ledger.hold(SRC, 4)
    ledger.forget([SRC])
    ledger.release(SRC, 4)
    ledger.hold(SRC, 9)
    ledger.release(SRC, 4)  # not held (any more): nothing to release, 9 stays held
    assert ledger.held == {SRC: {9: 1}}


# ---------------------------------------------------------------------- runs (batching destinations)
def hand_over(ledger: Ledger, offsets: list[int], dests: tuple[str, ...], size: int = 10) -> None:
    """Records handed to a batching destination as one run, as the writer does per fetched record set."""
    ledger.sent_runs({(d, 0): (offsets[0], offsets[-1], len(offsets), size * len(offsets)) for d in dests})
    ledger.consumed({SRC: offsets[-1]})


def test_batches_acknowledge_the_runs_they_cover_whatever_their_bounds():
    ledger = Ledger({"src": ("a",)})
    hand_over(ledger, list(range(0, 100, 2)), ("a",))  # 50 records, gaps (compacted) between
    hand_over(ledger, list(range(100, 130)), ("a",))  # 30 more
    assert ledger.in_flight_bytes == 800 and ledger.outstanding([SRC]) == 80
    assert ledger.committable(SRC) == 0
    # a batch of the first 20 records (0..38), inside the first run
    assert ledger.acked_through("a", 0, 38, 20) == 0
    assert ledger.committable(SRC) == 39 and ledger.outstanding([SRC]) == 60
    # a batch from 40 to 109: the rest of the first run and 10 of the second
    assert ledger.acked_through("a", 0, 109, 40) == 39
    assert ledger.committable(SRC) == 110 and ledger.outstanding([SRC]) == 20
    assert ledger.acked_through("a", 0, 129, 20) == 110
    assert ledger.committable(SRC) == 130 and ledger.outstanding([SRC]) == 0
    assert ledger.in_flight_bytes == 0


def test_runs_hold_the_commit_until_every_destination_has_them():
    ledger = Ledger({"src": ("a", "b")})
    hand_over(ledger, list(range(10)), ("a", "b"))
    ledger.acked_through("a", 0, 9, 10)
    assert ledger.committable(SRC) == 0
    ledger.acked_through("b", 0, 4, 5)
    assert ledger.committable(SRC) == 5
    ledger.acked_through("b", 0, 9, 5)
    assert ledger.committable(SRC) == 10 and ledger.in_flight_bytes == 0
