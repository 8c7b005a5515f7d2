"""evaluate's outputs: the JSON object the issue names, CSV, Markdown and the terminal table."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console

from tests.unit.evaluate.fixed_grid import GRID, LZ4_16K
from transcoder.evaluate import render
from transcoder.evaluate.recommend import Workload, recommend

W = Workload(rate=10_000, retention_ms=7 * 86_400_000)
REC = recommend(GRID, W, current=LZ4_16K).as_dict(W)
CELL_KEYS = {"codec", "level", "batch_bytes", "records", "uncompressed_bytes", "compressed_bytes", "ratio",
             "compress_mb_s", "decompress_mb_s", "compress_cpu_s_per_1m", "decompress_cpu_s_per_1m"}


def test_json_is_one_object_with_every_cell_and_the_recommendation():
    doc = json.loads(render.as_json(GRID, REC, {"source": "test"}))
    assert CELL_KEYS <= set(doc["cells"][0])
    assert [(c["codec"], c["level"], c["batch_bytes"]) for c in doc["cells"]] == [
        (c.codec, c.level, c.batch_bytes) for c in GRID]
    none, zstd3 = doc["cells"][0], doc["cells"][3]
    assert none["level"] is None and none["compress_mb_s"] is None and none["ratio"] == 1.0
    assert zstd3["ratio"] == 8.0 and zstd3["compressed_bytes"] == 31_250_000
    assert zstd3["compress_mb_s"] == round(250 / 0.9, 2) and zstd3["compress_cpu_s_per_1m"] == 0.9
    assert doc["recommendation"]["codec"] == "zstd" and doc["recommendation"]["text"].startswith("Use zstd-3")


def test_csv_has_a_header_and_a_row_per_cell():
    rows = list(csv.DictReader(io.StringIO(render.as_csv(GRID))))
    assert len(rows) == len(GRID) and CELL_KEYS <= set(rows[0])
    assert rows[5]["codec"] == "zstd" and rows[5]["level"] == "19" and float(rows[5]["ratio"]) == 11.0


def test_markdown_and_table_mark_the_recommended_cell():
    md = render.markdown(GRID, REC)
    lines = md.splitlines()
    assert lines[0].startswith("| setting | batch |") and sum(line.startswith("| ") for line in lines) == 7
    assert "| zstd-3 ◀ | 1 MiB | 1,000,000 | 250,000,000 | 31,250,000 | 8.00x |" in md
    assert "> Use zstd-3 in 1 MiB batches" in md
    console = Console(width=250, record=True)
    console.print(render.table(GRID, "t", REC))
    text = console.export_text()
    assert "zstd-3 ◀" in text and "zstd-19 ◀" not in text
