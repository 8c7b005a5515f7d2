"""Every problem of a config file is reported at once, one per line: field errors, the level checks and the
cross-field checks together (pydantic alone runs a model's cross-field checks only once all its fields are valid)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from transcoder.config import load
from transcoder.errors import ConfigError


def _problems(tmp_path: Path, raw: dict) -> list[str]:
    path = tmp_path / "transcoder.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as exc:
        load(path, environ={})
    first, *lines = str(exc.value).split("\n")
    if not lines:  # one problem: one line
        assert first.startswith(f"{path}: ")
        return [first.removeprefix(f"{path}: ")]
    assert first == f"{path}: {len(lines)} problems:"
    assert all(line.startswith("  ") for line in lines)
    return [line.removeprefix("  ") for line in lines]


def test_three_problems_with_a_zstd_level_of_40_are_all_reported(tmp_path):
    got = _problems(tmp_path, {
        "cluster": {"bootstrap_servers": "k1:9092"},
        "guarantee": "exactly-once", "lanes": "shared",
        "routes": [{"source": "orders", "destinations": [{"codec": "zstd", "level": 40},
                                                         {"codec": "lz4", "batch": {"max_records": 0}}]}],
    })
    assert got == [
        "routes.0.destinations.0: level 40 is outside 1..22, the range of zstd levels",
        "routes.0.destinations.1.batch.max_records: Input should be greater than or equal to 1",
        "guarantee exactly-once needs lanes: isolated: a transaction belongs to one producer, and each destination "
        "has a producer of its own (its codec)",
    ]


def test_a_level_beside_a_field_error_of_the_same_destination_and_every_cross_field_problem(tmp_path):
    got = _problems(tmp_path, {
        "cluster": {"bootstrap_servers": "k1:9092"},
        "guarantee": "exactly-once", "commit_interval_ms": 40_000, "transaction_timeout_ms": 60_000,
        "errors": {"tolerance": "all"},
        "metrics": {"port": 70_000},
        "routes": [{"source": "bad topic!", "destinations": [{"codec": "zstd", "level": 40,
                                                               "batch": {"linger_ms": -1}}]},
                   {"source_pattern": "(", "destinations": []}],
    })
    assert got == [
        "routes.0.destinations.0.batch.linger_ms: Input should be greater than or equal to 0",
        "routes.0.destinations.0: level 40 is outside 1..22, the range of zstd levels",
        "routes.0: source 'bad topic!' is not a valid Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)",
        "routes.1.destinations: List should have at least 1 item after validation, not 0",
        "routes.1: source_pattern '(' is not a regex: missing ), unterminated subpattern at position 0",
        "errors: tolerance all needs a dlq_topic, or failed records would be dropped",
        "metrics.port: Input should be less than or equal to 65535",
        "guarantee exactly-once: commit_interval_ms (40000) must be at most half of transaction_timeout_ms (60000), "
        "or the broker aborts transactions before they are committed",
    ]  # errors is not valid (no dlq_topic): the check of its tolerance against exactly-once waits for it


def test_a_check_that_needs_an_invalid_field_is_left_to_that_fields_own_error(tmp_path):
    # source_pattern is invalid (empty): "give exactly one of source or source_pattern" would be false
    got = _problems(tmp_path, {"cluster": {"bootstrap_servers": "k1:9092"},
                               "routes": [{"source_pattern": "", "destinations": [{"codec": "lz4", "level": 99}]}]})
    assert got == ["routes.0.source_pattern: String should have at least 1 character",
                   "routes.0.destinations.0: level 99 is outside 0..12, the range of lz4 levels"]


def test_a_valid_config_still_loads_and_a_lone_cross_field_problem_is_reported_once(tmp_path):
    raw = {"cluster": {"bootstrap_servers": "k1:9092"},
           "routes": [{"source": "orders", "destinations": [{"codec": "zstd", "level": 19}]}]}
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert load(path, environ={}).routes[0].destinations[0].level == 19
    assert _problems(tmp_path, {**raw, "errors": {"tolerance": "all"}}) == [
        "errors: tolerance all needs a dlq_topic, or failed records would be dropped"]
