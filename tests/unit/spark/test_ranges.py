"""spark.read: transcoder: the micro-batch ends the driver plans, and the ranges its tasks copy."""

from __future__ import annotations

import pytest

from transcoder.spark.ranges import IdlePacing, bounded, flat, nested, planned


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


def test_an_idle_reader_asks_kafka_at_most_every_idle_ask_s_and_a_busy_one_at_once():
    pacing = IdlePacing(ask_every_s=0.1)
    assert pacing.wait_s(10.0) == 0.0  # the first ask
    pacing.answered(10.0, new=True)  # a backlog: Spark plans a micro-batch and asks again at once
    assert pacing.wait_s(10.01) == 0.0
    pacing.answered(10.02, new=False)  # nothing new: Spark asks again 10 ms later, the reader waits out the rest
    assert pacing.wait_s(10.03) == pytest.approx(0.09)
    assert pacing.wait_s(10.2) == 0.0
    pacing.answered(10.2, new=True)
    assert pacing.wait_s(10.21) == 0.0
