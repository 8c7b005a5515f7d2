"""Source topology changes and source record loss, on the session's broker: never silent.

- Records a lane had not copied yet deleted from the source (DeleteRecords while the lane is stopped): the next run
  names the loss in one line, counts it (transcoder_source_records_lost_total), marks the offset map's gap (verify
  reports it, not `equal`), and stops (on_source_loss: stop, the default) or copies on after it (continue).
- A partition added to a running source: a destination transcoder created is extended and the partition copied;
  any other destination stops the lane naming the topic and both partition counts, and verify never reports
  `equal` for a partition whose records have no copy.
- A source topic deleted and recreated (a new topic id): under a running lane, one source_records_lost line names
  both ids, the lane's position and the old topic's last end seen; stop copies and commits nothing of the new topic,
  continue copies it from its start. Between runs, with a migration section, the offset map tells: the group has no
  committed offset and the map's copies name another topic id; verify names the recreation.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
import structlog
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import NewPartitions, NewTopic

from tests.support.configs import make_config
from tests.support.records import read_all
from tests.support.running import ServiceThread
from transcoder.errors import DataLossError, TranscoderError
from transcoder.kafka import offset_map_topic as offset_map
from transcoder.metrics.registry import Metrics
from transcoder.migrate.compare import LOST_IN_SOURCE, NOT_COPIED, RECREATED
from transcoder.migrate.verify import verify
from transcoder.pipeline.offset_runs import Recreation, Run
from transcoder.service.runner import Service

HOT_PATHS = ["batches", "records"]


def _produce(producer_factory: Any, topic: str, lo: int, hi: int, partition: int = 0) -> None:
    p = producer_factory(**{"enable.idempotence": True})
    for i in range(lo, hi):
        p.produce(topic, key=f"k-{partition}-{i}".encode(), value=f"v-{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def _copied(kafka: Any, topic: str) -> int:
    """Records in `topic` so far; 0 while the topic just created has no leader yet."""
    try:
        return len(read_all(kafka.bootstrap, topic, timeout=5))
    except KafkaException:
        return 0


def _stopped_at_the_gap(kafka: Any, conf: Any, source: str, dest: str, error: BaseException, metrics: Metrics) -> Any:
    """Records 100..249 of `source` [0] were deleted before they were copied, under on_source_loss: stop: the error
    names them in one line, the counter counts them, nothing past the gap was copied, and the offset map marks the
    gap (verify reports it, not `equal`). The verify result."""
    line = str(error)
    assert isinstance(error, DataLossError) and error.exit_code == 4, type(error)
    assert f"source records 100..249 of {source} [0] (150) were deleted before they were copied" in line, line
    assert "on_source_loss: stop" in line and "\n" not in line
    assert (error.topic, error.partition, error.offset) == (source, 0, 100)
    assert _lost(metrics, source) == 150
    assert [r[2] for r in read_all(kafka.bootstrap, dest)] == [f"k-0-{i}".encode() for i in range(100)]
    maps, _ = offset_map.read(conf, dest)
    assert maps[0].lost == [(100, 250)]
    result = verify(conf, source, dest, maps)[0]
    assert result.mismatch is not None and result.mismatch.field == LOST_IN_SOURCE, result.line
    return result


def _lost(metrics: Metrics, topic: str) -> float:
    return sum(s.value for fam in metrics.registry.collect() if fam.name == "transcoder_source_records_lost"
               for s in fam.samples if s.name.endswith("_total") and s.labels.get("topic") == topic)


@pytest.mark.parametrize(("hot_path", "guarantee"), [("batches", "at-least-once"), ("records", "at-least-once"),
                                                    ("batches", "exactly-once"), ("records", "exactly-once")])
def test_records_deleted_before_they_were_copied_stop_the_lane_then_continue(
        kafka, admin, topic_factory, producer_factory, hot_path, guarantee) -> None:
    source = topic_factory(partitions=1)
    dest = f"{source}.zstd"
    routes = [{"source": source, "destinations": [{"codec": "zstd"}]}]
    conf = make_config(kafka, routes, hot_path=hot_path, guarantee=guarantee, migration={})
    _produce(producer_factory, source, 0, 100)
    Service(conf).run(until_caught_up=True)
    assert [r[2] for r in read_all(kafka.bootstrap, dest)] == [f"k-0-{i}".encode() for i in range(100)]

    # The lane is stopped; the source gets 300 more records, and the first 150 of them are deleted before the
    # lane read them (retention or DeleteRecords overtaking a lagging lane).
    _produce(producer_factory, source, 100, 400)
    for fut in admin.delete_records([TopicPartition(source, 0, 250)]).values():
        fut.result()

    metrics = Metrics()
    with pytest.raises(TranscoderError) as stopped:
        Service(conf, metrics=metrics).run(until_caught_up=True)
    result = _stopped_at_the_gap(kafka, conf, source, dest, stopped.value, metrics)
    # (the source's records 0..249 are all gone: nothing before the gap is left to compare)
    assert (result.mismatch.source_offset, result.verified_through) == (100, 100)
    assert "source offsets 100..249 (150 records)" in result.line

    # on_source_loss: continue: the loss is named and counted again, and the copy goes on after the gap
    metrics = Metrics()
    cont = make_config(kafka, routes, hot_path=hot_path, guarantee=guarantee, migration={},
                       on_source_loss="continue", group_id=conf.group_id)
    Service(cont, metrics=metrics).run(until_caught_up=True)
    assert _lost(metrics, source) == 150
    got = [(r[2], r[3]) for r in read_all(kafka.bootstrap, dest)]
    want = [(f"k-0-{i}".encode(), f"v-0-{i}".encode()) for i in [*range(100), *range(250, 400)]]
    assert got == want
    result = verify(cont, source, dest, offset_map.read(cont, dest)[0])[0]
    assert result.mismatch is not None and result.mismatch.field == LOST_IN_SOURCE, result.line


def test_records_deleted_before_they_were_copied_on_spark_with_its_own_reader(kafka, admin, spark, tmp_path,
                                                                          topic_factory, producer_factory) -> None:
    """spark.read: transcoder (the default): the tasks' fetchers find the loss, the driver says, counts and marks it
    as the service does; stop fails the micro-batch naming it, continue copies on after the gap."""
    from transcoder.spark.engine import SparkEngine

    source = topic_factory(partitions=1)
    dest = f"{source}.zstd"
    routes = [{"source": source, "destinations": [{"codec": "zstd"}]}]
    on_spark = {"read": "transcoder", "checkpoint_location": str(tmp_path)}
    conf = make_config(kafka, routes, migration={}, spark=on_spark)
    _produce(producer_factory, source, 0, 100)
    SparkEngine(conf, spark=spark).run(until_caught_up=True)
    _produce(producer_factory, source, 100, 400)
    for fut in admin.delete_records([TopicPartition(source, 0, 250)]).values():
        fut.result()

    metrics = Metrics()
    with pytest.raises(DataLossError) as stopped:
        SparkEngine(conf, metrics=metrics, spark=spark).run(until_caught_up=True)
    _stopped_at_the_gap(kafka, conf, source, dest, stopped.value, metrics)

    metrics = Metrics()
    cont = conf.model_copy(update={"on_source_loss": "continue"})
    SparkEngine(cont, metrics=metrics, spark=spark).run(until_caught_up=True)
    assert _lost(metrics, source) == 150
    got = [(r[2], r[3]) for r in read_all(kafka.bootstrap, dest)]
    assert got == [(f"k-0-{i}".encode(), f"v-0-{i}".encode()) for i in [*range(100), *range(250, 400)]]


@pytest.mark.parametrize("own", [True, False], ids=["created-by-transcoder", "created-by-the-user"])
@pytest.mark.parametrize("hot_path", HOT_PATHS)
def test_a_partition_added_to_a_running_source_is_copied_or_stops_the_lane_naming_both_counts(
        kafka, admin, topic_factory, producer_factory, hot_path, own) -> None:
    source = topic_factory(partitions=3)
    dest = f"{source}.lz4"
    if not own:
        topic_factory(partitions=3, name=dest)
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}], hot_path=hot_path,
                       migration={}, cluster={"bootstrap_servers": kafka.bootstrap,
                                              "config": {"topic.metadata.refresh.interval.ms": 1000}})
    for p in range(3):
        _produce(producer_factory, source, 0, 50, partition=p)
    service = Service(conf)
    t = ServiceThread(service).start()
    failed = t.errors
    deadline = time.monotonic() + 60
    while _copied(kafka, dest) < 150:
        assert time.monotonic() < deadline, "the first 150 records were not copied"
        assert t.is_alive(), failed
        time.sleep(0.5)
    for fut in admin.create_partitions([NewPartitions(source, 4)]).values():
        fut.result()
    _produce(producer_factory, source, 0, 100, partition=3)
    if own:  # the destination transcoder created is extended, and partition 3 copied into partition 3
        try:
            while _copied(kafka, dest) < 250:
                assert time.monotonic() < deadline + 60, "partition 3 was not copied"
                assert t.is_alive(), failed
                time.sleep(0.5)
        finally:
            service.stop()
            t.join(60)
        assert not failed, failed
        got = [(r[0], r[2], r[3]) for r in read_all(kafka.bootstrap, dest) if r[0] == 3]
        assert got == [(3, f"k-3-{i}".encode(), f"v-3-{i}".encode()) for i in range(100)]
        results = verify(conf, source, dest, offset_map.read(conf, dest)[0])
        assert [(p, r.mismatch, r.compared) for p, r in sorted(results.items())] == \
               [(0, None, 50), (1, None, 50), (2, None, 50), (3, None, 100)]
        return
    t.join(60)
    if t.is_alive():
        service.stop()
        t.join(60)
        pytest.fail("the lane did not stop on a partition its destination does not have")
    assert len(failed) == 1 and isinstance(failed[0], TranscoderError), failed
    line = str(failed[0])
    assert f"source {source} has 4 partitions now but its destination {dest} has 3: partition 3" in line, line
    assert (failed[0].topic, failed[0].partition) == (source, 3)

    # verify: partition 3 has records and no copy: never `equal`
    results = verify(conf, source, dest, offset_map.read(conf, dest)[0])
    assert all(results[p].mismatch is None and results[p].compared == 50 for p in range(3)), results
    m = results[3].mismatch
    assert m is not None and m.field == NOT_COPIED and m.source_offset == 0, results[3].line
    assert "source offsets 0..99 (100 records) have no copy" in results[3].line


def _topic_id(admin: Any, topic: str) -> str:
    """The topic's id, once its creation has reached the broker's metadata."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return str(admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id)
        except KafkaException as exc:  # UNKNOWN_TOPIC_OR_PART right after the creation
            assert time.monotonic() < deadline, exc
            time.sleep(0.2)


