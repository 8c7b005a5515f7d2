"""Content verification between a source topic and its copy (`transcoder migrate verify`): the reading.

Per partition, from a start source offset up to the *verifiable end* (the source's end now, and what the
offset map covers), ranges of `migration.verify_range_records` source offsets are read on both sides and
compared (migrate.compare): the source records of the range, and the destination records at the offsets of
their mapped copies. Both sides are read read_committed by one consumer each (assign, seek), a range at a
time: records are held as digests, never a whole partition. A read that makes no progress for `timeout`
seconds raises KafkaUnavailableError naming topic, partition and offset.

`verified_through` is the source offset up to which (exclusive) everything compared equal: the end of the
last range that matched, or the first mismatch, where the partition stops. A later call resumes from it
(`verify --follow`): keep one `Verifier` for that, so its consumers stay where they were.

A source topic deleted and recreated is named as such (migrate.compare.recreation, the source topic's id now against
the ids the offset map recorded): the old topic's copies are not compared with the new topic's records; the new
topic's copies are, and the recreation is the partition's mismatch after them.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Self, cast

import structlog
from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from transcoder.config import Config
from transcoder.errors import KafkaUnavailableError, TopicError
from transcoder.kafka.admin import describe, describe_configs
from transcoder.kafka.clients import client_config, connect_admin
from transcoder.kafka.topic_ids import topic_id
from transcoder.migrate.compare import (
    LOST_IN_SOURCE,
    NOT_COPIED,
    Absence,
    CopyIndex,
    Mismatch,
    Summary,
    compare_range,
    merged,
    recreation,
    stale,
    unmapped_gaps,
)
from transcoder.migrate.retry import until_deadline
from transcoder.pipeline.offset_runs import PartitionMap

log = structlog.get_logger("transcoder.migrate.verify")

DEFAULT_RANGE_RECORDS = 10_000
#: Seconds a read may go without a record or an end-of-partition before it is a stall.
DEFAULT_TIMEOUT_S = 30.0
#: Records per consume call: what is read past a range's end waits in memory for the next range.
_BATCH = 500
#: A read that starts this few records past where the consumer is reads on instead of seeking.
_SKIP_MAX = 2_000


@dataclass(frozen=True)
class PartitionResult:
    """One partition's verification: [start, verified_through) compared equal, up to `end` at most."""

    partition: int
    start: int
    verified_through: int
    #: the verifiable end of this call: min(source end now, what the offset map covers, the end asked for)
    end: int
    ranges: int
    compared: int
    duplicates: int
    cleaned_in_source: int
    cleaned_in_destination: int
    #: destination records between mapped copies that no run maps: counted, not compared
    unmapped_in_destination: int
    mismatch: Mismatch | None
    #: why nothing was compared, where that is so (no offset map: not copied)
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.mismatch is None

    @property
    def complete(self) -> bool:
        """Verified up to the verifiable end."""
        return self.mismatch is None and self.verified_through >= self.end

    @property
    def line(self) -> str:
        """One line for operators (no contents: offsets, counts, sizes and hashes)."""
        if self.mismatch is not None:
            return (f"{self.mismatch.line} (verified through {self.verified_through}, {self.compared} records "
                    "equal before it)")
        if self.note is not None:
            return f"partition {self.partition}: {self.note}"
        parts = [f"partition {self.partition}: verified through {self.verified_through} of {self.end}",
                 f"{self.compared} records equal"]
        for n, what in ((self.duplicates, "duplicate copies equal"),
                        (self.cleaned_in_source, "cleaned in the source"),
                        (self.cleaned_in_destination, "cleaned in the destination"),
                        (self.unmapped_in_destination, "destination records not in the offset map, not compared")):
            if n:
                parts.append(f"{n} {what}")
        return ", ".join(parts)


