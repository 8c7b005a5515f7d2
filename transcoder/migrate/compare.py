"""Content verification, the pure part: record fingerprints, range digests, and the comparison of one range of
source offsets with its copies (`transcoder migrate verify`; the reading is in migrate.verify).

A record is held as a `Summary`: per field a blake2b digest and a size, never its contents (keys and values may
be secret; what is printed about a record is sizes and short hashes). Its fingerprint is blake2b over key,
value, headers in order (names and values, None distinct from b"") and the timestamp in milliseconds (its type
is not compared: a LogAppendTime source is copied as CreateTime with the same value). A range digest is blake2b
over the fingerprints of the range's source records in offset order (source side), or over the fingerprints of
their first copies in the same order (destination side).

`compare_range` takes what was read of one range [lo, hi) of source offsets (the records that exist), the runs
mapping its copies (PartitionMap.copies) and what was read of those destination offsets, and applies the rules:

- a source record with no mapped copy: mismatch `missing in destination`;
- every copy present must equal its source record (duplicates of an at-least-once replay included);
- a mapped copy that does not exist: cleaned (a compacted destination, or below its low watermark: retention)
  and counted, else mismatch `missing in destination`;
- a mapped copy whose source record does not exist: cleaned in the source (compacted, or below its low
  watermark) and counted, else mismatch `not in source`.

The first mismatch (lowest source offset, then destination offset) ends the range: `verified_through` is the
offset up to which (exclusive) everything compared equal.

A source topic deleted and recreated under the same name starts again at offset 0: the offset map's copies of the old
topic are no copies of the new one's records. `recreation` names them (mismatch `source topic recreated`, both topic
ids, the old copies' offsets, what the lane found lost) instead of comparing them with the new topic's records.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from transcoder.pipeline.offset_runs import PartitionMap, Run, last_recreation

DIGEST_SIZE = 16

KEY = "key"
VALUE = "value"
HEADERS = "headers"
TIMESTAMP = "timestamp"
MISSING = "missing in destination"
NOT_IN_SOURCE = "not in source"
#: source records gone before the lane copied them (retention, DeleteRecords, a recreated topic): no copy, ever
LOST_IN_SOURCE = "lost in the source before it was copied"
#: source records of a partition the offset map has nothing for (a partition added to a running source)
NOT_COPIED = "not copied"
#: the offset map holds copies of a source topic deleted and recreated since (another topic id): not comparable
RECREATED = "source topic recreated"
FIELDS = (KEY, VALUE, HEADERS, TIMESTAMP)

_NONE = b"\x00"
_SOME = b"\x01"


def _h(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


@dataclass(frozen=True, slots=True)
class Blob:
    """A key, value or header value as its size and digest."""

    size: int
    digest: bytes

    @classmethod
    def of(cls, data: bytes | None) -> Blob | None:
        return None if data is None else cls(len(data), _h(data))


@dataclass(frozen=True, slots=True)
class Header:
    name: str
    value: Blob | None

    @property
    def digest(self) -> bytes:
        h = hashlib.blake2b(digest_size=DIGEST_SIZE)
        name = self.name.encode()
        h.update(len(name).to_bytes(4, "big"))
        h.update(name)
        if self.value is None:
            h.update(_NONE)
        else:
            h.update(_SOME)
            h.update(self.value.digest)
        return h.digest()


@dataclass(frozen=True, slots=True)
class Summary:
    """One record without its contents: what comparing and naming the field that differs needs."""

    key: Blob | None
    value: Blob | None
    headers: tuple[Header, ...]
    #: milliseconds; None: the record has none (message format v0), so the copy's is not compared
    timestamp: int | None
    fingerprint: bytes = field(default=b"", compare=False)

    @classmethod
    def of(cls, key: bytes | str | None, value: bytes | str | None,
           headers: Iterable[tuple[str, bytes | str | None]] | None, timestamp: int | None) -> Summary:
        """From a record's fields (confluent-kafka's Message.key(), value(), headers(), timestamp()[1])."""
        hs = tuple(Header(n, Blob.of(_b(v))) for n, v in (headers or ()))
        return cls(Blob.of(_b(key)), Blob.of(_b(value)), hs, timestamp)

    def __post_init__(self) -> None:
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", _fingerprint(self))

    def without_timestamp(self) -> Summary:
        return Summary(self.key, self.value, self.headers, None)


def _b(data: bytes | str | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _fingerprint(s: Summary) -> bytes:
    h = hashlib.blake2b(digest_size=DIGEST_SIZE)
    for blob in (s.key, s.value):
        if blob is None:
            h.update(_NONE)
        else:
            h.update(_SOME)
            h.update(blob.size.to_bytes(8, "big"))
            h.update(blob.digest)
    h.update(len(s.headers).to_bytes(4, "big"))
    for hd in s.headers:
        h.update(hd.digest)
    if s.timestamp is None:
        h.update(_NONE)
    else:
        h.update(_SOME)
        h.update(s.timestamp.to_bytes(8, "big", signed=True))
    return h.digest()


def fingerprint(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None,
                timestamp: int | None) -> bytes:
    """A record's fingerprint (see the module's doc)."""
    return Summary.of(key, value, headers, timestamp).fingerprint


def range_digest(fingerprints: Iterable[bytes]) -> bytes:
    """blake2b over fingerprints in order: one range of one side."""
    h = hashlib.blake2b(digest_size=DIGEST_SIZE)
    n = 0
    for fp in fingerprints:
        h.update(fp)
        n += 1
    h.update(n.to_bytes(8, "big"))
    return h.digest()


def _size(b: Blob | None) -> str:
    return "null" if b is None else f"{b.size} bytes"


def _short(b: Blob | None) -> str:
    return "null" if b is None else b.digest.hex()[:8]


def _blob_detail(name: str, a: Blob | None, b: Blob | None) -> str:
    if a is None or b is None:
        return f"{name} differs ({_size(a)} vs {_size(b)})"
    if a.size != b.size:
        return f"{name} differs ({a.size} vs {b.size} bytes)"
    return f"{name} differs ({a.size} bytes each, blake2b {_short(a)} vs {_short(b)})"


def _headers_detail(a: tuple[Header, ...], b: tuple[Header, ...]) -> str:
    if sorted(h.digest for h in a) == sorted(h.digest for h in b):
        return f"headers differ in order (the same {len(a)} headers in another order)"
    if len(a) != len(b):
        return f"headers differ ({len(a)} vs {len(b)} headers)"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.name != y.name:
            return f"headers differ at header {i + 1} (name {x.name!r} vs {y.name!r})"
        if x.value != y.value:
            vs = (f"{x.value.size} bytes each, blake2b {_short(x.value)} vs {_short(y.value)}"
                  if x.value is not None and y.value is not None and x.value.size == y.value.size
                  else f"{_size(x.value)} vs {_size(y.value)}")
            return f"headers differ at header {i + 1} ({x.name!r}: {vs})"
    return "headers differ"  # not reached: equal headers have equal digests


def differing_fields(source: Summary, copy: Summary) -> list[str]:
    """The fields that differ, in the order key, value, headers, timestamp (none compared when the source has
    no timestamp)."""
    out = []
    if source.key != copy.key:
        out.append(KEY)
    if source.value != copy.value:
        out.append(VALUE)
    if tuple(h.digest for h in source.headers) != tuple(h.digest for h in copy.headers):
        out.append(HEADERS)
    if source.timestamp is not None and source.timestamp != copy.timestamp:
        out.append(TIMESTAMP)
    return out


def describe_difference(source: Summary, copy: Summary) -> tuple[str, str] | None:
    """(field, detail) of the first field that differs, None when the records are equal. The detail says
    sizes and short hashes, never contents, and names the other fields that differ too."""
    fields = differing_fields(source, copy)
    if not fields:
        return None
    first = fields[0]
    if first == KEY:
        detail = _blob_detail("key", source.key, copy.key)
    elif first == VALUE:
        detail = _blob_detail("value", source.value, copy.value)
    elif first == HEADERS:
        detail = _headers_detail(source.headers, copy.headers)
    else:
        detail = f"timestamp differs ({source.timestamp} vs {copy.timestamp})"
    if len(fields) > 1:
        detail += f"; {', '.join(fields[1:])} also differ{'s' if len(fields) == 2 else ''}"
    return first, detail


def same(source: Summary, copy: Summary) -> bool:
    """Whether `copy` equals `source` (its timestamp not compared where the source has none)."""
    if source.timestamp is None and copy.timestamp is not None:
        copy = copy.without_timestamp()
    return source.fingerprint == copy.fingerprint


@dataclass(frozen=True)
class Mismatch:
    """The first difference found in a partition: where, which field, and how (sizes and hashes only)."""

    partition: int
    source_offset: int
    dest_offset: int | None
    field: str
    detail: str

    @property
    def lost(self) -> bool:
        """The difference is records gone from the source before they were copied (LOST_IN_SOURCE, or the source
        topic deleted and recreated): data loss (exit 4), not a copy that differs (exit 3)."""
        return self.field in (LOST_IN_SOURCE, RECREATED)

    @property
    def line(self) -> str:
        if self.field == RECREATED:  # its offsets are the old topic's: the detail names them
            return f"partition {self.partition}: {self.detail}"
        where = f"source offset {self.source_offset}"
        if self.dest_offset is not None:
            where += f" / destination offset {self.dest_offset}"
        return f"partition {self.partition}: {where}: {self.detail}"


@dataclass(frozen=True)
class RangeResult:
    """One range [lo, hi) of source offsets compared with its copies."""

    lo: int
    hi: int
    #: everything in [lo, verified_through) compared equal: hi, or the mismatch's source offset
    verified_through: int
    #: source records compared with (at least one of) their copies
    compared: int
    #: further copies of a source record (an at-least-once replay), each compared as well
    duplicates: int
    #: mapped copies whose source record is gone (compacted, or below the source's low watermark)
    cleaned_in_source: int
    #: mapped copies that are gone from the destination (compacted, or below its low watermark)
    cleaned_in_destination: int
    #: range digests over the records compared in [lo, verified_through), source side and destination side
    source_digest: bytes
    dest_digest: bytes
    mismatch: Mismatch | None


@dataclass(frozen=True)
class Absence:
    """How an offset that does not exist is explained on one side: a compacted topic (cleaned records), or
    below the low watermark (retention). `low_watermark` is called only when a record is absent, after the
    read, so that it is not older than what was read."""

    compacted: bool
    low_watermark: Callable[[], int]

    def explained(self, offset: int) -> bool:
        return self.compacted or offset < self.low_watermark()


def copies_by_source(copies: Iterable[Run]) -> dict[int, list[int]]:
    """source offset -> its copies' destination offsets, in destination order."""
    out: dict[int, list[int]] = {}
    for r in sorted(copies, key=lambda r: r.dest):
        for i in range(r.count):
            out.setdefault(r.source + i, []).append(r.dest + i)
    return out


