"""transcoder.codecs.framing: the v2 record batches it builds parse, record by record, with kafka-python's reader."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from transcoder.codecs import ATTRIBUTE_ID, CODECS, encode_batch


def parse(raw: bytes):
    batch = MemoryRecords(raw).next_batch()
    assert batch is not None and batch.validate_crc()
    return batch, list(batch)


RECORDS = [
    (b"k1", b"value one", (("h", b"1"), ("h", b"2"), ("empty", None)), 1_700_000_000_000),
    (None, b"", (), 1_700_000_000_005),
    (b"", None, (), 1_700_000_000_003),  # a tombstone, earlier than the one before
    (b"k4", b"x" * 5000, (("trace", b"abc"),), 1_700_000_000_010),
]


@pytest.mark.parametrize("codec,level", [("none", None), ("zstd", 3), ("zstd", 19), ("zstd", 22), ("gzip", 9),
                                         ("gzip", 1), ("lz4", None), ("lz4", 9), ("snappy", None)])
def test_batches_round_trip_through_kafkas_reader(codec, level):
    raw = encode_batch(RECORDS, codec=codec, level=level)
    batch, records = parse(raw)
    assert batch.compression_type == ATTRIBUTE_ID[codec]
    assert batch.base_offset == 0 and batch.last_offset == len(RECORDS) - 1
    assert [(r.key, r.value, list(r.headers), r.timestamp, r.offset) for r in records] == [
        (k, v, list(h), ts, i) for i, (k, v, h, ts) in enumerate(RECORDS)]


def test_higher_zstd_levels_compress_repetitive_logs_at_least_as_well():
    logs = [(None, f'10.0.0.{i % 50} - - "GET /api/items/{i % 300} HTTP/1.1" 200 {i % 9000}'.encode(), (),
             1_700_000_000_000 + i) for i in range(3000)]
    sizes = {lvl: len(encode_batch(logs, codec="zstd", level=lvl)) for lvl in (1, 12, 19)}
    assert sizes[19] <= sizes[12] <= sizes[1] < len(encode_batch(logs))


def test_bad_batches_are_refused():
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])
    with pytest.raises(ValueError, match="zstd level 23 is outside -131072..22"):  # zstd's fast levels are negative
        encode_batch(RECORDS, codec="zstd", level=23)
    with pytest.raises(ValueError, match="zstd level -131073 is outside -131072..22"):
        encode_batch(RECORDS, codec="zstd", level=-131073)
    with pytest.raises(ValueError, match="unknown codec 'brotli'"):
        encode_batch(RECORDS, codec="brotli")  # type: ignore[arg-type]


def test_lz4_batches_are_frames_of_independent_64k_blocks_without_size_or_checksum():
    from transcoder.codecs import compress

    frame = compress("lz4", b"GET /index.html 200\n" * 20000)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # the LZ4 frame magic
    flg, bd = frame[4], frame[5]
    assert flg & 0x20 and not flg & 0x08 and not flg & 0x04  # independent blocks; no content size, no checksum
    assert bd == 0x40  # 64 KiB blocks, as librdkafka and Kafka's Java client write them


RECORD = st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=200)),
                   st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))),
                            max_size=3).map(tuple),
                   st.integers(min_value=0, max_value=2**41))


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(RECORD, min_size=1, max_size=20), st.sampled_from(CODECS))
def test_any_records_round_trip(records, codec):
    _, parsed = parse(encode_batch(records, codec=codec))
    assert [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in parsed] == [
        (k, v, list(h), ts) for k, v, h, ts in records]


# ------------------------------------------------------------------ the compiled framing (native/)
LOGS = [(f"host-{i % 17}".encode(), f'10.0.{i % 256}.{i % 97} - - [22/Nov/2026:10:{i % 60:02d}:00 +0000] "GET '
         f'/api/v1/items/{i % 311} HTTP/1.1" 200 {(i * 7919) % 9999} "-" "curl/8.{i % 9}"'.encode(),
         (("trace", f"{i:08x}".encode()),) if i % 3 == 0 else (), 1_700_000_000_000 + i) for i in range(4000)]


@pytest.mark.parametrize("codec,level", [("none", None), ("gzip", 6), ("snappy", None), ("lz4", None), ("lz4", 9),
                                         ("zstd", 3), ("zstd", 19)])
def test_batches_encoded_together_in_parallel_equal_batches_encoded_one_by_one(codec, level):
    from transcoder.codecs import encode_batches

    jobs = [(LOGS[i:i + 500], 4242, 3, i) for i in range(0, len(LOGS), 500)]
    together = encode_batches(jobs, codec=codec, level=level)
    assert together == [encode_batch(r, codec=codec, level=level, producer_id=pid, producer_epoch=epoch,
                                     base_sequence=seq) for r, pid, epoch, seq in jobs]
    for raw, (records, _, _, seq) in zip(together, jobs, strict=True):
        batch, parsed = parse(raw)
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, seq)
        assert [(r.key, r.value, list(r.headers), r.timestamp) for r in parsed] == [
            (k, v, list(h), ts) for k, v, h, ts in records]


@pytest.mark.parametrize("level", [1, 6, 9])
def test_gzip_batches_are_no_larger_than_zlibs_at_the_same_level(level):
    """transcoder's gzip (libdeflate) against the zlib librdkafka and Java use, on the same records section."""
    import zlib

    from transcoder.codecs import BATCH_OVERHEAD, records_section

    ours = len(encode_batch(LOGS, codec="gzip", level=level)) - BATCH_OVERHEAD
    z = zlib.compressobj(level, zlib.DEFLATED, 31)  # a gzip member, as librdkafka writes it
    theirs = len(z.compress(records_section(LOGS)) + z.flush())
    print(f"gzip-{level}: libdeflate {ours:,} B, zlib {theirs:,} B")
    assert ours <= theirs


def test_records_of_the_wrong_shape_are_refused_with_a_line_saying_what_a_record_is():
    with pytest.raises(TypeError, match=r"a record is a tuple \(key, value, headers, timestamp_ms"):
        encode_batch([(b"k", b"v")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="a record's value must be bytes or None, not str"):
        encode_batch([(b"k", "v", (), 1)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="a header is a tuple"):
        encode_batch([(b"k", b"v", ((b"name", b"v"),), 1)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="gzip level 10 is outside 0..9"):
        encode_batch(LOGS[:1], codec="gzip", level=10)
