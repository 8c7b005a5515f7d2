"""transcoder.pipeline.commits: which offsets a checkpoint commits, per guarantee."""

from __future__ import annotations

from transcoder.pipeline import commits
from transcoder.pipeline.commits import (
    acknowledged_offsets,
    read_offsets,
    release_offsets,
    rewind_offset,
)
from transcoder.pipeline.ledger import Ledger

A0, A1 = ("src", 0), ("src", 1)


def _ledger_with(sent: dict[int, range], acked: dict[int, int]) -> Ledger:
    """Records of src's partitions sent to destinations d1 and d2; `acked[p]` of each acknowledged by d1 only."""
    ledger = Ledger({"src": ("d1", "d2")})
    for p, offsets in sent.items():
        ledger.sent({(d, p): [(o, 10) for o in offsets] for d in ("d1", "d2")}, 20 * len(offsets))
        ledger.consumed({("src", p): offsets[-1]})
        for _ in range(acked.get(p, 0)):
            ledger.acked("d1", p)
    return ledger


def test_at_least_once_commits_nothing_past_an_unacknowledged_record():
    ledger = _ledger_with({0: range(10)}, {0: 10})  # d1 acknowledged all ten, d2 none
    assert acknowledged_offsets([A0], {A0: 10}, ledger, {}) == {A0: 0}  # d2 still owes record 0
    for _ in range(4):
        ledger.acked("d2", 0)
    assert acknowledged_offsets([A0], {A0: 10}, ledger, {}) == {A0: 4}


def test_at_least_once_commits_the_read_position_once_everything_is_acknowledged():
    ledger = _ledger_with({0: range(10)}, {0: 10})
    for _ in range(10):
        ledger.acked("d2", 0)
    # the position may be past the last record read (transaction markers, compacted gaps)
    assert acknowledged_offsets([A0], {A0: 12}, ledger, {}) == {A0: 12}
    assert acknowledged_offsets([A0], {A0: None}, ledger, {}) == {A0: 10}
    assert acknowledged_offsets([A0], {A0: -1001}, ledger, {}) == {A0: 10}


def test_at_least_once_commits_only_past_the_last_commit_and_never_a_withheld_partition():
    ledger = _ledger_with({0: range(10), 1: range(5)}, {})
    for p, n in ((0, 10), (1, 5)):
        for d in ("d1", "d2"):
            for _ in range(n):
                ledger.acked(d, p)
    assert acknowledged_offsets([A0, A1], {}, ledger, {A0: 10, A1: 3}) == {A1: 5}
    assert acknowledged_offsets([A0, A1], {}, ledger, {}, withheld={A1}) == {A0: 10}


def test_at_least_once_nothing_for_a_partition_never_read():
    assert acknowledged_offsets([A0], {A0: 7}, Ledger({"src": ("d1",)}), {}) == {}


def test_exactly_once_commits_read_positions_past_the_last_commit():
    assert read_offsets([A0, A1], {A0: 10, A1: 4}, {A1: 4}) == {A0: 10}
    assert read_offsets([A0, A1], {A0: None, A1: -1001}, {}) == {}
    assert read_offsets([A0, A1], {A0: 10, A1: 8}, {}, withheld={A0}) == {A1: 8}


def test_rewind_goes_to_the_last_commit_else_to_the_first_record_read():
    assert rewind_offset(A0, {A0: 40}, {A0: 7}) == 40
    assert rewind_offset(A0, {}, {A0: 7}) == 7
    assert rewind_offset(A0, {A1: 3}, {}) is None


def test_release_offsets_are_the_known_commits_of_every_partition_or_none():
    known = {("t", 0): 7, ("t", 1): 0}
    assert release_offsets([("t", 0), ("t", 1)], known) == {("t", 0): 7, ("t", 1): 0}
    assert release_offsets([("t", 0), ("t", 2)], known) is None  # ("t", 2): never committed here: abort
    assert release_offsets([], known) is None


def test_a_replayed_run_goes_on_at_the_groups_committed_offset():
    offsets = [3, 4, 7, 8, 12]  # gaps: a compacted or transactional source
    assert commits.first_uncommitted(offsets, None) == 0  # never committed: all of it
    assert commits.first_uncommitted(offsets, 2) == 0
    assert commits.first_uncommitted(offsets, 7) == 2  # 3 and 4 are in a committed transaction
    assert commits.first_uncommitted(offsets, 5) == 2  # a committed offset inside a gap
    assert commits.first_uncommitted(offsets, 13) == 5  # all of it committed: nothing to write
    assert commits.first_uncommitted([], 13) == 0


def test_a_transactional_id_is_the_groups_and_the_partitions_in_any_order():
    a = commits.transactional_id("g", [("t", 1), ("t", 0)])
    assert a == commits.transactional_id("g", [("t", 0), ("t", 1)])
    assert a.startswith("transcoder-g-")
    others = {commits.transactional_id("g", [("t", 0)]), commits.transactional_id("h", [("t", 0), ("t", 1)])}
    assert len({a} | others) == 3
