"""What the broker stores and returns to a raw Fetch, read by the compiled part (transcoder_native.decode_stored)
exactly as a read_committed consumer reads it: librdkafka's batches in every codec, transactions with aborts,
fetches cut at any size. Re-batched and sealed, they are written back through the broker and read by librdkafka."""

from __future__ import annotations

import time

import pytest
import transcoder_native as native
from confluent_kafka import Producer

from tests.support.records import produce_transactions, read_all
from transcoder.kafka.protocol import RawClient


def fetch_all(info: RawClient, topic: str, partition: int, *, max_bytes: int) -> tuple[list, int]:
    """Every record of a partition through raw Fetches of at most `max_bytes`: (offset, timestamp, key, value,
    headers) per record, and the number of fetches."""
    out, pos, fetches = [], 0, 0
    end = None
    while True:
        part = info.fetch_partition(topic, partition, pos, leader=1, max_bytes=max_bytes)
        fetches += 1
        end = part.last_stable_offset if part.last_stable_offset >= 0 else part.high_watermark
        aborted = [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or [])]
        got = native.decode_stored(part.records or b"", pos, aborted)
        out += [got.record(i) for i in range(len(got))]
        assert got.next_offset > pos or pos >= end, f"no progress at offset {pos}"
        pos = got.next_offset
        if pos >= end:
            return out, fetches


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_batches_read_as_a_consumer_reads_them(kafka, topic_factory, codec):
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    p = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec, "linger.ms": 20,
                  "batch.size": 50_000})
    now = int(time.time() * 1000)
    for i in range(5000):
        p.produce(topic, value=None if i % 97 == 0 else (f'10.0.{i % 7}.1 "GET /x/{i % 50}" ' * (1 + i % 4)).encode(),
                  key=None if i % 3 == 0 else f"k{i % 40}".encode(), timestamp=now + i,
                  headers=[("trace", f"{i}".encode()), ("nil", None)] if i % 10 == 0 else None)
    assert p.flush(30) == 0
    want = [(o, ts, k, v, list(h)) for _, o, k, v, h, ts in read_all(kafka.bootstrap, topic)]
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        got, fetches = fetch_all(info, topic, 0, max_bytes=20_000)  # small fetches: cut inside batches
    finally:
        info.close()
    assert fetches > 3
    assert len(got) == 5000
    assert got == want


def test_aborted_transactions_are_left_out_and_the_rest_copied_back_exactly(kafka, topic_factory, read_topic):
    source = topic_factory(partitions=2)
    produce_transactions(kafka.bootstrap, source, transactions=10, per=300, partitions=2,
                         aborted=lambda t: t % 3 == 1, headers=True)
    want = read_all(kafka.bootstrap, source)
    assert len(want) == 7 * 300
    dest = topic_factory(partitions=2, config={"compression.type": "producer"})
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        for partition in (0, 1):
            got, _ = fetch_all(info, source, partition, max_bytes=1 << 20)
            assert [r[0] for r in got] == [o for p, o, *_ in want if p == partition]
            # re-batched into small batches, sealed as zstd, written back through the broker
            part = info.fetch_partition(source, partition, 0, leader=1, max_bytes=1 << 24)
            stored = native.decode_stored(part.records, 0, [(a.producer_id, a.first_offset)
                                                            for a in part.aborted_transactions or []])
            rb = native.Rebatcher(16_384, 500)
            rb.add(stored, now_ms=0)
            sections = rb.take(flush=True)
            for _section, batch in zip(sections, native.seal_sections(sections, [(-1, -1, -1)] * len(sections),
                                                                     codec="zstd"), strict=True):
                assert info.produce_batch(dest, partition, batch, leader=1) >= 0
    finally:
        info.close()
    copied = read_all(kafka.bootstrap, dest)
    assert [(p, k, v, h, ts) for p, _, k, v, h, ts in copied] == [(p, k, v, h, ts) for p, _, k, v, h, ts in want]
    assert {b["compresscodec"] for b in kafka.stored_batches(dest, 0)} == {"zstd"}
