"""The local broker stores each batch with the codec the producer used (compression.type=producer)."""

from __future__ import annotations

import pytest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _records(n: int) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else f"host-{i % 13}".encode()
        value = (f'10.0.{i % 5}.{i % 250} - - [01/Jan/2026:00:00:{i % 60:02d} +0000] '
                 f'"GET /api/v1/items/{i} HTTP/1.1" 200 {512 + i} "-" "curl/8.5.0"').encode()
        headers = [("seq", str(i).encode()), ("tag", b"a"), ("tag", b"b")] if i % 3 == 0 else []
        out.append((key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_round_trips_and_is_stored_as_produced(codec, kafka, topic_factory, producer_factory,
                                                          read_topic):
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    producer = producer_factory(**{"compression.type": codec, "linger.ms": 100, "batch.size": 262144,
                                   "enable.idempotence": True})
    sent = _records(3000)
    for key, value, headers in sent:
        producer.produce(topic, value=value, key=key, headers=headers or None)
    assert producer.flush(30) == 0

    got = read_topic(topic)
    assert len(got) == len(sent)
    for (key, value, headers), msg in zip(sent, got, strict=True):
        assert msg.key() == key
        assert msg.value() == value
        assert (msg.headers() or []) == headers

    batches = kafka.stored_batches(topic, 0)
    assert batches, "no stored batch found in the segment dump"
    assert sum(int(b["count"]) for b in batches) == len(sent)
    assert {b["compresscodec"] for b in batches} == {codec}
    assert {b["magic"] for b in batches} == {"2"}
