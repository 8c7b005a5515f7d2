"""Batches as the producer cuts them, framed and compressed as Kafka stores them."""

from __future__ import annotations

import pytest
import transcoder_native as native
from kafka.record import MemoryRecords

from transcoder.codecs import encode_batch, encode_record
from transcoder.evaluate.batches import cut, cut_java, record_size
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import measure_partition, measure_sample

LOGS = [(f"host-{i % 7}".encode(), f'10.0.0.{i % 50} - - "GET /api/items/{i % 300} HTTP/1.1" 200'.encode(),
         (("trace", b"ab"),) if i % 4 == 0 else (), 1_700_000_000_000 + i) for i in range(5000)]


def test_batches_close_before_the_record_that_would_pass_max_bytes_and_at_max_records():
    two = 61 + sum(_encoded(LOGS[1:3]))  # two records framed as a v2 batch: they fit exactly
    assert [len(b) for b in cut(LOGS[1:4], max_bytes=two)] == [2, 1]
    assert len(cut(LOGS[1:4], max_bytes=two - 1)[0]) == 1
    assert [len(b) for b in cut(LOGS[:10], max_bytes=1 << 20, max_records=4)] == [4, 4, 2]
    everything = cut(LOGS, max_bytes=16384)
    assert [r for b in everything for r in b] == LOGS  # nothing lost, offset order kept
    assert all(61 + sum(_encoded(b)) <= 16384 for b in everything)
    assert cut([], max_bytes=16384) == []


@pytest.mark.parametrize(("max_bytes", "max_records"), [(16384, 100_000), (65536, 100_000), (1 << 20, 37), (200, 5)])
def test_the_cut_is_the_batched_lanes_rebatcher(max_bytes, max_records):
    """evaluate cuts a sample exactly as a batched lane re-batches the same records fetched from the broker."""
    stored = native.decode_stored(encode_batch(LOGS, codec="lz4"), 0)
    rb = native.Rebatcher(max_bytes, max_records)
    rb.add(stored, 0)
    sections = rb.take(flush=True)
    batches = cut(LOGS, max_bytes=max_bytes, max_records=max_records)
    assert [len(s) for s in sections] == [len(b) for b in batches]
    assert [bytes(b) for b in native.seal_sections(sections, [(-1, -1, -1)] * len(sections), codec="none")] == [
        encode_batch(b) for b in batches]


def test_cells_are_the_framed_batches_and_larger_batches_compress_better():
    small, large = measure_partition(LOGS, [Cell(Setting("zstd", 3), 16384), Cell(Setting("zstd", 3), 1 << 20)],
                                     repeats=1)
    assert small.records == large.records == 5000
    assert small.record_bytes == sum(record_size(r) for r in LOGS)
    one = cut(LOGS, max_bytes=1 << 20)
    assert large.batches == len(one) == 1
    assert large.compressed_bytes == len(encode_batch(one[0], codec="zstd", level=3))
    assert large.uncompressed_bytes == len(encode_batch(one[0]))
    sixteen = cut(LOGS, max_bytes=16384)
    assert small.batches == len(sixteen)
    assert small.compressed_bytes == sum(len(encode_batch(b, codec="zstd", level=3)) for b in sixteen)
    assert large.compressed_bytes < small.compressed_bytes
    batch = MemoryRecords(encode_batch(one[0], codec="lz4")).next_batch()  # what a Kafka client reads back
    assert [r.value for r in batch][:3] == [v for _, v, _, _ in LOGS[:3]]


def _encoded(batch):
    return [len(encode_record(i, r[3] - batch[0][3], r[0], r[1], r[2])) for i, r in enumerate(batch)]


def test_the_java_rule_fills_batch_size_with_uncompressed_bytes_until_its_estimate_learns_the_ratio():
    plain = cut_java(LOGS, batch_size=16384, codec="none")
    assert [r for b in plain for r in b] == LOGS
    for b, nxt in zip(plain, plain[1:], strict=False):  # full: the next record would not have fitted
        assert 61 + sum(_encoded(b)) <= 16384 < 61 + sum(_encoded(b)) + len(encode_record(len(b), 0, *nxt[0][:3]))
    packed = cut_java(LOGS, batch_size=16384, codec="zstd", level=3)
    assert [r for b in packed for r in b] == LOGS
    first = packed[0]
    assert 61 + int(sum(_encoded(first)) * 1.05) <= 16384  # estimate 1.0 x the 1.05 safety factor
    # the estimate moves down 0.005 per batch that compressed better: batches grow one after the other
    assert len(packed[1]) > len(packed[0]) and len(packed[-2]) > len(packed[1])


def test_java_cells_are_cut_per_codec_and_named_so():
    java, rdk = measure_sample({0: LOGS}, [Cell(Setting("zstd", 3), 16384, "java"), Cell(Setting("zstd", 3), 16384)],
                               repeats=1)
    assert java.label == "zstd-3 (java)" and rdk.label == "zstd-3"
    java_cut, rdk_cut = cut_java(LOGS, batch_size=16384, codec="zstd", level=3), cut(LOGS, max_bytes=16384)
    assert (java.batches, rdk.batches) == (len(java_cut), len(rdk_cut))
    assert len(java_cut[-2]) > len(rdk_cut[-2])  # the estimate has learnt the ratio: more records per batch


def test_a_lagging_estimate_opens_smaller_batches_and_never_more_records_per_batch():
    """The Java producer's sender drains (and updates the estimate) behind the batches being filled: with a lag
    of k, batch j takes the estimate after j - k batches; with no bound on the lag the estimate stays 1.0."""
    keeping_up = cut_java(LOGS, batch_size=16384, codec="zstd", level=3)
    lagging = cut_java(LOGS, batch_size=16384, codec="zstd", level=3, lag=5)
    stale = cut_java(LOGS, batch_size=16384, codec="zstd", level=3, lag=len(LOGS))
    assert [r for b in lagging for r in b] == [r for b in stale for r in b] == LOGS
    assert [len(b) for b in lagging[:6]] == [len(b) for b in stale[:6]]  # the first six open at 1.0
    assert len(keeping_up[2]) > len(lagging[2]) and len(keeping_up[-2]) > len(lagging[-2]) > len(stale[-2])
    assert len(keeping_up) < len(stale)
    with pytest.raises(ValueError, match="lag"):
        cut_java(LOGS, batch_size=16384, codec="zstd", lag=-1)
