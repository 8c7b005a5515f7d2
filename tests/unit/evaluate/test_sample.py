"""Samples from files and generators spread over partitions as Kafka's Java producer spreads records."""

from __future__ import annotations

import pytest
from kafka.partitioner.default import murmur2

from transcoder.errors import ConfigError, InputError
from transcoder.evaluate.sample import from_records

RECORDS = [(f"user-{i % 11}".encode() if i % 5 else None, f"v{i}".encode(), (), 1_000 + i) for i in range(200)]


def test_keyed_records_go_by_murmur2_of_the_key_and_unkeyed_round_robin_each_in_order():
    sample = from_records("test", RECORDS, 4)
    assert sum(len(rs) for rs in sample.partitions.values()) == 200
    for p, rs in sample.partitions.items():
        assert rs == sorted(rs, key=lambda r: r[3])  # each partition keeps the records' order
        for i, r in ((r[3] - 1_000, r) for r in rs):
            want = (murmur2(r[0]) & 0x7FFFFFFF) % 4 if r[0] is not None else i % 4
            assert p == want
    assert from_records("one", RECORDS).partitions == {0: RECORDS}


def test_bad_counts_and_empty_samples_are_one_line_errors():
    with pytest.raises(ConfigError, match="--partition-count must be at least 1"):
        from_records("x", RECORDS, 0)
    with pytest.raises(InputError, match="the sample is empty: nothing gave no records"):
        from_records("nothing", []).check_not_empty()
