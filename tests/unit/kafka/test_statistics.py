"""librdkafka statistics -> exported figures: batch windows, cumulative bytes, consumer lag."""

from __future__ import annotations

import pytest

from transcoder.kafka.statistics import Window, consumer_lag, producer_topics

WINDOW = {"min": 2805, "max": 18724, "avg": 13350, "sum": 80100, "cnt": 6, "p50": 14000, "p75": 16000,
          "p90": 18000, "p95": 18500, "p99": 18724, "p99_99": 18724}


def producer_stats(batchsize=WINDOW, batchcnt=None, parts=None):
    return {"topics": {"logs.zstd": {
        "batchsize": batchsize,
        "batchcnt": batchcnt or {"min": 1000, "max": 5000, "sum": 20000, "cnt": 6, "p50": 3000},
        "partitions": parts or {
            "0": {"txbytes": 2_000_000, "txmsgs": 10_000},
            "1": {"txbytes": 2_088_890, "txmsgs": 10_000},
            "-1": {"txbytes": 999, "txmsgs": 9},
        },
    }}}


def test_producer_topics_reads_windows_and_cumulative_totals():
    t = producer_topics(producer_stats())["logs.zstd"]
    assert (t.batch_bytes.count, t.batch_bytes.total) == (6, 80100.0)
    assert (t.batch_records.count, t.batch_records.total) == (6, 20000.0)
    assert t.record_bytes_total == 4_088_890  # the -1 (unassigned) queue is not a partition
    assert t.records_total == 20_000


def test_empty_statistics():
    assert producer_topics({}) == {}
    assert consumer_lag({"topics": {}}) == {}
    t = producer_topics({"topics": {"x": {}}})["x"]
    assert (t.batch_bytes.count, t.record_bytes_total) == (0, 0)


def test_window_buckets_are_exact_at_percentiles_and_ends():
    w = Window.of(WINDOW)
    assert w.cumulative_counts([2804, 2805, 14000, 16000, 18724, 10**9]) == pytest.approx([0, 0, 3, 4.5, 6, 6])


def test_window_buckets_interpolate_and_are_monotone():
    w = Window.of(WINDOW)
    counts = w.cumulative_counts([1000, 5000, 8000, 12000, 15000, 17000, 18600, 20000])
    assert counts == sorted(counts)
    assert counts[0] == 0 and counts[-1] == 6
    assert counts[3] == pytest.approx(3 * (12000 - 2805) / (14000 - 2805))


def test_window_with_repeated_percentiles_and_no_values():
    w = Window.of({"min": 10, "max": 10, "cnt": 4, "sum": 40, "p50": 10, "p99": 10})
    assert w.cumulative_counts([9, 10, 11]) == [0, 4, 4]
    assert Window.of({"cnt": 0}).cumulative_counts([1, 2]) == [0.0, 0.0]


def test_consumer_lag_per_partition_skips_unknown():
    stats = {"topics": {"logs": {"partitions": {
        "0": {"consumer_lag": 9000, "desired": True},
        "1": {"consumer_lag": 0, "desired": True},
        "2": {"consumer_lag": -1, "desired": True},
        "3": {"consumer_lag": 50, "desired": False},
        "-1": {"consumer_lag": 7},
    }}}}
    assert consumer_lag(stats) == {("logs", 0): 9000, ("logs", 1): 0}


def test_window_from_values_is_exact():
    w = Window.from_values([400, 100, 300, 200] * 25)  # 100 values
    assert (w.count, w.total, w.minimum, w.maximum) == (100, 25_000.0, 100.0, 400.0)
    assert dict(w.percentiles) == {0.5: 200.0, 0.75: 300.0, 0.9: 400.0, 0.95: 400.0, 0.99: 400.0, 0.9999: 400.0}
    assert w.cumulative_counts([100, 400]) == [0.0, 100.0]


def test_window_from_one_value_and_from_none():
    assert Window.from_values([7]).percentiles == tuple((f, 7.0) for f in (0.5, 0.75, 0.9, 0.95, 0.99, 0.9999))
    assert Window.from_values([]) == Window(count=0, total=0.0, minimum=0.0, maximum=0.0, percentiles=())
