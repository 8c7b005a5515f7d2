"""transcoder.metrics.status and LaneMetrics' own tallies: health, readiness, the /status document, backlog."""

from __future__ import annotations

import time

import pytest

from transcoder.metrics.registry import LATENCY_BUCKETS, Metrics
from transcoder.metrics.status import LaneStatus, document, healthy, histogram_quantile, ready, stalled


def lane_status(name: str = "a", **kw) -> LaneStatus:
    return LaneStatus(name=name, group_id=f"g.{name}", destinations={f"{name}.zstd": (name, "zstd")}, **kw)


def test_histogram_quantile():
    assert histogram_quantile(0.99, []) is None
    assert histogram_quantile(0.5, [(1.0, 0.0), (float("inf"), 0.0)]) is None
    assert histogram_quantile(0.5, [(1.0, 10.0), (2.0, 20.0), (float("inf"), 20.0)]) == pytest.approx(1.0)
    assert histogram_quantile(0.75, [(1.0, 10.0), (2.0, 20.0), (float("inf"), 20.0)]) == pytest.approx(1.5)
    assert histogram_quantile(0.99, [(1.0, 0.0), (float("inf"), 5.0)]) == 1.0  # in +Inf: the highest bound


def test_ready_needs_every_lane_assigned_or_caught_up():
    assert ready([]) == (False, "starting: pre-flight checks and topic provisioning")
    assert ready([lane_status(state="running", assigned=[("a", 0)])]) == (True, "ok")
    assert ready([lane_status(state="running")]) == (False, "lane a has no partitions assigned")
    assert ready([lane_status(state="caught-up")]) == (True, "ok")
    assert ready([lane_status(state="failed", error="boom")]) == (False, "lane a failed: boom")


def test_healthy_until_a_running_loop_is_stuck():
    assert healthy([lane_status(state="running")], 60) == (True, "ok")
    stuck = lane_status(state="running", last_loop=time.monotonic() - 120)
    ok, why = healthy([stuck], 60)
    assert not ok and why.startswith("lane a: loop has not turned for 12")
    assert healthy([lane_status(state="stopped", last_loop=time.monotonic() - 120)], 60) == (True, "ok")


def test_backlog_is_counted_apart_from_latency():
    m = Metrics().lane("a")
    for s in (0.02, 0.02, 0.3, 4.0):
        m.latency("a.zstd", s)
    m.backfill("a.zstd")
    m.backfill("a.zstd")
    f = m.figures("a.zstd")
    assert f.backlog_samples == 2
    assert f.latency_buckets[-1] == (float("inf"), 4.0)
    assert dict(f.latency_buckets)[0.05] == 2.0 and dict(f.latency_buckets)[5.0] == 4.0
    assert len(f.latency_buckets) == len(LATENCY_BUCKETS) + 1
    reg = m.m.registry
    assert reg.get_sample_value("transcoder_backlog_latency_samples_total",
                                {"lane": "a", "destination": "a.zstd"}) == 2.0
    assert reg.get_sample_value("transcoder_end_to_end_latency_seconds_count",
                                {"lane": "a", "destination": "a.zstd"}) == 4.0


def test_status_document_from_snapshots():
    m = Metrics().lane("a")
    m.latency("a.zstd", 0.2)
    m.backfill("a.zstd")
    st = lane_status(state="running", assigned=[("a", 0)], committed={("a", 0): 7}, records=8,
                     acked={"a.zstd": 8}, lag={("a", 0): (3, 1.5)})
    doc = document(group_id="g", lanes_mode="isolated", lanes=[(st, m)], cpu={("a", "loop"): 2.0, ("b", "loop"): 9.0},
                   brokers=None, health=lambda: (True, "ok"), readiness=lambda: (True, "ok"))
    lane = doc["lanes"][0]
    assert lane["committed"] == {"a[0]": 7} and lane["lag_records"] == {"a[0]": 3}
    assert lane["cpu_seconds"] == {"loop": 2.0} and lane["cpu_seconds_per_million_records"] == 2.0 / 8 * 1e6
    dest = lane["destinations"][0]
    assert (dest["topic"], dest["source"], dest["codec"], dest["records_out"]) == ("a.zstd", "a", "zstd", 8)
    assert dest["latency_samples"] == 1 and dest["backlog_latency_samples"] == 1
    assert 0.1 < dest["latency_p99_seconds"] <= 0.25
    assert dest["disk_bytes"] is None and dest["wire_ratio"] is None


def test_a_loop_is_stalled_after_30_s_without_turning_while_running():
    now = time.monotonic()
    lanes = [lane_status(state="running", last_loop=now - 31), lane_status(state="running", last_loop=now - 29),
             lane_status(state="stopped", last_loop=now - 300)]
    lanes[1].name, lanes[2].name = "b", "c"
    assert stalled(lanes, now) == {"a": pytest.approx(31)}
    assert stalled(lanes, now, after_s=10) == {"a": pytest.approx(31), "b": pytest.approx(29)}
