"""Consumer groups of a topic against the real broker: committed offsets and lag, live members, moving offsets."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from transcoder.errors import MigrationError
from transcoder.migrate import groups

PER_PARTITION = 10


@pytest.fixture
def ga(admin, kafka):
    """The group calls ask through a GroupAdmin: the session's AdminClient, and kafka-python for the coordinator."""
    ga = groups.GroupAdmin.connect({"bootstrap.servers": kafka.bootstrap}, admin=admin, timeout_s=30)
    yield ga
    ga.close()


def _fill(producer_factory, topic: str, partitions: int = 3, per_partition: int = PER_PARTITION) -> None:
    p = producer_factory()
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


def _join(consumer: Consumer, topic: str, timeout: float = 30.0) -> None:
    """Subscribe and poll until the group assigned partitions and a record was read."""
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error() and consumer.assignment():
            return
    raise AssertionError(f"the consumer did not join and read {topic} within {timeout} s")


def _commit(consumer: Consumer, topic: str, offsets: dict[int, int]) -> None:
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)


def _committed(consumer_factory, group: str, topic: str, partitions: int = 3) -> dict[int, int]:
    c = consumer_factory(**{"group.id": group})
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def test_groups_on_shows_committed_offsets_and_lag(ga, topic_factory, producer_factory, consumer_factory):
    topic = topic_factory(partitions=3)
    _fill(producer_factory, topic)
    reader, lane = f"reader-{uuid.uuid4().hex[:8]}", f"lane-{uuid.uuid4().hex[:8]}"
    c = consumer_factory(**{"group.id": reader, "client.id": "reader-app"})
    _join(c, topic)
    _commit(c, topic, {0: 4, 1: 7})  # consumed part of partitions 0 and 1, nothing committed on 2
    c.close()
    other = consumer_factory(**{"group.id": lane})
    _join(other, topic)
    _commit(other, topic, {0: 10, 1: 10, 2: 10})
    other.close()

    found = {g.group_id: g for g in groups.groups_on(ga, topic, exclude=[lane])}
    assert set(found) == {reader}
    g = found[reader]
    assert g.committed == {0: 4, 1: 7}
    assert g.ends == {0: PER_PARTITION, 1: PER_PARTITION, 2: PER_PARTITION}
    assert g.lag_by_partition == {0: 6, 1: 3}
    assert g.lag == 9
    assert g.uncommitted == (2,)
    assert g.state == "Empty" and g.members == () and not g.simple

    assert {g.group_id for g in groups.groups_on(ga, topic)} == {reader, lane}
    assert groups.groups_on(ga, topic, exclude=[reader, lane]) == []
    assert groups.describe_group(ga, lane, topic).lag == 0


def test_live_member_is_named_refused_and_waited_for(ga, kafka, topic_factory, producer_factory):
    topic = topic_factory(partitions=3)
    _fill(producer_factory, topic)
    group, client_id = f"live-{uuid.uuid4().hex[:8]}", f"live-app-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": client_id,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    _join(consumer, topic)
    _commit(consumer, topic, {0: 1, 1: 2, 2: 3})
    stop = threading.Event()

    def keep_polling() -> None:  # the member stays in the group until told to leave, then leaves
        while not stop.is_set():
            consumer.poll(0.1)
        consumer.close()

    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    try:
        view = groups.describe_group(ga, group, topic)
        assert view.state == "Stable"
        assert [m.client_id for m in view.members] == [client_id]
        assert view.members[0].partitions == (0, 1, 2)
        assert view.members[0].host  # where it runs, e.g. 127.0.0.1
        assert view.committed == {0: 1, 1: 2, 2: 3}

        with pytest.raises(MigrationError, match=f"group {group} has 1 active member.*{client_id}@"):
            groups.commit_offsets(ga, group, topic, {0: 5})
        with pytest.raises(MigrationError, match=f"still has 1 active member.*{client_id}"):
            groups.wait_empty(ga, group, topic, timeout_s=0.5, poll_s=0.2)

        threading.Timer(1.0, stop.set).start()
        t0 = time.monotonic()
        empty = groups.wait_empty(ga, group, topic, timeout_s=30, poll_s=0.2)
        assert time.monotonic() - t0 >= 0.9
        assert empty.members == () and empty.state == "Empty"
        assert empty.committed == {0: 1, 1: 2, 2: 3}
        groups.commit_offsets(ga, group, topic, {0: 5})  # now allowed
        assert groups.describe_group(ga, group, topic).committed == {0: 5, 1: 2, 2: 3}
    finally:
        stop.set()
        poller.join(30)


def test_commit_offsets_sets_exactly_the_offsets_given(ga, topic_factory, producer_factory, consumer_factory):
    topic = topic_factory(partitions=3)
    _fill(producer_factory, topic)
    group = f"moved-{uuid.uuid4().hex[:8]}"
    c = consumer_factory(**{"group.id": group})
    _join(c, topic)
    _commit(c, topic, {0: 1, 1: 1, 2: 1})
    c.close()

    groups.commit_offsets(ga, group, topic, {0: 3, 2: 9})
    assert _committed(consumer_factory, group, topic) == {0: 3, 1: 1, 2: 9}

    fresh = f"new-{uuid.uuid4().hex[:8]}"  # a group the cluster does not know yet: the commit creates it
    groups.commit_offsets(ga, fresh, topic, {0: 2, 1: 4, 2: 10})
    assert _committed(consumer_factory, fresh, topic) == {0: 2, 1: 4, 2: 10}
    assert groups.describe_group(ga, fresh, topic).lag_by_partition == {0: 8, 1: 6, 2: 0}

    with pytest.raises(MigrationError, match=rf"{topic} \[3\].*partitions 0\.\.2"):
        groups.commit_offsets(ga, group, topic, {3: 0})
    with pytest.raises(MigrationError, match="offsets are >= 0"):
        groups.commit_offsets(ga, group, topic, {0: -1})


def test_unknown_group_and_group_without_offsets(ga, topic_factory, producer_factory, consumer_factory):
    topic, elsewhere = topic_factory(partitions=3), topic_factory(partitions=1)
    _fill(producer_factory, elsewhere, partitions=1)
    unknown = f"nobody-{uuid.uuid4().hex[:8]}"
    with pytest.raises(MigrationError, match=f"group {unknown} is unknown to the cluster"):
        groups.describe_group(ga, unknown, topic)
    with pytest.raises(MigrationError, match=f"group {unknown} is unknown to the cluster"):
        groups.wait_empty(ga, unknown, topic, timeout_s=1)

    group = f"other-topic-{uuid.uuid4().hex[:8]}"
    c = consumer_factory(**{"group.id": group})
    _join(c, elsewhere)
    _commit(c, elsewhere, {0: 5})
    c.close()
    with pytest.raises(MigrationError, match=f"group {group} has no committed offsets on topic {topic}"):
        groups.describe_group(ga, group, topic)
    assert groups.groups_on(ga, topic) == []
    with pytest.raises(MigrationError, match="topic no-such-topic-.* does not exist"):
        groups.groups_on(ga, f"no-such-topic-{uuid.uuid4().hex[:8]}")
