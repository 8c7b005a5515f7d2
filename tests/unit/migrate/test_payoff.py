"""migrate.payoff and its rendering: the figures, the savings and the report of a migration's state (pure)."""

from __future__ import annotations

import json

import pytest

from transcoder.errors import MigrationError
from transcoder.kafka.offset_map_topic import CopierFigures, LaneHealth, decode_health
from transcoder.migrate import payoff_report
from transcoder.migrate.payoff import (
    FORMAT_VERSION,
    Copier,
    Prediction,
    Reading,
    TopicSize,
    copier_cpu,
    figures,
    payoff,
    reading_key,
    savings,
)
from transcoder.migrate.plan import TopicFacts
from transcoder.migrate.realized import reading

DAY = 86_400_000


def _prediction(**kw) -> Prediction:
    base = dict(codec="zstd", level=3, batch_max_bytes=1_048_576, records=20_000, record_bytes=4_000_000,
                stored_bytes=500_000, compress_cpu_s_per_1m=1.5, source_bytes_per_record=100.0,
                sample="20,000 records of logs (partition:offsets 0:0-9999, 1:0-9999)", at_ms=1_000)
    base.update(kw)
    return Prediction(**base)


def _reading(at_ms: int, *, src_disk: int, src_records: int, src_end: int, copy_disk: int, copy_records: int,
             copier: Copier | None = None, step: str = "verify", lag: int | None = 0) -> Reading:
    return Reading(at_ms=at_ms, step=step, source=TopicSize(src_disk, src_records, 3, src_end),
                   copy=TopicSize(copy_disk, copy_records, 3, copy_records), copier=copier, lag_records=lag)


def test_the_prediction_s_figures_are_its_sample_s_bytes_over_records():
    p = _prediction()
    assert p.ratio == 4_000_000 / 500_000 == 8.0
    assert p.bytes_per_record == 500_000 / 20_000 == 25.0
    assert p.disk_ratio == 100.0 / 25.0
    assert _prediction(source_bytes_per_record=None).disk_ratio is None


def test_a_reading_s_figures_per_record_and_replica():
    r = _reading(5_000, src_disk=3 * 100 * 1_000, src_records=1_000, src_end=1_000, copy_disk=3 * 26 * 900,
                 copy_records=900, copier=Copier(records=900, record_bytes=900 * 200, wire_bytes=900 * 27,
                                                 cpu_s=0.9, at_ms=4_000))
    assert r.source.bytes_per_record == 100.0 and r.copy.bytes_per_record == 26.0
    assert r.disk_ratio == pytest.approx(100 / 26)
    assert r.ratio == pytest.approx(200 / 26)  # the copier's average record over the copy's stored bytes per record
    assert r.wire_bytes_per_record == 27.0
    assert r.cpu_s_per_1m == pytest.approx(1000.0)
    # nothing to divide: no figure, never a zero
    empty = _reading(1, src_disk=0, src_records=0, src_end=0, copy_disk=0, copy_records=0,
                     copier=Copier(0, 0, 0, None, 1))
    assert (empty.disk_ratio, empty.ratio, empty.wire_bytes_per_record, empty.cpu_s_per_1m) == (None,) * 4


def test_figures_difference_is_realized_over_predicted_minus_one():
    p = _prediction()
    r = _reading(5_000, src_disk=3 * 100 * 1_000, src_records=1_000, src_end=1_000, copy_disk=3 * 26 * 1_000,
                 copy_records=1_000, copier=Copier(1_000, 1_000 * 200, 1_000 * 25, 2.0, 4_000))
    by = {f.name: f for f in figures(p, r)}
    assert by["stored bytes per record"].predicted == 25.0 and by["stored bytes per record"].realized == 26.0
    assert by["stored bytes per record"].difference == pytest.approx(0.04)
    assert by["disk ratio"].difference == pytest.approx((100 / 26) / 4.0 - 1)
    assert by["CPU s per 1M records"].realized == pytest.approx(2000.0)
    assert by["CPU s per 1M records"].difference is None  # compression alone against a whole lane: not compared
    assert by["ratio"].line() == f"ratio 8.00x predicted, {200 / 26:.2f}x realized, {((200 / 26) / 8 - 1) * 100:+.1f}%"
    assert {f.name: f.difference for f in figures(None, r)}["ratio"] is None


def test_savings_per_day_from_the_source_s_end_offsets_between_the_first_and_last_reading():
    first = _reading(0, src_disk=3 * 100 * 1_000, src_records=1_000, src_end=1_000, copy_disk=0, copy_records=0)
    last = _reading(DAY // 2, src_disk=3 * 100 * 3_000, src_records=3_000, src_end=3_000,
                    copy_disk=3 * 20 * 3_000, copy_records=3_000)
    s = savings([first, last])
    assert s.records_per_day == 4_000  # 2,000 records in half a day
    assert s.disk_saved_bytes == (100 - 20) * 3_000 * 3
    assert s.disk_saved_bytes_per_day == 4_000 * 80 * 3
    assert savings([]).disk_saved_bytes is None


def test_the_copier_s_cpu_adds_each_lane_run_s_last_figure():
    def at(t: int, cpu: float | None) -> Reading:
        return _reading(t, src_disk=1, src_records=1, src_end=1, copy_disk=1, copy_records=1,
                        copier=Copier(10, 10, 10, cpu, t))
    # 5 s, then 9 s; the lane restarted (its counters began again): 3 s, then 4 s -> 9 + 4
    assert copier_cpu([at(1, 5.0), at(2, 9.0), at(3, 3.0), at(4, 4.0)]) == 13.0
    assert copier_cpu([at(1, None)]) is None


