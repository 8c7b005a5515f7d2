"""Timestamps against the real broker: never silently changed, and a batch refused for some of its records names
exactly those. A destination with message.timestamp.type=LogAppendTime is refused before anything is copied; created
destinations and dead-letter topics inherit their source's message.timestamp.*.max.ms; records stamped 2 h ahead,
which the source took (after.max.ms 1 day) and an existing destination refuses (Kafka 4's default 1 h), fail alone:
the error and the dead-letter topic name exactly those, and every valid record is copied, in order. The cut without
a broker: tests/unit/kafka/test_record_refusals.py."""

from __future__ import annotations

import time

import pytest
import yaml
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support.cli import one_line, run_cli
from tests.support.configs import make_config, raw_config
from transcoder.errors import DeliveryError
from transcoder.service.runner import Service

DAY = 86_400_000
#: records stamped 2 h ahead of the clock, among 30 (offsets)
AHEAD = (4, 11, 12, 25)
RECORDS = 30


def _write(tmp_path, raw: dict) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _topic_configs(admin, topic: str) -> dict[str, str]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: e.value for k, e in admin.describe_configs([res])[res].result().items()}


def _source_with_records_ahead(topic_factory, producer_factory) -> tuple[str, list[tuple[bytes, bytes, int]]]:
    """A source that takes timestamps up to a day ahead, holding 30 records, those at AHEAD stamped now + 2 h:
    (topic, [(key, value, timestamp)] in offset order)."""
    source = topic_factory(partitions=1, config={"message.timestamp.after.max.ms": str(DAY)})
    now = int(time.time() * 1000)
    records = [(b"k%d" % i, b"v%d" % i, now + 2 * 3_600_000 if i in AHEAD else now - 600_000 + i)
               for i in range(RECORDS)]
    p = producer_factory(**{"linger.ms": 50})
    for k, v, ts in records:
        p.produce(source, value=v, key=k, partition=0, timestamp=ts)
    assert p.flush(30) == 0
    return source, records


def _content(msgs) -> list[tuple[bytes, bytes, int]]:
    return [(m.key(), m.value(), m.timestamp()[1]) for m in msgs]


def test_a_log_append_time_destination_is_refused_and_tighter_limits_are_warned_of(kafka, admin, topic_factory,
                                                                                    tmp_path):
    source = topic_factory(partitions=1, config={"message.timestamp.after.max.ms": str(DAY)})
    dest = topic_factory(partitions=1, name=f"{source}.lz4", config={"compression.type": "producer",
                                                                     "message.timestamp.type": "LogAppendTime"})
    path = _write(tmp_path, raw_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}]))
    proc = run_cli("validate", "--config", path)
    assert proc.returncode == 1
    line = one_line(proc)
    assert f"destination {dest} has message.timestamp.type=LogAppendTime" in line, line
    assert (f"kafka-configs --alter --entity-type topics --entity-name {dest} --add-config "
            "message.timestamp.type=CreateTime") in line, line

    # the fix it names applied: CreateTime, but the broker's 1 h limit ahead where the source takes a day: validate
    # passes and says so
    res = ConfigResource(ConfigResource.Type.TOPIC, dest, incremental_configs=[
        ConfigEntry("message.timestamp.type", "CreateTime", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result()
    proc = run_cli("validate", "--config", path)
    assert proc.returncode == 0, proc.stderr
    assert "every pre-flight check passed" in proc.stdout
    assert "destination_timestamp_limit_tighter" in proc.stderr and dest in proc.stderr, proc.stderr
    assert f"--entity-name {dest} --add-config message.timestamp.after.max.ms={DAY}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("hot_path", ["batches", "records"])
def test_records_a_destination_refuses_for_their_timestamp_stop_the_copy_naming_the_first_of_them(
        kafka, topic_factory, producer_factory, read_topic, hot_path):
    source, records = _source_with_records_ahead(topic_factory, producer_factory)
    dest = topic_factory(partitions=1, name=f"{source}.lz4", config={"compression.type": "producer"})
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}], hot_path=hot_path)
    with pytest.raises(DeliveryError, match=rf"record {source} \[0\] offset 4 could not be written to {dest}: "
                                            r".*Invalid timestamp") as failed:
        Service(conf).run(until_caught_up=True)
    assert (failed.value.topic, failed.value.partition, failed.value.offset) == (source, 0, AHEAD[0])
    copied = _content(read_topic(dest))
    valid = [r for i, r in enumerate(records) if i not in AHEAD]
    assert copied[:AHEAD[0]] == records[:AHEAD[0]]  # the valid records before it, each exact
    assert all(r in valid for r in copied) and copied == sorted(copied, key=valid.index)  # only valid ones, in order


@pytest.mark.parametrize("hot_path", ["batches", "records"])
def test_with_a_dead_letter_topic_exactly_the_records_at_fault_land_there_and_every_valid_one_is_copied(
        kafka, admin, topic_factory, producer_factory, read_topic, hot_path):
    source, records = _source_with_records_ahead(topic_factory, producer_factory)
    tight = topic_factory(partitions=1, name=f"{source}.lz4", config={"compression.type": "producer"})
    dlq = f"{source}.dlq"
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}, {"codec": "zstd"}]}],
                       hot_path=hot_path, errors={"tolerance": "all", "dlq_topic": dlq})
    Service(conf).run(until_caught_up=True)

    # the destination and the dead-letter topic transcoder created inherit the source's limit: every record
    created = f"{source}.zstd"
    for topic in (created, dlq):
        assert _topic_configs(admin, topic)["message.timestamp.after.max.ms"] == str(DAY), topic
    assert _content(read_topic(created)) == records
    # the existing destination (Kafka 4's 1 h): every valid record, exact and in order; none of those at fault
    assert _content(read_topic(tight)) == [r for i, r in enumerate(records) if i not in AHEAD]
    dead = read_topic(dlq)
    assert _content(dead) == [records[i] for i in AHEAD]
    for m, offset in zip(dead, AHEAD, strict=True):
        h = dict(m.headers())
        assert (h["__transcoder.errors.topic"], h["__transcoder.errors.offset"],
                h["__transcoder.errors.destination"]) == (source.encode(), str(offset).encode(), tight.encode())
        assert b"timestamp" in h["__transcoder.errors.reason"].lower()


def test_a_dead_letter_topic_that_refuses_them_too_is_named_for_the_record_at_fault(
        kafka, topic_factory, producer_factory, read_topic):
    source, records = _source_with_records_ahead(topic_factory, producer_factory)
    dest = topic_factory(partitions=1, name=f"{source}.lz4", config={"compression.type": "producer"})
    dlq = topic_factory(partitions=1)  # Kafka 4's 1 h limit ahead: it refuses them as well
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}],
                       errors={"tolerance": "all", "dlq_topic": dlq})
    with pytest.raises(DeliveryError, match=rf"record {source} \[0\] offset 4 failed for {dest} .*could not be "
                                            rf"written to the DLQ {dlq}") as failed:
        Service(conf).run(until_caught_up=True)
    assert failed.value.offset == AHEAD[0]
    assert read_topic(dlq) == [] or all(m.value() in {records[i][1] for i in AHEAD} for m in read_topic(dlq))
