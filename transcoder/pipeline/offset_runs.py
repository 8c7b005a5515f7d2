"""The offset map as pure data: runs of copied offsets (which source record each destination record is a copy of),
their encoding as the map topic's entries, and exact translation of consumer-group offsets between the two topics
(staged migration, `transcoder migrate`).

Pure logic, no Kafka (the map topic's I/O is kafka.offset_map_topic). The writer feeds `MapBuilder` one (source
offset, destination offset) pair per delivered record, from the delivery reports; what it stores are *runs*: source
offsets s..s+n-1 copied to destination offsets d..d+n-1. A run breaks wherever either side jumps (a compacted gap,
a transaction marker or aborted record skipped, a batch of another producer in between, a record re-sent alone), so
the runs map every delivered record exactly, and a topic copied without gaps needs one run per flush.

Translation rules (records may have several copies after an at-least-once replay, or none yet):

- forward (source committed offset C -> destination offset D): every source record at or after C must
  have a copy at or after D (no gap), and D is the largest such offset (the fewest duplicates):
  D = min over mapped source records s >= C of the *last* copy of s. Where the source has no record at C
  (a compacted gap, a marker), this is the copy of the next record that exists.
- backward (destination committed offset D -> source offset C): the consumer has seen every source record
  with a copy below D; C is the first source record with no copy below D.

Source loss: records the lane had not read yet that were gone from the source when it got to them (retention
or DeleteRecords overtook it, the topic recreated) have no copy and never will. The lane stores each such gap,
source offsets [lo, hi), as an entry of its own (`lost`, no runs), so that verification and cutover see it.

Recreated sources: source offsets restart at 0 when a topic is deleted and created again under the same name, so
runs alone cannot tell the old topic's copies from the new one's. Each entry names the source topic's id (KIP-516,
`sid`) its runs were copied from, and a recreation the lane found is an entry of its own (`recreated`: the old and
the new id, the old topic's first offset not copied). `partition_maps` keeps the newest topic's runs as the map
(`runs`: translation, verification) and sets the older topics' copies apart (`replaced`); `replaced_source` tells a
lane whose group has no committed offset whether the map's copies are of the topic there now. Entries without an id
(written before ids were recorded) are read as before: their runs belong to the topic now, unless a recreation found
from such a map says otherwise.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: Runs per map record at most (a record stays well under a broker's default max.message.bytes).
MAX_RUNS_PER_ENTRY = 2000
#: The map entries' format (their field `v`, in every entry written since the first): 1, the one this version writes
#: and reads. An entry of a higher version was written by a newer transcoder and is refused (docs/upgrading.md).
FORMAT_VERSION = 1


@dataclass(frozen=True, order=True)
class Run:
    """Source offsets source..source+count-1 were copied to destination offsets dest..dest+count-1."""

    source: int
    dest: int
    count: int

    @property
    def source_end(self) -> int:
        return self.source + self.count

    @property
    def dest_end(self) -> int:
        return self.dest + self.count


@dataclass(frozen=True)
class Recreation:
    """A source topic deleted and created again under the same name, found by a lane: the old topic's source offsets
    from `at` on were never copied. `records`: how many of them the lane knew of (the old topic's last end it saw
    minus `at`; None: unknown); any written to the old topic after that end are unknown too."""

    #: the old topic's id; None: not recorded (its copies were mapped before transcoder recorded topic ids)
    old_id: str | None
    #: the topic's id when the lane found it (None: it could not be read)
    new_id: str | None
    at: int
    records: int | None
    #: on_source_loss: continue: the lane went on copying the new topic from its start (else it stopped)
    continued: bool = False

    def encode(self) -> dict[str, Any]:
        return {"old": self.old_id, "new": self.new_id, "at": self.at, "records": self.records,
                "continued": self.continued}

    @classmethod
    def decode(cls, d: dict[str, Any]) -> Recreation:
        old, new, records = d.get("old"), d.get("new"), d.get("records")
        r = cls(None if old is None else str(old), None if new is None else str(new), int(d["at"]),
                None if records is None else int(records), bool(d.get("continued", False)))
        if r.at < 0 or (r.records is not None and r.records < 0):
            raise ValueError("a recreation with a negative offset or count")
        return r


@dataclass(frozen=True)
class MapEntry:
    """One record of the offset-map topic: runs of one destination partition, in delivery order."""

    source_topic: str
    destination_topic: str
    partition: int
    runs: tuple[Run, ...]
    #: source offsets [lo, hi) lost in the source before they were copied (module doc); an entry of its own
    lost: tuple[tuple[int, int], ...] = ()
    #: the id of the source topic the runs were copied from (a lost range: whose offsets were lost); None: not known
    source_id: str | None = None
    #: the source topic deleted and recreated, found by the lane (an entry of its own, no runs)
    recreated: Recreation | None = None

    @property
    def key(self) -> bytes:
        """All entries of one destination partition share a key: one map partition holds them in order."""
        return f"{self.destination_topic}/{self.partition}".encode()

    def encode(self) -> bytes:
        d = {"v": FORMAT_VERSION, "source": self.source_topic, "destination": self.destination_topic,
             "partition": self.partition, "runs": [[r.source, r.dest, r.count] for r in self.runs]}
        if self.lost:
            d["lost"] = [[lo, hi] for lo, hi in self.lost]
        if self.source_id is not None:
            d["sid"] = self.source_id
        if self.recreated is not None:
            d["recreated"] = self.recreated.encode()
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> MapEntry:
        """ValueError for anything that is not a map entry of this format (one of a newer format: saying so)."""
        try:
            d = json.loads(value)
            v = d.get("v")
            if isinstance(v, int) and not isinstance(v, bool) and v > FORMAT_VERSION:
                raise ValueError(f"written in offset-map format version {v} by a newer transcoder; this one reads "
                                 f"version {FORMAT_VERSION}: upgrade transcoder to read it (docs/upgrading.md)")
            if v != FORMAT_VERSION:
                raise ValueError(f"offset-map format {v!r}, expected {FORMAT_VERSION}")
            runs = tuple(Run(int(s), int(o), int(n)) for s, o, n in d["runs"])
            if any(r.count <= 0 or r.source < 0 or r.dest < 0 for r in runs):
                raise ValueError("a run with a negative offset or no records")
            lost = tuple((int(lo), int(hi)) for lo, hi in d.get("lost", ()))
            if any(lo < 0 or hi <= lo for lo, hi in lost):
                raise ValueError("a lost range with a negative offset or no records")
            sid = d.get("sid")
            recreated = Recreation.decode(d["recreated"]) if d.get("recreated") is not None else None
            return cls(str(d["source"]), str(d["destination"]), int(d["partition"]), runs, lost,
                       None if sid is None else str(sid), recreated)
        except (TypeError, KeyError, AttributeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not an offset-map entry: {exc}") from exc


class MapBuilder:
    """Runs per destination partition, built from delivery reports (one `add` per delivered record). Each run is
    stamped with its source topic's id as `ids` holds it when the run begins (the lane sets it: a recreated topic's
    copies start again at a lower source offset, so they always begin a run of their own)."""

    def __init__(self) -> None:
        #: (destination topic, partition) -> (source topic, runs as [source, dest, count, source id] lists)
        self._open: dict[tuple[str, int], tuple[str, list[list[Any]]]] = {}
        #: source topic -> its id (KIP-516) now, as the lane knows it
        self.ids: dict[str, str] = {}

    def add(self, source_topic: str, dest_topic: str, partition: int, source_offset: int, dest_offset: int) -> None:
        key = (dest_topic, partition)
        found = self._open.get(key)
        if found is None:
            self._open[key] = (source_topic, [[source_offset, dest_offset, 1, self.ids.get(source_topic)]])
            return
        runs = found[1]
        last = runs[-1]
        n = last[2]
        if source_offset == last[0] + n and dest_offset == last[1] + n:
            last[2] = n + 1
        else:
            runs.append([source_offset, dest_offset, 1, self.ids.get(source_topic)])

    def __bool__(self) -> bool:
        return bool(self._open)

    def take(self) -> list[MapEntry]:
        """Everything added since the last call, as map entries (at most MAX_RUNS_PER_ENTRY runs each)."""
        out = []
        for (dest, partition), (source, runs) in self._open.items():
            for sid, same in itertools.groupby(runs, key=lambda r: r[3]):
                of_one = list(same)
                for i in range(0, len(of_one), MAX_RUNS_PER_ENTRY):
                    out.append(MapEntry(source, dest, partition,
                                        tuple(Run(s, d, n) for s, d, n, _ in of_one[i:i + MAX_RUNS_PER_ENTRY]),
                                        source_id=sid))
        self._open = {}
        return out

    def put_back(self, entries: Iterable[MapEntry]) -> None:
        """Entries that could not be stored go back in front of what was added since (their order kept)."""
        later, self._open = self._open, {}
        for e in entries:
            found = self._open.setdefault((e.destination_topic, e.partition), (e.source_topic, []))
            found[1].extend([r.source, r.dest, r.count, e.source_id] for r in e.runs)
        for key, (source, runs) in later.items():
            self._open.setdefault(key, (source, []))[1].extend(runs)


class _Covered:
    """A set of integers as sorted disjoint [start, end) intervals."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def first_free(self, lo: int, hi: int) -> int | None:
        """The smallest integer in [lo, hi) not in the set."""
        x = lo
        i = bisect.bisect_right(self.starts, x) - 1
        while x < hi:
            if i >= 0 and i < len(self.starts) and self.starts[i] <= x < self.ends[i]:
                x = self.ends[i]
                i += 1
                continue
            return x if x < hi else None
        return None

    def add(self, lo: int, hi: int) -> None:
        i = bisect.bisect_left(self.ends, lo)  # the first interval that ends at or after lo
        j = bisect.bisect_right(self.starts, hi)  # intervals before j start at or before hi
        if i < j:
            lo = min(lo, self.starts[i])
            hi = max(hi, self.ends[j - 1])
        self.starts[i:j] = [lo]
        self.ends[i:j] = [hi]


