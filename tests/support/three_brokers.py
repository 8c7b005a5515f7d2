"""Helpers for tests against the 3-node cluster of tests/cluster: who leads and coordinates what, waiting for full
ISRs, moving leadership back, and producing and reading records the plain way (confluent-kafka, independent of
transcoder)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.records import Rec, rec
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.protocol import RawClient

#: replicas of every partition on the cluster (its default.replication.factor)
REPLICAS = 3


#: librdkafka sends an admin client's controller requests (DescribeCluster, ElectLeaders, ...) to the broker its
#: metadata names as controller, and learns another only when it refreshes its metadata: every 5 min by default, so
#: after that node was killed such a request waited 300 s. Every second, on a cluster whose nodes the tests kill.
METADATA_REFRESH_MS = 1000


def admin_client(bootstrap: str, **conf: Any) -> AdminClient:
    """An AdminClient for the cluster that follows a killed or stopped node's requests to a live one within a
    second (METADATA_REFRESH_MS)."""
    return AdminClient({"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
                        **conf})


def _partitions(admin: AdminClient, topic: str) -> dict[int, Any]:
    """The topic's partitions as a broker's metadata has them now (PartitionMetadata: leader, replicas, isrs)."""
    md = admin.list_topics(topic=topic, timeout=10).topics[topic]
    if md.error is not None:
        raise AssertionError(f"topic {topic}: {md.error}")
    return md.partitions


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    """The node id leading the partition now (-1: none)."""
    return int(_partitions(admin, topic)[partition].leader)


def preferred_leader(admin: AdminClient, topic: str, partition: int) -> int:
    """The partition's first replica: the leader a preferred election gives it."""
    return int(_partitions(admin, topic)[partition].replicas[0])


def wait_leader(admin: AdminClient, topic: str, partition: int, *, not_on: int | None = None,
                timeout: float = 60.0) -> int:
    """Until the partition has a leader (other than `not_on`); returns it, else raises naming the partition."""
    deadline = time.monotonic() + timeout
    while True:
        leader = leader_of(admin, topic, partition)
        if leader >= 0 and leader != not_on:
            return leader
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} [{partition}]: leader {leader} after {timeout:.0f}s"
                                 + (f" (waiting for one other than node {not_on})" if not_on is not None else ""))
        time.sleep(0.2)


def wait_healthy(admin: AdminClient, topics: Iterable[str], timeout: float = 60.0) -> None:
    """Until every partition of `topics` has a leader and all REPLICAS replicas in its ISR; else raises naming the
    first partition that has not."""
    topics = list(topics)
    deadline = time.monotonic() + timeout
    while True:
        lagging = []
        for topic in topics:
            for p, md in sorted(_partitions(admin, topic).items()):
                if md.leader < 0 or len(md.replicas) != REPLICAS or set(md.isrs) != set(md.replicas):
                    lagging.append(f"{topic} [{p}]: leader {md.leader}, replicas {list(md.replicas)}, "
                                   f"ISR {list(md.isrs)}")
        if not lagging:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not every replica in sync after {timeout:.0f}s: {lagging[0]}"
                                 + (f" (and {len(lagging) - 1} more)" if len(lagging) > 1 else ""))
        time.sleep(0.3)


def elect_preferred(admin: AdminClient, topics: Iterable[str], timeout: float = 30.0) -> None:
    """A preferred leader election (AdminClient.elect_leaders, PREFERRED) for every partition of `topics`, then
    until the metadata shows each one led by its first replica. A partition already led by it is fine
    (ELECTION_NOT_NEEDED); any other refusal raises naming the partition."""
    topics = list(topics)
    tps = [TopicPartition(t, p) for t in topics for p in sorted(_partitions(admin, t))]
    # no timeout arguments: confluent-kafka 2.16.1's elect_leaders fails on any keyword (SystemError from its C
    # argument parsing), so librdkafka's defaults (socket.timeout.ms) bound it
    results = admin.elect_leaders(ElectionType.PREFERRED, tps).result()
    for tp, exc in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
        if err is not None and not (isinstance(err, KafkaError) and err.code() == KafkaError.ELECTION_NOT_NEEDED):
            raise AssertionError(f"preferred election of {tp.topic} [{tp.partition}] refused: {err}")
    deadline = time.monotonic() + timeout
    while True:
        off = [f"{t} [{p}] led by {md.leader}, preferred {md.replicas[0]}"
               for t in topics for p, md in sorted(_partitions(admin, t).items()) if md.leader != md.replicas[0]]
        if not off:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"preferred leaders not in the metadata after {timeout:.0f}s: {off[0]}")
        time.sleep(0.2)