class RangeReader:
    """Reads offset ranges of one topic's partitions with one consumer, read_committed; a range that starts
    where the last one ended continues without a seek."""

    def __init__(self, consumer: Any, topic: str, side: str, timeout: float) -> None:
        self.consumer = consumer
        self.topic = topic
        self.side = side
        self.timeout = timeout
        self._partition: int | None = None
        #: the stream (held messages, then the consumer) delivers every record at or after this offset, and
        #: no other; None: unknown (assign again)
        self._at: int | None = None
        self._held: deque[Message] = deque()

    def watermarks(self, partition: int) -> tuple[int, int]:
        """The partition's low and high watermarks, asked again on a retriable error (a broker that stalled: the
        query timed out behind this consumer's fetch, official CI) for up to the reader's timeout."""
        what = f"read the offsets of {self.side} topic {self.topic} [{partition}]"
        return until_deadline(lambda: self._watermarks(partition), what=what, timeout_s=self.timeout,
                              fields={"topic": self.topic, "partition": partition})

    def _watermarks(self, partition: int) -> tuple[int, int]:
        try:
            return self.consumer.get_watermark_offsets(TopicPartition(self.topic, partition),
                                                       timeout=min(self.timeout, 15.0))
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            raise KafkaUnavailableError(
                f"cannot read the offsets of {self.side} topic {self.topic} [{partition}]: "
                f"{err.str() if err is not None else exc}", topic=self.topic, partition=partition,
                kafka_error=err.name() if err is not None else None,
                retriable=bool(err.retriable()) if err is not None else False) from exc

    def _assign(self, partition: int, offset: int) -> None:
        self._held.clear()
        self.consumer.assign([TopicPartition(self.topic, partition, offset)])
        self._partition = partition
        self._at = None

    def read(self, partition: int, lo: int, hi: int) -> Iterator[Message]:
        """The records of offsets [lo, hi) that exist, in order."""
        if lo >= hi:
            return
        at = self._at
        if self._partition != partition or at is None or lo < at or lo - at > _SKIP_MAX:
            self._assign(partition, lo)
        self._at = None  # until this read completes
        pos = lo  # every record below pos was delivered (or does not exist)
        progress = time.monotonic()
        rearmed = False
        while True:
            if self._held:
                batch = list(self._held)
                self._held.clear()
            else:
                # consume() waits for a full batch or its timeout: wait for one record, then take what is there
                first = self.consumer.poll(0.5)
                batch = [] if first is None else [first, *self.consumer.consume(_BATCH, timeout=0)]
            if not batch:
                idle = time.monotonic() - progress
                if idle > self.timeout:
                    raise KafkaUnavailableError(
                        f"reading {self.side} topic {self.topic} [{partition}] stalled at offset {pos} (reading up "
                        f"to {hi}): nothing for {self.timeout:g} s", topic=self.topic, partition=partition,
                        offset=pos)
                if idle > min(5.0, self.timeout / 3) and not rearmed:
                    self._assign(partition, pos)  # a fresh fetch, whose end of partition is reported anew
                    rearmed = True
                continue
            for i, m in enumerate(batch):
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        if m.partition() != partition:
                            continue
                        # The end: the offsets below it that were not delivered do not exist. An end below hi
                        # may be old (seen before this read, held): it stands only if it is the end now.
                        e = m.offset()
                        assert e is not None  # an end of partition names its offset
                        if e < hi and self.watermarks(partition)[1] > e:
                            continue
                        self._held.extend(batch[i + 1:])
                        self._at = max(pos, e)
                        return
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, high = self.watermarks(partition)
                        if pos >= high:  # nothing there (yet)
                            return
                        # Deleted below the low watermark (retention, delete-records): read on from it.
                        pos = max(pos, low)
                        self._assign(partition, pos)
                        progress = time.monotonic()
                        break
                    raise KafkaUnavailableError(
                        f"reading {self.side} topic {self.topic} [{partition}] at offset {pos}: {err.str()}",
                        topic=self.topic, partition=partition, offset=pos, kafka_error=err.name(),
                        retriable=err.retriable())
                if m.partition() != partition:
                    continue
                o = m.offset()
                assert o is not None  # a record's
                if o < pos:
                    continue
                if o >= hi:
                    self._held.extend(batch[i:])
                    self._at = hi
                    return
                pos = o + 1
                progress = time.monotonic()
                yield m
                if pos >= hi:
                    self._held.extend(batch[i + 1:])
                    self._at = hi
                    return


