"""Source record loss, the pure parts: the offset map's lost ranges (encoded, decoded, merged, looked up), a loss's
record count, the on_source_loss config key, and the Spark engine's option that honours it."""

from __future__ import annotations

import pytest

from transcoder import config as cfg
from transcoder.errors import ConfigError
from transcoder.kafka.fetcher import SourceLoss
from transcoder.pipeline.offset_runs import MapEntry, PartitionMap, Run, partition_maps


def conf(**extra: object) -> cfg.Config:
    return cfg.parse({"cluster": {"bootstrap_servers": "k:9092"},
                      "routes": [{"source": "a", "destinations": [{"codec": "zstd"}]}], **extra}, environ={})


def test_a_lost_range_round_trips_and_an_entry_without_one_is_encoded_as_before():
    e = MapEntry("a", "a.zstd", 2, (), ((100, 250),))
    assert MapEntry.decode(e.encode()) == e
    plain = MapEntry("a", "a.zstd", 2, (Run(0, 0, 5),))
    assert b"lost" not in plain.encode() and MapEntry.decode(plain.encode()) == plain
    with pytest.raises(ValueError, match="lost range"):
        MapEntry.decode(b'{"v":1,"source":"a","destination":"d","partition":0,"runs":[],"lost":[[5,5]]}')


def test_lost_ranges_join_their_partition_map_and_are_found_from_an_offset():
    maps = partition_maps([MapEntry("a", "d", 0, (Run(0, 0, 100),)), MapEntry("a", "d", 0, (), ((100, 250),)),
                           MapEntry("a", "d", 0, (Run(250, 100, 50),)), MapEntry("a", "d", 0, (), ((100, 250),)),
                           MapEntry("a", "other", 0, (), ((0, 9),))], "d")
    m = maps[0]
    assert m.lost == [(100, 250)]  # the same gap marked twice (the lane ran twice) is one gap
    assert m.lost_from(0) == (100, 250) and m.lost_from(249) == (100, 250) and m.lost_from(250) is None
    # translation is unchanged: a group at the gap resumes at the copy of the first record after it
    assert m.forward(120) == 100
    only_lost = partition_maps([MapEntry("a", "d", 1, (), ((0, 30),))], "d")[1]
    assert not only_lost and only_lost.lost_from(0) == (0, 30)
    assert PartitionMap([]).lost_from(0) is None


def test_a_loss_counts_the_records_between_the_position_and_the_first_offset():
    assert SourceLoss("a", 0, offset=100, first=250, end=400).records == 150
    # the partition ends before the position (truncated, recreated): how many were lost is unknown
    assert SourceLoss("a", 0, offset=500, first=0, end=40).records is None


def test_on_source_loss_defaults_to_stop_and_takes_only_stop_or_continue():
    assert conf().on_source_loss == "stop"
    assert conf(on_source_loss="continue").on_source_loss == "continue"
    with pytest.raises(ConfigError, match="on_source_loss"):
        conf(on_source_loss="skip")


def test_the_spark_engine_honours_on_source_loss():
    from transcoder.spark.source import read_options

    assert read_options(conf(), ["a"])["failOnDataLoss"] == "true"
    assert read_options(conf(on_source_loss="continue"), ["a"])["failOnDataLoss"] == "false"


def test_a_recreated_topic_counts_the_records_seen_and_not_copied_or_says_unknown():
    seen = SourceLoss("a", 0, 100, 0, 0, topic_id="old", new_topic_id="new", seen_end=140)
    assert seen.recreated and seen.records == 40
    assert SourceLoss("a", 0, 100, 0, 0, topic_id="old", new_topic_id="new", seen_end=100).records == 0
    assert SourceLoss("a", 0, 100, 0, 0, topic_id="old", new_topic_id="new").records is None  # its end never seen
    # not recreated: a partition that starts again below the position is an unknown loss, as before
    assert not SourceLoss("a", 0, 100, 0, 30).recreated and SourceLoss("a", 0, 100, 0, 30).records is None
