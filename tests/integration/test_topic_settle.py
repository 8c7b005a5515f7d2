"""A topic transcoder creates is read (and written) at once, on the real broker: `ensure` and `seed` return only once
every partition of the new topic has its leader (issue 29 row 13: a read right after CreateTopics got
NOT_LEADER_FOR_PARTITION and was reported as an unreachable cluster)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.support.cli import run_cli
from transcoder.dev.seed import generated
from transcoder.kafka.admin import ensure, leaderless


def test_a_topic_ensure_created_is_read_on_every_partition_at_once(kafka):
    client = AdminClient({"bootstrap.servers": kafka.bootstrap})  # a client of its own: no metadata cached
    name = f"settle-{uuid.uuid4().hex[:8]}"
    shape, created = ensure(client, name, partitions=8, replication_factor=1)
    assert created and shape.partitions == 8
    assert leaderless(client.list_topics(topic=name, timeout=10).topics[name]) == {}
    # ListOffsets of every partition, once, no retry: each answered by its leader
    futures = client.list_offsets({TopicPartition(name, p): OffsetSpec.latest() for p in range(8)},
                                  request_timeout=10)
    assert sorted((tp.partition, f.result().offset) for tp, f in futures.items()) == [(p, 0) for p in range(8)]


def test_seed_onto_a_new_topic_writes_every_record(kafka, read_topic):
    name = f"settle-seed-{uuid.uuid4().hex[:8]}"
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)  # within retention
    proc = run_cli("seed", "--kind", "dns", "--count", "300", "--partitions", "6", "--topic", name,
                   "--start", start.isoformat(), "-b", kafka.bootstrap)
    assert proc.returncode == 0, proc.stderr
    got = sorted((m.key(), m.value(), m.timestamp()[1]) for m in read_topic(name))
    records = generated("dns", seed_value=0, keys=True, headers=False, start_ms=int(start.timestamp() * 1000),
                        events_per_second=2000.0)
    assert got == sorted((r.key, r.value, r.timestamp_ms) for _, r in zip(range(300), records, strict=False))
