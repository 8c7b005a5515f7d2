"""transcoder.report.tables: live scoring in words (candidate vs current), and in `transcoder report`."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from transcoder.report.tables import (
    as_json,
    candidate_sentence,
    candidate_sentences,
    from_status,
    status_markdown,
    status_table,
)


@pytest.mark.parametrize(("args", "sentence"), [
    # ratio 5.9 vs 5.0, CPU 4.2 vs 2.0 s per 1M records
    (("zstd-9", 5.9, 4.2, "lz4", 5.0, 2.0), "zstd-9 would store this topic 1.18× smaller for 2.1× the CPU"),
    (("snappy", 4.0, 1.0, "zstd", 8.0, 4.0), "snappy would store this topic 2.00× larger for 0.25× the CPU"),
    (("zstd-19", 9.0, 60.0, "lz4", 4.5, 2.0), "zstd-19 would store this topic 2.00× smaller for 30× the CPU"),
    (("lz4", 5.0, 2.0, "lz4", 5.0, 2.0), "lz4 would store this topic at the same size for 1.0× the CPU"),
    # current codec none: no CPU to compare with; CPU s per 1M records are µs per record
    (("zstd", 8.3, 3.14, "none", 1.0, 0.0), "zstd would store this topic 8.30× smaller for 3.1 µs of CPU per record"),
    (("none", 1.0, 0.0, "none", 1.0, 0.0), "none would store this topic at the same size for 0.0 µs of CPU per record"),
    # a current setting that measured no CPU at all (a tiny sample): the candidate's own CPU, not a division by 0
    (("gzip", 6.0, 5.0, "lz4", 3.0, 0.0), "gzip would store this topic 2.00× smaller for 5.0 µs of CPU per record"),
    (("gzip", float("nan"), 5.0, "lz4", 3.0, 1.0), "gzip: no figure on this sample"),
    (("gzip", 6.0, 5.0, "lz4", 0.0, 1.0), "gzip: no figure on this sample"),
    (("gzip", None, 5.0, "lz4", 3.0, 1.0), "gzip: no figure on this sample"),
])
def test_sentence(args, sentence):
    assert candidate_sentence(*args) == sentence


def test_smaller_is_the_ratio_of_ratios_and_larger_its_inverse():
    assert candidate_sentence("a", 6.0, 1.0, "lz4", 5.0, 1.0).startswith("a would store this topic 1.20× smaller")
    assert candidate_sentence("a", 5.0, 1.0, "lz4", 6.0, 1.0).startswith("a would store this topic 1.20× larger")


def _figures(codec, level, ratio, c, d):
    return {"codec": codec, "level": level, "label": codec if level is None else f"{codec}-{level}", "ratio": ratio,
            "compress_cpu_s_per_1m": c, "decompress_cpu_s_per_1m": d}


def status_doc(candidates: dict | None) -> dict:
    return {"lanes": [{"name": "t.lz4", "cpu_seconds_per_million_records": 9.0, "lag_records": {},
                       "destinations": [{"topic": "t.lz4", "codec": "lz4", "records_out": 10,
                                         "candidates": candidates}]}]}


SCORED = {"samples": 3, "sampled_records": 12_000, "errors": 0, "last_error": None,
          "sample": {"source": "t", "partition": 1, "first_offset": 100, "last_offset": 4099, "records": 4000,
                     "record_bytes": 1_000_000, "batches": 1, "scored_at": 0.0},
          "current": _figures("lz4", None, 5.0, 2.0, 1.0),
          "candidates": [_figures("zstd", 9, 5.9, 4.2, 1.5), _figures("gzip", None, 6.5, 9.0, 3.0)]}


def test_report_rows_carry_the_sentences_and_the_sample():
    (row,) = from_status(status_doc(SCORED))
    assert row.candidates == ("zstd-9 would store this topic 1.18× smaller for 2.1× the CPU",
                              "gzip would store this topic 1.30× smaller for 4.5× the CPU")
    assert row.candidate_sample == "t [1] offsets 100-4099, 4,000 records"
    assert json.loads(as_json([row]))[0]["candidates"] == list(row.candidates)
    md = status_markdown([row])
    assert md.endswith("Candidate codecs (live scoring):\n\nt.lz4 (latest sample: t [1] offsets 100-4099, 4,000 "
                       "records):\n- zstd-9 would store this topic 1.18× smaller for 2.1× the CPU\n"
                       "- gzip would store this topic 1.30× smaller for 4.5× the CPU")
    console = Console(width=300, record=True)
    console.print(status_table([row]))
    text = console.export_text()
    assert "Candidate codecs (live scoring):" in text
    assert "  zstd-9 would store this topic 1.18× smaller for 2.1× the CPU" in text


@pytest.mark.parametrize("candidates", [None, {"samples": 0, "sampled_records": 0, "errors": 0, "last_error": None,
                                               "sample": None, "current": None, "candidates": []}])
def test_no_live_scoring_or_no_sample_yet_adds_nothing(candidates):
    (row,) = from_status(status_doc(candidates))
    assert row.candidates == () and row.candidate_sample is None
    assert "live scoring" not in status_markdown([row])
    assert candidate_sentences(candidates) == ()
