"""bench.spans (pure): the warm boundary picked from samples, the records and CPU interpolated at it, the
whole and warmed spans, the fall-back of a copy too short to warm; and bench.measure's sampling on a
scripted clock, broker and copier (no broker, no sleeping)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench import measure
from bench.copiers import Running
from bench.spans import Sample, Span, WarmRule, at, time_at_records, warm_boundary, warmed_span, whole_span

RECORDS = 1_000_000

#: A copier warming up: 10,000 records/s at 0.1 CPU s per 1,000 records for its first 4 s, then
#: 50,000/s, then 100,000/s at 5 CPU s per 1M. Its first record lands at t=101.
SAMPLES = [
    Sample(100.0, 0, 1.0, 50.0),
    Sample(101.0, 10_000, 2.0, 51.0),
    Sample(105.0, 50_000, 6.0, 52.0),
    Sample(109.0, 250_000, 8.0, 53.0),
    Sample(111.0, 350_000, 9.0, 54.0),  # 30% (300,000) is crossed half-way from 109 to 111: t=110
    Sample(113.0, 550_000, 10.0, 55.0),
    Sample(117.0, 950_000, 12.0, 57.0),
    Sample(117.5, 1_000_000, 12.25, 57.25),
]


def test_time_at_records_interpolates_the_crossing():
    assert time_at_records(SAMPLES, 300_000) == pytest.approx(110.0)
    assert time_at_records(SAMPLES, 5_000) == pytest.approx(100.5)
    assert time_at_records(SAMPLES, 350_000) == 111.0  # on a sample
    assert time_at_records(SAMPLES, 0) == 100.0
    assert time_at_records(SAMPLES, 2_000_000) is None


def test_records_and_cpu_are_interpolated_in_time():
    s = at(SAMPLES, 111.5)
    assert (s.records, s.cpu, s.broker_cpu) == (pytest.approx(400_000), pytest.approx(9.25), pytest.approx(54.25))
    assert at(SAMPLES, 50.0) == SAMPLES[0] and at(SAMPLES, 200.0) == SAMPLES[-1]  # clamped
    assert at([Sample(0.0, 0, 0.0), Sample(2.0, 10, 4.0)], 1.0).broker_cpu is None


def test_whole_span_runs_from_the_first_sample_with_a_record():
    w = whole_span(SAMPLES, RECORDS)
    assert w == Span(start=0.0, records=1_000_000, seconds=16.5, cpu_seconds=10.25, broker_cpu_seconds=6.25)
    assert w.records_per_s == pytest.approx(60_606.06, abs=0.01)


def test_boundary_is_the_later_of_the_record_share_and_the_time_floor():
    assert warm_boundary(SAMPLES, RECORDS) == 111.0  # 10 s after the first record, later than 30% (t=110)
    assert warm_boundary(SAMPLES, RECORDS, WarmRule(seconds=5.0)) == pytest.approx(110.0)  # 30% later than 106
    assert warm_boundary(SAMPLES, RECORDS, WarmRule(fraction=0.5, seconds=0.0)) == pytest.approx(112.5)
    assert warm_boundary(SAMPLES[:4], RECORDS) is None  # the destination never held 30%


def test_warmed_span_leaves_the_warm_up_out():
    span, note = warmed_span(SAMPLES, RECORDS)
    assert note is None
    assert span == Span(start=10.0, records=650_000, seconds=6.5, cpu_seconds=3.25, broker_cpu_seconds=3.25)
    assert span.records_per_s == pytest.approx(100_000)
    assert span.cpu_per_1m == pytest.approx(5.0)  # the whole copy's is 10.25
    assert span.broker_cpu_per_1m == pytest.approx(5.0)


def test_warmed_span_from_an_interpolated_boundary():
    span, note = warmed_span(SAMPLES, RECORDS, WarmRule(seconds=10.5))  # t=111.5, between two samples
    assert note is None
    assert (span.start, span.records, span.seconds) == (pytest.approx(10.5), pytest.approx(600_000), 6.0)
    assert (span.cpu_seconds, span.broker_cpu_seconds) == (pytest.approx(3.0), pytest.approx(3.0))
    span, _ = warmed_span(SAMPLES, RECORDS, WarmRule(seconds=5.0))  # t=110, where 30% was crossed
    assert (span.records, span.seconds, span.cpu_seconds) == (pytest.approx(700_000), 7.5, pytest.approx(3.75))


def test_a_copy_too_short_to_warm_falls_back_to_the_whole_span_with_a_note():
    # 15 s after the first record: 150,000 records (15%) in 1.5 s remain
    span, note = warmed_span(SAMPLES, RECORDS, WarmRule(seconds=15.0))
    assert span == whole_span(SAMPLES, RECORDS)
    assert note is not None and note.startswith("too short to warm (16.5 s from the first record to the last; "
                                                "from 15.0 s it would hold 15% in 1.5 s;")
    # enough records (20% >= 10%) but 2 s < 3 s: still too short
    span, note = warmed_span(SAMPLES, RECORDS, WarmRule(fraction=0.8, seconds=0.0, min_fraction=0.1))
    assert note is not None and span.seconds == 16.5
    # the boundary at the last sample: nothing after it
    span, note = warmed_span(SAMPLES, RECORDS, WarmRule(seconds=30.0))
    assert note is not None and span.start == 0.0
    assert "; the boundary, 30.0 s after the first record, comes after the last; " in note


def test_no_record_seen_is_an_error():
    with pytest.raises(ValueError):
        whole_span([Sample(0.0, 0, 0.0)], 10)


class Clock:
    """time for bench.measure: each record count takes 0.02 s, each sleep its poll."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_measure_copy_samples_count_and_cpu_and_computes_both_spans(monkeypatch):
    clock = Clock()
    counts = iter([0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000])

    def record_count(admin, topic):
        clock.now += 0.02
        return next(counts)

    # the copier burns 0.5 CPU s per second, the broker 0.1: the CPU read on both sides of the count
    # averages to the CPU at the sample's time
    monkeypatch.setattr(measure, "time", clock)
    monkeypatch.setattr(measure, "record_count", record_count)
    monkeypatch.setattr(measure, "process_cpu", lambda pid: clock.now * (0.5 if pid == 11 else 0.1))
    proc = SimpleNamespace(pid=11, poll=lambda: None, args=["copier"])
    running = Running("dest", [proc])  # type: ignore[list-item]
    info = SimpleNamespace(topic_sizes=lambda topics: {t: 4096 for t in topics})
    r = measure.measure_copy(None, info, running, copier="mm2", codec="lz4", records=1000, uncompressed_bytes=9,
                             launched=-1.0, timeout=60, broker_pid=22, poll_s=1.0,
                             rule=WarmRule(fraction=0.3, seconds=2.0, min_seconds=1.0))
    # samples at k * 1.02 + 0.01 holding 100 k records: the first record at 1.03, the last at 10.21
    assert r.startup_seconds == pytest.approx(2.03)
    assert r.seconds == pytest.approx(9.18)
    assert (r.cpu_seconds, r.broker_cpu_seconds) == (pytest.approx(4.59), pytest.approx(0.918))
    assert r.disk_bytes == 4096 and r.warm_note is None
    # 30% (300 records, t=3.07) is later than 2 s after the first record (3.03)
    w = r.warm
    assert (w.start, w.records, w.seconds) == (pytest.approx(2.04), pytest.approx(700), pytest.approx(7.14))
    assert (w.cpu_seconds, w.broker_cpu_seconds) == (pytest.approx(3.57), pytest.approx(0.714))


def test_shortest_copy_that_warms_and_the_count_suggested():
    from bench.figures import CopyRun, count_to_warm
    from bench.spans import min_copy_seconds

    assert min_copy_seconds() == 13.0  # 10 s floor + 3 s of warmed span (12.5 s would do for 20% alone)
    assert min_copy_seconds(WarmRule(seconds=0.0)) == pytest.approx(3 / 0.7)  # the 3 s after 30%
    assert min_copy_seconds(WarmRule(seconds=20.0)) == 25.0  # 20% of the records after 20 s
    assert min_copy_seconds(WarmRule(fraction=0.9)) == float("inf")  # 10% left < 20%

    def copy(seconds: float, note: str | None) -> CopyRun:
        return CopyRun("mm2", "lz4", 200_000, 1, seconds, 1.0, 1.0, 1, warm_note=note)

    # the fastest too-short copy: 200,000 in 1.6 s = 125,000/s, x 13 s = 1,625,000 -> 1,700,000
    runs = [copy(4.0, "too short"), copy(1.6, "too short"), copy(0.5, None)]
    assert count_to_warm(runs, WarmRule()) == 1_700_000
    assert count_to_warm([copy(0.5, None)], WarmRule()) is None
