"""Batch sizes and records above Kafka's limits (pure), and zstd's fast levels as a Kafka client reads them."""

from __future__ import annotations

from kafka.record import MemoryRecords

from transcoder.codecs import encode_batch
from transcoder.evaluate.measure import CellResult
from transcoder.evaluate.recommend import Limits, Workload, recommend

MIB = 1024 * 1024


def _cell(batch: int, ratio_bytes: int) -> CellResult:
    return CellResult(codec="lz4", level=None, batch_bytes=batch, batches=1, records=1000, record_bytes=100_000,
                      uncompressed_bytes=100_000, compressed_bytes=ratio_bytes, compress_cpu_s=0.001,
                      decompress_cpu_s=0.0005)


def test_a_batch_size_above_the_producers_default_is_warned_and_the_topics_own_limit_is_named():
    default = Limits.of([(None, b"x" * 100, (), 0)])
    assert default.max_batch_bytes == MIB and default.records_over == 0
    assert default.warnings([16384, MIB]) == []
    [line] = default.warnings([16384, 4 * MIB], chosen=16384)
    assert line.startswith("⚠ 4 MiB batches (cells marked ⚠) are above the producers' default max.request.size "
                           "(1,048,576 B) and the broker's default message.max.bytes (1,048,588 B)")
    # a topic that takes 8 MiB: only the producers' default is in the way
    [line] = Limits(max_message_bytes=8 * MIB).warnings([4 * MIB], chosen=4 * MIB)
    assert "(the recommended batch size)" in line and "message.max.bytes (1" not in line
    # a topic that takes less than 1 MiB: its own limit
    small = Limits.of([(b"k", b"v" * 600_000, (), 0), (None, b"v" * 100, (), 0)], max_message_bytes=500_000)
    assert small.max_batch_bytes == 500_000 and small.records_over == 1 and small.largest_record_bytes == 600_001
    [line] = small.warnings([])
    assert "1 record(s) of the sample are above the producers' default max.request.size (1,048,576 B) and the " \
           "topic's max.message.bytes (500,000 B) (the largest: 600,001 B)" in line


def test_the_recommendation_carries_the_warnings_in_its_text_and_its_dict():
    w = Workload(rate=None, retention_ms=None)
    r = recommend([_cell(16384, 50_000), _cell(4 * MIB, 20_000)], w)
    assert r.chosen.batch_bytes == 4 * MIB
    assert len(r.warnings) == 1 and "(the recommended batch size)" in r.warnings[0]
    assert r.text.endswith(r.warnings[0])
    d = r.as_dict(w)
    assert d["warnings"] == list(r.warnings) and d["max_batch_bytes"] == MIB


def test_a_batch_at_a_fast_zstd_level_reads_back_record_by_record():
    records = [(f"k{i}".encode(), f"GET /items/{i % 17} 200".encode(), (("h", b"v"),), 1_700_000_000_000 + i)
               for i in range(200)]
    for level in (-1, -5, -7, -131072):
        batch = MemoryRecords(encode_batch(records, codec="zstd", level=level)).next_batch()
        assert batch.compression_type == 4
        assert [(r.key, r.value, tuple(r.headers), r.timestamp) for r in batch] == [
            (k, v, tuple((n, hv) for n, hv in h), t) for k, v, h, t in records]
