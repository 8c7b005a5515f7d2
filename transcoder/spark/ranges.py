"""`spark.read: transcoder`: Spark plans and retries, transcoder reads.

A Python streaming data source (pyspark's DataSourceStreamReader) whose offsets are the source partitions'
`{topic: {partition: offset}}` (the shape of Spark's Kafka source, so lag and checkpoints read alike). The driver's
reader asks Kafka for each partition's read_committed end (ListOffsets), bounds a micro-batch by
`max_offsets_per_trigger` as Spark's Kafka source does, and Spark checkpoints the ends and schedules one task per
source partition with records. The task (`read`, in an executor's Python worker) reads its range with the
service's raw fetcher (stored record sets, decoded natively), hands them to the writer's compiled path, and yields
its tally: no Kafka consumer in the executor JVM, no Arrow transfer of the records.

Exactly-once and at-least-once are the same as on Spark's Kafka source (spark/exactly_once.py, spark/sink.py):
one task per source partition, the micro-batch committed to the checkpoint after every task returned.
"""

from __future__ import annotations

import math
import pickle
import time
from bisect import bisect_left
from collections.abc import Generator, Iterator, Mapping
from datetime import datetime
from typing import Any

from transcoder.config import Config
from transcoder.errors import DataLossError, TranscoderError
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import LaneSpec

#: offsets as the checkpoint keeps them: topic -> partition (a string, as JSON keys are) -> offset
Offsets = dict[str, dict[str, int]]
#: the data sources' names for spark.readStream.format(): this, then the lane's name (source_name)
NAME = "transcoder-kafka"
SCHEMA = "tally binary"
#: a task's fetch that brings its range no further for this long fails the task (Spark retries it)
STALL_S = 120.0


def flat(offsets: Mapping[str, Mapping[str, int]]) -> dict[Partition, int]:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


