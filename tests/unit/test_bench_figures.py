"""bench.figures (pure) and bench.copiers' MirrorMaker 2 config: medians, ratios to MM2, targets, tables."""

from __future__ import annotations

import pytest

from bench.copiers import Batching, mm2_properties, mm2_state_topics
from bench.figures import (
    ClientRun,
    CopyRun,
    Spread,
    client_table,
    cloudflare_table,
    copiers_table,
    summarise,
    verdicts,
)


def run(copier: str, codec: str, *, seconds: float, cpu: float, disk: int, records: int = 1_000_000,
        p99: float | None = 0.5) -> CopyRun:
    return CopyRun(copier=copier, codec=codec, records=records, uncompressed_bytes=250_000_000, seconds=seconds,
                   cpu_seconds=cpu, startup_seconds=1.0, disk_bytes=disk, latency_p50=0.2, latency_p99=p99)


RUNS = [
    run("transcoder", "zstd", seconds=10, cpu=6, disk=25_000_000),
    run("transcoder", "zstd", seconds=20, cpu=8, disk=25_000_000),
    run("transcoder", "zstd", seconds=12.5, cpu=7, disk=25_000_000),
    run("mm2", "zstd", seconds=20, cpu=10, disk=26_000_000),
    run("mm2", "zstd", seconds=25, cpu=10, disk=26_000_000),
    run("mm2-default", "zstd", seconds=20, cpu=12, disk=50_000_000),
    run("transcoder", "none", seconds=5, cpu=2, disk=250_000_000),
    run("kcat", "zstd", seconds=10, cpu=3, disk=25_000_000, p99=None),
]


def test_spread_is_median_min_max():
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0)
    assert Spread.of([1.0, 4.0]) == Spread(2.5, 1.0, 4.0)
    assert Spread.of([]) is None


def test_summary_per_copier_and_codec():
    s = summarise(RUNS)
    t = s[("transcoder", "zstd")]
    assert t["records_per_s"] == Spread(80_000.0, 50_000.0, 100_000.0)
    assert t["cpu_per_1m"] == Spread(7.0, 6.0, 8.0)
    assert t["ratio"] == Spread(10.0, 10.0, 10.0)
    assert t["mb_per_s"].median == pytest.approx(20.0)
    assert s[("kcat", "zstd")]["latency_p99"] is None


def test_targets_compare_transcoder_with_the_right_mm2_variant():
    v = {(t.figure, c): (r, met) for t, c, r, met in verdicts(summarise(RUNS), ["zstd", "none"])}
    assert v[("cpu_per_1m", "zstd")] == (pytest.approx(0.7), True)  # 7 / 10 <= 0.8
    assert v[("records_per_s", "zstd")] == (pytest.approx(80_000 / 45_000), True)
    assert v[("ratio", "zstd")] == (pytest.approx(2.0), True)  # against mm2-default: 10 / 5
    assert v[("cpu_per_1m", "none")] == (None, None)  # no mm2 run for none


def test_targets_can_be_missed():
    runs = [run("transcoder", "lz4", seconds=10, cpu=9, disk=60_000_000),
            run("mm2", "lz4", seconds=10, cpu=10, disk=60_000_000),
            run("mm2-default", "lz4", seconds=10, cpu=10, disk=70_000_000)]
    assert [met for _, _, _, met in verdicts(summarise(runs), ["lz4"])] == [False, False, False]


def test_copiers_table_shows_ratios_to_mm2_and_ranges():
    table = copiers_table(summarise(RUNS), ["zstd"])
    rows = {line.split(" | ")[1]: line for line in table.splitlines()[2:]}
    assert list(rows) == ["transcoder", "mm2", "mm2-default", "kcat"]
    assert "80,000 (50,000–100,000) · 1.78x" in rows["transcoder"]
    assert "7.00 (6.00–8.00) · 0.70x" in rows["transcoder"]
    assert "· " not in rows["mm2"].split(" | ", 3)[3]  # the baseline has no ratio to itself
    assert "n/a" in rows["kcat"]


def test_cloudflare_table_ratios_are_to_none():
    table = cloudflare_table(summarise(RUNS), ["none", "zstd"], records=1_000_000)
    none, zstd = table.splitlines()[2:]
    assert none == "| none | 2.00 | 1,000,000 | 2.00 | 1.00 | 250.0 | 250.0 | 1.00 |"
    assert zstd == "| zstd | 7.00 | 1,000,000 | 7.00 | 3.50 | 25.0 | 25.0 | 10.00 |"


def test_client_table():
    runs = [ClientRun("lz4", 100_000, 25_000_000, 2.0, 5_000_000), ClientRun("lz4", 100_000, 25_000_000, 4.0,
                                                                              5_000_000)]
    assert client_table(runs, ["lz4", "zstd"]).splitlines()[2:] == [
        "| lz4 | 3.00 (2.00–4.00) | 37,500 (25,000–50,000) | 9.4 (6.2–12.5) | 5.0 |"]


def test_mm2_properties_reach_the_data_producer_through_the_target_alias():
    props = dict(line.split(" = ", 1) for line in mm2_properties("h:1", "src", "m1zstd", "zstd",
                                                                Batching(262144, 20)).splitlines())
    assert props["m1zstd->B.topics"] == "src"
    assert props["B.producer.compression.type"] == "zstd"
    assert (props["B.producer.batch.size"], props["B.producer.linger.ms"]) == ("262144", "20")
    assert props["m1zstd.bootstrap.servers"] == props["B.bootstrap.servers"] == "h:1"
    default = mm2_properties("h:1", "src", "a", "lz4", None)
    assert "batch.size" not in default and "linger.ms" not in default
    assert "mm2-offsets.a.internal" in mm2_state_topics("a")
    live = dict(line.split(" = ", 1) for line in mm2_properties("h:1", "src", "a", "lz4", None, live="src.live")
                .splitlines())
    assert live["a->B.topics"] == "src, src.live"  # the latency trickle's topic, copied by the same task


def test_bench_refuses_an_unknown_codec_or_copier_before_starting_anything():
    from click.testing import CliRunner

    from bench.__main__ import main

    result = CliRunner().invoke(main, ["--codecs", "zstd,brotli", "--copiers", "transcoder,flume"])
    assert result.exit_code == 2
    assert "unknown codec or copier: brotli, flume" in result.output
