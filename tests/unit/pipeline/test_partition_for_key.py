"""partition_for_key: the partition librdkafka's default partitioner gives a key (checked against librdkafka)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from transcoder.pipeline.partitions import partition_for_key


def test_a_key_lands_where_librdkafkas_default_partitioner_puts_it():
    p = Producer({"test.mock.num.brokers": 1, "linger.ms": 0})
    landed: dict[bytes, int] = {}
    keys = [b"k", b"offset-map/0/0", *(f"t.zstd-{i % 5}/{i % 3}/{i * 977}".encode() for i in range(300))]
    topic = "partitioned"
    p.produce(topic, b"x", b"first")  # the mock cluster creates it (4 partitions)
    p.flush(10)
    n = len(p.list_topics(topic, timeout=10).topics[topic].partitions)
    assert n > 1
    for k in keys:
        p.produce(topic, b"v", k, on_delivery=lambda err, m: landed.__setitem__(m.key(), m.partition()))
    assert p.flush(10) == 0
    assert landed == {k: partition_for_key(k, n) for k in keys}
    assert set(landed.values()) == set(range(n))


def test_no_key_no_partition():
    with pytest.raises(ValueError, match="a key is needed"):
        partition_for_key(b"", 3)