def test_stored_forms_round_trip_and_a_newer_version_is_refused_in_one_line():
    p = _prediction()
    assert Prediction.from_dict(json.loads(json.dumps(p.as_dict()))) == p
    r = _reading(7, src_disk=1, src_records=1, src_end=1, copy_disk=1, copy_records=1,
                 copier=Copier(1, 2, 3, 0.5, 6), step="cutover:app")
    assert Reading.from_dict(json.loads(json.dumps(r.as_dict()))) == r
    assert reading_key(r) == "reading/000000000000007"
    newer = {**p.as_dict(), "version": FORMAT_VERSION + 1}
    with pytest.raises(MigrationError, match=r"format version 2, this one reads up to 1"):
        Prediction.from_dict(newer)
    older = {k: v for k, v in p.as_dict().items() if k != "version"}  # no version: the first format
    assert Prediction.from_dict(older) == p


def test_a_reading_from_the_facts_gathered():
    src = TopicFacts("logs", 2, 3, records=1_000, disk_bytes=300_000, end_offsets=1_200)
    dst = TopicFacts("logs.zstd", 2, 3, records=900, disk_bytes=54_000, end_offsets=900)
    health = LaneHealth("logs.zstd", 0, None, 55, CopierFigures(900, 180_000, 20_000, 1.25))
    r = reading("cutover:app", src, dst, health, at_ms=60, lane_committed={0: 500, 1: 550},
                source_ends={0: 600, 1: 600}, groups_moved=1)
    assert r.source == TopicSize(300_000, 1_000, 3, 1_200) and r.copy == TopicSize(54_000, 900, 3, 900)
    assert r.copier == Copier(900, 180_000, 20_000, 1.25, 55)
    assert r.lag_records == 100 + 50
    assert reading("x", src, dst, None, at_ms=1, lane_committed=None, source_ends={}, groups_moved=0).copier is None


def test_the_health_record_of_an_earlier_version_has_no_figures():
    where = {"topic": "m", "partition": 0, "offset": 7}
    old = decode_health(json.dumps({"errors_total": 2, "last_error_ms": 5, "at_ms": 9}).encode(), "d", **where)
    assert old == LaneHealth("d", 2, 5, 9, None)
    new = decode_health(json.dumps({"v": 1, "errors_total": 0, "last_error_ms": None, "at_ms": 9, "copier": {
        "records": 4, "record_bytes": 40, "wire_bytes": 12, "cpu_s": None}}).encode(), "d", **where)
    assert new.copier == CopierFigures(4, 40, 12, None)


def _state() -> dict:
    p = _prediction()
    r1 = _reading(1_000, src_disk=3 * 100 * 1_000, src_records=1_000, src_end=1_000, copy_disk=3 * 26 * 500,
                  copy_records=500, copier=Copier(500, 100_000, 13_000, 1.0, 900), step="start", lag=500)
    r2 = _reading(2_000, src_disk=3 * 100 * 1_000, src_records=1_000, src_end=1_000, copy_disk=3 * 26 * 1_000,
                  copy_records=1_000, copier=Copier(1_000, 200_000, 26_000, 2.0, 1_900), step="cutover:app", lag=7)
    return {"migration": {"source": "logs", "destination": "logs.zstd", "codec": "zstd-3", "stage": "shadow",
                          "started_ms": 500},
            "prediction": p.as_dict(), reading_key(r2): r2.as_dict(), reading_key(r1): r1.as_dict(),
            "group/app": {"stage": "destination", "moved_ms": 2_000, "history": [["source", 600],
                                                                                ["destination", 2_000]]},
            "group/other": {"stage": "source", "history": [["source", 600]]},
            "verify/0": {"verified_through": 500, "at_ms": 1}, "verify/1": {"verified_through": 480, "at_ms": 1}}


def test_the_payoff_of_a_state_in_time_order():
    p = payoff(_state(), migration="logs.zstd")
    assert [r.step for r in p.readings] == ["start", "cutover:app"]
    assert [(g.group, g.stage) for g in p.groups] == [("app", "destination"), ("other", "source")]
    assert p.verified_through == {0: 500, 1: 480}
    assert p.cutovers == (("app", 2_000, 7),)
    assert {f.name: f.realized for f in p.figures}["stored bytes per record"] == 26.0
    assert p.savings.cpu_s == 2.0
    with pytest.raises(MigrationError, match="has no state"):
        payoff({}, migration="x")


def test_the_report_renders_every_figure_and_a_self_contained_page():
    p = payoff(_state(), migration="logs.zstd")
    md = payoff_report.markdown(p)
    assert "| stored bytes per record | 25.0 B | 26.0 B | +4.0% |" in md
    assert "cutover of app at" in md and "lagged 7 records" in md
    doc = payoff_report.as_dict(p)
    assert json.loads(json.dumps(doc, default=str))["figures"][1]["difference"] == pytest.approx(0.04)
    page = payoff_report.page(p)
    assert page.count('src="data:image/png;base64,') == 3 and "<script" not in page and "http" not in page
    disk = payoff_report.disk_figure(p.readings)
    lines = {ln.get_gid(): ln for ln in disk.axes[0].get_lines()}
    assert list(lines["disk:copy"].get_ydata()) == [3 * 26 * 500 / 1e6, 3 * 26 * 1_000 / 1e6]
    bars = {b.get_gid(): b.get_width() for b in payoff_report.figures_figure(p.figures).axes[0].patches}
    assert bars["ratio:stored bytes per record"] == pytest.approx(4.0)  # +4%
