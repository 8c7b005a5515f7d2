"""`transcoder evaluate --engine spark`: the sample's partitions spread over Spark executors, each Kafka
partition measured whole by one Python worker (transcoder.evaluate.measure's `measure_partition`, the local
engine's own), the partials folded in the driver — so both engines report the same bytes.

Records reach the workers as Arrow batches (`mapInArrow`) with the Spark engine's columns (sink.COLUMNS:
headers as JSON text), from an in-memory sample (a file, a generator: sent from the driver) or read by the
executors from the topic with Spark's Kafka source (`measure_topic_on_spark`: the offsets the plan names,
read_committed, as `sample.read_ranges` reads them here). Rows are repartitioned by Kafka partition (a Kafka
partition is never split between tasks; a task may get several) and sorted by offset within each; the driver
checks that every (partition, cell) came back exactly once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from binascii import b2a_base64
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from transcoder.config import SparkConfig
from transcoder.errors import ConfigError, InputError, TranscoderError
from transcoder.evaluate.batches import Record
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import CellResult, Partial, fold, measure_partition
from transcoder.spark import session, sink
from transcoder.spark.source import java_client_properties

if TYPE_CHECKING:  # the Python workers import this module: kept light (no Kafka admin, no engine)
    from transcoder.evaluate.sample import TopicPlan

APP_NAME = "transcoder-evaluate"
#: Spark SQL types of the annotations a Partial's fields may have (`X | None`: X, nullable).
_SQL_TYPES = {"str": "string", "int": "bigint", "float": "double", "bool": "boolean",
              "tuple[float, ...]": "array<double>"}


def _columns() -> tuple[tuple[str, str], ...]:
    """A Partial's fields as the columns of a task's rows (CPU per repeat as array<double>), whatever they are."""
    out = []
    for f in dataclasses.fields(Partial):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        base = kind.removesuffix(" | None")
        if base not in _SQL_TYPES:
            raise TypeError(f"Partial.{f.name}: no Spark type for {f.type!r} (transcoder.spark.evaluate._SQL_TYPES)")
        out.append((f.name, _SQL_TYPES[base]))
    return tuple(out)


#: The row a task returns per (Kafka partition, cell): the partition, then the Partial's fields.
_PARTIAL_COLUMNS = _columns()
RESULT_SCHEMA = ", ".join(["partition int", *(f"{name} {kind}" for name, kind in _PARTIAL_COLUMNS)])
#: The column of the Spark partition each Kafka partition goes to (0..n-1, one per Kafka partition).
_SLOT = "_slot"


def measure_on_spark(partitions: Mapping[int, Sequence[Record]], cells: Sequence[Cell], *, repeats: int = 3,
                     max_records: int = 100_000, master: str = "local[*]", spark: Any = None) -> list[CellResult]:
    """Every cell's figures on an in-memory sample (partition -> records in offset order), measured on Spark:
    the same figures as measure_sample's, sizes byte for byte. InputError for an empty sample; a Spark
    failure as one line (TranscoderError)."""
    _check(cells, repeats)
    filled = {p: rs for p, rs in partitions.items() if rs}
    if not filled:
        raise InputError("the sample is empty: no records to evaluate")

    def frame(spark: Any) -> Any:
        return spark.createDataFrame(_arrow_table(filled))

    return _run(frame, sorted(filled), cells, repeats=repeats, max_records=max_records, master=master, spark=spark,
                expected=set(filled), what="the sample")


def measure_topic_on_spark(plan: TopicPlan, cells: Sequence[Cell], *, repeats: int = 3, max_records: int = 100_000,
                           master: str = "local[*]", spark: Any = None) -> list[CellResult]:
    """Every cell's figures on a topic's sample read by the executors (Spark's Kafka source, batch): the
    records of plan.ranges, read_committed, exactly those `sample.read_ranges(plan)` reads in-process."""
    _check(cells, repeats)
    ranges = {p: r for p, r in sorted(plan.ranges.items()) if r[0] < r[1]}
    if not ranges:
        raise InputError(f"the sample is empty: topic {plan.topic} has no records to read", topic=plan.topic)
    options = kafka_options(plan, ranges)

    def frame(spark: Any) -> Any:
        return spark.read.format("kafka").options(**options).load().selectExpr(*sink.COLUMNS)

    return _run(frame, sorted(ranges), cells, repeats=repeats, max_records=max_records, master=master, spark=spark,
                expected=None, what=f"topic {plan.topic}")


def kafka_options(plan: TopicPlan, ranges: Mapping[int, tuple[int, int]]) -> dict[str, str]:
    """Options of the batch read of these [start, end) offsets (the cluster's security translated for Java)."""
    cluster = dict(plan.cluster)
    return {
        "kafka.bootstrap.servers": str(cluster["bootstrap.servers"]),
        **{f"kafka.{k}": v for k, v in java_client_properties(cluster).items()},
        "assign": json.dumps({plan.topic: sorted(ranges)}),
        "startingOffsets": json.dumps({plan.topic: {str(p): start for p, (start, _) in ranges.items()}}),
        "endingOffsets": json.dumps({plan.topic: {str(p): end for p, (_, end) in ranges.items()}}),
        "includeHeaders": "true",
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",  # records deleted since the plan was made: an error, not a smaller sample
    }


def _check(cells: Sequence[Cell], repeats: int) -> None:
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    if not cells:
        raise ValueError("no cells to measure")


def _run(frame: Callable[[Any], Any], kafka_partitions: list[int], cells: Sequence[Cell], *, repeats: int,
         max_records: int, master: str, spark: Any, expected: set[int] | None, what: str) -> list[CellResult]:
    unique = list(dict.fromkeys(cells))  # a cell given twice is measured once (and reported twice)
    owned = spark is None
    if owned:
        spark = _build(master)
    try:
        try:
            spark.sparkContext.setJobDescription(f"transcoder evaluate: {what}, {len(unique)} cells")
            rows = _measured(frame(spark), kafka_partitions, unique, repeats, max_records).collect()
        except TranscoderError:
            raise
        except Exception as exc:  # py4j/pyspark errors: a JVM exception chain, kept as one line
            raise TranscoderError(f"evaluating {what} on Spark failed: {_failure(exc)}") from exc
    finally:
        if owned:
            spark.stop()
        else:
            spark.sparkContext.setJobDescription(None)
    partials = _partials(rows, unique, expected, what)
    return fold(partials, cells)


def _build(master: str) -> Any:
    """The session, its JVM's standard output sent to stderr: Ivy and Spark print there (`:: loading settings ::`),
    and `evaluate --format json|csv` writes its results to stdout."""
    try:
        conf = SparkConfig(master=master)
    except ValueError as exc:  # pydantic's ValidationError
        errors = getattr(exc, "errors", None)
        reason = errors()[0]["msg"].removeprefix("Value error, ") if callable(errors) else str(exc)
        raise ConfigError(f"--master: {reason}") from None
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)  # the JVM started now inherits it
        return session.build(conf, app_name=APP_NAME)
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _failure(exc: BaseException) -> str:
    """One line for a failed job: a Python worker's exception as its traceback's last line (`ValueError: ...`),
    else the JVM's exception and root cause (session.java_failure)."""
    from pyspark.errors import PythonException

    if isinstance(exc, PythonException):
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and not ln.strip().startswith("SQLSTATE")]
        if lines:
            return f"in a Python worker: {lines[-1]}"
    return session.java_failure(exc)


