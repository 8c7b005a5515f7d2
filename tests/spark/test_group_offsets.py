"""The lane's consumer group on the Spark engine, on the session's SparkSession. exactly-once: a copy in several
micro-batches, then the last one replayed as Spark replays it after a driver killed between its tasks' commits and
the checkpoint's. at-least-once with spark.commit_group: the group's offsets where the copy is. Both with Spark's
Kafka source reading and with transcoder's own reader (spark.read: transcoder)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.configs import make_config
from tests.support.faults import compare_topics
from transcoder.spark import checkpoints
from transcoder.spark.engine import SparkEngine

PARTITIONS = 3
PER_PARTITION = 1000


@pytest.mark.parametrize("read", ["kafka", "transcoder"])
def test_a_micro_batch_replayed_after_its_tasks_committed_copies_nothing_twice(read, kafka, spark, topic_factory,
                                                                              producer_factory, tmp_path):
    source = topic_factory(partitions=PARTITIONS)
    producer = producer_factory(**{"linger.ms": 5})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(source, key=f"k{i}".encode(), value=f'{{"n": {i}, "path": "/a/{i % 17}"}}'.encode(),
                         partition=i % PARTITIONS, headers=[("n", str(i).encode())] if i % 2 else None)
    assert producer.flush(60) == 0
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd"}]}], guarantee="exactly-once",
                       spark={"checkpoint_location": str(tmp_path), "max_offsets_per_trigger": 1200, "read": read})
    first = SparkEngine(conf, spark=spark)
    first.run(until_caught_up=True)
    [lane] = first.lanes
    assert lane.batches >= 3 and lane.status.records == PARTITIONS * PER_PARTITION

    # The driver "killed" after the last micro-batch's tasks committed their transactions, before the checkpoint
    # recorded the batch: its commit file gone, Spark runs that batch again, over the same offsets.
    commits = Path(checkpoints.lane_location(conf, lane.spec)) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    second = SparkEngine(conf, spark=spark)
    second.run(until_caught_up=True)
    [again] = second.lanes
    assert again.batches == 1, "the micro-batch was not replayed"
    assert again.status.records == 0  # its tasks found the group's offsets at their runs' ends

    dest = lane.spec.targets[0].topic_for(source)
    result = compare_topics(kafka.bootstrap, source, dest)
    assert result.source == PARTITIONS * PER_PARTITION, result.summary()
    assert (result.lost, result.duplicates, result.foreign, result.in_order) == (0, 0, 0, True), result.summary()
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": lane.spec.group_id,
                  "isolation.level": "read_committed"})
    try:  # the lane's group holds the copy's progress, as kafka-consumer-groups shows it
        got = c.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        c.close()
    assert [tp.offset for tp in got] == [PER_PARTITION] * PARTITIONS


@pytest.mark.parametrize("read", ["kafka", "transcoder"])
def test_at_least_once_with_commit_group_shows_its_progress_in_the_lanes_group(read, kafka, spark, topic_factory,
                                                                               producer_factory, tmp_path):
    source = topic_factory(partitions=PARTITIONS)
    producer = producer_factory()
    for i in range(PARTITIONS * 200):
        producer.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}],
                       spark={"checkpoint_location": str(tmp_path), "commit_group": True, "read": read})
    engine = SparkEngine(conf, spark=spark)
    engine.run(until_caught_up=True)
    [lane] = engine.lanes
    result = compare_topics(kafka.bootstrap, source, lane.spec.targets[0].topic_for(source))
    assert (result.source, result.lost, result.duplicates, result.foreign) == (PARTITIONS * 200, 0, 0, 0), \
        result.summary()
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": lane.spec.group_id})
    try:
        got = c.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        c.close()
    assert [tp.offset for tp in got] == [200] * PARTITIONS
