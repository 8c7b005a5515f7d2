"""stored_from_columns: records given as columns (the Spark engine's) as the StoredRecords fetched ones are."""

from __future__ import annotations

import pytest

from transcoder.codecs import decode_stored, encode_batch, stored_from_columns


def _records(stored):
    return [stored.record(i) for i in range(len(stored))]


def test_columns_read_back_record_by_record_with_their_offsets_gaps_included():
    offsets = [5, 6, 7, 10, 11, 40]
    keys = [b"a", None, b"c", b"", b"e", b"f"]
    values = [b"1", b"2", None, b"4", b"", b"6" * 3000]
    headers = [None, [("h", b"x"), ("h", None)], None, [], [("z", b"")], None]
    stamps = [1000, 1001, 999, 2000, 2001, 5]
    s = stored_from_columns(offsets, keys, values, headers, stamps)
    assert s.offsets == offsets and s.next_offset == 41
    assert _records(s) == [(o, ts, k, v, list(h or [])) for o, ts, k, v, h in zip(offsets, stamps, keys, values,
                                                                                     headers, strict=True)]
    # sizes as transcoder counts them everywhere: key + value + header names and values
    assert s.size == sum(len(k or b"") + len(v or b"") + sum(len(n) + len(x or b"") for n, x in h or [])
                         for k, v, h in zip(keys, values, headers, strict=True))
    assert s.span(0, 6) == (5, 40, s.size)


def test_without_gaps_it_is_the_one_batch_a_producer_would_send():
    n = 1000
    keys, values = [f"k{i}".encode() for i in range(n)], [b"v" * (i % 50) for i in range(n)]
    s = stored_from_columns(list(range(300, 300 + n)), keys, values, [None] * n, list(range(n)))
    one = decode_stored(encode_batch(list(zip(keys, values, [None] * n, range(n), strict=True)), base_offset=300), 300)
    assert _records(s) == _records(one)


@pytest.mark.parametrize("offsets", [[], [3, 3], [4, 2], [1, 3, 2, 4]])
def test_no_records_or_offsets_not_increasing_are_refused(offsets):
    n = len(offsets)
    with pytest.raises(ValueError):
        stored_from_columns(offsets, [b"k"] * n, [b"v"] * n, [None] * n, [0] * n)