def _recreate_with(admin: Any, producer_factory: Any, source: str, old_id: str, new: int) -> str:
    """`_recreate` the source, then write `new` records (new-i, w-i) to its partition 0; its new topic id."""
    _recreate(admin, source)
    new_id = _topic_id(admin, source)
    assert new_id != old_id
    p = producer_factory(**{"enable.idempotence": True})
    for i in range(new):
        p.produce(source, key=f"new-{i}".encode(), value=f"w-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    return new_id


def _recreate(admin: Any, topic: str) -> None:
    """Delete `topic` and create it again under the same name (1 partition), once the deletion is done."""
    for fut in admin.delete_topics([topic], operation_timeout=30).values():
        fut.result()
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                operation_timeout=30)[topic].result()
            return
        except KafkaException as exc:  # the deletion still under way (TOPIC_ALREADY_EXISTS)
            assert time.monotonic() < deadline, exc
            time.sleep(0.2)


@pytest.mark.parametrize(("hot_path", "on_source_loss", "new"), [
    ("batches", "stop", 30), ("records", "stop", 30), ("batches", "continue", 30), ("records", "continue", 30),
    # more records in the new topic than the lane's position in the old one: offsets alone look fine there
    ("batches", "stop", 150), ("records", "continue", 150)])
def test_a_source_topic_deleted_and_recreated_under_a_running_lane_is_a_loss_never_silent(
        kafka, admin, topic_factory, producer_factory, hot_path, on_source_loss, new) -> None:
    """The lane copied the old topic's 100 records; the topic is deleted, created again (a new topic id) and
    given `new` records. One source_records_lost line names both ids, the lane's position (100) and the old
    topic's last end it saw (100: 0 records known lost); stop: the lane fails naming it, nothing of the new topic
    copied or committed; continue: the new topic is copied from its start. The offset map marks the recreation (both
    ids) and names each copy's topic id: verify compares the new topic's copies and names the old topic's."""
    source = topic_factory(partitions=1)
    dest = f"{source}.zstd"
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd"}]}], hot_path=hot_path,
                       on_source_loss=on_source_loss, migration={},
                       cluster={"bootstrap_servers": kafka.bootstrap,
                                "config": {"topic.metadata.refresh.interval.ms": 1000}})
    _produce(producer_factory, source, 0, 100)
    old_id = _topic_id(admin, source)
    metrics = Metrics()
    service = Service(conf, metrics=metrics)
    with structlog.testing.capture_logs() as logs:
        t = ServiceThread(service).start()
        failed = t.errors
        deadline = time.monotonic() + 60
        while _copied(kafka, dest) < 100:
            assert time.monotonic() < deadline, "the first 100 records were not copied"
            assert t.is_alive(), failed
            time.sleep(0.5)
        time.sleep(1.5)  # the group commits them (commit_interval_ms)
        new_id = _recreate_with(admin, producer_factory, source, old_id, new)
        if on_source_loss == "stop":
            t.join(60)
            if t.is_alive():
                service.stop()
                t.join(60)
                pytest.fail(f"the lane did not stop on its source recreated: {failed}; its last events: "
                            f"{[(x['event'], x.get('partitions')) for x in logs][-40:]}")
        else:
            try:
                while _copied(kafka, dest) < 100 + new:
                    assert time.monotonic() < deadline + 60, (
                        f"the new topic was not copied: {failed}; its last events: "
                        f"{[(x['event'], x.get('partitions'), x.get('note')) for x in logs][-40:]}")
                    assert t.is_alive(), failed
                    time.sleep(0.5)
                time.sleep(1.5)  # committed
            finally:
                service.stop()
                t.join(60)
    lost = [e for e in logs if e["event"] == "source_records_lost"]
    assert len(lost) == 1, (failed, [x["event"] for x in logs])
    e = lost[0]
    # Where the lane was when it found the recreation: 100, unless (hot_path: records, `new` past 100) librdkafka read
    # the new topic from the old position before the lane's next topic-id check: the known gap of docs/guarantees.md
    at = e["offset"] if hot_path == "records" and new > 100 else 100
    assert 100 <= at <= 100 + new, e
    assert (e["topic"], e["partition"], e["offset"], e["topic_id"], e["new_topic_id"], e["last_end_offset"],
            e["records_lost"]) == (source, 0, at, old_id, new_id, at, 0), e
    got = [(r[2], r[3]) for r in read_all(kafka.bootstrap, dest)]
    old = [(f"k-0-{i}".encode(), f"v-0-{i}".encode()) for i in range(100)]
    group = service.lanes[0].spec.group_id  # the lane's own group (lanes: isolated)
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(source, 0)])])[group].result()
    offset = committed.topic_partitions[0].offset
    if on_source_loss == "stop":
        assert len(failed) == 1 and isinstance(failed[0], DataLossError), failed  # `run` exits 4
        line = str(failed[0])
        assert f"source topic {source} was deleted and recreated (topic id {old_id} is now {new_id})" in line, line
        assert "on_source_loss: stop" in line and "\n" not in line
        assert got == old  # nothing of the new topic copied
        assert offset < 0, offset  # nothing committed into the new topic (the old topic's 100 least of all)
    else:
        assert not failed, failed
        fresh = [(f"new-{i}".encode(), f"w-{i}".encode()) for i in range(new)]
        events = [(x["event"], x.get("partitions")) for x in logs if x["event"] != "lane_progress"]
        gap = hot_path == "records" and new > 100 and got != old + fresh
        if gap:  # the known gap: the new topic's records from the old position on, some twice; none missing
            twice = Counter(got[100:]) - Counter(fresh)
            assert got[:100] == old and not Counter(fresh) - Counter(got[100:]), (len(got), events)
            assert not twice - Counter(fresh[100:]) and max(twice.values()) == 1, (twice, events)
        else:
            assert got == old + fresh, f"{len(got)} records copied, {len(got) - len(set(got))} twice: {events}"
        assert offset == new, offset  # the new topic's own end, never the old topic's position (100)
    pmap = offset_map.read(conf, dest)[0][0]
    assert pmap.recreations == [Recreation(old_id, new_id, at, 0, continued=on_source_loss == "continue")]
    assert sum(r.count for r in pmap.replaced) == at and min(r.dest for r in pmap.replaced) == 0, pmap.replaced
    result = verify(conf, source, dest, {0: pmap})[0]
    assert result.mismatch is not None and result.mismatch.field == RECREATED, result.line
    assert f"(topic id {old_id} is now {new_id}); destination offsets 0..{at - 1} are copies of the old topic" in \
        result.line, result.line
    if on_source_loss == "continue":  # the new topic's copies compared, all equal
        assert (pmap.source_id, pmap.source_start, pmap.source_end, pmap.forward(0)) == (new_id, 0, new, at)
        assert result.compared == new or gap, result.line


