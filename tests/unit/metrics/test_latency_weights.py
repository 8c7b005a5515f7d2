"""A batch's latency samples give each of its records the same chance (issue 29, item 8): pure logic."""

from __future__ import annotations

from transcoder.kafka.writer.metrics import LATENCY_SAMPLING, batch_latencies
from transcoder.metrics.registry import Metrics
from transcoder.metrics.status import histogram_quantile


class _Section:
    def __init__(self, stamps: list[int]) -> None:
        self.stamps = stamps

    def record(self, i: int) -> tuple[int, int, bytes, bytes, list]:
        return (i, self.stamps[i], b"k", b"v", [])


def test_a_batch_is_sampled_across_its_records_not_by_its_newest():
    # 1,000 records stamped 0..999 ms, acknowledged at 1,000 ms: they waited 1..1,000 ms, 500 ms in the middle.
    samples = batch_latencies(_Section(list(range(1000))), 1000, 1000.0)
    assert len(samples) == 16
    assert sum(w for _, w in samples) == 1000 / LATENCY_SAMPLING  # 1 record in 16, as the record-by-record path
    ages = sorted(a for a, _ in samples)
    assert ages[0] > 900 and ages[-1] < 100 or ages[0] < 100 and ages[-1] > 900  # oldest and newest strata
    m = Metrics().lane("a")
    for age, w in samples:
        m.latency("a.zstd", age / 1000, w)
    f = m.figures("a.zstd")
    assert abs(histogram_quantile(0.5, f.latency_fine_buckets) - 0.5) < 0.05
    assert m.m.registry.get_sample_value("transcoder_end_to_end_latency_seconds_count",
                                         {"lane": "a", "destination": "a.zstd"}) == 1000 / LATENCY_SAMPLING


def test_a_small_batch_is_sampled_whole():
    samples = batch_latencies(_Section([10, 20, 30]), 3, 100.0)
    assert sorted(samples) == [(70.0, 1 / 16), (80.0, 1 / 16), (90.0, 1 / 16)]


def test_weighted_batches_count_by_their_records():
    # A batch of 1,000 records that waited 0.1 s and one of 10 that waited 2 s: the p50 is 0.1 s, not in between.
    m = Metrics().lane("a")
    m.latency("a.zstd", 0.1, 1000 / 16)
    m.latency("a.zstd", 2.0, 10 / 16)
    f = m.figures("a.zstd")
    assert 0.094 < histogram_quantile(0.5, f.latency_fine_buckets) <= 0.1
    assert 0.094 < histogram_quantile(0.98, f.latency_fine_buckets) <= 0.1
