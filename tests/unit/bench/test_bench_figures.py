"""bench.figures (pure) and bench.copiers' MirrorMaker 2 config: medians, ratios to MM2, targets judged on
the warmed span, tables."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.copiers import Batching, mm2_properties, mm2_state_topics
from bench.figures import (
    ClientRun,
    CopyRun,
    LiveLatency,
    Spread,
    client_table,
    cloudflare_table,
    copiers_table,
    latency_table,
    summarise,
    too_short,
    verdict_lines,
    verdicts,
)
from bench.spans import Span

# bench's CLI, invoked here in-process, sets the process's logging (warning and up): put back after each test, so
# that a later test capturing info lines in this process sees them
pytestmark = pytest.mark.usefixtures("fresh_structlog")


def run(copier: str, codec: str, *, seconds: float, cpu: float, disk: int, records: int = 1_000_000,
        p99: float | None = 0.5, warm: Span | None = None, note: str | None = None) -> CopyRun:
    """A copy; without `warm`, its warmed span is its last 60% of records at the whole copy's rate and CPU."""
    if warm is None:
        warm = Span(start=seconds * 0.4, records=records * 0.6, seconds=seconds * 0.6, cpu_seconds=cpu * 0.6)
    return CopyRun(copier=copier, codec=codec, records=records, uncompressed_bytes=250_000_000, seconds=seconds,
                   cpu_seconds=cpu, startup_seconds=1.0, disk_bytes=disk, warm=warm, warm_note=note,
                   live=None if p99 is None else LiveLatency(rate=2000, reached=1990, records=5000, sent=5600,
                                                             p50=0.2, p99=p99))


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

