"""The offset map's runs and translation rules, against a brute-force model of copy histories."""

from __future__ import annotations

import random

import pytest

from transcoder.pipeline.offset_runs import (
    MapBuilder,
    MapEntry,
    PartitionMap,
    Run,
    partition_maps,
)


def history(rng: random.Random, *, replays: int, gaps: bool) -> tuple[list[int], list[int]]:
    """A source partition's offsets (with gaps: compaction, markers) and the destination as delivered:
    dest[d] = the source offset copied there; replays restart the copy at an earlier source record."""
    offsets, o = [], 0
    for _ in range(rng.randint(1, 120)):
        o += rng.choice([1, 1, 1, 2, 5]) if gaps else 1
        offsets.append(o)
    dest: list[int] = []
    i = 0
    for _ in range(replays):
        j = rng.randint(i, len(offsets))
        dest.extend(offsets[i:j])
        i = rng.randint(0, j)  # a crash: the copy starts again at an earlier commit
    dest.extend(offsets[i:])
    return offsets, dest


def build(dest: list[int], *, flush_every: int = 7) -> PartitionMap:
    b = MapBuilder()
    entries: list[MapEntry] = []
    for d, s in enumerate(dest):
        b.add("src", "dst", 0, s, d)
        if d % flush_every == 0:
            entries += b.take()
    entries += b.take()
    entries = [MapEntry.decode(e.encode()) for e in entries]  # through the topic's bytes
    return partition_maps(entries, "dst").get(0, PartitionMap([]))


def brute_forward(dest: list[int], c: int) -> int | None:
    last: dict[int, int] = {}
    for d, s in enumerate(dest):
        last[s] = d
    found = [d for s, d in last.items() if s >= c]
    return min(found) if found else None


def brute_backward(dest: list[int], d0: int) -> int:
    first: dict[int, int] = {}
    for d, s in enumerate(dest):
        first.setdefault(s, d)
    unseen = [s for s, d in first.items() if d >= d0]
    return min(unseen) if unseen else max(dest) + 1


@pytest.mark.parametrize("seed", range(60))
def test_translation_matches_the_model_and_never_leaves_a_gap(seed: int) -> None:
    rng = random.Random(seed)
    offsets, dest = history(rng, replays=seed % 4, gaps=seed % 2 == 0)
    m = build(dest, flush_every=rng.randint(1, 20))
    for c in range(0, offsets[-1] + 3):
        d = m.forward(c)
        assert d == brute_forward(dest, c), (c, dest)
        # reading the destination from d sees every source record >= c: no gap
        if d is not None:
            assert {s for s in offsets if s >= c} <= set(dest[d:])
    for d0 in range(0, len(dest) + 2):
        assert m.backward(d0) == brute_backward(dest, d0)


def test_a_plain_copy_translates_to_the_copy_of_the_next_record_and_back() -> None:
    offsets = [0, 1, 2, 5, 6, 9, 10]  # 3-4 and 7-8 gone (compaction, markers)
    m = build(offsets)
    assert [m.forward(c) for c in range(12)] == [0, 1, 2, 3, 3, 3, 4, 5, 5, 5, 6, None]
    assert [m.backward(d) for d in range(8)] == [0, 1, 2, 5, 6, 9, 10, 11]
    assert m.source_of(3) == 5 and m.source_of(7) is None
    assert m.source_end == 11 and m.dest_end == 7 and m.source_start == 0


def test_runs_break_where_either_side_jumps() -> None:
    b = MapBuilder()
    for s, d in [(0, 10), (1, 11), (2, 12), (5, 13), (6, 14), (7, 20)]:
        b.add("src", "dst", 3, s, d)
    (e,) = b.take()
    assert e.runs == (Run(0, 10, 3), Run(5, 13, 2), Run(7, 20, 1))
    assert e.key == b"dst/3" and not b


def test_entries_put_back_stay_in_front() -> None:
    b = MapBuilder()
    b.add("src", "dst", 0, 0, 0)
    taken = b.take()
    b.add("src", "dst", 0, 1, 1)
    b.put_back(taken)
    assert b.take()[0].runs == (Run(0, 0, 1), Run(1, 1, 1))


@pytest.mark.parametrize("value", [b"{}", b"not json", b'{"v": 2, "runs": []}',
                                   b'{"v":1,"source":"a","destination":"b",'
                                   b'"partition":0,"runs":[[0,0,0]]}'])
def test_decode_refuses_what_is_not_an_entry(value: bytes) -> None:
    with pytest.raises(ValueError):
        MapEntry.decode(value)
