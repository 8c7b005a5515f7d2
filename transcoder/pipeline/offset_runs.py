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
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: Runs per map record at most (a record stays well under a broker's default max.message.bytes).
MAX_RUNS_PER_ENTRY = 2000
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
class MapEntry:
    """One record of the offset-map topic: runs of one destination partition, in delivery order."""

    source_topic: str
    destination_topic: str
    partition: int
    runs: tuple[Run, ...]
    #: source offsets [lo, hi) lost in the source before they were copied (module doc); an entry of its own
    lost: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> bytes:
        """All entries of one destination partition share a key: one map partition holds them in order."""
        return f"{self.destination_topic}/{self.partition}".encode()

    def encode(self) -> bytes:
        d = {"v": FORMAT_VERSION, "source": self.source_topic, "destination": self.destination_topic,
             "partition": self.partition, "runs": [[r.source, r.dest, r.count] for r in self.runs]}
        if self.lost:
            d["lost"] = [[lo, hi] for lo, hi in self.lost]
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> MapEntry:
        """ValueError for anything that is not a map entry of this format."""
        try:
            d = json.loads(value)
            if d.get("v") != FORMAT_VERSION:
                raise ValueError(f"offset-map format {d.get('v')!r}, expected {FORMAT_VERSION}")
            runs = tuple(Run(int(s), int(o), int(n)) for s, o, n in d["runs"])
            if any(r.count <= 0 or r.source < 0 or r.dest < 0 for r in runs):
                raise ValueError("a run with a negative offset or no records")
            lost = tuple((int(lo), int(hi)) for lo, hi in d.get("lost", ()))
            if any(lo < 0 or hi <= lo for lo, hi in lost):
                raise ValueError("a lost range with a negative offset or no records")
            return cls(str(d["source"]), str(d["destination"]), int(d["partition"]), runs, lost)
        except (TypeError, KeyError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not an offset-map entry: {exc}") from exc


class MapBuilder:
    """Runs per destination partition, built from delivery reports (one `add` per delivered record)."""

    def __init__(self) -> None:
        #: (destination topic, partition) -> (source topic, runs as [source, dest, count] lists)
        self._open: dict[tuple[str, int], tuple[str, list[list[int]]]] = {}

    def add(self, source_topic: str, dest_topic: str, partition: int, source_offset: int, dest_offset: int) -> None:
        key = (dest_topic, partition)
        found = self._open.get(key)
        if found is None:
            self._open[key] = (source_topic, [[source_offset, dest_offset, 1]])
            return
        runs = found[1]
        last = runs[-1]
        n = last[2]
        if source_offset == last[0] + n and dest_offset == last[1] + n:
            last[2] = n + 1
        else:
            runs.append([source_offset, dest_offset, 1])

    def __bool__(self) -> bool:
        return bool(self._open)

    def take(self) -> list[MapEntry]:
        """Everything added since the last call, as map entries (at most MAX_RUNS_PER_ENTRY runs each)."""
        out = []
        for (dest, partition), (source, runs) in self._open.items():
            for i in range(0, len(runs), MAX_RUNS_PER_ENTRY):
                out.append(MapEntry(source, dest, partition,
                                    tuple(Run(s, d, n) for s, d, n in runs[i:i + MAX_RUNS_PER_ENTRY])))
        self._open = {}
        return out

    def put_back(self, entries: Iterable[MapEntry]) -> None:
        """Entries that could not be stored go back in front of what was added since (their order kept)."""
        later, self._open = self._open, {}
        for e in entries:
            found = self._open.setdefault((e.destination_topic, e.partition), (e.source_topic, []))
            found[1].extend([r.source, r.dest, r.count] for r in e.runs)
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
    """Every run of one destination partition (from all map entries read), for translation and lookups."""

    def __init__(self, runs: Iterable[Run], lost: Iterable[tuple[int, int]] = ()) -> None:
        self.runs: list[Run] = sorted(runs, key=lambda r: r.dest)
        self._dest_starts = [r.dest for r in self.runs]
        #: source offsets [lo, hi) lost in the source before they were copied, in order
        self.lost: list[tuple[int, int]] = sorted(set(lost))

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
    """destination partition -> its map, from the entries of the map topic (other destinations ignored)."""
    runs: dict[int, list[Run]] = {}
    lost: dict[int, list[tuple[int, int]]] = {}
    for e in entries:
        if e.destination_topic == destination_topic:
            runs.setdefault(e.partition, []).extend(e.runs)
            lost.setdefault(e.partition, []).extend(e.lost)
    return {p: PartitionMap(rs, lost.get(p, ())) for p, rs in runs.items()}