class PartitionMap:
    """Every run of one destination partition copying the newest source topic mapped (from all map entries read),
    for translation and lookups; the copies of topics deleted and recreated since are set apart (`replaced`)."""

    def __init__(self, runs: Iterable[Run], lost: Iterable[tuple[int, int]] = (), *, source_id: str | None = None,
                 replaced: Iterable[Run] = (), recreations: Iterable[Recreation] = ()) -> None:
        self.runs: list[Run] = sorted(runs, key=lambda r: r.dest)
        self._dest_starts = [r.dest for r in self.runs]
        #: source offsets [lo, hi) lost in the source before they were copied, in order
        self.lost: list[tuple[int, int]] = sorted(set(lost))
        #: the id of the source topic `runs` copy (None: not recorded)
        self.source_id = source_id
        #: copies of source topics deleted and recreated since (their source offsets are no offsets of the topic now)
        self.replaced: list[Run] = sorted(replaced, key=lambda r: r.dest)
        #: recreations lanes found, by the old topic's first offset not copied
        self.recreations: list[Recreation] = sorted(set(recreations), key=lambda r: (r.at, r.old_id or "",
                                                                                    r.new_id or "", r.continued))

    def lost_from(self, source_offset: int) -> tuple[int, int] | None:
        """The first source range lost before it was copied that ends past `source_offset` (None: none)."""
        return next(((lo, hi) for lo, hi in self.lost if hi > source_offset), None)

    def __bool__(self) -> bool:
        return bool(self.runs)

    @property
    def source_start(self) -> int | None:
        """The lowest source offset the map covers (None: empty map)."""
        return min((r.source for r in self.runs), default=None)

    @property
    def source_end(self) -> int | None:
        """One past the highest source offset copied."""
        return max((r.source_end for r in self.runs), default=None)

    @property
    def dest_end(self) -> int | None:
        """One past the highest destination offset that is a mapped copy."""
        return max((r.dest_end for r in self.runs), default=None)

    def source_of(self, dest_offset: int) -> int | None:
        """The source offset whose copy is at `dest_offset` (None: not a mapped copy)."""
        i = bisect.bisect_right(self._dest_starts, dest_offset) - 1
        while i >= 0:
            r = self.runs[i]
            if r.dest <= dest_offset < r.dest_end:
                return r.source + dest_offset - r.dest
            if r.dest_end <= dest_offset:
                return None  # runs do not overlap in destination offsets: nothing before covers it
            i -= 1
        return None

    def copies(self, source_lo: int, source_hi: int) -> Iterator[Run]:
        """The parts of runs copying source offsets in [source_lo, source_hi), in destination order."""
        for r in self.runs:
            lo, hi = max(r.source, source_lo), min(r.source_end, source_hi)
            if lo < hi:
                yield Run(lo, r.dest + lo - r.source, hi - lo)

    def forward(self, committed: int) -> int | None:
        """The destination offset a group committed at source offset `committed` resumes at.

        None: no mapped source record at or after `committed` (the group is at the end of what was copied;
        the caller resumes it after the last copy, `dest_end`, once everything before was copied).
        """
        best: int | None = None
        covered = _Covered()
        for r in reversed(self.runs):  # the latest copies first: a record's last copy is the first seen
            lo = max(r.source, committed)
            if lo < r.source_end:
                u = covered.first_free(lo, r.source_end)
                if u is not None:
                    d = r.dest + u - r.source
                    best = d if best is None else min(best, d)
            covered.add(r.source, r.source_end)
        return best

    def backward(self, committed: int) -> int | None:
        """The source offset a group committed at destination offset `committed` resumes at: the first source
        record with no copy below it. None: an empty map."""
        if not self.runs:
            return None
        best = max(r.source_end for r in self.runs)
        covered = _Covered()
        for r in self.runs:  # the earliest copies first: a record's first copy is the first seen
            lo = r.source + max(0, committed - r.dest)
            if lo < r.source_end:
                u = covered.first_free(lo, r.source_end)
                if u is not None:
                    best = min(best, u)
            covered.add(r.source, r.source_end)
        return best


