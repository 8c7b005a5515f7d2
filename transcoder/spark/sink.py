"""The executor side of the Spark engine: each task writes its records through the project's writer
(kafka.writer's Sink, the service's own), and returns one row of tallies for the driver.

Records reach the Python worker as Arrow batches (`mapInArrow`), one source partition's run each. On the service's
compiled path (`hot_path: batches`, the default) the run is framed natively into a StoredRecords
(codecs.stored_from_columns) and handed to the writer as the lanes hand it fetched record sets (`write_stored`):
re-batched, compressed and sent by transcoder's batch producer, acknowledged batch by batch. With `hot_path:
records` the writer takes the columns (`write_columns`) and produces record by record through librdkafka, and
where it needs one record (a failure, a re-send) it gets a `Delivered`. Either way keys, values, headers (order,
duplicates, nulls), partitions and timestamps are copied exactly as the service copies them — the timestamps
natively, which Spark's own Kafka sink cannot (it ignores the `timestamp` column).

A Python worker runs one task at a time and is reused (spark.python.worker.reuse): its writers, and
their producers' connections, live across tasks and micro-batches. Each task ends with every record
acknowledged (or dead-lettered): only then may the micro-batch be committed to the checkpoint.
"""

from __future__ import annotations

import json
import pickle
import time
from binascii import a2b_base64
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from transcoder.config import Config
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.kafka.fetcher import SourceLoss
from transcoder.kafka.producer import Delivered
from transcoder.kafka.statistics import Window
from transcoder.kafka.writer import Sink, TransactionalSink, build_sink
from transcoder.pipeline.commits import first_uncommitted
from transcoder.pipeline.partitions import Partition, show
from transcoder.pipeline.routes import LaneSpec
from transcoder.spark.exactly_once import TaskTransactions, group_client

#: The columns a task reads, in this order (SQL over the Kafka source's schema); ts in epoch ms, as Kafka keeps it.
#: Headers travel as JSON text (binary values in base64), null for a record without any: Spark's Arrow transfer
#: of the source's array<struct<key, value>> column cost ~14 us of executor CPU per record even when every
#: record had none (1M nginx records, local[1]: 18 s against 4 s without the column; as JSON, 6 s with
#: headers on every record). bench/results/2026-11-23-spark.md has the measurement.
COLUMNS = ("topic", "partition", "offset", "key", "value",
           "CASE WHEN size(headers) > 0 THEN to_json(headers) END AS headers", "unix_millis(timestamp) AS ts")
#: The one row a task returns: its tallies, pickled (the driver's and the executors' transcoder are one version).
RESULT_SCHEMA = "tally binary"
#: How often an executor's producers report statistics: a task waits for one more report after its last
#: delivery, so the driver gets the compressed bytes of every batch (the service's interval is too long here).
EXECUTOR_STATS_INTERVAL_MS = 250


def _payload(batch: Any) -> tuple[list[Any], list[Any], list[Any], list[int]]:
    """Keys, values, headers and sizes of an Arrow batch (columns as COLUMNS).

    Sizes are key + value + header names and values, as the service counts a record's bytes. Headers are
    decoded with one JSON parse per batch, not per record (base64 by binascii: b64decode adds a Python
    wrapper per call); a record without headers gets None.
    """
    import pyarrow.compute as pc

    key_col, value_col, header_col = batch.column(3), batch.column(4), batch.column(5)
    sizes = pc.add(pc.fill_null(pc.binary_length(key_col), 0), pc.fill_null(pc.binary_length(value_col), 0)
                   ).to_pylist()
    headers: list[Any] = [None] * len(header_col)
    if header_col.null_count != len(header_col):
        texts = header_col.to_pylist()
        at = [i for i, t in enumerate(texts) if t is not None]
        for i, hs in zip(at, json.loads("[" + ",".join([texts[i] for i in at]) + "]"), strict=True):
            pairs = [(h["key"], a2b_base64(h["value"]) if h.get("value") is not None else None) for h in hs]
            headers[i] = pairs
            sizes[i] += sum(len(k) + (len(v) if v is not None else 0) for k, v in pairs)
    return key_col.to_pylist(), value_col.to_pylist(), headers, sizes


def arrow_records(batch: Any) -> list[Delivered]:
    """The records of any Arrow batch (columns as COLUMNS), in their order, with the accessors of a
    confluent_kafka.Message (the source timestamp as CreateTime, as the service copies it)."""
    keys, values, headers, sizes = _payload(batch)
    topics, partitions, offsets, stamps = (batch.column(i).to_pylist() for i in (0, 1, 2, 6))
    return [Delivered(t, p, o, (k, v, h or (), ts, n)) for t, p, o, k, v, h, ts, n in
            zip(topics, partitions, offsets, keys, values, headers, stamps, sizes, strict=True)]


