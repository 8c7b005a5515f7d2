"""Batches transcoder builds itself (zstd at levels librdkafka refuses, and every batch of a batched lane): stored
as built, written once, split when the topic refuses their size, read back by librdkafka and by Kafka's Java code;
the batch producer that sends them."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.support.configs import make_config
from tests.support.records import read_all, read_with_java_consumer
from transcoder.codecs import encode_batch
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.protocol import RawClient
from transcoder.service.runner import Service


def test_a_zstd_level_19_batch_is_stored_as_zstd_and_reads_back(kafka, topic_factory, read_topic):
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    now = int(time.time() * 1000)
    records = [(f"host-{i % 17}".encode(), f'10.0.0.{i % 40} "GET /api/{i % 90}" 200'.encode(),
                (("seq", str(i).encode()),) if i % 5 == 0 else (), now + i) for i in range(2000)]
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
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


def _producer_id(info: RawClient) -> tuple[int, int]:
    for _ in range(50):  # a fresh broker answers COORDINATOR_LOAD_IN_PROGRESS for a moment
        code, pid, epoch = info.init_producer_id()
        if code == 0:
            return pid, epoch
        time.sleep(0.2)
    raise AssertionError(f"no producer id: error {code}")


def test_a_batch_sent_again_with_its_sequence_is_written_once(kafka, topic_factory, read_topic):
    """What makes the batch producer's retries safe: the broker deduplicates by producer id and sequence."""
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    now = int(time.time() * 1000)
    records = [(None, f"r{i}".encode(), (), now) for i in range(20)]
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        pid, epoch = _producer_id(info)
        first = encode_batch(records[:10], codec="zstd", level=19, producer_id=pid, producer_epoch=epoch,
                             base_sequence=0)
        assert info.produce({(topic, 0): first}, leader=1) == {(topic, 0): (0, 0)}
        code, base = info.produce({(topic, 0): first}, leader=1)[(topic, 0)]  # the answer was "lost": again
        assert code in (0, 46) and base in (0, -1)  # NONE with the first offset, or DUPLICATE_SEQUENCE_NUMBER
        second = encode_batch(records[10:], codec="zstd", level=19, producer_id=pid, producer_epoch=epoch,
                              base_sequence=10)
        assert info.produce({(topic, 0): second}, leader=1) == {(topic, 0): (0, 10)}
    finally:
        info.close()
    assert [m.value() for m in read_topic(topic)] == [v for _, v, _, _ in records]


def test_batch_producer_splits_what_the_topic_refuses_and_fails_only_the_record_too_large(kafka, topic_factory,
                                                                                         read_topic):
    topic = topic_factory(partitions=2, config={"max.message.bytes": "200000", "compression.type": "producer"})
    reports: list[tuple[str | None, int, int, bytes | None]] = []

    def delivered(err, msg) -> None:
        reports.append((err.name() if err else None, msg.partition(), msg.offset(), msg.value()))

    p = BatchProducer({"bootstrap.servers": kafka.bootstrap}, codec="zstd", level=19, client_id="split-test",
                      linger_ms=1000, max_bytes=8_000_000, max_records=10_000, on_delivery=delivered)
    p.start()
    try:
        sent: dict[int, list[bytes]] = {0: [], 1: []}
        for i in range(40):
            for partition in (0, 1):
                # incompressible 60 KB values: 40 of them make one 2.4 MB batch, 12x what the topic takes
                value = f"{partition}:{i}:".encode() + os.urandom(60_000)
                p.produce(topic, value, None, partition, headers=[("i", str(i).encode())])
                sent[partition].append(value)
        too_large = b"big:" + os.urandom(300_000)
        p.produce(topic, too_large, b"k", 0)
        for i in range(5):
            value = f"after-{i}".encode()
            p.produce(topic, value, None, 0)
            sent[0].append(value)
        assert p.flush(120) == 0
    finally:
        p.close(10)
    failed = [r for r in reports if r[0] is not None]
    assert failed == [("MSG_SIZE_TOO_LARGE", 0, -1, too_large)]
    for partition in (0, 1):
        ok = [(off, v) for err, part, off, v in reports if err is None and part == partition]
        assert ok == list(enumerate(sent[partition])), partition  # every record once, in order, offsets 0..n-1
        assert [m.value() for m in read_topic(topic) if m.partition() == partition] == sent[partition]
        batches = kafka.stored_batches(topic, partition)
        assert all(b["compresscodec"] == "zstd" and int(b["size"]) <= 200_000 for b in batches)
        assert len(batches) >= 2400_000 // 200_000  # split until each fits
        assert len({b["producerId"] for b in batches}) == 1  # no new producer id was needed


def test_batch_producer_without_a_broker_is_a_clear_error():
    p = BatchProducer({"bootstrap.servers": "127.0.0.1:1"}, codec="zstd", level=19, client_id="nowhere",
                      linger_ms=5, max_bytes=1 << 20, max_records=1000, on_delivery=lambda e, m: None,
                      request_timeout_ms=3000)
    with pytest.raises(KafkaUnavailableError, match="cannot reach Kafka at 127.0.0.1:1"):
        p.start()