def partition_maps(entries: Iterable[MapEntry], destination_topic: str) -> dict[int, PartitionMap]:
    """destination partition -> its map, from the entries of the map topic (other destinations ignored).

    The map's topic is the newest source topic id its runs name (by destination offset), other than one a recorded
    recreation replaced; runs of any other id are `replaced`. Runs without an id are the map's topic's, unless a
    recreation was found from such runs (its old id not recorded): then they are replaced too."""
    runs: dict[int, list[tuple[Run, str | None]]] = {}
    lost: dict[int, list[tuple[tuple[int, int], str | None]]] = {}
    recreations: dict[int, list[Recreation]] = {}
    for e in entries:
        if e.destination_topic == destination_topic:
            runs.setdefault(e.partition, []).extend((r, e.source_id) for r in e.runs)
            if e.recreated is not None:  # its lost range is the old topic's, kept for readers of the format before
                recreations.setdefault(e.partition, []).append(e.recreated)
            else:
                lost.setdefault(e.partition, []).extend((g, e.source_id) for g in e.lost)
    out = {}
    for p, rs in runs.items():
        recs = recreations.get(p, [])
        old = {r.old_id for r in recs}
        topics = _topic_of_each(rs, unrecorded_replaced=None in old)
        current = max(((r.dest, sid) for (r, _), sid in zip(rs, topics, strict=True)
                       if sid is not None and sid not in old), default=(0, None))[1]
        mine = [r for (r, _), sid in zip(rs, topics, strict=True) if sid == current and sid not in old]
        others = [r for (r, _), sid in zip(rs, topics, strict=True) if sid != current or sid in old]
        gaps = [g for g, sid in lost.get(p, ()) if sid in (current, None)]
        out[p] = PartitionMap(mine, gaps, source_id=current, replaced=others, recreations=recs)
    return out