@dataclass(frozen=True)
class Columns:
    """One Arrow batch of one source partition, as the writer's write_columns takes it."""

    topic: str
    partition: int
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]] | None]
    stamps: list[int]
    sizes: list[int]  # key + value + header names and values, as the service counts a record's bytes

    def record(self, i: int) -> Delivered:
        return Delivered(self.topic, self.partition, self.offsets[i],
                         (self.keys[i], self.values[i], self.headers[i] or (), self.stamps[i], self.sizes[i]))


def arrow_columns(batch: Any) -> Columns | None:
    """The batch as columns when it holds one source partition (as Spark's Kafka source reads); else None."""
    import pyarrow.compute as pc

    topics, partitions = batch.column(0), batch.column(1)
    bounds = pc.min_max(partitions).as_py()
    if bounds["min"] != bounds["max"] or len(topics.unique()) != 1:
        return None
    keys, values, headers, sizes = _payload(batch)
    return Columns(topic=topics[0].as_py(), partition=bounds["min"], offsets=batch.column(2).to_pylist(),
                   keys=keys, values=values, headers=headers, stamps=batch.column(6).to_pylist(), sizes=sizes)


@dataclass
class TaskTally:
    """What one Spark task measured: the driver folds it into the lane's metrics and status (WriterMetrics here)."""

    records: int = 0
    source_bytes: int = 0
    #: source partition -> (first offset, last offset, timestamp of the last record) written by this task
    ranges: dict[Partition, tuple[int, int, int]] = field(default_factory=dict)
    acked: dict[tuple[str, str], int] = field(default_factory=dict)  # (destination, codec) -> records
    #: (destination, codec) -> [(batch bytes window, batch records window, record bytes since the last one)]
    produced_windows: dict[tuple[str, str], list[tuple[Window, Window, int]]] = field(default_factory=dict)
    latencies: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # destination -> [(s, weight)]
    backlog: dict[str, float] = field(default_factory=dict)  # destination -> weight of backlog samples
    errors: dict[str, int] = field(default_factory=dict)
    dead_lettered_records: int = 0
    #: source records gone before the task read them (spark.read: transcoder): the driver says, counts and marks them
    losses: list[SourceLoss] = field(default_factory=list)
    cpu_seconds: float = 0.0  # the Python worker's CPU (this process: the loop and librdkafka's threads)
    seconds: float = 0.0
    #: The one-line error that must fail the micro-batch, and its fields (topic, partition, offset, ...).
    fatal: str | None = None
    fatal_type: str = "TranscoderError"  # its class in transcoder.errors
    fatal_fields: dict[str, Any] = field(default_factory=dict)


class TallyMetrics:
    """The writer's metrics in an executor: tallied per task, sent to the driver with the task's result."""

    def __init__(self) -> None:
        self.tally = TaskTally()
        self._record_bytes: dict[str, int] = {}  # destination -> cumulative record bytes seen (librdkafka's)

    def take(self) -> TaskTally:
        t, self.tally = self.tally, TaskTally()
        return t

    def lost(self, loss: SourceLoss) -> None:
        self.tally.losses.append(loss)

    def acked(self, destination: str, codec: str, n: int) -> None:
        key = (destination, codec)
        self.tally.acked[key] = self.tally.acked.get(key, 0) + n

    def produced(self, destination: str, codec: str, batch_bytes: Window, batch_records: Window,
                 record_bytes_total: int) -> None:
        before = self._record_bytes.get(destination, 0)
        self._record_bytes[destination] = max(before, record_bytes_total)
        self.tally.produced_windows.setdefault((destination, codec), []).append(
            (batch_bytes, batch_records, max(0, record_bytes_total - before)))

    def latency(self, destination: str, seconds: float, weight: float = 1.0) -> None:
        self.tally.latencies.setdefault(destination, []).append((seconds, weight))

    def backfill(self, destination: str, weight: float = 1.0) -> None:
        self.tally.backlog[destination] = self.tally.backlog.get(destination, 0.0) + weight

    def error(self, reason: str) -> None:
        self.tally.errors[reason] = self.tally.errors.get(reason, 0) + 1

    def dead_lettered(self) -> None:
        self.tally.dead_lettered_records += 1


#: (config fingerprint, lane) -> the writer this Python worker keeps for that lane, and its tallies
_WRITERS: dict[tuple[str, str], tuple[Sink, TallyMetrics]] = {}