def nested(offsets: Mapping[Partition, int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def bounded(start: Mapping[Partition, int], latest: Mapping[Partition, int],
            max_records: int | None) -> dict[Partition, int]:
    """The micro-batch's end: `latest`, or with `max_records` as Spark's Kafka source prorates maxOffsetsPerTrigger
    (each partition's share of the backlog, rounded down, and at least one record where it has any). A partition
    new since `start` starts at 0."""
    begin = {tp: start.get(tp, 0) for tp in latest}
    backlog = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
    total = sum(backlog.values())
    if max_records is None or total <= max_records:
        return {tp: max(begin[tp], latest[tp]) for tp in latest}
    out = {}
    for tp, size in backlog.items():
        share = max_records * (size / total)
        out[tp] = begin[tp] + min(size, math.ceil(share) if share < 1 else math.floor(share))
    return out


def planned(start: Mapping[Partition, int], end: Mapping[Partition, int]) -> list[tuple[str, int, int, int]]:
    """One (topic, partition, from, until) per source partition with records between the two."""
    return [(t, p, start.get((t, p), 0), until) for (t, p), until in sorted(end.items())
            if until > start.get((t, p), 0)]


def refusal(config: Config) -> str | None:
    """What `spark.read: transcoder` does not do yet, in one line; None when the config is fine."""
    if config.spark.read != "transcoder":
        return None
    if isinstance(config.start, datetime):
        return "spark.read: transcoder starts at earliest or latest only; a start timestamp needs spark.read: kafka"
    if config.evaluate is not None:
        return "spark.read: transcoder does not sample for live scoring (evaluate:) yet; use spark.read: kafka"
    return None


def source_name(lane: LaneSpec) -> str:
    """The lane's own data source name (each lane's class carries its own config and lane)."""
    return f"{NAME}-{lane.name}"


def source_class(config: Config, lane: LaneSpec, fingerprint: str, start_ms: float) -> type:
    """The data source of one lane, its config carried in the class (pickled with it, never in the query's
    options, which plans and the UI show)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    class RangeReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self) -> None:
            self._client: Any = None
            #: Trigger.AvailableNow (--until-caught-up): the ends when the query started, never read past
            self._target: dict[Partition, int] | None = None

        def _raw(self) -> Any:
            from transcoder.kafka.protocol import RawClient

            if self._client is None:
                self._client = RawClient(config.cluster.librdkafka())
            return self._client

        def _partitions(self) -> list[Partition]:
            meta = self._raw().leaders(set(lane.sources))
            return sorted(tp for tp in meta if tp[0] in lane.sources)

        def initialOffset(self) -> dict:  # noqa: N802 - pyspark's name
            # earliest or latest (refusal(): a start timestamp needs spark.read: kafka)
            return nested(self._raw().list_offsets(self._partitions(), latest=config.start == "latest"))

        def latestOffset(self, start: dict, limit: Any) -> dict:  # noqa: N802
            from pyspark.sql.streaming.datasource import ReadMaxRows

            latest = self._target if self._target is not None else \
                self._raw().list_offsets(self._partitions(), latest=True)
            most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            return nested(bounded(flat(start), latest, most))

        def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
            self._target = self._raw().list_offsets(self._partitions(), latest=True)

        def getDefaultReadLimit(self) -> Any:  # noqa: N802
            from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

            most = config.spark.max_offsets_per_trigger
            return ReadMaxRows(most) if most else ReadAllAvailable()

        def partitions(self, start: dict, end: dict) -> list[Any]:
            return [InputPartition(r) for r in planned(flat(start), flat(end))]

        def read(self, partition: Any) -> Iterator[tuple]:
            tally = write_range(config, fingerprint, lane, start_ms, *partition.value)
            yield (pickle.dumps(tally),)

        def commit(self, end: dict) -> None:
            pass

    class LaneSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return source_name(lane)

        def schema(self) -> str:
            return SCHEMA

        def streamReader(self, schema: Any) -> Any:  # noqa: N802
            return RangeReader()

    return LaneSource


def write_range(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float, topic: str, partition: int,
                first: int, until: int) -> Any:
    """Copy source records [first, until) of one partition to every destination of the lane (a task of
    `spark.read: transcoder`); its tally, a failure in `fatal` as sink.write_task reports it."""
    from transcoder.kafka.fetcher import Fetcher
    from transcoder.spark import sink

    tp = (topic, partition)

    def runs(skip_to: int) -> Generator[tuple[Any, int, int], None, None]:
        """(stored records, start index, stop index) from `skip_to` until `until`, read with the raw fetcher."""
        fetcher = Fetcher(config.cluster.librdkafka(), f"transcoder-{lane.name}-fetch", read_ahead=False,
                          past_loss=config.on_source_loss == "continue")
        try:
            fetcher.assign({tp: skip_to})
            progressed, position = time.monotonic(), skip_to
            while skip_to < until and fetcher.positions.get(tp, skip_to) < until:
                got = fetcher.fetch()
                now = time.monotonic()
                if fetcher.positions.get(tp, position) > position:
                    progressed, position = now, fetcher.positions[tp]
                elif now - progressed > STALL_S:
                    raise TranscoderError(f"lane {lane.name}: reading {topic} [{partition}] stalled at offset "
                                          f"{position} for {STALL_S:.0f} s (the micro-batch ends at {until})",
                                          topic=topic, partition=partition, offset=position, retriable=True)
                for loss in fetcher.take_losses():
                    if config.on_source_loss == "stop":
                        raise DataLossError(f"lane {lane.name}: records of {topic} [{partition}] from offset "
                                            f"{loss.offset} are gone from the source (its first offset is now "
                                            f"{loss.first}): on_source_loss: stop", topic=topic,
                                            partition=partition, offset=loss.offset)
                f = got.get(tp)
                if f is None or not len(f.records):
                    continue
                records = f.records
                if records.first_offset >= skip_to and records.last_offset < until:
                    yield records, 0, len(records)  # the whole round: no offset list built
                    continue
                offsets = records.offsets  # the range's first or last round: cut at its bounds
                start, stop = bisect_left(offsets, skip_to), bisect_left(offsets, until)
                if stop > start:
                    yield records, start, stop
        finally:
            fetcher.close()

    return sink.write_stored_task(config, fingerprint, lane, start_ms, tp, first, runs)
