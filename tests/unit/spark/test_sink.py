"""The executor side of the Spark engine, without Spark: Arrow rows as records, and the tallies."""

from __future__ import annotations

import pyarrow as pa
from confluent_kafka import TIMESTAMP_CREATE_TIME

from tests.support.configs import make_config
from transcoder.kafka.statistics import Window
from transcoder.spark.sink import COLUMNS, TallyMetrics, arrow_columns, arrow_records, executor_config


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    cols = list(zip(*rows, strict=True))
    types = [pa.string(), pa.int32(), pa.int64(), pa.binary(), pa.binary(), pa.string(), pa.int64()]
    return pa.RecordBatch.from_arrays([pa.array(list(c), type=t) for c, t in zip(cols, types, strict=True)],
                                      names=["topic", "partition", "offset", "key", "value", "headers", "ts"])


def test_arrow_rows_read_as_kafka_messages_with_every_field_kept():
    assert len(COLUMNS) == 7
    # Headers as Spark's to_json writes them: binary values in base64, a null value left out.
    rows = [
        ("t", 2, 10, b"k", b"v", '[{"key":"h","value":"MQ=="},{"key":"h","value":"Mg=="},{"key":"n"}]',
         1_600_000_000_123),
        ("t", 2, 12, None, None, None, 1_600_000_000_124),  # null key, tombstone, no headers; offset 11 absent
        ("t", 2, 13, b"", b"", None, 5),
    ]
    recs = arrow_records(_batch(rows))
    got = [(r.topic(), r.partition(), r.offset(), r.key(), r.value(), r.headers(), r.timestamp(), r.error())
           for r in recs]
    assert got == [
        ("t", 2, 10, b"k", b"v", [("h", b"1"), ("h", b"2"), ("n", None)], (TIMESTAMP_CREATE_TIME, 1_600_000_000_123),
         None),
        ("t", 2, 12, None, None, None, (TIMESTAMP_CREATE_TIME, 1_600_000_000_124), None),
        ("t", 2, 13, b"", b"", None, (TIMESTAMP_CREATE_TIME, 5), None),
    ]
    cols = arrow_columns(_batch(rows))
    assert cols is not None and (cols.topic, cols.partition, cols.offsets) == ("t", 2, [10, 12, 13])
    assert cols.headers == [r.headers() for r in recs] and cols.keys == [b"k", None, b""]
    assert cols.sizes == [2 + 2 + 2 + 1, 0, 0]  # key + value + header names and values, as the service counts
    assert cols.record(1).offset() == 12 and cols.record(0).headers() == recs[0].headers()
    assert arrow_columns(_batch([rows[0], ("t", 3, 1, None, b"x", None, 1)])) is None  # two partitions
    assert arrow_columns(_batch([rows[0], ("u", 2, 1, None, b"x", None, 1)])) is None  # two topics


def test_tallies_carry_increments_and_start_afresh_per_task():
    m = TallyMetrics()
    w = Window.from_values([100.0, 300.0])
    m.produced("d", "zstd", w, Window.from_values([10.0, 20.0]), 5000)  # librdkafka's txbytes are cumulative
    m.acked("d", "zstd", 30)
    m.latency("d", 0.5)
    m.backfill("d")
    m.error("MSG_SIZE_TOO_LARGE")
    m.dead_lettered()
    first = m.take()
    assert first.acked == {("d", "zstd"): 30}
    assert first.produced_windows[("d", "zstd")] == [(w, Window.from_values([10.0, 20.0]), 5000)]
    assert (first.latencies, first.backlog, first.errors, first.dead_lettered_records) == (
        {"d": [(0.5, 1.0)]}, {"d": 1}, {"MSG_SIZE_TOO_LARGE": 1}, 1)
    m.produced("d", "zstd", w, w, 7000)
    second = m.take()
    assert second.acked == {} and second.produced_windows[("d", "zstd")][0][2] == 2000  # only the increase
    assert m.take().produced_windows == {}


def test_executor_producers_report_statistics_often():
    conf = make_config(type("K", (), {"bootstrap": "127.0.0.1:1"})(), [{"source": "s", "destinations": [
        {"codec": "zstd"}]}], metrics={"port": 0, "stats_interval_ms": 5000})
    assert executor_config(conf).metrics.stats_interval_ms == 250
    assert executor_config(conf).routes == conf.routes