def executor_config(config: Config) -> Config:
    stats = min(config.metrics.stats_interval_ms, EXECUTOR_STATS_INTERVAL_MS)
    return config.model_copy(update={"metrics": config.metrics.model_copy(update={"stats_interval_ms": stats})})


def _writer(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float) -> tuple[Sink, TallyMetrics]:
    key = (fingerprint, lane.name)
    found = _WRITERS.get(key)
    if found is None:
        # Another config's writers (an earlier engine in this Spark application) are idle: their tasks drained.
        for stale in [k for k in _WRITERS if k[0] != fingerprint]:
            _WRITERS.pop(stale)[0].close(0)
        metrics = TallyMetrics()
        found = _WRITERS[key] = (build_sink(executor_config(config), lane.name, lane.targets, metrics,
                                            start_ms=start_ms, batched=config.batched), metrics)
    return found


def _consumer_error(err: KafkaError) -> None:  # Delivered.error() is always None: Spark read the records
    raise TranscoderError(f"unexpected consumer error from a Spark record: {err.str()}")


def write_task(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float,
               batches: Iterator[Any]) -> TaskTally:
    """Write one task's records (Arrow batches of one source partition range) to every destination of the
    lane; return when each is acknowledged, dead-lettered, or a failure is known (then `fatal` says which).
    exactly-once: in the task's transactions (spark.exactly_once), from the group's committed offset on."""
    task = _Task(config, fingerprint, lane, start_ms)
    writer, txns = task.writer, task.txns

    def copy() -> None:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            cols = arrow_columns(batch)
            if cols is not None:  # one partition's run of records
                tp = (cols.topic, cols.partition)
                skip = 0
                if txns is not None:
                    if txns.partition is None:
                        txns.begin(tp)
                    elif txns.partition != tp:
                        raise TranscoderError(f"lane {lane.name}: one task read {show([txns.partition, tp])}; "
                                              "exactly-once writes one source partition per task")
                    skip = first_uncommitted(cols.offsets, txns.committed)  # a replay: copied already
                n, nbytes = writer.write_columns(cols, skip)
                task.wrote(tp, cols.offsets[0], cols.offsets[-1], cols.stamps[-1], n, nbytes)
            else:  # Spark's Kafka source never mixes partitions in a batch; if it did, record by record
                if config.batched or txns is not None:
                    raise TranscoderError(f"lane {lane.name}: an Arrow batch of several source partitions; the "
                                          "batched path and exactly-once take one partition's records at a time")
                recs = arrow_records(batch)
                n, nbytes = writer.write(recs, _consumer_error)
                task.wrote(None, 0, 0, 0, n, nbytes)
                for r in recs:
                    task.wrote((r.topic(), r.partition()), r.offset(), r.offset(), r.timestamp()[1], 0, 0)
            task.turn()

    return task.run(copy)