#: MirrorMaker 2 warming up: its whole copy is slow and costly, its warmed span (the last 500,000
#: records) fast and cheap; transcoder is the same over both.
WARMING = [
    run("transcoder", "lz4", seconds=10, cpu=5, disk=60_000_000,
        warm=Span(start=5.0, records=500_000, seconds=5.0, cpu_seconds=2.5)),
    run("mm2", "lz4", seconds=20, cpu=10, disk=60_000_000,
        warm=Span(start=15.0, records=500_000, seconds=5.0, cpu_seconds=3.0)),
    run("mm2-default", "lz4", seconds=20, cpu=10, disk=60_000_000),
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
    v = {(x.target.figure, x.target.bound, x.codec): (x.ratio, x.met)
         for x in verdicts(summarise(RUNS), ["zstd", "none"])}
    assert v[("warm_cpu_per_1m", 0.8, "zstd")] == (pytest.approx(0.7), True)  # 7 / 10 <= 0.8
    assert v[("warm_cpu_per_1m", 0.5, "zstd")] == (pytest.approx(0.7), False)  # the compiled hot path's target
    assert v[("warm_records_per_s", 1.2, "zstd")] == (pytest.approx(80_000 / 45_000), True)
    assert v[("warm_records_per_s", 1.5, "zstd")] == (pytest.approx(80_000 / 45_000), True)
    assert v[("ratio", 1.5, "zstd")] == (pytest.approx(2.0), True)  # against mm2-default: 10 / 5
    assert v[("warm_cpu_per_1m", 0.8, "none")] == (None, None)  # no mm2 run for none


def test_targets_can_be_missed():
    runs = [run("transcoder", "lz4", seconds=10, cpu=9, disk=60_000_000),
            run("mm2", "lz4", seconds=10, cpu=10, disk=60_000_000),
            run("mm2-default", "lz4", seconds=10, cpu=10, disk=70_000_000)]
    assert [x.met for x in verdicts(summarise(runs), ["lz4"])] == [False] * 5


def test_warmed_figures_are_the_warmed_spans():
    s = summarise(WARMING)
    mm2 = s[("mm2", "lz4")]
    assert mm2["records_per_s"].median == pytest.approx(50_000)  # whole: 1M in 20 s
    assert mm2["warm_records_per_s"].median == pytest.approx(100_000)  # warmed: 500,000 in 5 s
    assert mm2["cpu_per_1m"].median == pytest.approx(10.0)
    assert mm2["warm_cpu_per_1m"].median == pytest.approx(6.0)  # 3 CPU s / 500,000 records
    assert mm2["warm_start"].median == pytest.approx(15.0)
    assert mm2["warm_share"].median == pytest.approx(0.5)
    assert mm2["warm_broker_cpu_per_1m"] is None  # not measured


def test_targets_are_judged_on_the_warmed_span_with_the_whole_copy_beside():
    v = {x.target.figure: x for x in verdicts(summarise(WARMING), ["lz4"])}
    cpu, speed = v["warm_cpu_per_1m"], v["warm_records_per_s"]
    # whole copy: transcoder 5 vs mm2 10 CPU s/1M (0.5x, met); warmed: 5 vs 6 (0.83x, missed)
    assert (cpu.ratio, cpu.whole_ratio, cpu.met) == (pytest.approx(5 / 6), pytest.approx(0.5), False)
    # whole copy: 100,000 vs 50,000 records/s (2x, met); warmed: 100,000 vs 100,000 (1x, missed)
    assert (speed.ratio, speed.whole_ratio, speed.met) == (pytest.approx(1.0), pytest.approx(2.0), False)
    assert v["ratio"].whole_ratio is None  # disk has one span
    lines = verdict_lines(summarise(WARMING), ["lz4"]).splitlines()
    assert lines[0] == ("- CPU per 1M records <= 0.8x MirrorMaker 2 (same codec and batching), lz4: "
                        "0.83x warmed (whole copy 0.50x) — missed")


def test_runs_too_short_to_warm_are_counted_and_named_in_the_targets():
    runs = [*WARMING, run("mm2", "lz4", seconds=4, cpu=8, disk=60_000_000, note="too short to warm",
                          warm=Span(start=0.0, records=1_000_000, seconds=4, cpu_seconds=8))]
    short = too_short(runs)
    assert short[("mm2", "lz4")] == (1, 2)
    assert short[("transcoder", "lz4")] == (0, 1)
    lines = verdict_lines(summarise(runs), ["lz4"], short).splitlines()
    assert "(too short to warm, whole copy used: mm2 1 of 2 runs)" in lines[0]
    assert "too short" not in lines[2]  # the on-disk target has no warmed span
    row = next(ln for ln in copiers_table(summarise(runs), ["lz4"], short).splitlines() if "| mm2 |" in ln)
    assert row.endswith("| from 7.5 (0.0–15.0) s, 75 (50–100)% of records; 1 of 2 runs too short: whole copy |")


def test_copiers_table_shows_ratios_to_mm2_and_ranges():
    table = copiers_table(summarise(RUNS), ["zstd"])
    rows = {line.split(" | ")[1]: line for line in table.splitlines()[2:]}
    assert list(rows) == ["transcoder", "mm2", "mm2-default", "kcat"]
    cells = rows["transcoder"].split(" | ")
    assert cells[2] == cells[3] == "80,000 (50,000–100,000) · 1.78x"  # whole copy, warmed span (same rate here)
    assert cells[5] == cells[6] == "7.00 (6.00–8.00) · 0.70x"
    assert cells[-1] == "from 5.0 (4.0–8.0) s, 60% of records |"  # 0.4 of 10, 20, 12.5 s
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
    result = CliRunner().invoke(main, ["--copiers", "transcoder,mm2", "--fetch-partition-bytes", "4194304"])
    assert result.exit_code == 2
    assert "--fetch-partition-bytes is taken by transcoder, transcoder-records, franz-go only, not by mm2" in \
        result.output


def test_spark_targets_are_judged_per_core_and_local2_against_local1_and_only_when_spark_ran():
    runs = [run("transcoder", "zstd", seconds=10, cpu=6, disk=25_000_000),
            run("mm2", "zstd", seconds=10, cpu=10, disk=25_000_000),
            run("spark-local1", "zstd", seconds=10, cpu=15, disk=25_000_000),  # 2.5x the CPU per record
            run("spark-local2", "zstd", seconds=5, cpu=15, disk=25_000_000)]  # twice as fast
    v = {x.target.name: x for x in verdicts(summarise(runs), ["zstd"])}
    per_core = v["Spark engine local[1] records/s per core >= 0.5x the service lane's"]
    assert (per_core.ratio, per_core.met) == (pytest.approx(6 / 15), False)  # per core: service CPU / Spark CPU
    assert per_core.whole_ratio == pytest.approx(0.4)
    scale = v["Spark engine local[2] records/s >= 1.6x local[1]"]
    assert (scale.ratio, scale.met) == (pytest.approx(2.0), True)
    without = {x.target.name for x in verdicts(summarise(runs[:2]), ["zstd"])}
    assert not any(name.startswith("Spark") for name in without)  # no Spark copies: no Spark lines


def test_the_latency_table_has_a_row_per_copy_with_a_trickle():
    live = LiveLatency(rate=350_000, reached=349_100, records=3_500_000, sent=4_600_000, p50=0.0421, p99=0.1187,
                       driver="franz-go", produce_p99=0.0123, status_p50=0.05, status_p99=0.125,
                       all_p50=0.0433, all_p99=0.2, machine_busy=1.914)
    copies = [RUNS[0], RUNS[-1], replace(RUNS[1], live=live)]  # kcat: no trickle
    rows = latency_table(copies).splitlines()[2:]
    assert rows == [
        "| zstd | transcoder | 1 | python | 2,000 | 1,990 | 5,000 | 200 | 500 | n/a | n/a | n/a | n/a | n/a | n/a |",
        "| zstd | transcoder | 2 | franz-go | 350,000 | 349,100 | 3,500,000 | 42 | 119 | 12 | 43 | 200 | 50 | 125 | "
        "1.91 |",
    ]


def test_bench_refuses_bad_input_in_one_line_before_starting_kafka(tmp_path):
    from click.testing import CliRunner

    from bench.__main__ import main

    bad = tmp_path / "events.ndjson"
    bad.write_text("not json\n")
    result = CliRunner().invoke(main, ["--from-file", str(bad), "--key-field", "user", "--copiers", "transcoder"])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [f"Error: {bad}:1: not a JSON object (Expecting value: line 1 "
                                                  "column 1 (char 0))"], result.output


def test_a_spark_copiers_processes_are_told_apart_by_their_command_lines():
    from bench.figures import process_kind
    java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp /v/pyspark/jars/*"
    assert process_kind(f"{java} -Xmx1g org.apache.spark.deploy.SparkSubmit --conf a=b pyspark-shell") == "driver JVM"
    assert process_kind(f"{java} org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url x") == \
        "executor JVMs"
    assert process_kind(f"{java} org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077") == "cluster daemons"
    assert process_kind(f"{java} org.apache.spark.deploy.master.Master --host h") == "cluster daemons"
    assert process_kind("/v/bin/python -m pyspark.daemon pyspark.worker") == "Python workers"
    assert process_kind("/v/bin/python -m transcoder --log-level warning run --config c.yaml --engine spark") == \
        "driver Python"
    assert process_kind("bash /v/pyspark/bin/spark-class org.apache.spark.deploy.SparkSubmit") == "driver JVM"
    assert process_kind("sleep 5") == "other"


def test_the_process_table_gives_cpu_per_million_records_by_kind_with_shares():
    from dataclasses import replace

    from bench.figures import process_table
    spark = replace(run("spark-local2-own", "zstd", seconds=10, cpu=6, disk=1, records=2_000_000),
                    cpu_by_process={"driver JVM": 2.0, "Python workers": 3.0, "driver Python": 1.0})
    plain = run("transcoder", "zstd", seconds=10, cpu=2, disk=1, records=2_000_000)
    lines = process_table([plain, spark]).splitlines()
    assert len(lines) == 3  # header, rule, the Spark copy only
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:3] == ["zstd", "spark-local2-own", "1"]
    assert cells[3:] == ["0.50 (17%)", "1.00 (33%)", "0.00 (0%)", "1.50 (50%)", "0.00 (0%)", "0.00 (0%)", "3.00"]