def group_coordinator(admin: AdminClient, group: str, timeout: float = 30.0) -> int:
    """The node id coordinating the consumer group (FindCoordinator, through describe_consumer_groups)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(admin.describe_consumer_groups([group], request_timeout=10)[group].result().coordinator.id)
        except KafkaException as exc:
            # COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created or its leader moves
            if time.monotonic() > deadline:
                raise AssertionError(f"no coordinator for group {group} after {timeout:.0f}s: {exc}") from None
        time.sleep(0.3)


def transaction_coordinator(bootstrap: str, transactional_id: str, timeout: float = 30.0) -> int:
    """The node id coordinating the transactional id (FindCoordinator, key type 1)."""
    client = RawClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return client.find_coordinator(transactional_id, 1)
            except KafkaUnavailableError as exc:
                # COORDINATOR_NOT_AVAILABLE while __transaction_state is created or its leader moves
                if time.monotonic() > deadline:
                    raise AssertionError(f"no coordinator for transactional id {transactional_id} after "
                                         f"{timeout:.0f}s: {exc}") from None
            time.sleep(0.3)
    finally:
        client.close()


def read_committed(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Rec]:
    """Every record of `topic` a read_committed reader sees, from the beginning to the high watermarks read first,
    as (partition, offset, key, value, headers, timestamp) sorted by partition and offset; an independent
    consumer (no group offsets), every partition assigned at once. A partition not read to its high watermark
    within `timeout` (an open transaction holds a read_committed reader before it) raises naming it."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-committed-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    out: list[Rec] = []
    try:
        ends = _high_watermarks(bootstrap, topic)
        # the end of a partition is its EOF event at its high watermark: transaction markers and aborted records
        # take offsets but are never delivered, so the last record's offset + 1 need not reach it
        pending = {p for p, end in ends.items() if end > 0}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                p = min(pending)
                raise AssertionError(f"{topic} [{p}] not read to its high watermark {ends[p]} in {timeout:.0f}s "
                                     f"({sum(1 for r in out if r[0] == p)} records read)")
            for m in c.consume(10_000, timeout=0.5):
                err = m.error()
                if err is None:
                    out.append(rec(m))
                    if m.offset() + 1 >= ends[m.partition()]:
                        pending.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= ends[m.partition()]:
                        pending.discard(m.partition())
                else:
                    raise AssertionError(f"reading {topic}: {err.str()}")
    finally:
        c.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def _high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark (read_uncommitted: past any open transaction, which a read_committed
    consumer's own query would stop at)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watermarks-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_uncommitted"})
    try:
        partitions = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        c.close()


def produce(bootstrap: str, topic: str, records: Iterable[Sequence[Any]], timeout: float = 60.0) -> list[
        tuple[int, int]]:
    """Write `records` with a plain acks=all idempotent producer, in order, and wait for every acknowledgement.
    Each record is (partition, key, value), optionally followed by headers and a timestamp (ms: keep it within
    retention.ms, 7 days, of now, or the broker's next retention check deletes the record); partition None lets the
    partitioner choose. Returns (partition, offset) per record, in the order given; a record not
    acknowledged raises naming it."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    results: list[tuple[int, int] | str | None] = []

    def on_delivery(i: int) -> Any:
        def record(err: KafkaError | None, msg: Any) -> None:
            results[i] = err.str() if err is not None else (msg.partition(), msg.offset())
        return record

    for i, r in enumerate(records):
        partition, key, value, *rest = r
        headers = rest[0] if rest else None
        timestamp = rest[1] if len(rest) > 1 else 0
        results.append(None)
        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers, "timestamp": timestamp,
                                  "on_delivery": on_delivery(i)}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(timeout)
    if left:
        raise AssertionError(f"{left} record(s) to {topic} not acknowledged within {timeout:.0f}s")
    for i, res in enumerate(results):
        if not isinstance(res, tuple):
            raise AssertionError(f"record {i} to {topic} not written: {res}")
    return [res for res in results if isinstance(res, tuple)]
