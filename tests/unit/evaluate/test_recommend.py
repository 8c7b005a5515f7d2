"""The cost model and the recommendation, on a fixed grid: figures and words."""

from __future__ import annotations

import pytest

from tests.unit.evaluate.fixed_grid import GRID, GZIP6, LZ4, LZ4_16K, NONE, ZSTD3, ZSTD19
from transcoder.errors import ConfigError
from transcoder.evaluate.recommend import MONTH_S, Workload, costs, frontier, recommend

WEEK_MS = 7 * 86_400_000
W = Workload(rate=10_000, retention_ms=WEEK_MS, replication_factor=3, fanout=2)


def test_costs_are_rate_times_retention_times_bytes_per_record_and_cpu_per_record():
    c = costs(ZSTD3, W)
    per_record = 31.25  # 250 B / 8.0
    assert c.disk_bytes == pytest.approx(10_000 * 7 * 86_400 * per_record * 3)
    assert c.produce_bytes == pytest.approx(10_000 * MONTH_S * per_record)
    assert c.replication_bytes == pytest.approx(2 * c.produce_bytes)
    assert c.consume_bytes == pytest.approx(2 * c.produce_bytes)
    assert c.network_bytes == pytest.approx(5 * c.produce_bytes)
    assert c.producer_cores == pytest.approx(10_000 * 0.9e-6)
    assert c.broker_cores == pytest.approx(10_000 * 0.3e-6)
    assert c.consumer_cores == pytest.approx(2 * 10_000 * 0.3e-6)
    forever = costs(ZSTD3, Workload(rate=10_000, retention_ms=None))
    assert forever.disk_bytes == pytest.approx(10_000 * MONTH_S * per_record * 3)  # growth per month
    per_million = costs(ZSTD3, Workload(rate=None, retention_ms=WEEK_MS, replication_factor=1, fanout=1))
    assert per_million.produce_bytes == pytest.approx(31.25e6)
    assert per_million.cores == pytest.approx(0.9 + 0.3 + 0.3)  # CPU seconds per 1M records


def test_the_frontier_keeps_only_cells_no_other_beats_on_ratio_and_cpu():
    assert frontier(GRID, W) == [NONE, LZ4, ZSTD3, ZSTD19]  # lz4 @16K: more CPU, lower ratio; gzip-6 likewise


def test_default_choice_is_the_cheapest_near_the_best_ratio_of_codecs_a_producer_keeps_up_with():
    r = recommend(GRID, W, current=LZ4_16K)
    assert r.chosen == ZSTD3  # zstd-19 compresses at 1.3 MB/s: left out; gzip-6 is within 5% but costs more
    assert r.next_up == ZSTD19
    assert r.text == (
        "Use zstd-3 in 1 MiB batches: 8.00x smaller than uncompressed, 31.2 B per record on disk. Chosen as the "
        "least CPU among the cells within 5% of the best ratio (8.00x) of those compressing at 50 MB/s per core or "
        "more (give --cpu-budget or --min-ratio to choose otherwise).\n"
        "Disk held: 567 GB (× RF 3); network per month: 4.05 TB (produce 810 GB, replication 1.62 TB, 2 consumer "
        "group(s) 1.62 TB); 0.018 cores (producers 0.009, brokers 0.003, consumers 0.006).\n"
        "Against the current lz4 in 16 KiB batches (3.50x): disk -56% (-729 GB), network -56% (-5.21 TB per "
        "month), CPU +89% (+0.0085 cores).\n"
        "The next step up, zstd-19 in 1 MiB batches, would reach 11.00x (-27% disk) for 1.91 cores (+10497% CPU).")
    d = r.as_dict(W)
    assert (d["codec"], d["level"], d["batch_bytes"]) == ("zstd", 3, 1 << 20)
    assert d["current"]["codec"] == "lz4" and d["frontier"] == ["none@1048576", "lz4@1048576", "zstd-3@1048576",
                                                                "zstd-19@1048576"]


def test_a_cpu_budget_takes_the_highest_ratio_it_affords():
    assert recommend(GRID, Workload(rate=10_000, retention_ms=WEEK_MS, cpu_budget=1.0)).chosen == ZSTD3
    big = recommend(GRID, Workload(rate=10_000, retention_ms=WEEK_MS, cpu_budget=2.5))
    assert big.chosen == ZSTD19 and big.next_up is None
    assert "librdkafka clients cap compression.level at 12: zstd-19 batches come from Java producers" in big.text
    assert "the highest ratio within the budget of 2.5 cores" in big.text
    assert "No cell measured has a higher ratio." in big.text


def test_a_minimum_ratio_takes_the_least_cpu_that_reaches_it():
    assert recommend(GRID, Workload(rate=10_000, retention_ms=WEEK_MS, min_ratio=4)).chosen == LZ4
    assert recommend(GRID, Workload(rate=10_000, retention_ms=WEEK_MS, min_ratio=7.9)).chosen == ZSTD3
    assert recommend([GZIP6, ZSTD19], Workload(rate=1, retention_ms=WEEK_MS, min_ratio=7.8)).chosen == GZIP6


def test_without_a_rate_figures_are_per_million_records():
    r = recommend(GRID, Workload(rate=None, retention_ms=WEEK_MS))
    assert "per 1M records" in r.text and "CPU seconds" in r.text


@pytest.mark.parametrize(("workload", "message"), [
    (Workload(rate=10, retention_ms=WEEK_MS, min_ratio=20), "no cell meets .* best ratio measured is 11.00x"),
    (Workload(rate=None, retention_ms=WEEK_MS, cpu_budget=1), "--cpu-budget needs the topic's rate"),
    (Workload(rate=-5, retention_ms=WEEK_MS), "--rate must be a positive number"),
    (Workload(rate=5, retention_ms=WEEK_MS, replication_factor=0), "--replication-factor must be at least 1"),
])
def test_impossible_constraints_are_one_line_errors(workload, message):
    with pytest.raises(ConfigError, match=message):
        recommend(GRID, workload)
