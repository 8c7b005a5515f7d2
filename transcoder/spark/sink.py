"""The executor side of the Spark engine: each task writes its records through the project's writer
(kafka.writer.Writer, the service's own), and returns one row of tallies for the driver.

Records reach the Python worker as Arrow batches (`mapInArrow`); `ArrowRecords` presents each row
with the accessors of a confluent_kafka.Message, so the writer copies keys, values, headers (order,
duplicates, nulls), partitions and timestamps exactly as the service does — the timestamps natively,
which Spark's own Kafka sink cannot (it ignores the `timestamp` column).

A Python worker runs one task at a time and is reused (spark.python.worker.reuse): its writers, and
their producers' connections, live across tasks and micro-batches. Each task ends with every record
acknowledged (or dead-lettered): only then may the micro-batch be committed to the checkpoint.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError

from transcoder.config import Config
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.kafka.statistics import Window
from transcoder.kafka.writer import Writer
from transcoder.pipeline.partitions import Partition, show
from transcoder.pipeline.routes import LaneSpec

#: The columns a task reads, in this order (SQL over the Kafka source's schema); ts in epoch ms, as Kafka keeps it.
COLUMNS = ("topic", "partition", "offset", "key", "value", "headers", "unix_millis(timestamp) AS ts")
#: The one row a task returns: its tallies, pickled (the driver's and the executors' transcoder are one version).
RESULT_SCHEMA = "tally binary"
#: How often an executor's producers report statistics: a task waits for one more report after its last
#: delivery, so the driver gets the compressed bytes of every batch (the service's interval is too long here).
EXECUTOR_STATS_INTERVAL_MS = 250


class SparkRecord:
    """One row of an Arrow batch, with the accessors the writer reads from a confluent_kafka.Message."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_topic", "_ts", "_value")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]] | None, ts: int) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers, self._ts = key, value, headers, ts

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        # LogAppendTime is copied as CreateTime, as the service does: the copy keeps the source's time.
        return TIMESTAMP_CREATE_TIME, self._ts


def arrow_records(batch: Any) -> list[SparkRecord]:
    """The records of one Arrow batch (columns as COLUMNS), in their order (a partition's offset order)."""
    topics, partitions, offsets, keys, values, headers, stamps = (batch.column(i).to_pylist() for i in range(7))
    return [SparkRecord(t, p, o, k, v, [(h["key"], h["value"]) for h in hs] if hs else None, ts)
            for t, p, o, k, v, hs, ts in zip(topics, partitions, offsets, keys, values, headers, stamps,
                                             strict=True)]


