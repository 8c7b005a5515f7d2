"""spark.read's default moved from Spark's Kafka source to transcoder's own reader (2026-11-29): a lane whose
checkpoint Spark's Kafka source wrote goes on with the own reader from where it was, nothing skipped, nothing copied
twice, on the session's SparkSession."""

from __future__ import annotations

from tests.support.configs import make_config
from tests.support.faults import compare_topics
from transcoder.spark.engine import SparkEngine

PARTITIONS = 2


def _produce(producer, topic: str, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def test_a_checkpoint_of_sparks_kafka_source_goes_on_with_the_own_reader(kafka, spark, topic_factory,
                                                                       producer_factory, tmp_path):
    source = topic_factory(partitions=PARTITIONS)
    producer = producer_factory(**{"linger.ms": 5})
    _produce(producer, source, 0, 1000)
    routes = [{"source": source, "destinations": [{"codec": "lz4"}]}]
    before = make_config(kafka, routes, spark={"checkpoint_location": str(tmp_path), "read": "kafka"})
    SparkEngine(before, spark=spark).run(until_caught_up=True)

    _produce(producer, source, 1000, 1600)
    after = before.model_copy(update={"spark": before.spark.model_copy(update={"read": "transcoder"})})
    assert make_config(kafka, routes).spark.read == "transcoder"  # the default now
    engine = SparkEngine(after, spark=spark)
    engine.run(until_caught_up=True)
    [lane] = engine.lanes
    assert lane.status.records == 600  # from the checkpoint's offsets, not from `start`
    result = compare_topics(kafka.bootstrap, source, lane.spec.targets[0].topic_for(source))
    assert result.source == 1600, result.summary()
    assert (result.lost, result.duplicates, result.foreign, result.in_order) == (0, 0, 0, True), result.summary()
