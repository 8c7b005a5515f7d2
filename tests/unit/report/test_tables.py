"""transcoder.report.tables: comparison rows (ratios, zero safety), Markdown text, JSON and rich table."""

from __future__ import annotations

import dataclasses
import json

import pytest

from transcoder.report.tables import (
    Row,
    TopicFigures,
    as_json,
    comparison,
    from_status,
    markdown,
    status_markdown,
    table,
)

SOURCE = TopicFigures("nginx", "none", 1000, 200_000)
DESTS = [TopicFigures("nginx.zstd", "zstd", 1000, 40_000), TopicFigures("nginx.gzip-6", "gzip-6", 1000, 50_000)]


def test_comparison_rows():
    assert comparison(SOURCE, DESTS, 400_000) == [
        Row("nginx", "none", 1000, 200_000, 200.0, 1.0, 2.0),
        Row("nginx.zstd", "zstd", 1000, 40_000, 40.0, 5.0, 10.0),
        Row("nginx.gzip-6", "gzip-6", 1000, 50_000, 50.0, 4.0, 8.0),
    ]


def test_ratios_are_source_over_destination():
    (src, dst) = comparison(TopicFigures("s", "lz4", 3, 300), [TopicFigures("d", "zstd", 3, 120)], 900)
    assert dst.ratio_to_source == pytest.approx(2.5)
    assert dst.ratio_to_uncompressed == pytest.approx(7.5)
    assert dst.avg_record_disk_bytes == pytest.approx(40.0)
    assert src.ratio_to_source == 1.0


@pytest.mark.parametrize("uncompressed", [None, 0])
def test_no_uncompressed_figure(uncompressed):
    rows = comparison(SOURCE, DESTS, uncompressed)
    assert [r.ratio_to_uncompressed for r in rows] == [None, None, None]


def test_empty_destination_has_no_ratio_rather_than_zero():
    rows = comparison(SOURCE, [TopicFigures("nginx.lz4", "lz4", 0, 0)], 400_000)
    assert rows[1] == Row("nginx.lz4", "lz4", 0, 0, None, None, None)
    assert markdown(rows).splitlines()[3] == "| nginx.lz4 | lz4 | 0 | 0 | - | - | - |"


def test_empty_source_has_no_ratio_rather_than_zero():
    rows = comparison(TopicFigures("s", "none", 0, 0), [TopicFigures("d", "zstd", 10, 50)], 100)
    assert rows[0] == Row("s", "none", 0, 0, None, None, None)
    assert rows[1] == Row("d", "zstd", 10, 50, 5.0, 0.0, 2.0)


def test_records_without_bytes_and_bytes_without_records():
    rows = comparison(SOURCE, [TopicFigures("a", "zstd", 5, 0), TopicFigures("b", "zstd", 0, 80)], None)
    assert (rows[1].avg_record_disk_bytes, rows[1].ratio_to_source) == (0.0, None)
    assert (rows[2].avg_record_disk_bytes, rows[2].ratio_to_source) == (None, 2500.0)


def test_no_destinations_gives_the_source_row_only():
    assert comparison(SOURCE, [], None) == [Row("nginx", "none", 1000, 200_000, 200.0, 1.0, None)]


def test_markdown_exact():
    assert markdown(comparison(SOURCE, DESTS, 400_000)) == "\n".join([
        "| topic | codec | records | on-disk bytes | avg record on disk | ratio to source | ratio to uncompressed |",
        "|---|---|---|---|---|---|---|",
        "| nginx | none | 1,000 | 200,000 | 200.0 B | 1.00x | 2.00x |",
        "| nginx.zstd | zstd | 1,000 | 40,000 | 40.0 B | 5.00x | 10.00x |",
        "| nginx.gzip-6 | gzip-6 | 1,000 | 50,000 | 50.0 B | 4.00x | 8.00x |",
    ])


