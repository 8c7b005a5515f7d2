"""In-place rollouts (producers switched to a codec one by one, nothing copied): the mix of codecs the broker
stores in the batches written since a time, per partition, read from the stored batches themselves (a raw
Fetch, as the recompression detector reads them), and what the topic's compression.type does to that mix.

How a partition is sampled: its offsets [start, end) run from the first record at or after the time
(ListOffsets by timestamp) to the last stable offset. The byte budget `max_bytes` is cut into WINDOWS windows
spread evenly over the range: window i starts at offset start + i * (end - start) / WINDOWS, or where the
previous window stopped if that is further on, and walks the stored batches from there (successive Fetches)
until it has read max_bytes / WINDOWS bytes. A range within the budget is so read whole, each window carrying
on where the previous one stopped, and its mix is exact; a larger one is sampled as WINDOWS evenly spread runs
of consecutive batches (`sampled_offsets` says how much of it). A batch straddling `start` or `end` counts for
the share of its offsets inside. Transaction markers and aborted batches, which no consumer sees, are not counted.

The mix is given by records (a batch holds `records_count` of them) and by stored bytes (the whole batch as
the broker keeps it, header included). The pure part (sampling over a fetch function, the arithmetic, the
verdict) is separate from the Kafka I/O (`fetch_batches`, `Watcher`). What evaluate predicts for the target
codec, and what the stored batches realize against it: migrate.watch_payoff.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, Self

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from transcoder.codecs import CODEC_OF_ID, CODECS
from transcoder.errors import ConfigError, KafkaUnavailableError, TopicError
from transcoder.kafka.admin import describe, describe_configs, end_offsets
from transcoder.kafka.clients import connect_admin
from transcoder.kafka.protocol import RawClient
from transcoder.metrics.registry import MigrationMetrics

#: Windows a partition's byte budget is cut into, spread evenly over its offsets since the time.
WINDOWS = 16
#: Default byte budget per partition and sample (`--max-bytes`).
DEFAULT_MAX_BYTES = 4 << 20

Basis = Literal["records", "bytes"]


# -- what the broker stores --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredBatch:
    """One stored batch, as the broker keeps it (nothing decompressed)."""

    base_offset: int
    last_offset: int
    codec: str  # a CODECS name; `id-N` for a codec id Kafka does not define
    records: int
    size: int  # bytes of the whole batch as stored, header included
    #: False for a transaction marker or a batch of an aborted transaction: no consumer sees its records
    visible: bool = True


@dataclass
class StoredTotals:
    """Stored batches counted: how many, their records, their bytes as stored (of one codec, or of all)."""

    batches: int = 0
    records: int = 0
    bytes: int = 0

    def add(self, other: StoredTotals) -> None:
        self.batches += other.batches
        self.records += other.records
        self.bytes += other.bytes


def clip(batch: StoredBatch, lo: int, hi: int) -> tuple[int, int, int] | None:
    """(records, bytes, offsets) of `batch` inside offsets [lo, hi), pro rata of its offsets; None: none inside.

    Exact for a batch without gaps (its records are its offsets); a compacted batch's straddling records are
    estimated.
    """
    inside = min(batch.last_offset + 1, hi) - max(batch.base_offset, lo)
    if inside <= 0:
        return None
    span = batch.last_offset - batch.base_offset + 1
    if inside >= span:
        return batch.records, batch.size, span
    return round(batch.records * inside / span), round(batch.size * inside / span), inside


@dataclass
class PartitionMix:
    """The stored codecs of one partition's records in offsets [start, end)."""

    partition: int
    start: int
    end: int
    #: offsets of [start, end) the walked batches cover (end - start: read whole, the mix is exact)
    sampled_offsets: int = 0
    codecs: dict[str, StoredTotals] = field(default_factory=dict)
    #: why the partition was not (or not fully) sampled, when something stopped it
    note: str | None = None

    def add(self, codec: str, records: int, nbytes: int, offsets: int) -> None:
        t = self.codecs.setdefault(codec, StoredTotals())
        t.add(StoredTotals(1, records, nbytes))
        self.sampled_offsets += offsets

    @property
    def offsets(self) -> int:
        return max(0, self.end - self.start)

    @property
    def complete(self) -> bool:
        return self.sampled_offsets >= self.offsets

    @property
    def tally(self) -> StoredTotals:
        return merge([self.codecs])