def compare_range(partition: int, lo: int, hi: int, source: Mapping[int, Summary], copies: Sequence[Run],
                  dest: Mapping[int, Summary], *, source_absence: Absence, dest_absence: Absence) -> RangeResult:
    """Compare source offsets [lo, hi) with their copies (see the module's doc).

    `source`: the source records read in [lo, hi) by offset (absent offsets do not exist); `copies`: the runs
    mapping copies of [lo, hi) (PartitionMap.copies(lo, hi)); `dest`: the destination records read at the
    copies' offsets.
    """
    by_source = copies_by_source(copies)
    compared = duplicates = cleaned_src = cleaned_dst = 0
    src_fps: list[bytes] = []
    dst_fps: list[bytes] = []
    mismatch: Mismatch | None = None
    for s in sorted({o for o in source if lo <= o < hi} | {o for o in by_source if lo <= o < hi}):
        rec = source.get(s)
        dests = by_source.get(s, [])
        if rec is None:
            if not source_absence.explained(s):
                mismatch = Mismatch(partition, s, dests[0], NOT_IN_SOURCE,
                                    f"not in source: destination offset {dests[0]} is mapped as a copy of source "
                                    f"offset {s}, which does not exist (the source is not compacted and the "
                                    "offset is above its low watermark)")
                break
            cleaned_src += 1
            continue
        if not dests:
            mismatch = Mismatch(partition, s, None, MISSING,
                                "missing in destination: no copy of this record is mapped (dead-lettered, or "
                                "never delivered)")
            break
        first: Summary | None = None
        for d in dests:
            copy = dest.get(d)
            if copy is None:
                if not dest_absence.explained(d):
                    mismatch = Mismatch(partition, s, d, MISSING,
                                        "missing in destination: the mapped copy does not exist (the destination "
                                        "is not compacted and the offset is above its low watermark)")
                    break
                cleaned_dst += 1
                continue
            if not same(rec, copy):
                found = describe_difference(rec, copy)
                assert found is not None
                mismatch = Mismatch(partition, s, d, found[0], found[1])
                break
            if first is None:
                first = copy
            else:
                duplicates += 1
        if mismatch is not None:
            break
        if first is not None:
            compared += 1
            src_fps.append(rec.fingerprint)
            dst_fps.append((first.without_timestamp() if rec.timestamp is None else first).fingerprint)
    through = hi if mismatch is None else mismatch.source_offset
    return RangeResult(lo, hi, through, compared, duplicates, cleaned_src, cleaned_dst,
                       range_digest(src_fps), range_digest(dst_fps), mismatch)