def test_markdown_number_formats_and_missing_ratio():
    rows = [Row("t", "zstd", 1_234_567, 9_876_543_210, 1234.56, 3.14159, None)]
    assert markdown(rows).splitlines()[2] == "| t | zstd | 1,234,567 | 9,876,543,210 | 1,234.6 B | 3.14x | - |"


def test_markdown_of_no_rows_is_the_header():
    assert markdown([]).splitlines() == [
        "| topic | codec | records | on-disk bytes | avg record on disk | ratio to source | ratio to uncompressed |",
        "|---|---|---|---|---|---|---|",
    ]


def test_as_json_round_trips():
    rows = comparison(SOURCE, DESTS, None)
    data = json.loads(as_json(rows))
    assert data == [dataclasses.asdict(r) for r in rows]
    assert list(data[0]) == [f.name for f in dataclasses.fields(Row)]
    assert data[1] == {"topic": "nginx.zstd", "codec": "zstd", "records": 1000, "disk_bytes": 40_000,
                       "avg_record_disk_bytes": 40.0, "ratio_to_source": 5.0, "ratio_to_uncompressed": None}
    assert [Row(**d) for d in data] == rows


def test_rich_table():
    t = table(comparison(SOURCE, DESTS, 400_000), title="T")
    assert t.title == "T"
    assert [c.header for c in t.columns] == ["topic", "codec", "records", "on-disk bytes", "avg record on disk",
                                             "ratio to source", "ratio to uncompressed"]
    assert [c.justify for c in t.columns] == ["left", "left"] + ["right"] * 5
    assert t.row_count == 3
    assert list(t.columns[6].cells) == ["2.00x", "10.00x", "8.00x"]


def _status_doc(p99, samples, backlog):
    return {"lanes": [{"name": "l", "lag_records": {"t[0]": 0}, "cpu_seconds_per_million_records": 4.0,
                       "destinations": [{"topic": "t.zstd", "codec": "zstd", "records_out": 10,
                                         "latency_p99_seconds": p99, "latency_samples": samples,
                                         "backlog_latency_samples": backlog}]}]}


@pytest.mark.parametrize("p99,samples,backlog,cell", [
    (0.25, 5, 0, "0.250 s"),
    (0.25, 5, 1200, "0.250 s (1,200 backlog samples left out)"),
    (None, 0, 1200, "backlog only"),  # a backfill: its age is not the pipeline's latency
    (None, 0, 0, "-"),
])
def test_report_says_what_its_latency_is_of(p99, samples, backlog, cell):
    md = status_markdown(from_status(_status_doc(p99, samples, backlog)))
    header, _, row = md.splitlines()[:3]
    assert "p99 latency (new records)" in header
    assert f"| {cell} |" in row


def _disk_doc(compacted):
    return {"lanes": [{"name": "l", "lag_records": {"t[0]": 0}, "destinations": [{
        "topic": "t.zstd", "codec": "zstd", "records_out": 100_000, "disk_bytes": 100_000, "topic_records": 100_000,
        "compacted": compacted}]}]}


def test_a_compacted_destination_has_no_average_record_only_bytes_per_record_copied():
    # 100,000 records copied, compaction kept 100 keys' latest (1,000 B each): 100,000 B over 100,000 offsets is
    # no average record (issue 42: "1.0 B"). How many records the log holds Kafka does not say without reading it.
    row = from_status(_disk_doc(True))[0]
    assert row.avg_record_disk_bytes is None and row.disk_bytes_per_record_copied == 1.0 and row.compacted
    md = status_markdown([row])
    assert "| 1.0 B per record copied (compacted: the log holds fewer) |" in md
    assert json.loads(as_json([row]))[0]["avg_record_disk_bytes"] is None
    plain = from_status(_disk_doc(False))[0]
    assert plain.avg_record_disk_bytes == 1.0 and plain.disk_bytes_per_record_copied is None
    assert "| 1.0 B |" in status_markdown([plain])
