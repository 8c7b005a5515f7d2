"""Source record loss, the pure parts: the offset map's lost ranges (encoded, decoded, merged, looked up), a loss's
record count, the on_source_loss config key, and the Spark engine's option that honours it; a recreated source:
the source topic ids the map records with its runs and recreations, the old topic's copies set apart from the new
one's, and the decision a lane takes from them for a partition its group never committed."""

from __future__ import annotations

import pytest

from transcoder import config as cfg
from transcoder.errors import ConfigError
from transcoder.kafka.fetcher import SourceLoss
from transcoder.pipeline.offset_runs import (
    MapBuilder,
    MapEntry,
    PartitionMap,
    Recreation,
    ReplacedSource,
    Run,
    partition_maps,
    replaced_source,
)


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


def test_ids_and_recreations_round_trip_and_entries_without_them_read_as_before():
    e = MapEntry("a", "d", 0, (Run(0, 0, 5),), source_id="id-a")
    assert MapEntry.decode(e.encode()) == e
    found = MapEntry("a", "d", 0, (), ((300, 301),), "id-a", Recreation("id-a", "id-b", 300, None, continued=True))
    assert MapEntry.decode(found.encode()) == found
    old = MapEntry.decode(b'{"v":1,"source":"a","destination":"d","partition":0,"runs":[[0,0,5]]}')
    assert old == MapEntry("a", "d", 0, (Run(0, 0, 5),)) and old.source_id is None and old.recreated is None


def test_runs_name_the_topic_id_they_began_under_and_a_recreated_topics_copies_are_an_entry_of_their_own():
    b = MapBuilder()
    b.ids["a"] = "id-a"
    for s in range(3):
        b.add("a", "d", 0, s, s)
    b.ids["a"] = "id-b"  # recreated: the new topic is read from its start
    for s in range(2):
        b.add("a", "d", 0, s, 3 + s)
    assert b.take() == [MapEntry("a", "d", 0, (Run(0, 0, 3),), source_id="id-a"),
                        MapEntry("a", "d", 0, (Run(0, 3, 2),), source_id="id-b")]


def _maps(*entries: MapEntry) -> PartitionMap:
    return partition_maps([MapEntry.decode(e.encode()) for e in entries], "d")[0]


OLD = MapEntry("a", "d", 0, (Run(0, 0, 300),), source_id="id-a")  # the old topic's 300 records copied
NEW = MapEntry("a", "d", 0, (Run(0, 300, 600),), source_id="id-b")  # the new topic's 600, after them


def test_the_map_is_the_newest_topics_copies_and_the_old_topics_are_set_apart():
    m = _maps(OLD, MapEntry("a", "d", 0, (), ((300, 301),), "id-a", Recreation("id-a", "id-b", 300, None, True)),
              NEW)
    assert (m.source_id, m.runs, m.replaced) == ("id-b", [Run(0, 300, 600)], [Run(0, 0, 300)])
    assert m.lost == []  # the recreation's range is the old topic's offsets, not the new one's
    # a group at the new topic's offset 0 resumes at the copy of the new topic's record 0, not the old one's
    assert m.forward(0) == 300 and m.source_end == 600 and m.backward(300) == 0
    # stopped on it: nothing of the new topic copied, the old topic's copies are no map of the topic now
    stopped = _maps(OLD, MapEntry("a", "d", 0, (), ((300, 301),), "id-a", Recreation("id-a", "id-b", 300, None)))
    assert (stopped.runs, stopped.replaced, stopped.source_id) == ([], [Run(0, 0, 300)], None)


def test_runs_without_an_id_belong_to_the_topic_after_them_unless_a_recreation_was_found_from_them():
    legacy = MapEntry("a", "d", 0, (Run(0, 0, 300),))
    upgraded = _maps(legacy, MapEntry("a", "d", 0, (Run(300, 300, 10),), source_id="id-a"))
    assert upgraded.runs == [Run(0, 0, 300), Run(300, 300, 10)] and upgraded.source_id == "id-a"
    found = _maps(legacy, MapEntry("a", "d", 0, (), ((300, 301),), None, Recreation(None, "id-b", 300, None, True)),
                  NEW)
    assert (found.runs, found.replaced) == ([Run(0, 300, 600)], [Run(0, 0, 300)])
    assert _maps(legacy).runs == [Run(0, 0, 300)] and _maps(legacy).source_id is None


@pytest.mark.parametrize(("entries", "now", "verdict"), [
    ([], "id-a", None),  # nothing mapped
    ([OLD], "id-a", None),  # the same topic: a copy that stopped before its first commit
    ([OLD], "id-b", ReplacedSource("id-a", (0, 300), 300)),  # recreated while no lane ran
    ([MapEntry("a", "d", 0, (Run(0, 0, 300),))], "id-b", ReplacedSource(None, (0, 300), 300)),  # no id recorded
    ([OLD], None, ReplacedSource("id-a", (0, 300), 300)),  # the id now unknown: nothing shows it is the same
    # stopped on it before: still a loss until a run goes on with on_source_loss: continue
    ([OLD, MapEntry("a", "d", 0, (), ((300, 301),), "id-a", Recreation("id-a", "id-b", 300, None))], "id-b",
     ReplacedSource("id-a", (0, 300), 300)),
    # went on (continue), nothing of the new topic copied yet: no loss again
    ([OLD, MapEntry("a", "d", 0, (), ((300, 301),), "id-a", Recreation("id-a", "id-b", 300, None, True))], "id-b",
     None),
    ([OLD, NEW], "id-b", None),
    ([OLD, NEW], "id-c", ReplacedSource("id-b", (0, 600), 600)),  # recreated once more
    ([MapEntry("a", "d", 0, (), ((0, 30),))], "id-a", None),  # records deleted before any was copied: not this
])
def test_a_partition_never_committed_is_a_recreation_where_the_map_copied_another_topic(entries, now, verdict):
    pmap = partition_maps([MapEntry.decode(e.encode()) for e in entries], "d").get(0)
    assert replaced_source(pmap, now) == verdict