class _Task:
    """One task's writer, transactions and ranges, and the steps every task takes whatever reads its records:
    a turn after each run (linger, failures, backpressure), the end (commit, drain, the group's offsets), the tally."""

    def __init__(self, config: Config, fingerprint: str, lane: LaneSpec, start_ms: float) -> None:
        self.cpu0, self.t0 = time.process_time(), time.monotonic()
        self.config, self.fingerprint, self.lane = config, fingerprint, lane
        self.writer, self.metrics = _writer(config, fingerprint, lane, start_ms)
        writer = self.writer  # exactly-once: build_sink made it transactional
        self.txns = TaskTransactions(config, lane, writer, group_client(config, fingerprint, lane)) \
            if isinstance(writer, TransactionalSink) else None
        # exactly-once: the transactions commit them; a migration's gates read them (copied, lag)
        self.commit_group = (config.spark.commit_group or config.migration is not None) and self.txns is None
        #: source partition -> (first offset, last offset, timestamp of the last record) written
        self.ranges: dict[Partition, tuple[int, int, int]] = {}
        self.records = self.source_bytes = 0
        self.fatal: TranscoderError | None = None

    def run(self, copy: Callable[[], None]) -> TaskTally:
        """`copy` (the task's reading and writing, through `wrote` and `turn`), then the end; the tally, with the
        one-line failure that must fail the micro-batch in `fatal`."""
        try:
            copy()
            self.finish()
        except TranscoderError as exc:
            self.fatal = exc
        finally:
            self.release()
        return self.tally()

    def wrote(self, tp: Partition | None, first: int, last: int, stamp: int, n: int, nbytes: int) -> None:
        """`n` records (`nbytes` source bytes) of `tp` written, its run reaching `last` (tp None: counted only)."""
        self.records, self.source_bytes = self.records + n, self.source_bytes + nbytes
        if tp is None:
            return
        self.ranges[tp] = (self.ranges[tp][0] if tp in self.ranges else first, last, stamp)
        if self.txns is not None and n:
            self.txns.written(last + 1)

    def turn(self) -> None:
        writer = self.writer
        writer.tick(time.monotonic())  # batches whose linger is over go
        writer.poll(0)
        writer.handle_failures()
        while writer.ledger.in_flight_bytes > self.config.max_in_flight_bytes:  # backpressure, as the lane's
            writer.poll(0.05)
            writer.handle_failures()

    def finish(self) -> None:
        config, lane, writer, ranges = self.config, self.lane, self.writer, self.ranges
        if self.txns is not None:
            self.txns.commit()  # delivers what the transaction holds, or fails
        writer.drain(config.shutdown_timeout_s)
        outstanding = writer.ledger.outstanding(list(ranges))
        if outstanding:
            raise DeliveryError(
                f"lane {lane.name}: {outstanding} records of {show(ranges)} not acknowledged within "
                f"shutdown_timeout_s={config.shutdown_timeout_s:g}s; the micro-batch is not committed")
        writer.final_statistics()
        if self.commit_group and ranges:
            _commit_group(group_client(config, self.fingerprint, lane), lane, ranges)

    def release(self) -> None:
        """Whatever ended the task: its acknowledgements counted, its ranges no longer the writer's."""
        self.writer.flush_acked()
        self.writer.ledger.forget(list(self.ranges))

    def tally(self) -> TaskTally:
        tally = self.metrics.take()
        tally.records, tally.source_bytes, tally.ranges = self.records, self.source_bytes, self.ranges
        tally.cpu_seconds, tally.seconds = time.process_time() - self.cpu0, time.monotonic() - self.t0
        if self.fatal is not None:
            f = self.fatal
            tally.fatal, tally.fatal_type, tally.fatal_fields = str(f), type(f).__name__, f.fields()
        return tally


def write_stored_task(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float, tp: Partition, first: int,
                      runs: Callable[[int, Callable[[SourceLoss], None]], Generator[tuple[Any, int, int], None, None]],
                      ) -> TaskTally:
    """One task of `spark.read: transcoder` (spark/ranges.py): source partition `tp` from offset `first`, its
    stored records as `runs(from_offset, lost)` reads them ((records, start index, stop index) each; the source's
    losses told to `lost`, into the tally), to every destination, as write_task writes Spark's; under exactly-once
    from the group's committed offset when further."""
    task = _Task(config, fingerprint, lane, start_ms)

    def copy() -> None:
        start = first
        if task.txns is not None:
            task.txns.begin(tp)
            start = max(first, task.txns.committed or 0)  # a replay: copied already below the group's offset
        read = runs(start, task.metrics.lost)
        try:
            for stored, i, j in read:
                n, nbytes = task.writer.write_stored(tp, stored, time.monotonic(), i, j)
                begin, last, _ = stored.span(i, j)
                task.wrote(tp, begin, last, int(stored.record(j - 1)[1]), n, nbytes)
                task.turn()
        finally:
            read.close()

    return task.run(copy)


def _commit_group(group: Any, lane: LaneSpec, ranges: dict[Partition, tuple[int, int, int]]) -> None:
    """spark.commit_group: the offsets after the task's acknowledged records, committed to the lane's group.
    DeliveryError (the micro-batch is not committed) when Kafka refuses them."""
    offsets = [TopicPartition(t, p, last + 1) for (t, p), (_, last, _) in sorted(ranges.items())]
    try:
        refused = [tp for tp in group.commit(offsets=offsets, asynchronous=False) if tp.error is not None]
    except KafkaException as exc:
        raise DeliveryError(f"lane {lane.name}: the offsets of {show(ranges)} not committed to group "
                            f"{lane.group_id}: {exc.args[0].str()}", retriable=True) from None
    if refused:
        raise DeliveryError(f"lane {lane.name}: the offset of {show([(refused[0].topic, refused[0].partition)])} "
                            f"not committed to group {lane.group_id}: {refused[0].error.str()}", retriable=True)


def task_function(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float) -> Any:
    """The function `mapInArrow` runs in the executors (pickled with its arguments)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        tally = write_task(config, fingerprint, lane, start_ms, batches)
        yield pa.RecordBatch.from_pydict({"tally": [pickle.dumps(tally)]})

    return run