class ProgressLine:
    """Says how far a long verification is, at most every `every_s` seconds: records compared so far, of how many
    (the source offsets it set out to compare), and how long it has taken. `update` is called after each range;
    the line goes to `emit` (the CLI: stderr)."""

    def __init__(self, what: str, emit: Callable[[str], None], *, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.emit = emit
        self.every_s = every_s
        self.clock = clock
        self.total = 0
        self.started = clock()
        self._last = self.started

    def start(self, total: int) -> None:
        """The verification sets out to compare `total` source offsets (all partitions)."""
        self.total = total
        self.started = self._last = self.clock()

    def update(self, done: int) -> bool:
        """`done` source offsets compared so far; True when a line was emitted."""
        now = self.clock()
        if now - self._last < self.every_s:
            return False
        self._last = now
        self.emit(self.line(done, now - self.started))
        return True

    def line(self, done: int, elapsed_s: float) -> str:
        pct = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        rate = f", {done / elapsed_s:,.0f} records/s" if elapsed_s > 0 else ""
        return f"{self.what}: {done:,} of {self.total:,} records compared{pct} in {elapsed_s:.0f}s{rate}"


def planned(pmap: PartitionMap | None, start: int | None, end: int | None, low: int, high: int) -> int:
    """Pure: about how many source offsets `verify_partition` compares in a partition (its range's width: records,
    but for those compaction or aborted transactions left out); 0 where nothing was copied."""
    if pmap is None or not pmap or pmap.source_start is None or pmap.source_end is None:
        return 0
    begin = max(start if start is not None else pmap.source_start, low)
    stop = min(high, pmap.source_end, end if end is not None else high)
    return max(0, stop - begin)


def summarize(m: Message) -> Summary:
    ts_type, ts = m.timestamp()
    # a consumed record's headers are (name, bytes or None) pairs; confluent-kafka's type is a producer's
    headers = cast("list[tuple[str, bytes | None]] | None", m.headers())
    return Summary.of(m.key(), m.value(), headers, None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts)


def _offset(m: Message) -> int:
    """A record's offset (confluent-kafka types it optional, for errors, which `read` does not yield)."""
    offset = m.offset()
    assert offset is not None
    return offset


class _LowWatermark:
    """A partition's low watermark, asked only where a record is absent, at most once per range (after the
    range's read, so that it is not older than what was read)."""

    def __init__(self, reader: RangeReader, partition: int) -> None:
        self.reader = reader
        self.partition = partition
        self._value: int | None = None

    def reset(self) -> None:
        self._value = None

    def __call__(self) -> int:
        if self._value is None:
            self._value = self.reader.watermarks(self.partition)[0]
        return self._value


def _compacted(admin: Any, topic: str) -> bool:
    policy = describe_configs(admin, [topic])[topic].effective.get("cleanup.policy", "delete")
    return "compact" in policy


class Verifier:
    """Verifies one source topic against one destination topic, partition by partition; reuse it across
    calls (`--follow`). Close it (or use it as a context manager)."""

    def __init__(self, config: Config, source_topic: str, dest_topic: str, *, range_records: int | None = None,
                 compacted_source: bool | None = None, compacted_dest: bool | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, uncopied: bool = False,
                 progress: ProgressLine | None = None) -> None:
        """`uncopied`: a partition with records and nothing in the offset map is a mismatch (NOT_COPIED), as
        `migrate verify` reports it; else (verifying beside a lane that may not have reached it yet) a note.
        `progress`: told the records compared after each range (a long verification says how far it is)."""
        self.progress = progress
        self._done = 0  # source offsets compared by this verification, for `progress`
        self.config = config
        self.uncopied = uncopied
        self.source_topic = source_topic
        self.dest_topic = dest_topic
        if range_records is None:
            range_records = config.migration.verify_range_records if config.migration else DEFAULT_RANGE_RECORDS
        if range_records < 1:
            raise ValueError("range_records must be at least 1")
        self.range_records = range_records
        self.timeout = timeout
        self._compacted = {"source": compacted_source, "destination": compacted_dest}
        self._partitions: list[int] | None = None
        #: the source topic's id (KIP-516), asked with its shape; None: not known
        self._source_id: str | None = None
        self._consumers: list[Any] = []
        self.source = RangeReader(self._consumer(config.cluster.librdkafka()), source_topic, "source", timeout)
        self.dest = RangeReader(self._consumer(config.target_cluster.librdkafka()), dest_topic, "destination", timeout)

    def _consumer(self, base: Mapping[str, Any]) -> Any:
        c = Consumer(client_config(base, **{
            "group.id": f"transcoder-verify-{uuid.uuid4().hex[:8]}",  # never joins: assign only, no commits
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "error",
            "queued.max.messages.kbytes": 16_384,  # what is fetched ahead, per partition
            # A broker answers one request per connection at a time: a fetch waiting at a partition's end would
            # hold up the next seek and offset query by up to this long.
            "fetch.wait.max.ms": 50,
        }))
        self._consumers.append(c)
        return c

    def _describe(self, side: str) -> None:
        """The topic of `side` exists; its partitions (source); whether it is compacted (where not given)."""
        topic, cluster = ((self.source_topic, self.config.cluster) if side == "source"
                          else (self.dest_topic, self.config.target_cluster))
        admin, _ = connect_admin(cluster.librdkafka(), timeout=min(self.timeout, 15.0))
        shape = describe(admin, topic)
        if shape is None:
            raise TopicError(f"{side} topic {topic} does not exist", topic=topic)
        if side == "source":
            self._partitions = list(range(shape.partitions))
            self._source_id = topic_id(admin, topic, timeout=min(self.timeout, 15.0))
        if self._compacted[side] is None:
            self._compacted[side] = _compacted(admin, topic)

    def partitions(self) -> list[int]:
        """The source topic's partitions."""
        if self._partitions is None:
            self._describe("source")
        assert self._partitions is not None
        return self._partitions

    def source_id(self) -> str | None:
        """The source topic's id now (None: it could not be read)."""
        self.partitions()
        return self._source_id

    def _is_compacted(self, side: str) -> bool:
        if self._compacted[side] is None:
            self._describe(side)
        return bool(self._compacted[side])

    def verify_partition(self, partition: int, pmap: PartitionMap | None, start: int | None = None, *,
                         end: int | None = None) -> PartitionResult:
        """Compare `partition` from `start` (default: where the map starts; never below the source's low
        watermark) up to the verifiable end, range by range; stop at the first mismatch."""
        low, high = self.source.watermarks(partition)
        named = recreation(partition, pmap, self.source_id(), low) if pmap is not None else None
        if named is not None and pmap is not None and stale(pmap, self._source_id):
            # the map's copies are all of a topic deleted since: nothing of the topic now to compare
            return PartitionResult(partition, low, low, high, 0, 0, 0, 0, 0, 0, named)
        lost = pmap.lost_from(start if start is not None else 0) if pmap is not None else None
        if pmap is None or (not pmap and lost is None):
            s = max(start if start is not None else low, low)
            upto = high if end is None else min(high, end)
            if upto > s and self.uncopied:  # records with no copy (a partition added to a running source)
                return PartitionResult(partition, s, s, upto, 0, 0, 0, 0, 0, 0, Mismatch(
                    partition, s, None, NOT_COPIED, f"{NOT_COPIED}: source offsets {s}..{upto - 1} ({upto - s} "
                    "records) have no copy: the offset map has nothing for this partition (added to the source "
                    "after the lane started, or not copied yet)"))
            return PartitionResult(partition, s, s, high, 0, 0, 0, 0, 0, 0, None,
                                   note="not copied: the offset map has nothing for this partition")
        if not pmap:  # nothing copied, records lost before they could be
            assert lost is not None
            return PartitionResult(partition, lost[0], lost[0], max(high, lost[1]), 0, 0, 0, 0, 0, 0,
                                   self._lost(partition, lost))
        assert pmap.source_start is not None and pmap.source_end is not None
        begin = max(start if start is not None else pmap.source_start, low)
        stop = min(high, pmap.source_end)
        if end is not None:
            stop = min(stop, end)
        if lost is not None:  # verified up to the gap at most: the gap itself is a mismatch
            begin = min(begin, lost[0])
            stop = min(stop, lost[0])
        index = CopyIndex(pmap.runs)
        gaps = unmapped_gaps(pmap.runs)
        gap_at = [g[2] for g in gaps]
        src_low, dst_low = _LowWatermark(self.source, partition), _LowWatermark(self.dest, partition)
        src_absence = Absence(self._is_compacted("source"), src_low)
        dst_absence = Absence(self._is_compacted("destination"), dst_low)
        totals = {"ranges": 0, "compared": 0, "duplicates": 0, "cleaned_in_source": 0, "cleaned_in_destination": 0,
                  "unmapped_in_destination": 0}
        through = begin
        mismatch = None
        lo = begin
        while lo < stop:
            hi = min(lo + self.range_records, stop)
            source = {_offset(m): summarize(m) for m in self.source.read(partition, lo, hi)}
            copies = index.copies(lo, hi)
            dest: dict[int, Summary] = {}
            for a, b in merged((r.dest, r.dest_end) for r in copies):
                for m in self.dest.read(partition, a, b):
                    dest[_offset(m)] = summarize(m)
            for g in gaps[bisect.bisect_left(gap_at, lo):bisect.bisect_left(gap_at, hi)]:
                totals["unmapped_in_destination"] += sum(1 for _ in self.dest.read(partition, g[0], g[1]))
            src_low.reset()
            dst_low.reset()
            r = compare_range(partition, lo, hi, source, copies, dest, source_absence=src_absence,
                              dest_absence=dst_absence)
            if self.progress is not None:
                self._done += hi - lo
                self.progress.update(self._done)
            totals["ranges"] += 1
            for k in ("compared", "duplicates", "cleaned_in_source", "cleaned_in_destination"):
                totals[k] += getattr(r, k)
            through = r.verified_through
            log.debug("verify_range", topic=self.source_topic, destination=self.dest_topic, partition=partition,
                      lo=lo, hi=hi, compared=r.compared, equal=r.mismatch is None,
                      digest=r.source_digest.hex()[:16])
            if r.mismatch is not None:
                mismatch = r.mismatch
                break
            lo = hi
        if mismatch is None and lost is not None:
            mismatch = self._lost(partition, lost)
            through = lost[0]
        if mismatch is None and named is not None:  # the new topic's copies are equal; the old topic's are not
            mismatch = replace(named, source_offset=max(through, begin))
        return PartitionResult(partition, begin, max(through, begin), max(stop, begin), ranges=totals["ranges"],
                               compared=totals["compared"], duplicates=totals["duplicates"],
                               cleaned_in_source=totals["cleaned_in_source"],
                               cleaned_in_destination=totals["cleaned_in_destination"],
                               unmapped_in_destination=totals["unmapped_in_destination"], mismatch=mismatch)

    @staticmethod
    def _lost(partition: int, lost: tuple[int, int]) -> Mismatch:
        lo, hi = lost
        return Mismatch(partition, lo, None, LOST_IN_SOURCE,
                        f"{LOST_IN_SOURCE}: source offsets {lo}..{hi - 1} ({hi - lo} records) were gone from the "
                        "source before the lane copied them (retention, DeleteRecords or a recreated topic; the "
                        "lane's source_records_lost line)")

    def verify(self, maps: Mapping[int, PartitionMap], starts: Mapping[int, int] | None = None, *,
               ends: Mapping[int, int] | None = None) -> dict[int, PartitionResult]:
        """Every partition of the source topic (see verify_partition); `starts`: the previous verified_through
        per partition (default: where its map starts); `ends`: an upper bound per partition, where wanted."""
        starts = starts or {}
        ends = ends or {}
        if self.progress is not None:
            self._done = 0
            self.progress.start(sum(planned(maps.get(p), starts.get(p), ends.get(p), *self.source.watermarks(p))
                                    for p in self.partitions()))
        return {p: self.verify_partition(p, maps.get(p), starts.get(p), end=ends.get(p))
                for p in self.partitions()}

    def close(self) -> None:
        for c in self._consumers:
            c.close()
        self._consumers = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def verify_partition(config: Config, source_topic: str, dest_topic: str, partition: int, pmap: PartitionMap | None,
                     start: int | None = None, *, end: int | None = None, range_records: int | None = None,
                     compacted_source: bool | None = None, compacted_dest: bool | None = None,
                     timeout: float = DEFAULT_TIMEOUT_S) -> PartitionResult:
    """One partition (Verifier.verify_partition), with consumers of its own."""
    with Verifier(config, source_topic, dest_topic, range_records=range_records, compacted_source=compacted_source,
                  compacted_dest=compacted_dest, timeout=timeout, uncopied=True) as v:
        return v.verify_partition(partition, pmap, start, end=end)


def verify(config: Config, source_topic: str, dest_topic: str, maps: Mapping[int, PartitionMap],
           starts: Mapping[int, int] | None = None, *, ends: Mapping[int, int] | None = None,
           range_records: int | None = None, timeout: float = DEFAULT_TIMEOUT_S,
           progress: ProgressLine | None = None) -> dict[int, PartitionResult]:
    """Every partition of the source topic (Verifier.verify), with consumers of its own."""
    with Verifier(config, source_topic, dest_topic, range_records=range_records, timeout=timeout,
                  uncopied=True, progress=progress) as v:
        return v.verify(maps, starts, ends=ends)
