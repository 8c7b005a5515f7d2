"""A Spark lane's lag is known from its start, not from its first micro-batch's end or its query's start: the
lanes' queries start one after another, each waiting (up to 30 s) for its source's Python process, and a first
micro-batch can copy the whole backlog; until then the lag said nothing (the throttled lane of test_metrics[spark]
showed no lag before it had caught up, on a loaded CI machine)."""

from __future__ import annotations

from typing import Any

from tests.support.configs import make_config
from transcoder.spark.engine import SparkEngine

PARTITIONS = 2


class _LagAtFirstQuery:
    """The real SparkSession, noting every lane's lag (from the engine's lane status) when the first query is
    built (the first readStream)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self.engine: SparkEngine | None = None
        self.seen: dict[str, dict] | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "readStream" and self.seen is None and self.engine is not None:
            self.seen = {ln.spec.name: dict(ln.status.lag) for ln in self.engine.lanes}
        return getattr(self._spark, name)


def test_a_spark_lanes_lag_is_known_before_its_first_query_starts(kafka, spark, topic_factory, producer_factory,
                                                                  tmp_path):
    source = topic_factory(partitions=PARTITIONS)
    producer = producer_factory(**{"linger.ms": 5})
    for i in range(1000):
        producer.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    config = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}],
                         spark={"checkpoint_location": str(tmp_path)})
    watching = _LagAtFirstQuery(spark)
    engine = SparkEngine(config, spark=watching)
    watching.engine = engine
    engine.run(until_caught_up=True)
    [lane] = engine.lanes
    assert watching.seen == {lane.spec.name: {(source, 0): (500, 0.0), (source, 1): (500, 0.0)}}
    assert lane.status.records == 1000
    assert lane.status.lag == {(source, 0): (0, 0.0), (source, 1): (0, 0.0)}
