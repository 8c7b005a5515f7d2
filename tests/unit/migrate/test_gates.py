"""The cutover gates and the translation of a group's offsets (pure)."""

from __future__ import annotations

import pytest

from transcoder.errors import MigrationError
from transcoder.migrate import gates
from transcoder.pipeline.offset_runs import PartitionMap, Run


def facts(**over) -> gates.GateFacts:
    base = dict(group="g", members=(), committed={0: 40, 1: 50}, lane_committed={0: 100, 1: 100},
                source_ends={0: 100, 1: 100}, verified_through={0: 100, 1: 100}, map_source_end={0: 100, 1: 100},
                mismatch=None, last_error_ms=None, now_ms=1_000_000, max_lag_records=10, error_window_s=60)
    return gates.GateFacts(**{**base, **over})


def test_a_group_passes_when_everything_holds() -> None:
    assert gates.failed(facts()) == []


@pytest.mark.parametrize(("over", "name", "words"), [
    ({"members": ("app-1@/10.0.0.7",)}, "members", "app-1@/10.0.0.7"),
    ({"lane_committed": {0: 30, 1: 100}, "max_lag_records": 100}, "copied", "partition 0 only up to offset 30"),
    ({"source_ends": {0: 100, 1: 200}}, "lag", "lags 100 records on partition 1"),
    ({"verified_through": {0: 39, 1: 100}, "map_source_end": {0: 45, 1: 100}}, "verified", "offset 39 of partition 0"),
    ({"mismatch": "partition 0: source offset 7 / destination offset 7: value differs"}, "mismatch", "offset 7"),
    ({"last_error_ms": 1_000_000 - 5_000}, "errors", "5 s ago"),
])
def test_each_gate_names_what_is_wrong(over, name, words) -> None:
    (gate,) = gates.failed(facts(**over))
    assert gate.name == name and words in gate.detail


def test_a_partition_never_written_to_needs_no_copy() -> None:
    f = facts(committed={0: 40, 2: 0}, lane_committed={0: 100}, source_ends={0: 100, 2: 0},
              verified_through={0: 100, 2: 0}, map_source_end={0: 100})
    assert gates.failed(f) == []


def test_verification_at_the_end_of_the_copy_reaches_a_group_past_trailing_markers() -> None:
    # the group is at 100 (after a commit marker at 99); the last record copied is 98
    f = facts(committed={0: 100}, verified_through={0: 99}, map_source_end={0: 99}, lane_committed={0: 100},
              source_ends={0: 100})
    assert gates.failed(f) == []
    spark = facts(committed={0: 100}, verified_through={0: 99}, map_source_end={0: 99}, lane_committed=None,
                  source_ends={0: 100})
    assert [g.name for g in gates.failed(spark)] == ["verified"]


def test_forward_and_backward_translate_per_partition() -> None:
    maps = {0: PartitionMap([Run(0, 0, 10)]), 1: PartitionMap([Run(5, 0, 3), Run(10, 3, 5)])}
    assert gates.forward("g", {0: 4, 1: 9}, maps, {0: 4, 1: 10}, {}) == {0: 4, 1: 3}
    assert gates.forward("g", {0: 10}, maps, {0: None}, {0: 10}) == {0: 10}  # at the end
    assert gates.backward("g", {0: 4, 1: 3}, maps, {}) == {0: 4, 1: 10}


def test_forward_refuses_records_copied_before_the_map() -> None:
    maps = {0: PartitionMap([Run(50, 0, 10)])}
    with pytest.raises(MigrationError, match="map starts at source offset 50"):
        gates.forward("g", {0: 10}, maps, {0: 10}, {})
    assert gates.forward("g", {0: 10}, maps, {0: 50}, {}) == {0: 0}  # 10..49 do not exist (compacted away)
    with pytest.raises(MigrationError, match="no offset map"):
        gates.forward("g", {0: 3}, {}, {0: 3}, {})


# ---------------------------------------------------------------- never backwards
def test_rewinds_are_the_partitions_translated_below_the_current_commit() -> None:
    from transcoder.migrate.gates import Rewind, rewinds

    assert rewinds({}, {0: 7000}) == []  # no commit there yet: nothing to rewind
    assert rewinds({0: 7000, 1: 5}, {0: 7000, 1: 9}) == []  # the same, or forward
    assert rewinds({0: 37354, 1: 18127, 2: 8134}, {0: 7000, 1: 18127, 2: 7000}) == [
        Rewind(0, 37354, 7000), Rewind(2, 8134, 7000)]
    assert rewinds({3: 10}, {0: 1}) == []  # a partition not committed on is not compared


def test_the_rewind_line_names_group_topic_partition_and_both_offsets() -> None:
    from transcoder.migrate.gates import Rewind, rewind_line

    line = rewind_line("cutover", "g2", "orders.zstd", [Rewind(0, 37354, 7000), Rewind(1, 18127, 7000),
                                                         Rewind(2, 8134, 7000)])
    assert "\n" not in line
    assert line.startswith("cutover of group g2 refused: it would move the group backwards on orders.zstd [0] from "
                           "its committed offset 37354 to 7000 (and 2 more partition(s)), delivering 42,615 record(s) "
                           "again")