def test_a_batch_that_cannot_be_built_is_reported_failed_and_the_producer_goes_on(kafka, topic_factory, read_topic):
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    reports: list[tuple[str | None, int, bytes | None]] = []
    p = BatchProducer({"bootstrap.servers": kafka.bootstrap}, codec="zstd", level=19, client_id="encode-fail",
                      linger_ms=5, max_bytes=1 << 20, max_records=1000,
                      on_delivery=lambda err, msg: reports.append((err.name() if err else None, msg.offset(),
                                                                   msg.value())))
    p.start()
    try:
        p.produce(topic, b"bad", None, 0, headers=[("h", "str")])  # type: ignore[list-item]  # str, not bytes: unencodable
        assert p.flush(30) == 0
        for i in range(3):
            p.produce(topic, f"ok-{i}".encode(), None, 0)
        assert p.flush(30) == 0
    finally:
        p.close(10)
    assert reports == [("_FAIL", -1, b"bad"), (None, 0, b"ok-0"), (None, 1, b"ok-1"), (None, 2, b"ok-2")]
    assert [m.value() for m in read_topic(topic)] == [b"ok-0", b"ok-1", b"ok-2"]


@pytest.mark.parametrize("codec,level", [("gzip", 1), ("gzip", 6), ("gzip", 9), ("snappy", None), ("lz4", None),
                                         ("lz4", 9), ("zstd", 3)])
def test_batches_built_here_are_read_by_librdkafka_and_by_kafkas_java_code(kafka, topic_factory, read_topic,
                                                                              codec, level):
    """The framing `transcoder evaluate` measures (issue 12) is what Kafka's clients read: each codec's batch,
    stored as built, read back record by record through librdkafka, and decompressed by the broker's own
    Java code (DumpLogSegments --deep-iteration)."""
    topic = topic_factory(partitions=1, config={"compression.type": "producer"})
    now = int(time.time() * 1000)
    records = [(f"host-{i % 17}".encode() if i % 9 else None, f'10.0.0.{i % 40} "GET /api/{i % 90}" 200'.encode(),
                (("seq", str(i).encode()), ("seq", None)) if i % 5 == 0 else (), now + i) for i in range(3000)]
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        assert info.produce_batch(topic, 0, encode_batch(records, codec=codec, level=level), leader=1) == 0
    finally:
        info.close()
    got = read_topic(topic)
    assert [(m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]) for m in got] == [
        (k, v, list(h), ts) for k, v, h, ts in records]
    assert [b["compresscodec"] for b in kafka.stored_batches(topic, 0)] == [codec]
    deep = "".join(kafka.local.dump_log_segment(seg, deep=True) for seg in kafka.segment_files(topic, 0))
    payloads = re.findall(r"payload: (.*)$", deep, re.M)
    assert payloads == [v.decode() for _, v, _, _ in records]


def test_the_lanes_batches_are_read_back_by_kafkas_java_consumer(kafka, topic_factory, producer_factory):
    """Issue 15: what a lane writes (record sets re-batched and sealed in native/, gzip by libdeflate) is read by
    Kafka's own Java consumer through the broker, CRCs checked, record by record, at every gzip level."""
    source = topic_factory(partitions=2)
    p = producer_factory(**{"linger.ms": 5})
    base_ts = int(time.time() * 1000) - 60_000
    for i in range(3000):
        key = None if i % 7 == 0 else (b"" if i % 11 == 0 else f"host-{i % 17}".encode())
        value = (None if i % 97 == 0
                 else f'10.0.{i % 40}.{i % 250} "GET /api/{i % 90}?q={i}" 200 {i * 7 % 5000}'.encode())
        headers = [("trace", f"{i:08x}".encode()), ("tag", b"a"), ("tag", b""), ("gone", None)] if i % 3 == 0 else None
        p.produce(source, value=value, key=key, partition=i % 2, timestamp=base_ts + i, headers=headers)
    assert p.flush(30) == 0
    destinations = [{"codec": "gzip", "level": level, "batch": {"max_bytes": 65536}} for level in (1, 6, 9)] + [
        {"codec": c, "batch": {"max_bytes": 65536}} for c in ("zstd", "lz4", "snappy")]
    conf = make_config(kafka, [{"source": source, "destinations": destinations}])
    assert conf.batched
    Service(conf).run(until_caught_up=True)
    want = read_all(kafka.bootstrap, source)
    assert len(want) == 3000
    for d in conf.routes[0].destinations:
        dest = d.topic_for(source)
        got = sorted(read_with_java_consumer(kafka.bootstrap, dest, len(want)))
        assert len(got) == len(want), dest
        for w, g in zip(want, got, strict=True):
            assert g == w, f"{dest} [{g[0]}] offset {g[1]}"
        for partition in (0, 1):
            batches = kafka.stored_batches(dest, partition)
            assert {b["compresscodec"] for b in batches} == {d.codec}, dest
            assert len(batches) > 1, dest  # several batches of at most 64 KiB each, not one
