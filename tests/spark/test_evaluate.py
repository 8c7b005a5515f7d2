"""`transcoder evaluate --engine spark` (issue 12, item 5): the sample's partitions measured in Spark's Python
workers report the same bytes as the in-process engine, from memory and from a topic read by the executors."""

from __future__ import annotations

import dataclasses
import json
from itertools import islice

import pytest

from tests.support.cli import run_cli
from transcoder.dev.datagen import generate
from transcoder.errors import ConfigError, InputError, TranscoderError
from transcoder.evaluate.grid import Cell, Setting, grid, settings
from transcoder.evaluate.measure import Partial, measure_partition, measure_sample
from transcoder.evaluate.sample import TopicPlan, plan_topic, read_ranges
from transcoder.spark.evaluate import (
    _arrow_table,
    _partials,
    measure_on_spark,
    measure_topic_on_spark,
    task_function,
)

SIZE_FIELDS = ("codec", "level", "batch_bytes", "batches", "records", "record_bytes", "uncompressed_bytes",
               "compressed_bytes")
KIB = 1024


def _sizes(results):
    return [tuple(getattr(r, f) for f in SIZE_FIELDS) for r in results]


def _sample():
    """Three partitions of nginx records with headers (uneven), tombstones, unkeyed records, records without
    headers and headers with null and empty values; and an empty partition."""
    gen = generate("nginx", headers=True)
    out = {}
    for p, n in ((0, 900), (1, 700), (2, 40)):
        records = []
        for i, r in enumerate(islice(gen, n)):
            key = None if i % 17 == 0 else r.key
            value = None if i % 23 == 0 else r.value
            headers = () if i % 29 == 0 else ((("h", None), ("h", b""), ("", b"x")) if i % 31 == 0 else r.headers)
            records.append((key, value, headers, r.timestamp_ms))
        out[p] = records
    out[5] = []
    return out


def test_spark_measures_the_same_bytes_as_the_local_engine(spark):
    sample = _sample()
    cells = grid(settings(["zstd:1,19", "lz4", "snappy", "gzip:1", "none"]), [16 * KIB, 256 * KIB])
    local = measure_sample(sample, cells, repeats=1)
    on_spark = measure_on_spark(sample, cells, repeats=1, spark=spark)
    assert _sizes(on_spark) == _sizes(local)
    assert sum(len(rs) for rs in sample.values()) == on_spark[0].records == 1640
    for r in on_spark:
        if r.codec == "none":
            assert r.compress_cpu_s == r.decompress_cpu_s == 0
        else:
            assert r.compress_cpu_s > 0 and r.decompress_cpu_s > 0, r
    assert not spark.sparkContext._jsc.sc().isStopped()  # a session given is not stopped


def _without_cpu(partial):
    return {k: v for k, v in dataclasses.asdict(partial).items() if not k.endswith("cpu_s")}


def test_a_task_with_several_partitions_measures_each_whole():
    """The executors' function: runs of partitions across Arrow batch boundaries, each measured once, whole."""
    sample = {p: rs for p, rs in _sample().items() if rs}
    cells = [Cell(Setting("lz4", None), 16 * KIB), Cell(Setting("none", None), 64 * KIB)]
    batches = _arrow_table(sample).to_batches(max_chunksize=97)
    rows = [row for out in task_function(cells, 1, 100_000)(iter(batches)) for row in out.to_pylist()]
    assert [r["partition"] for r in rows] == [0, 0, 1, 1, 2, 2]
    for p, records in sample.items():
        got = [_without_cpu(Partial(**{k: v for k, v in r.items() if k != "partition"})) for r in rows
               if r["partition"] == p]
        assert got == [_without_cpu(w) for w in measure_partition(records, cells, repeats=1)]


def test_a_partition_measured_twice_or_not_at_all_is_an_error():
    from pyspark.sql import Row

    cells = [Cell(Setting("lz4", None), 16 * KIB)]
    partial = measure_partition(_sample()[2], cells, repeats=1)[0]
    row = Row(partition=0, **{k: list(v) if isinstance(v, tuple) else v
                              for k, v in dataclasses.asdict(partial).items()})
    assert _partials([row], cells, {0}, "the sample") == [partial]
    with pytest.raises(TranscoderError, match=r"^evaluating the sample on Spark: partition 0 was measured in 2 parts "
                                              r"\(split between Spark tasks\) for lz4 at 16384 B"):
        _partials([row, row], cells, {0}, "the sample")
    with pytest.raises(TranscoderError, match="partition 1 was not measured for lz4 at 16384 B"):
        _partials([row], cells, {0, 1}, "the sample")


def test_an_empty_sample_is_refused_in_one_line():
    cells = [Cell(Setting("lz4", None), 16 * KIB)]
    with pytest.raises(InputError, match="^the sample is empty: no records to evaluate$"):
        measure_on_spark({0: [], 1: []}, cells)
    plan = TopicPlan(cluster={"bootstrap.servers": "localhost:1"}, topic="t", partitions=2, ranges={}, leaders={},
                     replication_factor=1, configs={})
    with pytest.raises(InputError, match="^the sample is empty: topic t has no records to read$"):
        measure_topic_on_spark(plan, cells)


def test_a_bad_master_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^--master: 'spark:/x' is not a Spark master URL \(local\[\*\]"):
        measure_on_spark({0: [(None, b"x", (), 0)]}, [Cell(Setting("lz4", None), 16 * KIB)], master="spark:/x")


def test_a_failure_in_the_workers_is_one_line(spark):
    sample = {0: [(None, b"x" * 100, (), 0)] * 10}
    with pytest.raises(TranscoderError) as caught:
        measure_on_spark(sample, [Cell(Setting("zstd", 99), 16 * KIB)], repeats=1, spark=spark)
    assert str(caught.value) == ("evaluating the sample on Spark failed: in a Python worker: ValueError: zstd level "
                                 "99 is outside -131072..22")


def test_spark_reads_and_measures_the_records_the_local_reader_reads(kafka, spark, topic_factory):
    topic = topic_factory(partitions=3)
    proc = run_cli("seed", "--kind", "nginx", "--count", "20000", "--partitions", "3", "--headers", "--topic", topic,
                   "-b", kafka.bootstrap)
    assert proc.returncode == 0, proc.stderr
    plan = plan_topic({"bootstrap.servers": kafka.bootstrap}, topic, records=5000)
    assert len(plan.ranges) == 3
    cells = grid(settings(["lz4", "zstd:3"]), [64 * KIB])
    local = measure_sample(read_ranges(plan).partitions, cells, repeats=1)
    on_spark = measure_topic_on_spark(plan, cells, repeats=1, spark=spark)
    assert _sizes(on_spark) == _sizes(local)
    assert on_spark[0].records == sum(end - start for start, end in plan.ranges.values())


def test_evaluate_on_spark_from_the_command_line():
    proc = run_cli("evaluate", "--engine", "spark", "--master", "local[2]", "--kind", "nginx", "--count", "5000",
                   "--codecs", "lz4", "--batch-sizes", "64KiB", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["sample"]["engine"] == "spark"
    assert [(c["codec"], c["batch_bytes"], c["records"]) for c in out["cells"]] == [("lz4", 65536, 5000)]
