"""`transcoder evaluate` at its edges, with generated or file input (no broker): zstd's fast levels, output paths
refused before the grid is measured, and batch sizes and records above Kafka's default limits named."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import one_line, run_cli

BASE = ("evaluate", "--kind", "nginx", "--count", "300", "--repeats", "1")


def test_zstd_fast_levels_are_measured_as_the_readme_says():
    proc = run_cli(*BASE, "--codecs", "zstd:-5,-1,-7", "--codecs", "zstd:1", "--batch-sizes", "16KiB",
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    cells = json.loads(proc.stdout)["cells"]
    assert [c["level"] for c in cells] == [-5, -1, -7, 1]
    assert all(c["records"] == 300 and 0 < c["compressed_bytes"] < c["uncompressed_bytes"] for c in cells)
    fast5, fast1, fast7, level1 = (c["compressed_bytes"] for c in cells)
    assert fast7 >= fast5 >= fast1 >= level1  # faster levels compress less


@pytest.mark.parametrize(("where", "message"), [
    ("/proc/x", "--html /proc/x: cannot write the report there"),
    ("a-file", "is a file; give a directory for index.html"),
    ("dir-with-a-dir", "index.html is not a file, and the report writes one there"),
])
def test_an_html_path_that_cannot_take_the_report_is_refused_before_the_grid_is_measured(tmp_path, monkeypatch,
                                                                                          where, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("keep me\n")
    (tmp_path / "dir-with-a-dir" / "index.html").mkdir(parents=True)
    proc = run_cli(*BASE, "--codecs", "lz4", "--batch-sizes", "16KiB", "--html", where)
    assert proc.returncode == 2
    assert message in one_line(proc)
    assert proc.stdout == ""  # refused before any work: no table was printed
    assert (tmp_path / "a-file").read_text() == "keep me\n"


def test_an_existing_report_directory_is_written_over(tmp_path):
    report = tmp_path / "report"
    for codec in ("lz4", "snappy"):
        proc = run_cli(*BASE, "--codecs", codec, "--batch-sizes", "16KiB", "--format", "csv", "--html", str(report))
        assert proc.returncode == 0, proc.stderr
        assert f"<td>{codec}</td>" in (report / "index.html").read_text()


def test_batch_sizes_and_records_above_kafkas_default_limits_are_named_in_the_table_and_the_recommendation(
        tmp_path):
    proc = run_cli(*BASE, "--codecs", "lz4", "--batch-sizes", "16KiB,1MiB,4MiB", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split(" | ")[1]: line for line in proc.stdout.splitlines() if line.startswith("| lz4")}
    assert sorted(rows) == ["1 MiB", "16 KiB", "4 MiB ⚠"]  # 1 MiB = max.request.size: no warning
    warnings = [line for line in proc.stdout.splitlines() if "⚠ " in line and not line.startswith("| ")]
    assert len(warnings) == 1 and "4 MiB batches" in warnings[0] and "max.request.size (1,048,576 B)" in warnings[0]
    assert "message.max.bytes (1,048,588 B)" in warnings[0]

    f = tmp_path / "big.log"
    f.write_text("small line\n" + "x" * 1_200_000 + "\n" + "another small line\n")
    out = run_cli("evaluate", "--file", str(f), "--codecs", "zstd:3", "--batch-sizes", "64KiB", "--repeats", "1",
                  "--format", "json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)["recommendation"]
    assert rec["max_batch_bytes"] == 1_048_576
    assert len(rec["warnings"]) == 1 and "1 record(s) of the sample are above" in rec["warnings"][0]
    assert "(the largest: 1,200,000 B)" in rec["warnings"][0] and rec["warnings"][0] in rec["text"]
