"""The writer against the real broker: a batch the destination refuses for one record in it.

The destination's max.message.bytes is lowered while the service runs (pre-flight would refuse it
at start), then one batch of 20 records is copied, one of them too large for the new limit. The
broker refuses the whole batch (MESSAGE_TOO_LARGE): only that record is at fault.
"""

from __future__ import annotations

import os
import threading
import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support.configs import make_config
from transcoder.errors import DeliveryError
from transcoder.service.runner import Service

RECORDS = 20
LIMIT = 100_000


def _wait_for(predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _start(service: Service) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            service.run()
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    _wait_for(lambda: service.ready()[0] or bool(errors), what="the lane to be assigned")
    assert not errors, errors
    return thread, errors


def _lower_max_message_bytes(admin, topic: str) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", str(LIMIT), incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)

    def applied() -> bool:
        got = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        return next(iter(got.values())).result(30)["max.message.bytes"].value == str(LIMIT)

    _wait_for(applied, what="max.message.bytes to change")
    time.sleep(1)  # the partition's log picks the new config up from metadata


def _one_batch(producer_factory, topic: str, big_at: int) -> bytes:
    """20 records in one batch; the one at `big_at` is 2x the destination's new limit, incompressible."""
    big = os.urandom(2 * LIMIT)
    p = producer_factory(**{"linger.ms": 200, "message.max.bytes": 10_000_000})
    for i in range(RECORDS):
        p.produce(topic, value=big if i == big_at else f"record-{i}".encode(), key=f"k{i}".encode(), partition=0)
    assert p.flush(30) == 0
    return big


def _route(source: str) -> list[dict]:
    # linger 1 s: the 20 records reach the destination in one batch
    return [{"source": source, "destinations": [{"codec": "none", "batch": {"linger_ms": 1000}}]}]


def test_tolerance_all_dead_letters_only_the_record_at_fault(kafka, topic_factory, producer_factory, read_topic,
                                                            admin):
    source = topic_factory(partitions=1)
    dlq = f"{source}.dlq"
    service = Service(make_config(kafka, _route(source), errors={"tolerance": "all", "dlq_topic": dlq}))
    thread, errors = _start(service)
    try:
        _lower_max_message_bytes(admin, f"{source}.none")
        big = _one_batch(producer_factory, source, big_at=13)
        lane = service.lanes[0]
        _wait_for(lambda: lane.status.committed.get((source, 0), -1) >= RECORDS or bool(errors),
                  what="offset 20 to be committed")
    finally:
        service.stop()
        thread.join(60)
    assert not errors, errors
    copied = read_topic(f"{source}.none")
    assert [m.value() for m in copied] == [f"record-{i}".encode() for i in range(RECORDS) if i != 13]
    assert [m.key() for m in copied] == [f"k{i}".encode() for i in range(RECORDS) if i != 13]
    dead = read_topic(dlq)
    assert [(m.value(), m.key()) for m in dead] == [(big, b"k13")]
    headers = dict(dead[0].headers())
    assert headers["__transcoder.errors.offset"] == b"13"
    assert headers["__transcoder.errors.partition"] == b"0"
    assert b"too large" in headers["__transcoder.errors.reason"].lower()
    assert lane.status.dead_lettered == 1
    assert lane.status.acked == {f"{source}.none": RECORDS - 1}


def test_tolerance_none_names_the_record_at_fault(kafka, topic_factory, producer_factory, consumer_factory, admin):
    source = topic_factory(partitions=1)
    conf = make_config(kafka, _route(source))
    service = Service(conf)
    thread, errors = _start(service)
    try:
        _lower_max_message_bytes(admin, f"{source}.none")
        _one_batch(producer_factory, source, big_at=6)
        _wait_for(lambda: bool(errors), what="the lane to fail")
    finally:
        service.stop()
        thread.join(60)
    err = errors[0]
    assert isinstance(err, DeliveryError)
    assert (err.topic, err.partition, err.offset, err.kafka_error) == (source, 0, 6, "MSG_SIZE_TOO_LARGE")
    assert str(err).startswith(f"lane {source}.none: record {source} [0] offset 6 could not be written to "
                               f"{source}.none: ")
    assert str(err).endswith("(errors.tolerance=none)")
    # Nothing at or after the failed record is committed: a restart copies it again.
    c = consumer_factory(**{"group.id": f"{conf.group_id}.{source}.none"})
    committed = c.committed([TopicPartition(source, 0)], timeout=10)[0].offset
    assert committed <= 6


