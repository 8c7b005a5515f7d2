"""`migrate plan` facts against the real broker: measured ratio and projections, groups, pre-flight, destinations."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.configs import make_config
from transcoder.errors import ConfigError, MigrationError
from transcoder.kafka.protocol import RawClient
from transcoder.migrate import plan as planning

RECORDS = 3000


def _value(i: int) -> bytes:
    return (f'10.0.{i % 5}.{i % 250} - - [01/Jan/2026:00:00:{i % 60:02d} +0000] "GET /api/v1/items/{i} HTTP/1.1" '
            f'200 {512 + i} "-" "curl/8.5.0"').encode()


def _fill(producer_factory, topic: str, codec: str, partitions: int = 3) -> None:
    p = producer_factory(**{"compression.type": codec, "linger.ms": 50, "batch.size": 262144})
    for i in range(RECORDS):
        p.produce(topic, value=_value(i), partition=i % partitions)
    assert p.flush(30) == 0


def _wait_sizes(kafka, *topics: str, timeout: float = 30.0) -> None:
    """DescribeLogDirs reports a partition's size a moment after the records are written."""
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        deadline = time.monotonic() + timeout
        while not all(info.topic_sizes(topics).values()):
            assert time.monotonic() < deadline, f"no size reported for {topics} within {timeout} s"
            time.sleep(0.2)
    finally:
        info.close()


def _group_commits(kafka, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _config(kafka, source: str, destination: str, *, codec: str = "zstd", name: str = "shadow", **extra):
    return make_config(kafka, [{"source": source, "destinations": [
        {"codec": codec, "name": name, "topic": destination, "batch": {"max_bytes": 524288, "linger_ms": 20}}]}],
        migration={}, **extra)


def test_plan_measures_the_shadow_copy(kafka, topic_factory, producer_factory):
    source = topic_factory(partitions=3)
    destination = topic_factory(partitions=3, config={"compression.type": "producer"})
    _fill(producer_factory, source, "none")
    _fill(producer_factory, destination, "zstd")
    _wait_sizes(kafka, source, destination)
    config = _config(kafka, source, destination)
    reader = f"reader-{uuid.uuid4().hex[:8]}"
    _group_commits(kafka, reader, source, {0: 100, 1: 1000, 2: 0})
    _group_commits(kafka, f"{config.group_id}.shadow", source, {0: 1000, 1: 1000, 2: 1000})  # the lane: left out

    p = planning.make_plan(config, None, groups=None)

    assert p.target == "shadow" and p.codec == "zstd" and p.batch_max_bytes == 524288 and p.batch_linger_ms == 20
    assert (p.source.topic, p.source.partitions, p.source.records) == (source, 3, RECORDS)
    assert (p.destination.topic, p.destination.partitions, p.destination.records) == (destination, 3, RECORDS)
    assert p.destination.exists and p.destination.compression_type == "producer"
    assert p.lane_group == f"{config.group_id}.shadow"

    assert [g.group_id for g in p.groups] == [reader]
    g = p.groups[0]
    assert g.committed == {0: 100, 1: 1000, 2: 0}
    assert g.lag_by_partition == {0: 900, 1: 0, 2: 1000} and g.lag == 1900

    src, dst = p.source, p.destination
    pr = p.projection
    assert pr.measured and pr.note is None
    assert pr.source_bytes_per_record == pytest.approx(src.disk_bytes / src.replication_factor / RECORDS)
    assert pr.destination_bytes_per_record == pytest.approx(dst.disk_bytes / dst.replication_factor / RECORDS)
    assert pr.ratio == pytest.approx(pr.source_bytes_per_record / pr.destination_bytes_per_record)
    assert pr.ratio > 1.5  # uncompressed source, zstd copy of the same records
    # Same records on both sides: the projected destination disk is what the destination takes now.
    assert pr.projected_destination_disk_bytes == pytest.approx(dst.disk_bytes)
    assert pr.projected_destination_disk_bytes < src.disk_bytes
    [net] = pr.groups
    assert net.group_id == reader and net.lag_records == 1900
    assert net.source_fetch_bytes == pytest.approx(1900 * pr.source_bytes_per_record)
    assert net.destination_fetch_bytes == pytest.approx(1900 * pr.destination_bytes_per_record)

    status = {c.name: c.status for c in p.checks}
    assert status["zstd brokers"] == "ok"
    assert status["broker recompression"] == "ok"
    assert status["partitions"] == "ok"
    assert status["migration config"] == "ok"
    assert status["disk and network"] == "ok"
    zstd_consumers = next(c for c in p.checks if c.name == "zstd consumers")
    assert zstd_consumers.status == "check" and zstd_consumers.groups == (reader,)
    assert p.problems == ()
    assert [s.name for s in p.stages] == ["start", "verify", f"cutover {reader}", "rollback", "finish"]

    doc = json.loads(json.dumps(planning.as_dict(p), sort_keys=True))
    assert doc["projection"]["ratio"] == pytest.approx(pr.ratio)
    assert doc["groups"][0]["committed"] == {"0": 100, "1": 1000, "2": 0}

    # Named groups: only those; an unknown one is refused.
    assert [g.group_id for g in planning.make_plan(config, "shadow", groups=[reader]).groups] == [reader]
    unknown = f"nobody-{uuid.uuid4().hex[:8]}"
    with pytest.raises(MigrationError, match=f"group {unknown} is unknown to the cluster"):
        planning.make_plan(config, "shadow", groups=[unknown])


def test_plan_before_the_copy_and_with_a_recompressing_destination(kafka, topic_factory, producer_factory):
    source = topic_factory(partitions=2)
    _fill(producer_factory, source, "none", partitions=2)
    missing = f"{source}.zstd-not-yet"
    p = planning.make_plan(_config(kafka, source, missing), "shadow", groups=None)
    assert not p.destination.exists and p.destination.partitions is None
    assert not p.projection.measured
    assert p.projection.note.startswith(planning.NOT_MEASURED)
    assert {c.name: c.status for c in p.checks}["broker recompression"] == "ok"
    assert p.groups == ()

    gzip_dest = topic_factory(partitions=2, config={"compression.type": "gzip"})
    p = planning.make_plan(_config(kafka, source, gzip_dest), None, groups=None)
    [problem] = p.problems
    assert problem.name == "broker recompression"
    assert "compression.type=gzip" in problem.detail
    assert (f"kafka-configs --bootstrap-server {kafka.bootstrap} --alter --entity-type topics --entity-name "
            f"{gzip_dest} --add-config compression.type=producer") in problem.detail
    assert p.projection.note == f"{planning.NOT_MEASURED} (the destination holds no records)"


def test_destination_must_be_in_the_config_and_copy_one_topic(kafka, topic_factory):
    source, other = topic_factory(partitions=1), topic_factory(partitions=1)
    config = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd", "name": "a"},
                                                                      {"codec": "lz4", "name": "b"}]}])
    with pytest.raises(ConfigError, match="destination 'nope' is not in the config; it has: a, b"):
        planning.make_plan(config, "nope", groups=None)
    with pytest.raises(ConfigError, match="2 destinations: name one with --destination"):
        planning.make_plan(config, None, groups=None)
    assert planning.make_plan(config, f"{source}.lz4", groups=None).target == "b"  # its topic names it too

    pattern = make_config(kafka, [{"source_pattern": f"({source}|{other})",
                                   "destinations": [{"codec": "zstd", "name": "p"}]}])
    with pytest.raises(ConfigError, match="copies 2 topics .*literal `source`"):
        planning.make_plan(pattern, "p", groups=None)
