"""What an engine reports of a lane's progress: its counters and committed offsets, against the start end offsets."""

from __future__ import annotations

from transcoder.engine.progress import lane_progress
from transcoder.metrics.status import LaneStatus

ENDS = {("src", 0): (0, 600), ("src", 1): (100, 500)}


def status(**fields) -> LaneStatus:
    return LaneStatus(name="zstd", group_id="g", destinations={"src.zstd": ("src", "zstd")}, **fields)


def test_a_running_lane_reports_its_counters_and_the_offsets_left_below_the_start_ends():
    st = status(state="running", records=700, source_bytes=70_000, committed={("src", 0): 450, ("src", 1): 350})
    p = lane_progress(st, ENDS)
    assert (p.lane, p.state, p.records, p.source_bytes, p.remaining) == ("zstd", "running", 700, 70_000, 150 + 150)
    assert p.fraction == 700 / 1000


def test_a_lane_caught_up_has_nothing_left_whatever_its_last_offsets_are():
    # the last offset of partition 1 is a transaction marker: the commit stops one short, the lane is caught up
    st = status(state="caught-up", records=999, committed={("src", 0): 600, ("src", 1): 499})
    assert lane_progress(st, ENDS).remaining == 0
    assert lane_progress(st, ENDS).fraction == 1.0


def test_without_start_ends_there_is_nothing_to_reach():
    p = lane_progress(status(state="running", records=5), None)
    assert p.remaining is None and p.fraction is None