def merge(mixes: Iterable[Mapping[str, StoredTotals]]) -> StoredTotals:
    out = StoredTotals()
    for codecs in mixes:
        for t in codecs.values():
            out.add(t)
    return out


def by_codec(mixes: Iterable[Mapping[str, StoredTotals]]) -> dict[str, StoredTotals]:
    out: dict[str, StoredTotals] = {}
    for codecs in mixes:
        for codec, t in codecs.items():
            out.setdefault(codec, StoredTotals()).add(t)
    return out


def shares(codecs: Mapping[str, StoredTotals], basis: Basis = "records") -> dict[str, float]:
    """Each codec's share (0..1) of the records (or stored bytes); empty when there is nothing."""
    total = sum(getattr(t, basis) for t in codecs.values())
    return {c: getattr(t, basis) / total for c, t in codecs.items()} if total else {}


def codec_order(codecs: Iterable[str]) -> list[str]:
    """Kafka's codecs in their id order, then anything unknown."""
    known = [c for c in CODECS if c in set(codecs)]
    return known + sorted(set(codecs) - set(known))


# -- sampling ----------------------------------------------------------------------------------------------

#: fetch(offset, max_bytes) -> the stored batches from the one holding `offset` on (at least one when the
#: partition has any at or after `offset`)
Fetch = Callable[[int, int], Sequence[StoredBatch]]