def _topic_of_each(runs: list[tuple[Run, str | None]], *, unrecorded_replaced: bool) -> list[str | None]:
    """Each run's source topic id: its own; for a run without one, the id of the next run by destination offset
    that has one (copies are mapped in the order they were written), else of the one before; None where no run
    has an id. `unrecorded_replaced`: a recreation was found from runs without an id: theirs is the old topic's
    (named None, which then stands for a replaced topic)."""
    if unrecorded_replaced or all(sid is None for _, sid in runs):
        return [sid for _, sid in runs]
    order = sorted(range(len(runs)), key=lambda i: runs[i][0].dest)
    out: list[str | None] = [sid for _, sid in runs]
    for seq in (reversed(order), iter(order)):
        nearest = None
        for i in seq:
            if out[i] is None:
                out[i] = nearest
            else:
                nearest = out[i] if runs[i][1] is not None else nearest
    return out


@dataclass(frozen=True)
class ReplacedSource:
    """A partition's offset map holds copies of a source topic other than the one there now (`replaced_source`)."""

    #: the id the map recorded for its copies (None: not recorded)
    recorded_id: str | None
    #: source offsets [lo, hi) of the old topic the map holds copies of (None: none, only a recreation found before)
    mapped: tuple[int, int] | None
    #: the old topic's first source offset with no copy
    at: int


def replaced_source(pmap: PartitionMap | None, topic_id_now: str | None) -> ReplacedSource | None:
    """Pure: a partition its group has no committed offset for (Kafka deletes a group's offsets with the topic):
    whether the offset map's copies are of another topic than the one there now, which the lane must take as the
    topic deleted and recreated since they were made. So when the id the map recorded differs from `topic_id_now`;
    and, as nothing can show otherwise, when the map recorded no id (copies mapped before ids were recorded) or the
    id now is unknown. None: nothing mapped, or the same topic (a copy that stopped before its first commit)."""
    if pmap is None:
        return None
    mapped: tuple[int, int] | None
    if pmap.runs:
        assert pmap.source_start is not None and pmap.source_end is not None
        recorded, mapped, at = pmap.source_id, (pmap.source_start, pmap.source_end), pmap.source_end
    elif pmap.recreations:  # a recreation found before (stopped, or nothing copied of the new topic since)
        last = last_recreation(pmap.recreations)
        assert last is not None
        recorded = last.new_id if last.continued else last.old_id
        mapped = (min(r.source for r in pmap.replaced), max(r.source_end for r in pmap.replaced)) \
            if pmap.replaced and not last.continued else None
        at = last.at
    else:
        return None
    if recorded is not None and topic_id_now is not None and recorded == topic_id_now:
        return None
    return ReplacedSource(recorded, mapped, at)


def last_recreation(recreations: Sequence[Recreation]) -> Recreation | None:
    """The last of a chain of recreations (old id -> new id): the one no other starts from (None: none)."""
    olds = {r.old_id for r in recreations}
    return next((r for r in reversed(recreations) if r.new_id not in olds), recreations[-1] if recreations else None)