def _measured(df: Any, kafka_partitions: list[int], cells: Sequence[Cell], repeats: int, max_records: int) -> Any:
    """df (sink.COLUMNS) with each Kafka partition in one Spark partition, in offset order, measured."""
    from pyspark.sql import functions as F

    slots = F.array_position(F.array(*[F.lit(p) for p in kafka_partitions]), F.col("partition")) - 1
    df = df.withColumn(_SLOT, slots.cast("int"))
    n = len(kafka_partitions)
    if hasattr(df, "repartitionById"):  # pyspark 4.1+: Kafka partition i of the sample -> Spark partition i
        df = df.repartitionById(n, _SLOT)
    else:  # hashed: a Spark partition may get several Kafka partitions, never part of one
        df = df.repartition(n, _SLOT)
    df = df.sortWithinPartitions("partition", "offset").drop(_SLOT)
    return df.mapInArrow(task_function(list(cells), repeats, max_records), RESULT_SCHEMA)


def _arrow_table(partitions: Mapping[int, Sequence[Record]]) -> Any:
    """The in-memory sample as an Arrow table of sink.COLUMNS (topic empty, the offset a record's index)."""
    import pyarrow as pa

    parts, offsets, keys, values, headers, stamps = [], [], [], [], [], []
    for p, records in partitions.items():
        for i, (key, value, hs, ts) in enumerate(records):
            parts.append(p)
            offsets.append(i)
            keys.append(key)
            values.append(value)
            headers.append(_headers_json(hs) if hs else None)
            stamps.append(ts)
    n = len(parts)
    return pa.table({"topic": pa.array([""] * n, pa.string()), "partition": pa.array(parts, pa.int32()),
                     "offset": pa.array(offsets, pa.int64()), "key": pa.array(keys, pa.binary()),
                     "value": pa.array(values, pa.binary()), "headers": pa.array(headers, pa.string()),
                     "ts": pa.array(stamps, pa.int64())})


