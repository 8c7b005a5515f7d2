"""transcoder.config: the `evaluate:` section (live scoring of candidate codecs): defaults, bounds, one-line errors."""

from __future__ import annotations

from typing import Any

import pytest

from transcoder.codecs import CODECS
from transcoder.config import Batch, parse
from transcoder.config.model import DEFAULT_SAMPLE_BYTES_CAP, EvaluateConfig
from transcoder.errors import ConfigError


def make(evaluate: Any = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"cluster": {"bootstrap_servers": "k1:9092"},
                           "routes": [{"source": "nginx", "destinations": [{"codec": "lz4"}]}]}
    if evaluate is not None:
        raw["evaluate"] = evaluate
    return raw


def error(evaluate: Any, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(make(evaluate), source="t.yaml", environ=environ or {})
    return str(info.value)


def test_absent_section_is_off():
    assert parse(make(), environ={}).evaluate is None


def test_defaults():
    e = parse(make({"candidates": [{"codec": "zstd", "level": 9}, {"codec": "gzip"}]}), environ={}).evaluate
    assert e is not None
    assert e.sample_interval_s == 60.0
    assert e.sample_bytes is None
    assert e.max_cpu_share == 0.05
    assert [(c.codec, c.level, c.label) for c in e.candidates] == [("zstd", 9, "zstd-9"), ("gzip", None, "gzip")]


def test_sample_bytes_default_is_the_destinations_batch_size_capped():
    e = EvaluateConfig(candidates=[{"codec": "zstd"}])
    assert e.sample_bytes_for(Batch(max_bytes=65536)) == 65536
    assert e.sample_bytes_for(Batch(max_bytes=16 * 1024 * 1024)) == DEFAULT_SAMPLE_BYTES_CAP == 4 * 1024 * 1024
    assert EvaluateConfig(candidates=[{"codec": "zstd"}], sample_bytes=1000).sample_bytes_for(Batch()) == 1000


@pytest.mark.parametrize(("evaluate", "message"), [
    ({}, "t.yaml: evaluate.candidates: Field required"),
    ({"candidates": []}, "t.yaml: evaluate.candidates: List should have at least 1 item after validation, not 0"),
    ({"candidates": [{"codec": "zstd", "level": 23}]},
     "t.yaml: evaluate.candidates.0: level 23 is outside 1..22, the range of zstd levels"),
    ({"candidates": [{"codec": "lz4"}, {"codec": "snappy", "level": 1}]},
     "t.yaml: evaluate.candidates.1: codec snappy has no compression levels; remove `level`"),
    ({"candidates": [{"codec": "brotli"}]},
     "t.yaml: evaluate.candidates.0.codec: Input should be " + ", ".join(f"'{c}'" for c in CODECS[:-1])
     + f" or '{CODECS[-1]}'"),
    ({"candidates": [{"codec": "zstd", "level": 9}, {"codec": "zstd", "level": 9}]},
     "t.yaml: evaluate.candidates: candidate zstd-9 is listed twice"),
    ({"candidates": [{"codec": "zstd"}], "sample_interval_s": 0},
     "t.yaml: evaluate.sample_interval_s: Input should be greater than 0"),
    ({"candidates": [{"codec": "zstd"}], "max_cpu_share": 0},
     "t.yaml: evaluate.max_cpu_share: Input should be greater than 0"),
    ({"candidates": [{"codec": "zstd"}], "max_cpu_share": 1.5},
     "t.yaml: evaluate.max_cpu_share: Input should be less than or equal to 1"),
    ({"candidates": [{"codec": "zstd"}], "sample_bytes": 0},
     "t.yaml: evaluate.sample_bytes: Input should be greater than 0"),
    ({"candidates": [{"codec": "zstd"}], "sample_bytes": 65 * 1024 * 1024},
     "t.yaml: evaluate.sample_bytes: Input should be less than or equal to 67108864"),
    ({"candidates": [{"codec": "zstd"}], "interval": 5},
     "t.yaml: evaluate.interval: unknown key `interval` (did you mean `sample_interval_s`?)"),
    ({"candidates": [{"codec": "zstd", "lvl": 3}]},
     "t.yaml: evaluate.candidates.0.lvl: unknown key `lvl` (did you mean `level`?)"),
])
def test_errors_name_the_path(evaluate, message):
    assert error(evaluate) == message


def test_every_problem_on_a_line_of_its_own():
    msg = error({"candidates": [{"codec": "zstd", "level": 99}], "max_cpu_share": 2})
    assert msg.startswith("t.yaml: 2 problems:\n") and msg.count("\n") == 2
    assert "evaluate.candidates.0: level 99" in msg and "evaluate.max_cpu_share" in msg


def test_max_cpu_share_of_one_is_allowed():
    assert EvaluateConfig(candidates=[{"codec": "zstd"}], max_cpu_share=1).max_cpu_share == 1


def test_env_overrides_reach_the_section():
    c = parse(make(), environ={"TRANSCODER__EVALUATE__CANDIDATES": "[{codec: zstd, level: 19}]",
                               "TRANSCODER__EVALUATE__SAMPLE_INTERVAL_S": "5"})
    assert c.evaluate is not None and c.evaluate.sample_interval_s == 5.0
    assert [(x.codec, x.level) for x in c.evaluate.candidates] == [("zstd", 19)]