def _committed(admin: Any, group: str, topic: str) -> int:
    """The group's committed offset of `topic` [0] (negative: none)."""
    found = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])[group].result()
    return found.topic_partitions[0].offset


@pytest.mark.parametrize(("hot_path", "copied", "down", "new"), [
    ("batches", 100, 0, 30), ("records", 100, 0, 30),
    # the new topic longer than what was copied, and records written to the old one while no lane ran (issue 42):
    # offsets alone look fine there, the topic id tells
    ("batches", 300, 90, 600)])
def test_a_source_topic_recreated_between_runs_is_found_from_the_offset_map(
        kafka, admin, topic_factory, producer_factory, hot_path, copied, down, new) -> None:
    """With a migration section the offset map records the source topic's id with what was copied: a next run that
    finds no committed offset (Kafka deleted them with the topic) and another topic id names the loss in one line
    (both ids, the offsets mapped, how many lost: unknown), counts nothing it does not know, marks the recreation
    in the map and stops (nothing of the new topic copied or committed); with on_source_loss: continue it copies the
    new topic from its start, and verify names the recreation, not a value difference at offset 0."""
    source = topic_factory(partitions=1)
    dest = f"{source}.zstd"
    routes = [{"source": source, "destinations": [{"codec": "zstd"}]}]
    conf = make_config(kafka, routes, hot_path=hot_path, migration={})
    _produce(producer_factory, source, 0, copied)
    Service(conf).run(until_caught_up=True)
    old = [(f"k-0-{i}".encode(), f"v-0-{i}".encode()) for i in range(copied)]
    assert [(r[2], r[3]) for r in read_all(kafka.bootstrap, dest)] == old
    old_id = _topic_id(admin, source)
    _produce(producer_factory, source, copied, copied + down)  # written while no lane runs: never copied
    new_id = _recreate_with(admin, producer_factory, source, old_id, new)

    metrics = Metrics()
    service = Service(conf, metrics=metrics)
    with pytest.raises(TranscoderError) as stopped:
        service.run(until_caught_up=True)
    line = str(stopped.value)
    assert (f"source topic {source} was deleted and recreated while no lane copied it (topic id {old_id} is now "
            f"{new_id}): the offset map of {source} [0] holds copies of its source offsets 0..{copied - 1}") in line, \
        line
    assert f"records of the old topic from offset {copied} on were lost before they were copied (how many unknown" \
        in line, line
    assert "on_source_loss: stop" in line and "\n" not in line
    assert isinstance(stopped.value, DataLossError), type(stopped.value)  # `run` exits 4
    assert (stopped.value.topic, stopped.value.partition, stopped.value.offset) == (source, 0, copied)
    assert _lost(metrics, source) == 0  # how many is unknown (the old topic's end was never seen): none invented
    assert [(r[2], r[3]) for r in read_all(kafka.bootstrap, dest)] == old  # nothing of the new topic copied
    assert _committed(admin, service.lanes[0].spec.group_id, source) < 0  # nor committed
    pmap = offset_map.read(conf, dest)[0][0]
    assert pmap.recreations == [Recreation(old_id, new_id, copied, None)]
    assert (pmap.runs, pmap.replaced) == ([], [Run(0, 0, copied)])
    result = verify(conf, source, dest, {0: pmap})[0]
    assert result.mismatch is not None and result.mismatch.field == RECREATED, result.line
    assert f"(topic id {old_id} is now {new_id})" in result.line and "nothing of the topic now is copied" in \
        result.line, result.line

    cont = make_config(kafka, routes, hot_path=hot_path, migration={}, on_source_loss="continue",
                       group_id=conf.group_id)
    metrics = Metrics()
    with structlog.testing.capture_logs() as logs:
        Service(cont, metrics=metrics).run(until_caught_up=True)
    lost = [e for e in logs if e["event"] == "source_records_lost"]
    assert [(e["topic"], e["partition"], e["offset"], e["topic_id"], e["new_topic_id"], e["records_lost"])
            for e in lost] == [(source, 0, copied, old_id, new_id, "unknown")], lost
    assert _lost(metrics, source) == 0
    assert [(r[2], r[3]) for r in read_all(kafka.bootstrap, dest)] == \
        old + [(f"new-{i}".encode(), f"w-{i}".encode()) for i in range(new)]
    pmap = offset_map.read(cont, dest)[0][0]
    assert (pmap.source_id, pmap.runs, pmap.replaced) == (new_id, [Run(0, copied, new)], [Run(0, 0, copied)])
    assert pmap.recreations == [Recreation(old_id, new_id, copied, None, continued=True)]
    result = verify(cont, source, dest, {0: pmap})[0]
    # the new topic's records compared with their copies, all equal; the old topic's copies named, not compared
    assert result.compared == new and result.mismatch is not None and result.mismatch.field == RECREATED, result.line
    assert result.line.startswith(
        f"partition 0: source topic recreated: the source topic was deleted and recreated (topic id {old_id} is now "
        f"{new_id}); destination offsets 0..{copied - 1} are copies of the old topic (its source offsets "
        f"0..{copied - 1}), not compared; the old topic's records from source offset {copied} on were lost before "
        "they were copied (how many unknown)"), result.line
