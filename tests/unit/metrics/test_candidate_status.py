"""Live scoring in metrics.status (/status's `candidates` per destination) and in the registry's exposition."""

from __future__ import annotations

import re

from transcoder.metrics.registry import Metrics, SettingScore, exposition
from transcoder.metrics.status import (
    CandidateScores,
    CandidateStatus,
    LaneStatus,
    candidates_document,
    document,
)

CURRENT = SettingScore("lz4", None, 5.0, 2.0, 1.0)
ZSTD9 = SettingScore("zstd", 9, 5.9, 4.2, 1.5)
SCORES = CandidateScores(source="t", partition=1, first_offset=10, last_offset=19, records=10, record_bytes=2500,
                         batches=1, scored_at=1.5, current=CURRENT, candidates=(ZSTD9,))


def status_doc(candidates):
    m = Metrics()
    st = LaneStatus(name="t.lz4", group_id="g", destinations={"t.lz4": ("t", "lz4")})
    return document(group_id="g", lanes_mode="isolated", lanes=[(st, m.lane("t.lz4"))], cpu={}, brokers=None,
                    health=lambda: (True, "ok"), readiness=lambda: (True, "ok"), candidates=candidates)


def test_without_live_scoring_candidates_is_null():
    assert status_doc(None)["lanes"][0]["destinations"][0]["candidates"] is None


def test_before_the_first_sample():
    (dest,) = status_doc({})["lanes"][0]["destinations"]
    assert dest["candidates"] == {"samples": 0, "sampled_records": 0, "errors": 0, "last_error": None,
                                  "sample": None, "current": None, "candidates": []}


def test_the_latest_sample_its_figures_and_sentences():
    st = CandidateStatus(latest=SCORES, samples=4, sampled_records=40, errors=1, last_error="x")
    (dest,) = status_doc({"t.lz4": st})["lanes"][0]["destinations"]
    assert dest["candidates"] == candidates_document(st) == {
        "samples": 4, "sampled_records": 40, "errors": 1, "last_error": "x",
        "sample": {"source": "t", "partition": 1, "first_offset": 10, "last_offset": 19, "records": 10,
                   "record_bytes": 2500, "batches": 1, "scored_at": 1.5},
        "current": {"codec": "lz4", "level": None, "label": "lz4", "ratio": 5.0, "compress_cpu_s_per_1m": 2.0,
                    "decompress_cpu_s_per_1m": 1.0},
        "candidates": [{"codec": "zstd", "level": 9, "label": "zstd-9", "ratio": 5.9, "compress_cpu_s_per_1m": 4.2,
                        "decompress_cpu_s_per_1m": 1.5,
                        "sentence": "zstd-9 would store this topic 1.18× smaller for 2.1× the CPU"}],
    }


CANDIDATE_METRICS = {"transcoder_candidate_ratio", "transcoder_candidate_cpu_seconds_per_million",
                     "transcoder_candidate_current_ratio", "transcoder_candidate_current_cpu_seconds_per_million",
                     "transcoder_candidate_samples_total", "transcoder_candidate_sampled_records_total",
                     "transcoder_candidate_errors_total", "transcoder_candidate_scoring_cpu_seconds_total"}


def test_every_candidate_metric_is_exported_even_with_live_scoring_off():
    """The dashboard names them; an instance without `evaluate:` still declares them (no series)."""
    text = exposition(Metrics().registry)[1].decode()
    declared = set(re.findall(r"^# TYPE (transcoder_candidate_[a-z_]+)", text, re.MULTILINE))
    assert declared >= CANDIDATE_METRICS
    assert re.search(r"^transcoder_candidate_scoring_cpu_seconds_total 0\.0$", text, re.MULTILINE)


def test_candidate_scored_labels_codec_and_level_apart():
    m = Metrics()
    m.candidate_scored("t.lz4", CURRENT, [ZSTD9, SettingScore("gzip", None, 6.5, 9.0, 3.0)], 10)
    m.candidate_scored("t.lz4", CURRENT, [ZSTD9], 5)
    get = m.registry.get_sample_value
    assert get("transcoder_candidate_ratio", {"destination": "t.lz4", "codec": "zstd", "level": "9"}) == 5.9
    assert get("transcoder_candidate_ratio", {"destination": "t.lz4", "codec": "gzip", "level": ""}) == 6.5
    assert get("transcoder_candidate_current_ratio", {"destination": "t.lz4", "codec": "lz4", "level": ""}) == 5.0
    assert get("transcoder_candidate_cpu_seconds_per_million",
               {"destination": "t.lz4", "codec": "zstd", "level": "9", "direction": "decompress"}) == 1.5
    assert get("transcoder_candidate_current_cpu_seconds_per_million",
               {"destination": "t.lz4", "codec": "lz4", "level": "", "direction": "compress"}) == 2.0
    assert get("transcoder_candidate_samples_total", {"destination": "t.lz4"}) == 2
    assert get("transcoder_candidate_sampled_records_total", {"destination": "t.lz4"}) == 15
    m.candidate_error("t.lz4")
    m.candidate_cpu_spent(0.25)
    m.candidate_cpu_spent(0.0)
    assert get("transcoder_candidate_errors_total", {"destination": "t.lz4"}) == 1
    assert get("transcoder_candidate_scoring_cpu_seconds_total", {}) == 0.25
