"""Batches transcoder builds itself (zstd at levels librdkafka refuses) are accepted and stored as built."""

from __future__ import annotations

import time

from transcoder.brokers import BrokerInfo
from transcoder.codecs import encode_batch


def test_a_zstd_level_19_batch_is_stored_as_zstd_and_reads_back(kafka, topic_factory, read_topic):
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    now = int(time.time() * 1000)
    records = [(f"host-{i % 17}".encode(), f'10.0.0.{i % 40} "GET /api/{i % 90}" 200'.encode(),
                (("seq", str(i).encode()),) if i % 5 == 0 else (), now + i) for i in range(2000)]
    info = BrokerInfo({"bootstrap.servers": kafka.bootstrap})
    try:
        base = info.produce_batch(topic, 0, encode_batch(records[:1000], codec="zstd", level=19), leader=1)
        base2 = info.produce_batch(topic, 0, encode_batch(records[1000:], codec="zstd", level=22), leader=1)
    finally:
        info.close()
    assert (base, base2) == (0, 1000)
    got = read_topic(topic)
    assert [(m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]) for m in got] == [
        (k, v, list(h), ts) for k, v, h, ts in records]
    batches = kafka.stored_batches(topic, 0)
    assert [(b["baseOffset"], b["compresscodec"]) for b in batches] == [("0", "zstd"), ("1000", "zstd")]