def sample_partition(fetch: Fetch, partition: int, start: int, end: int, *, max_bytes: int = DEFAULT_MAX_BYTES,
                     windows: int = WINDOWS) -> PartitionMix:
    """Walk the stored batches of [start, end) within `max_bytes`, in `windows` evenly spread runs (module doc)."""
    mix = PartitionMix(partition, start, end)
    if start >= end:
        return mix
    window_bytes = max(1, max_bytes // max(1, windows))
    pos = start  # the first offset neither counted nor skipped on purpose
    for i in range(windows):
        pos = max(pos, start + (end - start) * i // windows)
        read = 0
        while read < window_bytes and pos < end:
            before = pos
            for b in fetch(pos, window_bytes - read):
                if b.last_offset < pos:
                    continue
                if b.base_offset > pos:  # offsets compaction removed: covered, nothing to count
                    mix.sampled_offsets += min(b.base_offset, end) - pos
                if b.base_offset >= end:
                    pos = end
                    break
                inside = clip(b, pos, end)
                if inside is not None and b.visible:
                    mix.add(b.codec, *inside)
                elif inside is not None:
                    mix.sampled_offsets += inside[2]  # markers, aborted records: covered, not counted
                read += b.size
                pos = b.last_offset + 1
                if pos >= end:
                    break
            if pos == before:
                mix.note = f"no stored batch at offset {pos} (end {end}): sampled up to there"
                return mix
        if pos >= end:
            break
    return mix


# -- the topic's mix and what compression.type does to it ---------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    #: producer: stored as written; target: the broker forces the target codec; recompresses: another one
    kind: Literal["producer", "target", "recompresses"]
    #: the codec the broker recompresses batches to (None: it keeps them as produced)
    stored_as: str | None
    #: share (0..1) of the records since the time stored as the target codec (None: no records)
    target_share: float | None
    text: str


def forced_codec(compression_type: str) -> str | None:
    """The codec a topic's compression.type makes the broker store every batch in; None for `producer`."""
    t = compression_type.strip().lower()
    if t == "producer":
        return None
    return "none" if t == "uncompressed" else t


def percent(share: float) -> str:
    """A share as a percentage that says 0% and 100% only when exact."""
    p = share * 100
    if 0 < p < 0.1:
        return "<0.1%"
    if 99.9 < p < 100:
        return ">99.9%"
    return f"{p:.1f}%".replace(".0%", "%")


def verdict(topic: str, compression_type: str, target: str, target_share: float | None, since: str) -> Verdict:
    """What compression.type does to the mix, and how far the rollout to `target` is."""
    progress = (f"no records were written since {since}." if target_share is None else
                f"{percent(target_share)} of records since {since} are stored as {target}.")
    forced = forced_codec(compression_type)
    if forced is None:
        return Verdict("producer", None, target_share,
                       f"compression.type=producer: stored as producers wrote it. {progress}")
    if forced == target:
        return Verdict("target", forced, target_share,
                       f"compression.type={compression_type}: {target} batches are stored as producers wrote them, "
                       f"and the broker recompresses every other batch to {target}, so the mix shows {target} "
                       "whatever producers send and cannot tell which producers switched (set "
                       f"compression.type=producer to watch them). {progress}")
    return Verdict("recompresses", forced, target_share,
                   f"compression.type={compression_type}: the broker recompresses to {forced}: the mix shows {forced} "
                   "whatever producers send; set compression.type=producer (kafka-configs --alter --entity-type "
                   f"topics --entity-name {topic} --add-config compression.type=producer). {progress}")


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class TopicMix:
    topic: str
    since_ms: int
    compression_type: str
    target: str
    partitions: list[PartitionMix]
    sampled_at_ms: int

    @property
    def codecs(self) -> dict[str, StoredTotals]:
        return by_codec(p.codecs for p in self.partitions)

    def shares(self, basis: Basis = "records") -> dict[str, float]:
        return shares(self.codecs, basis)

    @property
    def verdict(self) -> Verdict:
        s = self.shares()
        return verdict(self.topic, self.compression_type, self.target, s.get(self.target, 0.0) if s else None,
                       iso(self.since_ms))

    def as_dict(self) -> dict[str, Any]:
        def figures(codecs: Mapping[str, StoredTotals]) -> dict[str, Any]:
            total = merge([codecs])
            rs, bs = shares(codecs, "records"), shares(codecs, "bytes")
            return {"batches": total.batches, "records": total.records, "bytes": total.bytes,
                    "codecs": {c: {"batches": codecs[c].batches, "records": codecs[c].records,
                                   "bytes": codecs[c].bytes, "records_share": rs.get(c, 0.0),
                                   "bytes_share": bs.get(c, 0.0)} for c in codec_order(codecs)}}

        v = self.verdict
        return {
            "topic": self.topic, "since": iso(self.since_ms), "since_ms": self.since_ms,
            "sampled_at": iso(self.sampled_at_ms), "compression_type": self.compression_type, "target": self.target,
            "verdict": {"kind": v.kind, "stored_as": v.stored_as, "target_share": v.target_share, "text": v.text},
            "partitions": [{"partition": p.partition, "start_offset": p.start, "end_offset": p.end,
                            "offsets": p.offsets, "sampled_offsets": p.sampled_offsets, "complete": p.complete,
                            "note": p.note, **figures(p.codecs)} for p in self.partitions],
            "total": {"offsets": sum(p.offsets for p in self.partitions),
                      "sampled_offsets": sum(p.sampled_offsets for p in self.partitions),
                      "complete": all(p.complete for p in self.partitions), **figures(self.codecs)},
        }


def table(mix: TopicMix) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(headers, rows) of the mix: per partition then `all`, each codec's share of records and of bytes."""
    order = codec_order(mix.codecs)
    headers = ("partition", "offsets", "records sampled", "covered",
               *(f"{c} {basis}" for c in order for basis in ("records", "bytes")))

    def row(name: str, offsets: str, codecs: Mapping[str, StoredTotals], covered: float | None) -> tuple[str, ...]:
        rs, bs = shares(codecs, "records"), shares(codecs, "bytes")
        return (name, offsets, f"{merge([codecs]).records:,}", "-" if covered is None else percent(covered),
                *(percent(s.get(c, 0.0)) if s else "-" for c in order for s in (rs, bs)))

    rows = [row(str(p.partition), f"{p.start:,}..{p.end:,}", p.codecs,
                p.sampled_offsets / p.offsets if p.offsets else None) for p in mix.partitions]
    offsets = sum(p.offsets for p in mix.partitions)
    rows.append(row("all", f"{offsets:,} offsets", mix.codecs,
                    sum(p.sampled_offsets for p in mix.partitions) / offsets if offsets else None))
    return headers, rows


# -- Kafka I/O ---------------------------------------------------------------------------------------------


def fetch_batches(info: RawClient, topic: str, partition: int, offset: int, *, leader: int,
                  max_bytes: int) -> list[StoredBatch]:
    """The stored batches from the one holding `offset` on, up to about `max_bytes` (at least one), in one raw
    Fetch to the leader (read_committed: up to the last stable offset); nothing decompressed.

    The request is RawClient.fetch_partition, as stored_codecs' (codec ids only); this one keeps every batch's
    offsets, record count and stored size, and marks transaction markers and aborted batches.
    """
    from kafka.record import MemoryRecords

    part = info.fetch_partition(topic, partition, offset, leader=leader, max_bytes=max_bytes)
    records = MemoryRecords(part.records or b"")
    out: list[tuple[StoredBatch, int, bool, bool]] = []
    while (batch := records.next_batch()) is not None:
        codec = CODEC_OF_ID.get(batch.compression_type, f"id-{batch.compression_type}")
        if batch.magic < 2:
            out.append((_legacy(batch, codec), -1, False, False))
            continue
        out.append((StoredBatch(batch.base_offset, batch.last_offset, codec, batch.records_count,
                                batch.size_in_bytes), batch.producer_id, batch.is_transactional,
                    batch.is_control_batch))
    return hide_aborted(out, [(t.first_offset, t.producer_id) for t in (part.aborted_transactions or ())])


def hide_aborted(batches: Sequence[tuple[StoredBatch, int, bool, bool]],
                 aborted: Iterable[tuple[int, int]]) -> list[StoredBatch]:
    """The batches of one Fetch ((batch, producer id, transactional, control), in offset order), transaction
    markers and the batches of aborted transactions marked invisible, as a read_committed consumer skips them.

    `aborted` is the Fetch's (first offset, producer id) of the aborted transactions in its range: a producer's
    data batches are aborted from that first offset to the producer's next marker (Kafka's consumer rule).
    """
    pending = sorted(aborted)
    open_aborted: set[int] = set()  # producers whose aborted transaction has begun and not ended yet
    out = []
    for batch, producer_id, transactional, control in batches:
        while pending and pending[0][0] <= batch.last_offset:
            open_aborted.add(pending.pop(0)[1])
        visible = not control
        if transactional and control:
            open_aborted.discard(producer_id)  # its marker ends the transaction, aborted or not
        elif transactional and producer_id in open_aborted:
            visible = False
        out.append(batch if visible else replace(batch, visible=False))
    return out


def _legacy(batch: Any, codec: str) -> StoredBatch:
    """A message of format v0/v1 (written before Kafka 0.11): one record, or a compressed wrapper whose offset
    is its last inner record's; the wrapper is decompressed to count them (where kafka-python can: else one)."""
    if not batch.compression_type:
        return StoredBatch(batch.base_offset, batch.base_offset, codec, 1, batch.size_in_bytes)
    try:
        offsets = [r.offset for r in batch]
    except Exception:  # noqa: BLE001 (a codec library kafka-python lacks: an estimate beats no sample)
        offsets = []
    first = min(offsets) if offsets else batch.base_offset
    return StoredBatch(first, batch.base_offset, codec, max(1, len(offsets)), batch.size_in_bytes)


class Watcher:
    """One topic's stored codec mix, sampled on demand (`sample`) over connections kept open until `close`."""

    def __init__(self, cluster: Mapping[str, Any], topic: str, *, partitions: Sequence[int] | None = None,
                 target: str = "zstd", max_bytes: int = DEFAULT_MAX_BYTES, windows: int = WINDOWS) -> None:
        if max_bytes <= 0:
            raise ConfigError(f"--max-bytes must be positive, not {max_bytes}")
        self.topic, self.target, self.max_bytes, self.windows = topic, target, max_bytes, windows
        self._admin, _ = connect_admin(cluster)
        shape = describe(self._admin, topic)
        if shape is None:
            raise TopicError(f"topic {topic} does not exist", topic=topic)
        self.shape = shape
        if partitions is not None:
            missing = [p for p in partitions if not 0 <= p < shape.partitions]
            if missing:
                raise ConfigError(f"--partition: topic {topic} has partitions 0..{shape.partitions - 1}, not "
                                  f"{','.join(map(str, missing))}", topic=topic)
        self.partitions = list(partitions) if partitions is not None else list(range(shape.partitions))
        self.cluster = dict(cluster)
        self._info = RawClient(cluster)

    def sample(self, since_ms: int) -> TopicMix:
        """The mix of the records written at or after `since_ms`, per partition."""
        now_ms = int(time.time() * 1000)
        ctype = describe_configs(self._admin, [self.topic])[self.topic].effective.get("compression.type", "producer")
        ends = end_offsets(self._admin, {self.topic: self.shape})
        starts = _offsets_for_time(self._admin, self.topic, self.partitions, since_ms)
        ranges = {}
        for p in self.partitions:
            end = ends[(self.topic, p)][1]
            ranges[p] = (end if starts[p] < 0 else min(starts[p], end), end)  # -1: no record at or after the time
        return TopicMix(self.topic, since_ms, ctype, self.target, self.walk(ranges), now_ms)

    def walk(self, ranges: Mapping[int, tuple[int, int]]) -> list[PartitionMix]:
        """The stored batches of each partition's offsets [start, end), sampled within max_bytes (module doc)."""
        try:
            md = self._admin.list_topics(self.topic, timeout=10).topics[self.topic].partitions
        except KafkaException as exc:
            raise KafkaUnavailableError(f"cannot read the metadata of {self.topic}: {exc.args[0]}",
                                        topic=self.topic) from exc
        mixes = []
        for p, (start, end) in ranges.items():
            leader = md[p].leader if p in md else -1
            if leader < 0 and start < end:
                mixes.append(PartitionMix(p, start, end, note="no leader now: not sampled"))
                continue

            def fetch(offset: int, max_bytes: int, p: int = p, leader: int = leader) -> list[StoredBatch]:
                return fetch_batches(self._info, self.topic, p, offset, leader=leader, max_bytes=max_bytes)

            mixes.append(sample_partition(fetch, p, start, end, max_bytes=self.max_bytes, windows=self.windows))
        return mixes

    def close(self) -> None:
        self._info.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _offsets_for_time(admin: AdminClient, topic: str, partitions: Sequence[int], ms: int) -> dict[int, int]:
    """Per partition, the first offset whose timestamp is at or after `ms` (-1: none is)."""
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.for_timestamp(ms) for p in partitions},
                                 isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=30)
    out = {}
    for tp, fut in futures.items():
        try:
            out[tp.partition] = fut.result().offset
        except KafkaException as exc:
            if getattr(exc.args[0], "code", lambda: None)() == KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT:
                raise TopicError(f"cannot find the offsets of {topic} [{tp.partition}] at {iso(ms)}: the topic is "
                                 "stored in message format v0 (before Kafka 0.10), whose records carry no timestamps, "
                                 "so there is nothing written since a time to sample", topic=topic,
                                 partition=tp.partition, kafka_error="UNSUPPORTED_FOR_MESSAGE_FORMAT") from exc
            raise KafkaUnavailableError(f"cannot find the offsets of {topic} [{tp.partition}] at {iso(ms)}: "
                                        f"{exc.args[0]}", topic=topic, partition=tp.partition) from exc
    return out


def export(metrics: MigrationMetrics, mix: TopicMix) -> None:
    """The mix's share of records per codec as transcoder_stored_codec_ratio{topic,codec}."""
    metrics.stored_mix(mix.topic, mix.shares("records") or None)
