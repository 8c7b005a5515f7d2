"""Content verification, the pure part: fingerprints, range digests, the field named, the range rules, a recreated
source named as such."""

from __future__ import annotations

import pytest

from transcoder.migrate.compare import (
    HEADERS,
    KEY,
    MISSING,
    NOT_IN_SOURCE,
    RECREATED,
    TIMESTAMP,
    VALUE,
    Absence,
    CopyIndex,
    Mismatch,
    Summary,
    compare_range,
    describe_difference,
    fingerprint,
    merged,
    range_digest,
    recreation,
    same,
    stale,
    unmapped_gaps,
)
from transcoder.pipeline.offset_runs import MapEntry, PartitionMap, Recreation, Run, partition_maps

HDRS = [("a", b"1"), ("b", None), ("c", b"")]


def rec(key: bytes | None = b"k", value: bytes | None = b"value", headers=HDRS, ts: int | None = 1000) -> Summary:
    return Summary.of(key, value, headers, ts)


# --------------------------------------------------------------------------- fingerprints


def test_fingerprint_is_stable_and_covers_every_field() -> None:
    base = fingerprint(b"k", b"v", HDRS, 5)
    assert base == fingerprint(b"k", b"v", list(HDRS), 5)
    variants = [
        fingerprint(None, b"v", HDRS, 5), fingerprint(b"", b"v", HDRS, 5), fingerprint(b"K", b"v", HDRS, 5),
        fingerprint(b"k", None, HDRS, 5), fingerprint(b"k", b"", HDRS, 5), fingerprint(b"k", b"w", HDRS, 5),
        fingerprint(b"k", b"v", HDRS[::-1], 5), fingerprint(b"k", b"v", HDRS[:2], 5),
        fingerprint(b"k", b"v", [("a", b"1"), ("b", b""), ("c", b"")], 5),  # None header value is not b""
        fingerprint(b"k", b"v", [("A", b"1"), ("b", None), ("c", b"")], 5),
        fingerprint(b"k", b"v", HDRS, 6), fingerprint(b"k", b"v", HDRS, None),
        fingerprint(b"kv", b"", HDRS, 5),  # field boundaries count: key+value concatenations differ
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_no_headers_is_the_same_as_an_empty_header_list() -> None:
    assert fingerprint(b"k", b"v", None, 1) == fingerprint(b"k", b"v", [], 1)


def test_str_fields_are_their_utf8_bytes() -> None:
    assert fingerprint("k", "v", [("h", "x")], 1) == fingerprint(b"k", b"v", [("h", b"x")], 1)


def test_range_digest_is_over_the_fingerprints_in_order() -> None:
    a, b = fingerprint(b"1", b"", None, 1), fingerprint(b"2", b"", None, 1)
    assert range_digest([a, b]) == range_digest(iter([a, b]))
    assert range_digest([a, b]) != range_digest([b, a])
    assert range_digest([a]) != range_digest([a, a])
    assert range_digest([]) != range_digest([a])


def test_a_source_without_a_timestamp_does_not_compare_the_copys() -> None:
    assert same(rec(ts=None), rec(ts=12345))
    assert not same(rec(ts=1), rec(ts=2))


# --------------------------------------------------------------------------- the field named


@pytest.mark.parametrize(("copy", "field", "detail"), [
    (rec(key=b"q"), KEY, "key differs (1 bytes each, blake2b "),
    (rec(key=None), KEY, "key differs (1 bytes vs null)"),
    (rec(value=b"valu"), VALUE, "value differs (5 vs 4 bytes)"),
    (rec(value=b"VALUE"), VALUE, "value differs (5 bytes each, blake2b "),
    (rec(headers=HDRS[::-1]), HEADERS, "headers differ in order (the same 3 headers in another order)"),
    (rec(headers=HDRS[:2]), HEADERS, "headers differ (3 vs 2 headers)"),
    (rec(headers=[("a", b"1"), ("x", None), ("c", b"")]), HEADERS, "headers differ at header 2 (name 'b' vs 'x')"),
    (rec(headers=[("a", b"1"), ("b", b""), ("c", b"")]), HEADERS, "headers differ at header 2 ('b': null vs 0 bytes)"),
    (rec(headers=[("a", b"2"), ("b", None), ("c", b"")]), HEADERS, "headers differ at header 1 ('a': 1 bytes each"),
    (rec(ts=999), TIMESTAMP, "timestamp differs (1000 vs 999)"),
])
def test_the_first_field_that_differs_is_named(copy: Summary, field: str, detail: str) -> None:
    found = describe_difference(rec(), copy)
    assert found is not None
    assert found[0] == field
    assert found[1].startswith(detail), found[1]


def test_other_fields_that_differ_are_listed_after_the_first() -> None:
    found = describe_difference(rec(), rec(value=b"x", ts=1))
    assert found == (VALUE, "value differs (5 vs 1 bytes); timestamp also differs")
    found = describe_difference(rec(), rec(key=b"x", headers=[], ts=1))
    assert found is not None and found[1].endswith("; headers, timestamp also differ")


def test_equal_records_have_no_difference() -> None:
    assert describe_difference(rec(), rec()) is None


def test_the_detail_never_holds_contents() -> None:
    secret = b"hunter2-secret"
    found = describe_difference(rec(key=secret, value=secret), rec(key=secret[::-1], value=secret + b"!"))
    assert found is not None
    assert "hunter2" not in found[1] and "terces" not in found[1]


def test_mismatch_line() -> None:
    m = Mismatch(2, 1041, 1043, VALUE, "value differs (312 vs 311 bytes)")
    assert m.line == "partition 2: source offset 1041 / destination offset 1043: value differs (312 vs 311 bytes)"
    assert Mismatch(0, 7, None, MISSING, "missing in destination: x").line == \
        "partition 0: source offset 7: missing in destination: x"


# --------------------------------------------------------------------------- one range

NEVER = Absence(False, lambda: 0)


def src(offsets, **kw) -> dict[int, Summary]:
    return {o: rec(value=f"v{o}".encode(), **kw) for o in offsets}


def copies_of(source: dict[int, Summary], runs: list[Run]) -> dict[int, Summary]:
    """The destination as an exact copy under `runs` (of the records that exist)."""
    out = {}
    for r in runs:
        for i in range(r.count):
            if r.source + i in source:
                out[r.dest + i] = source[r.source + i]
    return out


def run_range(source, runs, dest, lo=0, hi=10, s_abs=NEVER, d_abs=NEVER):
    return compare_range(3, lo, hi, source, list(PartitionMap(runs).copies(lo, hi)), dest,
                         source_absence=s_abs, dest_absence=d_abs)


def test_an_exact_copy_matches_and_its_digests_are_equal() -> None:
    source = src(range(10))
    runs = [Run(0, 100, 10)]
    r = run_range(source, runs, copies_of(source, runs))
    assert r.mismatch is None and r.verified_through == 10 and r.compared == 10 and r.duplicates == 0
    assert r.source_digest == r.dest_digest == range_digest(source[o].fingerprint for o in range(10))


def test_a_changed_value_is_the_mismatch_and_verified_through_stops_at_it() -> None:
    source = src(range(10))
    runs = [Run(0, 100, 10)]
    dest = copies_of(source, runs)
    dest[104] = rec(value=b"changed!")
    dest[107] = rec(value=b"also")
    r = run_range(source, runs, dest)
    assert r.mismatch is not None
    assert (r.mismatch.partition, r.mismatch.source_offset, r.mismatch.dest_offset,
            r.mismatch.field) == (3, 4, 104, VALUE)
    assert r.mismatch.detail == "value differs (2 vs 8 bytes)"
    assert r.verified_through == 4 and r.compared == 4


def test_duplicates_are_each_compared_and_counted() -> None:
    source = src(range(10))
    runs = [Run(0, 0, 6), Run(3, 6, 7)]  # a replay from source offset 3
    dest = copies_of(source, runs)
    r = run_range(source, runs, dest)
    assert r.mismatch is None and r.compared == 10 and r.duplicates == 3
    dest[7] = rec(value=b"bad")  # the second copy of source offset 4
    r = run_range(source, runs, dest)
    assert r.mismatch is not None and (r.mismatch.source_offset, r.mismatch.dest_offset) == (4, 7)


def test_source_gaps_are_not_compared() -> None:
    source = src([0, 1, 4, 5, 9])  # compaction, markers, aborted records: those offsets do not exist
    runs = [Run(0, 0, 2), Run(4, 2, 2), Run(9, 4, 1)]
    r = run_range(source, runs, copies_of(source, runs))
    assert r.mismatch is None and r.compared == 5 and r.verified_through == 10


def test_a_source_record_without_a_mapped_copy_is_missing() -> None:
    source = src(range(10))
    runs = [Run(0, 0, 6), Run(7, 6, 3)]  # 6 dead-lettered
    r = run_range(source, runs, copies_of(source, runs))
    assert r.mismatch == Mismatch(3, 6, None, MISSING, r.mismatch.detail) and r.verified_through == 6
    assert "no copy of this record is mapped" in r.mismatch.detail


def test_a_mapped_copy_that_is_gone_is_missing_unless_cleaned_or_expired() -> None:
    source = src(range(10))
    runs = [Run(0, 100, 10)]
    dest = copies_of(source, runs)
    del dest[102], dest[105]
    r = run_range(source, runs, dest)
    assert r.mismatch is not None and (r.mismatch.source_offset, r.mismatch.dest_offset, r.mismatch.field) == \
        (2, 102, MISSING)
    r = run_range(source, runs, dest, d_abs=Absence(True, lambda: 0))  # compacted
    assert r.mismatch is None and r.cleaned_in_destination == 2 and r.compared == 8
    r = run_range(source, runs, dest, d_abs=Absence(False, lambda: 103))  # retention: 102 expired, 105 not
    assert r.mismatch is not None and r.mismatch.dest_offset == 105 and r.cleaned_in_destination == 1


def test_a_copy_whose_source_is_gone_is_cleaned_in_source_or_not_in_source() -> None:
    full = src(range(10))
    runs = [Run(0, 0, 10)]
    dest = copies_of(full, runs)
    source = {o: v for o, v in full.items() if o not in (1, 3)}
    r = run_range(source, runs, dest, s_abs=Absence(True, lambda: 0))
    assert r.mismatch is None and r.cleaned_in_source == 2 and r.compared == 8
    r = run_range(source, runs, dest, s_abs=Absence(False, lambda: 2))  # 1 expired; 3 should exist
    assert r.mismatch is not None and (r.mismatch.source_offset, r.mismatch.dest_offset, r.mismatch.field) == \
        (3, 3, NOT_IN_SOURCE)
    assert r.cleaned_in_source == 1


def test_the_low_watermark_is_asked_only_when_a_record_is_absent() -> None:
    asked = []
    source = src(range(10))
    runs = [Run(0, 0, 10)]
    run_range(source, runs, copies_of(source, runs), s_abs=Absence(False, lambda: asked.append(1) or 0),
              d_abs=Absence(False, lambda: asked.append(1) or 0))
    assert asked == []


def test_the_first_mismatch_is_by_source_offset_not_destination_offset() -> None:
    source = src(range(10))
    runs = [Run(5, 0, 5), Run(0, 5, 5)]  # later source offsets copied first
    dest = copies_of(source, runs)
    dest[1] = rec(value=b"x")   # source 6
    dest[8] = rec(ts=1)         # source 3
    r = run_range(source, runs, dest)
    assert r.mismatch is not None and (r.mismatch.source_offset, r.mismatch.dest_offset) == (3, 8)


def test_only_the_range_is_compared() -> None:
    source = src(range(20))
    runs = [Run(0, 0, 20)]
    dest = copies_of(source, runs)
    dest[3] = rec(value=b"x")
    r = run_range(source, runs, dest, lo=10, hi=20)
    assert r.mismatch is None and r.compared == 10


# --------------------------------------------------------------------------- bookkeeping


@pytest.mark.parametrize("runs", [
    [Run(0, 0, 100)],
    [Run(0, 0, 30), Run(20, 30, 50), Run(60, 80, 5), Run(100, 85, 10)],
    [Run(s, s // 2, 1) for s in range(0, 200, 2)],
    [Run(50, 0, 50), Run(0, 50, 60), Run(40, 110, 20)],
])
def test_copy_index_equals_the_maps_copies(runs: list[Run]) -> None:
    pmap, index = PartitionMap(runs), CopyIndex(runs)
    for lo in range(0, 120, 7):
        for hi in (lo, lo + 1, lo + 10, lo + 33, 500):
            assert index.copies(lo, hi) == list(pmap.copies(lo, hi)), (lo, hi)


def test_unmapped_gaps_follow_the_run_before_them() -> None:
    runs = [Run(0, 0, 10), Run(7, 14, 13), Run(20, 27, 5), Run(25, 40, 1)]
    assert unmapped_gaps(runs) == [(10, 14, 9), (32, 40, 24)]
    assert unmapped_gaps([Run(0, 0, 10)]) == []


def test_merged_intervals() -> None:
    assert merged([(5, 7), (0, 2), (2, 3), (6, 9), (11, 12)]) == [(0, 3), (5, 9), (11, 12)]


# --------------------------------------------------------------------------- a recreated source

OLD = MapEntry("a", "d", 0, (Run(0, 0, 300),), source_id="id-a")
FOUND = MapEntry("a", "d", 0, (), ((300, 301),), "id-a", Recreation("id-a", "id-b", 300, None, continued=True))
NEW = MapEntry("a", "d", 0, (Run(0, 300, 600),), source_id="id-b")


def _map(*entries: MapEntry) -> PartitionMap:
    return partition_maps(entries, "d")[0]


def test_a_recreation_continued_is_named_after_the_new_topics_copies_never_as_a_value_at_offset_0() -> None:
    m = _map(OLD, FOUND, NEW)
    assert not stale(m, "id-b")  # the new topic's copies are compared
    found = recreation(0, m, "id-b", 600)
    assert found is not None and found.field == RECREATED
    assert found.line == (
        "partition 0: source topic recreated: the source topic was deleted and recreated (topic id id-a is now "
        "id-b); destination offsets 0..299 are copies of the old topic (its source offsets 0..299), not compared; "
        "the old topic's records from source offset 300 on were lost before they were copied (how many unknown)")


def test_a_map_of_another_topic_id_than_now_is_stale_and_named_even_before_a_lane_found_it() -> None:
    m = _map(OLD)
    assert stale(m, "id-b") and not stale(m, "id-a") and recreation(0, m, "id-a", 0) is None
    found = recreation(0, m, "id-b", 0)
    assert found is not None and "(topic id id-a is now id-b)" in found.line
    assert "nothing of the topic now is copied" in found.line and "no lane has named the loss yet" in found.line
    # stopped on it: the old copies set apart, nothing of the new topic
    stopped = _map(OLD, MapEntry("a", "d", 0, (), ((300, 302),), "id-a", Recreation("id-a", "id-b", 300, 2)))
    assert stale(stopped, None)
    found = recreation(0, stopped, None, 0)
    assert found is not None and "(topic id id-a is now id-b)" in found.line
    assert "the old topic's records 300..301 (2) were lost before they were copied" in found.line


def test_a_map_without_ids_or_recreations_is_compared_as_before() -> None:
    m = _map(MapEntry("a", "d", 0, (Run(0, 0, 300),)))
    assert not stale(m, "id-b") and recreation(0, m, "id-b", 0) is None