class CopyIndex:
    """PartitionMap.copies for many ranges of one map: the runs by source offset, so that one lookup costs
    a bisection and the runs it returns, not a pass over every run (a compacted source makes many runs)."""

    def __init__(self, runs: Iterable[Run]) -> None:
        self._runs = sorted(runs, key=lambda r: (r.source, r.dest))
        self._starts = [r.source for r in self._runs]
        self._reach: list[int] = []  # the largest source_end of runs[:i + 1]
        reach = -1
        for r in self._runs:
            reach = max(reach, r.source_end)
            self._reach.append(reach)

    def copies(self, source_lo: int, source_hi: int) -> list[Run]:
        """The parts of runs copying source offsets in [source_lo, source_hi), in destination order."""
        out = []
        i = bisect.bisect_left(self._starts, source_hi) - 1
        while i >= 0 and self._reach[i] > source_lo:
            r = self._runs[i]
            lo, hi = max(r.source, source_lo), min(r.source_end, source_hi)
            if lo < hi:
                out.append(Run(lo, r.dest + lo - r.source, hi - lo))
            i -= 1
        out.sort(key=lambda r: r.dest)
        return out


def unmapped_gaps(runs: Iterable[Run]) -> list[tuple[int, int, int]]:
    """Destination offsets between mapped copies that no run maps, as (dest_lo, dest_hi, source offset): the
    source offset is the last one the run before the gap copied (the gap holds copies written after it before
    a crash whose map entries were lost, or another producer's records). Sorted by that source offset, so that
    the range holding it reads the gap, once."""
    by_dest = sorted(runs, key=lambda r: r.dest)
    gaps = [(a.dest_end, b.dest, a.source_end - 1) for a, b in itertools.pairwise(by_dest) if a.dest_end < b.dest]
    return sorted(gaps, key=lambda g: (g[2], g[0]))


def merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """[lo, hi) intervals merged where they touch or overlap, sorted."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def stale(pmap: PartitionMap, topic_id_now: str | None) -> bool:
    """Whether the map's copies (`runs`) are of another source topic than the one there now: nothing of the topic
    now is mapped (the lane stopped on its recreation, or has not seen it yet)."""
    if pmap.source_id is not None and topic_id_now is not None:
        return pmap.source_id != topic_id_now
    return not pmap.runs and bool(pmap.replaced or pmap.recreations)


def recreation(partition: int, pmap: PartitionMap, topic_id_now: str | None, at: int) -> Mismatch | None:
    """The mismatch naming a recreated source topic, where the offset map shows one: copies of another topic id
    than the one now (`stale`), copies set apart as a replaced topic's, or a recreation a lane found. None: none.
    `at`: the source offset verification reached (the mismatch's; its line names no source offset)."""
    is_stale = stale(pmap, topic_id_now)
    if not (is_stale or pmap.replaced or pmap.recreations):
        return None
    old_runs = [*pmap.replaced, *(pmap.runs if is_stale else ())]
    found = last_recreation(pmap.recreations)
    old_id = (pmap.source_id if is_stale and pmap.source_id is not None else
              found.old_id if found is not None and found.old_id is not None else "(not recorded)")
    new_id = topic_id_now or (found.new_id if found is not None else None) or "(unknown)"
    parts = [f"{RECREATED}: the source topic was deleted and recreated (topic id {old_id} is now {new_id})"]
    if old_runs:
        d0, d1 = min(r.dest for r in old_runs), max(r.dest_end for r in old_runs) - 1
        s0, s1 = min(r.source for r in old_runs), max(r.source_end for r in old_runs) - 1
        parts.append(f"destination offsets {d0}..{d1} are copies of the old topic (its source offsets {s0}..{s1}), "
                     "not compared" + ("; nothing of the topic now is copied" if is_stale else ""))
    if found is None:
        parts.append("no lane has named the loss yet (run the copy: it stops, or with on_source_loss: continue "
                     "copies the new topic from its start)")
    elif found.records is None:
        parts.append(f"the old topic's records from source offset {found.at} on were lost before they were copied "
                     "(how many unknown)")
    elif found.records:
        parts.append(f"the old topic's records {found.at}..{found.at + found.records - 1} ({found.records}) were "
                     "lost before they were copied (and any written after the last end the lane saw)")
    else:
        parts.append(f"no record of the old topic the lane saw was left uncopied (it was at {found.at}; any written "
                     "after the last end it saw were lost)")
    return Mismatch(partition, at, None, RECREATED, "; ".join(parts))