@dataclass
class Tally:
    """What one task measured: the driver folds it into the lane's metrics and status (WriterMetrics here)."""

    records: int = 0
    source_bytes: int = 0
    #: source partition -> (first offset, last offset, timestamp of the last record) written by this task
    ranges: dict[Partition, tuple[int, int, int]] = field(default_factory=dict)
    acked: dict[tuple[str, str], int] = field(default_factory=dict)  # (destination, codec) -> records
    #: (destination, codec) -> [(batch bytes window, batch records window, record bytes since the last one)]
    produced_windows: dict[tuple[str, str], list[tuple[Window, Window, int]]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    backlog: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    dead_lettered_records: int = 0
    cpu_seconds: float = 0.0  # the Python worker's CPU (this process: the loop and librdkafka's threads)
    seconds: float = 0.0
    #: The one-line error that must fail the micro-batch, and its fields (topic, partition, offset, ...).
    fatal: str | None = None
    fatal_type: str = "TranscoderError"  # its class in transcoder.errors
    fatal_fields: dict[str, Any] = field(default_factory=dict)


class TallyMetrics:
    """The writer's metrics in an executor: tallied per task, sent to the driver with the task's result."""

    def __init__(self) -> None:
        self.tally = Tally()
        self._record_bytes: dict[str, int] = {}  # destination -> cumulative record bytes seen (librdkafka's)

    def take(self) -> Tally:
        t, self.tally = self.tally, Tally()
        return t

    def acked(self, destination: str, codec: str, n: int) -> None:
        key = (destination, codec)
        self.tally.acked[key] = self.tally.acked.get(key, 0) + n

    def produced(self, destination: str, codec: str, batch_bytes: Window, batch_records: Window,
                 record_bytes_total: int) -> None:
        before = self._record_bytes.get(destination, 0)
        self._record_bytes[destination] = max(before, record_bytes_total)
        self.tally.produced_windows.setdefault((destination, codec), []).append(
            (batch_bytes, batch_records, max(0, record_bytes_total - before)))

    def latency(self, destination: str, seconds: float) -> None:
        self.tally.latencies.setdefault(destination, []).append(seconds)

    def backfill(self, destination: str) -> None:
        self.tally.backlog[destination] = self.tally.backlog.get(destination, 0) + 1

    def error(self, reason: str) -> None:
        self.tally.errors[reason] = self.tally.errors.get(reason, 0) + 1

    def dead_lettered(self) -> None:
        self.tally.dead_lettered_records += 1


#: (config fingerprint, lane) -> the writer this Python worker keeps for that lane, and its tallies
_WRITERS: dict[tuple[str, str], tuple[Writer, TallyMetrics]] = {}


def executor_config(config: Config) -> Config:
    stats = min(config.metrics.stats_interval_ms, EXECUTOR_STATS_INTERVAL_MS)
    return config.model_copy(update={"metrics": config.metrics.model_copy(update={"stats_interval_ms": stats})})


def _writer(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float) -> tuple[Writer, TallyMetrics]:
    key = (fingerprint, lane.name)
    found = _WRITERS.get(key)
    if found is None:
        metrics = TallyMetrics()
        found = _WRITERS[key] = (Writer(executor_config(config), lane.name, lane.targets, metrics,
                                        start_ms=start_ms), metrics)
    return found


def _consumer_error(err: KafkaError) -> None:  # SparkRecord.error() is always None: Spark read the records
    raise TranscoderError(f"unexpected consumer error from a Spark record: {err.str()}")


def write_task(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float,
               batches: Iterator[Any]) -> Tally:
    """Write one task's records (Arrow batches of one source partition range) to every destination of the
    lane; return when each is acknowledged, dead-lettered, or a failure is known (then `fatal` says which)."""
    cpu0, t0 = time.process_time(), time.monotonic()
    writer, metrics = _writer(config, fingerprint, lane, start_ms)
    limit = config.max_in_flight_bytes
    records = source_bytes = 0
    ranges: dict[Partition, tuple[int, int, int]] = {}
    fatal: TranscoderError | None = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            recs = arrow_records(batch)
            n, nbytes = writer.write(recs, _consumer_error)
            records += n
            source_bytes += nbytes
            first, last = recs[0], recs[-1]
            tp = (first.topic(), first.partition())
            # A task reads one partition's range (in offset order); any other shape is still tallied exactly.
            for r in (last,) if (last.topic(), last.partition()) == tp else recs:
                at = (r.topic(), r.partition())
                ranges[at] = (ranges[at][0] if at in ranges else (first if at == tp else r).offset(),
                              r.offset(), r.timestamp()[1])
            writer.poll(0)
            writer.handle_failures()
            while writer.ledger.in_flight_bytes > limit:  # backpressure, as the service's lane
                writer.poll(0.05)
                writer.handle_failures()
        writer.drain(config.shutdown_timeout_s)
        outstanding = writer.ledger.outstanding(list(ranges))
        if outstanding:
            raise DeliveryError(
                f"lane {lane.name}: {outstanding} records of {show(ranges)} not acknowledged within "
                f"shutdown_timeout_s={config.shutdown_timeout_s:g}s; the micro-batch is not committed")
        writer.final_statistics()
    except TranscoderError as exc:
        fatal = exc
    finally:
        writer.flush_acked()
        writer.ledger.forget(list(ranges))
    tally = metrics.take()
    tally.records, tally.source_bytes, tally.ranges = records, source_bytes, ranges
    tally.cpu_seconds, tally.seconds = time.process_time() - cpu0, time.monotonic() - t0
    if fatal is not None:
        tally.fatal, tally.fatal_type, tally.fatal_fields = str(fatal), type(fatal).__name__, fatal.fields()
    return tally


def task_function(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float) -> Any:
    """The function `mapInArrow` runs in the executors (pickled with its arguments)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        tally = write_task(config, fingerprint, lane, start_ms, batches)
        yield pa.RecordBatch.from_pydict({"tally": [pickle.dumps(tally)]})

    return run