def _headers_json(headers: Sequence[tuple[str, bytes | None]]) -> str:
    """Headers as Spark's to_json writes the Kafka source's headers column (values in base64, null left out)."""
    return json.dumps([{"key": k} if v is None else {"key": k, "value": b2a_base64(v, newline=False).decode()}
                       for k, v in headers], separators=(",", ":"))


def task_function(cells: list[Cell], repeats: int, max_records: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function `mapInArrow` runs in the Python workers (pickled with its arguments): each run of one Kafka
    partition's rows (sorted by partition, then offset) rebuilt as records and measured; one row per cell."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        current: int | None = None
        records: list[Record] = []
        for batch in batches:
            if batch.num_rows == 0:
                continue
            keys, values, headers, _ = sink._payload(batch)
            partitions, stamps = batch.column(1).to_pylist(), batch.column(6).to_pylist()
            for p, k, v, h, ts in zip(partitions, keys, values, headers, stamps, strict=True):
                if p != current:
                    if records:
                        yield _rows(current, measure_partition(records, cells, repeats=repeats,
                                                               max_records=max_records))
                    current, records = p, []
                records.append((k, v, tuple(h) if h else (), ts))
        if records:
            yield _rows(current, measure_partition(records, cells, repeats=repeats, max_records=max_records))

    return run


def _rows(partition: int | None, partials: list[Partial]) -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(),
             "array<double>": pa.list_(pa.float64())}
    schema = pa.schema([("partition", pa.int32()), *((name, types[kind]) for name, kind in _PARTIAL_COLUMNS)])
    columns: dict[str, list[Any]] = {"partition": [partition] * len(partials)}
    for name, _ in _PARTIAL_COLUMNS:
        columns[name] = [list(v) if isinstance(v := getattr(p, name), tuple) else v for p in partials]
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def _partials(rows: list[Any], cells: Sequence[Cell], expected: set[int] | None, what: str) -> list[Partial]:
    """The tasks' rows as Partials, checked: every measured Kafka partition (and each of `expected`) came back
    once per cell, whole (a partition split between tasks would come back twice)."""
    if not rows:
        raise InputError(f"the sample is empty: {what} gave no records")
    seen: dict[int, dict[Any, int]] = {p: {} for p in expected or ()}
    partials = []
    for row in rows:
        fields = row.asDict()
        partition = fields.pop("partition")
        values: dict[str, Any] = {name: tuple(v) if isinstance(v := fields[name], list) else v
                                  for name, _ in _PARTIAL_COLUMNS}
        partial = Partial(**values)
        counts = seen.setdefault(partition, {})
        counts[partial.key] = counts.get(partial.key, 0) + 1
        partials.append(partial)
    every = {key: p for p in partials for key in [p.key]}
    for p, counts in sorted(seen.items()):
        for key, partial in every.items():
            n = counts.get(key, 0)
            if n != 1:
                how = "not measured" if n == 0 else f"measured in {n} parts (split between Spark tasks)"
                raise TranscoderError(f"evaluating {what} on Spark: partition {p} was {how} for "
                                      f"{_label(partial)} at {partial.batch_bytes} B; its figures would be wrong")
    if len(every) != len(cells):
        raise TranscoderError(f"evaluating {what} on Spark: {len(every)} cells came back for the {len(cells)} measured")
    return partials


def _label(p: Partial) -> str:
    return Setting(p.codec, p.level).label  # type: ignore[arg-type]
