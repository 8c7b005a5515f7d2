"""Spark's Kafka source, with the options transcoder gives it, reads exactly what a Kafka consumer reads."""

from __future__ import annotations

import time

from tests.support.configs import make_config
from transcoder.spark.source import read_options


def test_spark_reads_every_record_as_a_kafka_consumer_does(kafka, spark, topic_factory, producer_factory, read_topic):
    topic = topic_factory(partitions=3)
    p = producer_factory(**{"linger.ms": 5})
    base = int(time.time() * 1000) - 86_400_000  # old timestamps, kept as they are
    for i in range(300):
        key = None if i % 10 == 0 else f"k{i % 7}".encode()
        value = None if i % 9 == 0 else f"value-{i}".encode()  # tombstones
        headers = [("h", b"1"), ("h", b"2"), ("null", None)] if i % 3 == 0 else None
        p.produce(topic, value=value, key=key, partition=i % 3, timestamp=base + i, headers=headers)
    assert p.flush(30) == 0
    expected = [(m.partition(), m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()[1])
                for m in read_topic(topic)]

    conf = make_config(kafka, [{"source": topic, "destinations": [{"codec": "zstd"}]}])
    opts = read_options(conf, [topic])
    opts.pop("startingOffsets")  # a batch read takes its range as earliest..latest
    rows = (spark.read.format("kafka").options(**opts).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load()
            .selectExpr("partition", "offset", "key", "value", "headers", "unix_millis(timestamp) AS ts").collect())
    got = sorted(((r.partition, r.offset, None if r.key is None else bytes(r.key),
                   None if r.value is None else bytes(r.value),
                   [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers or []],
                   r.ts) for r in rows), key=lambda t: (t[0], t[1]))
    assert len(got) == 300
    assert got == sorted(expected, key=lambda t: (t[0], t[1]))
