"""spark.read: transcoder: the micro-batch ends the driver plans, and the ranges its tasks copy."""

from __future__ import annotations

from transcoder import config as cfg
from transcoder.spark.ranges import bounded, flat, nested, planned, refusal


def test_offsets_keep_the_shape_of_sparks_kafka_source():
    offsets = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    assert nested(offsets) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert flat(nested(offsets)) == offsets


def test_a_micro_batch_ends_at_the_latest_offsets_or_prorated_as_max_offsets_per_trigger():
    start = {("a", 0): 100, ("a", 1): 0}
    latest = {("a", 0): 1100, ("a", 1): 3000, ("a", 2): 10}  # ("a", 2) is new since start: from 0
    assert bounded(start, latest, None) == latest
    assert bounded(start, latest, 10_000) == latest
    # 4,010 records of backlog, 401 allowed: each partition its share, rounded down, at least one where it has any
    assert bounded(start, latest, 401) == {("a", 0): 200, ("a", 1): 300, ("a", 2): 1}
    assert bounded({("a", 0): 50}, {("a", 0): 40}, None) == {("a", 0): 50}  # never backwards


def test_each_partition_with_records_is_one_range():
    assert planned({("a", 0): 100, ("a", 1): 5}, {("a", 0): 200, ("a", 1): 5, ("b", 0): 3}) == [
        ("a", 0, 100, 200), ("b", 0, 0, 3)]


def test_what_the_own_reader_does_not_do_yet_is_refused_in_one_line():
    def conf(**extra):
        return cfg.parse({"cluster": {"bootstrap_servers": "k:9092"}, "spark": {"read": "transcoder"},
                          "routes": [{"source": "a", "destinations": [{"codec": "lz4"}]}], **extra}, environ={})

    assert refusal(conf()) is None
    assert "a start timestamp needs spark.read: kafka" in refusal(conf(start="2026-01-01T00:00:00Z"))
    assert "live scoring" in refusal(conf(evaluate={"candidates": [{"codec": "zstd"}]}))
