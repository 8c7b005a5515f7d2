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
from collections.abc import Callable, Generator, Iterator, Mapping
from datetime import datetime
from typing import Any

from transcoder.config import Config
from transcoder.engine.source_loss import stop_error
from transcoder.errors import TranscoderError
from transcoder.kafka.fetcher import SourceLoss
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import LaneSpec

#: offsets as the checkpoint keeps them: topic -> partition (a string, as JSON keys are) -> offset
Offsets = dict[str, dict[str, int]]
#: the data sources' names for spark.readStream.format(): this, then the lane's name (source_name)
NAME = "transcoder-kafka"
SCHEMA = "tally binary"
#: a task's fetch that brings its range no further for this long fails the task (Spark retries it)
STALL_S = 120.0
#: a live-scoring sample's read (on the driver, between micro-batches) given up after this long without progress
SAMPLE_STALL_S = 10.0


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


#: an idle query asks Kafka for its sources' ends at most this often: Spark asks the reader again 10 ms after a
#: micro-batch found nothing new (spark.sql.streaming.pollingDelay), 100 ListOffsets a second per idle query
IDLE_ASK_S = 0.1


class IdlePacing:
    """Pure: how long the driver's reader waits before it asks Kafka for the ends again. Only while the last answer
    brought nothing new (idle), and only until IDLE_ASK_S after that answer: a copy with a backlog asks at once, a
    record arriving at an idle source waits at most IDLE_ASK_S more."""

    def __init__(self, ask_every_s: float = IDLE_ASK_S) -> None:
        self.every = ask_every_s
        self._asked_at: float | None = None  # when the last answer brought nothing new

    def wait_s(self, now: float) -> float:
        return 0.0 if self._asked_at is None else max(0.0, self._asked_at + self.every - now)

    def answered(self, now: float, new: bool) -> None:
        """An answer (at `now`) that brought records past the last end (`new`) or not."""
        self._asked_at = None if new else now


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
            self._pacing = IdlePacing()

        def _raw(self) -> Any:
            from transcoder.kafka.protocol import RawClient

            if self._client is None:
                self._client = RawClient(config.cluster.librdkafka())
            return self._client

        def _partitions(self) -> list[Partition]:
            meta = self._raw().leaders(set(lane.sources))
            return sorted(tp for tp in meta if tp[0] in lane.sources)

        def initialOffset(self) -> dict:  # noqa: N802 - pyspark's name
            # a new checkpoint: earliest, latest, or the first offset at the start time (the service's rule)
            start = config.start
            if isinstance(start, datetime):
                return nested(self._raw().offsets_at(self._partitions(), int(start.timestamp() * 1000)))
            return nested(self._raw().list_offsets(self._partitions(), latest=start == "latest"))

        def latestOffset(self, start: dict, limit: Any) -> dict:  # noqa: N802
            from pyspark.sql.streaming.datasource import ReadMaxRows

            begin = flat(start)
            if self._target is not None:
                latest = self._target
            else:
                time.sleep(self._pacing.wait_s(time.monotonic()))
                latest = self._raw().list_offsets(self._partitions(), latest=True)
                self._pacing.answered(time.monotonic(), any(o > begin.get(tp, 0) for tp, o in latest.items()))
            most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            return nested(bounded(begin, latest, most))

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


def read_range(config: Config, lane: LaneSpec, tp: Partition, first: int, until: int, *, client: str,
               stall_s: float, past_loss: bool, lost: Callable[[SourceLoss], None],
               ) -> Generator[tuple[Any, int, int], None, None]:
    """(stored records, start index, stop index) of source partition `tp` from `first` until `until`, read with the
    raw fetcher (client id `transcoder-<lane>-<client>`); each loss of the source told to `lost` (which may raise);
    TranscoderError (retriable) when a fetch brings the range no further for `stall_s`."""
    from transcoder.kafka.fetcher import Fetcher

    fetcher = Fetcher(config.cluster.librdkafka(), f"transcoder-{lane.name}-{client}", read_ahead=False,
                      past_loss=past_loss)
    try:
        fetcher.assign({tp: first})
        progressed, position = time.monotonic(), first
        while first < until and fetcher.positions.get(tp, first) < until:
            got = fetcher.fetch()
            now = time.monotonic()
            if fetcher.positions.get(tp, position) > position:
                progressed, position = now, fetcher.positions[tp]
            elif now - progressed > stall_s:
                raise TranscoderError(f"lane {lane.name}: reading {tp[0]} [{tp[1]}] stalled at offset {position} for "
                                      f"{stall_s:.0f} s (the range ends at {until})", topic=tp[0],
                                      partition=tp[1], offset=position, retriable=True)
            for loss in fetcher.take_losses():
                lost(loss)
            f = got.get(tp)
            if f is None or not len(f.records):
                continue
            records = f.records
            if records.first_offset >= first and records.last_offset < until:
                yield records, 0, len(records)  # the whole round: no offset list built
                continue
            offsets = records.offsets  # the range's first or last round: cut at its bounds
            start, stop = bisect_left(offsets, first), bisect_left(offsets, until)
            if stop > start:
                yield records, start, stop
    finally:
        fetcher.close()


def write_range(config: Config, fingerprint: str, lane: LaneSpec, start_ms: float, topic: str, partition: int,
                first: int, until: int) -> Any:
    """Copy source records [first, until) of one partition to every destination of the lane (a task of
    `spark.read: transcoder`); its tally, a failure in `fatal` as sink.write_task reports it."""
    from transcoder.spark import sink

    tp = (topic, partition)

    def runs(skip_to: int, lost: Callable[[SourceLoss], None]) -> Generator[tuple[Any, int, int], None, None]:
        """The range from `skip_to`; each loss told to `lost` (the driver says, counts and marks it), then, under
        on_source_loss: stop, raised."""
        def told(loss: SourceLoss) -> None:
            lost(loss)
            if config.on_source_loss == "stop":
                raise stop_error(lane.name, loss)

        return read_range(config, lane, tp, skip_to, until, client="fetch", stall_s=STALL_S,
                          past_loss=config.on_source_loss == "continue", lost=told)

    return sink.write_stored_task(config, fingerprint, lane, start_ms, tp, first, runs)


def sample_records(config: Config, lane: LaneSpec, tp: Partition, first: int, until: int, most: int) -> list[Any]:
    """Live scoring on the driver: at most `most` records of source partition `tp` from `first` (before `until`: what
    a micro-batch copied), read again (read_range), as the service's record sets path offers them (with the
    accessors of a confluent_kafka.Message). TranscoderError when the read stalls (the scorer reports it)."""
    from transcoder.kafka.producer import Delivered

    out: list[Any] = []
    # the copy's tasks say a loss; a sample reads what is there
    read = read_range(config, lane, tp, first, until, client="sample", stall_s=SAMPLE_STALL_S, past_loss=True,
                      lost=lambda loss: None)
    try:
        for records, start, stop in read:
            out += [Delivered(tp[0], tp[1], o, (k, v, h, ts, 0))
                    for o, ts, k, v, h in map(records.record, range(start, min(stop, start + most - len(out))))]
            if len(out) >= most:
                break
    finally:
        read.close()
    return out
