"""How far a one-shot copy is: offsets left, the share done, the rate and the time left (pure maths)."""

from __future__ import annotations

import pytest

from transcoder.pipeline.progress import LaneProgress, Rate, eta_seconds, fraction_done, remaining, span

ENDS = {("a", 0): (0, 1000), ("a", 1): (200, 500), ("b", 0): (50, 50)}  # (low, high) when the run started


def test_remaining_is_the_start_end_offsets_minus_the_committed_positions():
    assert remaining(ENDS, {}) == 1000 + 300  # nothing committed: from each partition's low watermark
    assert remaining(ENDS, {("a", 0): 400, ("a", 1): 250}) == 600 + 250
    # committed past the start end (records produced since): nothing left there, never a negative count
    assert remaining(ENDS, {("a", 0): 1500, ("a", 1): 500}) == 0
    # a position below the low watermark (retention deleted what it pointed at) counts from the low watermark
    assert remaining({("a", 1): (200, 500)}, {("a", 1): 10}) == 300


def test_the_share_done_is_of_the_sources_offsets_at_start_committed():
    assert span(ENDS) == 1000 + 300
    assert fraction_done(1000, 1000) == 0.0
    assert fraction_done(1000, 750) == 0.25
    assert fraction_done(1000, 0) == 1.0
    assert fraction_done(0, 0) == 1.0  # nothing to copy: done
    assert fraction_done(None, 10) is None and fraction_done(1000, None) is None  # no end to reach
    # a run resuming from an earlier commit: the share of the topic done, not of this run's records
    assert LaneProgress("l", "running", records=300, source_bytes=9000, remaining=100, total=4000).fraction == 0.975


@pytest.mark.parametrize(("left", "rate", "eta"), [
    (1000, 100.0, 10.0), (0, None, 0.0), (0, 0.0, 0.0), (500, 0.0, None), (500, None, None), (None, 100.0, None),
])
def test_the_time_left_is_what_is_left_at_the_rate(left, rate, eta):
    assert eta_seconds(left, rate) == eta


def test_the_rate_is_the_slope_over_the_window():
    r = Rate(window_s=10)
    assert r.per_second() is None
    r.add(0.0, 0)
    assert r.per_second() is None  # one reading: no slope
    for t in range(1, 21):  # 100 records a second for 20 s
        r.add(float(t), 100 * t)
    assert r.per_second() == pytest.approx(100.0)
    for t in range(21, 41):  # then 10 a second: after a window the old pace is gone
        r.add(float(t), 2000 + 10 * (t - 20))
    assert r.per_second() == pytest.approx(10.0)
    r.add(41.0, 2200)  # a reading held back (the same count): a stall lowers the rate, never below 0
    assert 0 <= r.per_second() < 10.0


def test_the_rate_spans_the_whole_window_and_no_more():
    r = Rate(window_s=10)
    for t in range(0, 21):
        r.add(t * 0.5, 0)  # a stall for 10 s
    for t in range(21, 41):
        r.add(t * 0.5, 2 * (t - 20))  # then 4 records a second for 10 s, a reading every half second
    assert r.per_second() == pytest.approx(4.0)  # the stall left the window whole
    r = Rate(window_s=10)
    r.add(0.0, 0)
    r.add(4.0, 40)
    assert r.per_second() == pytest.approx(10.0)  # a window not yet full: the readings there are
