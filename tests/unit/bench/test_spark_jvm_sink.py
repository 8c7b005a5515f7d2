"""bench.spark_jvm_sink (pure part): the timestamp header, the sink's producer options, the codec list, the
record-by-record comparison and the seeded edge records. No broker, no Spark, no JDK here."""

from __future__ import annotations

import itertools

import pytest

from bench.spark_jvm_sink import (
    CREATE_TIME,
    INTERCEPTOR_CLASS,
    LOG_APPEND_TIME,
    TIMESTAMP_HEADER,
    Rec,
    decode_timestamp,
    diff_partition,
    edge_records,
    encode_timestamp,
    master_slug,
    parse_codecs,
    producer_options,
    timestamp_header_sql,
)
from transcoder.dev import datagen


@pytest.mark.parametrize("ms", [0, 1, 1_767_225_600_123, 2**63 - 1])
def test_timestamp_header_is_8_big_endian_bytes_and_reads_back(ms):
    value = encode_timestamp(ms)
    assert len(value) == 8 and int.from_bytes(value, "big", signed=True) == ms
    assert decode_timestamp(value) == ms


def test_a_negative_timestamp_leaves_the_time_to_the_producer_and_a_malformed_header_is_refused():
    assert decode_timestamp(encode_timestamp(-1)) is None
    for bad in (None, b"", b"\0" * 7, b"\0" * 9):
        with pytest.raises(ValueError, match="8 bytes"):
            decode_timestamp(bad)


@pytest.mark.parametrize("ms", [0, 5, 1_767_225_600_123, -1, -(2**63), 2**63 - 1])
def test_the_sql_route_through_hex_gives_the_same_bytes(ms):
    # what unhex(lpad(hex(ms), 16, '0')) computes: Spark's hex() of a bigint is Long.toHexString, upper case,
    # no leading zeros, two's complement when negative
    spark_hex = format(ms & 0xFFFF_FFFF_FFFF_FFFF, "X")
    assert bytes.fromhex(spark_hex.rjust(16, "0")) == encode_timestamp(ms)
    sql = timestamp_header_sql()
    assert "lpad(hex(unix_millis(timestamp)), 16, '0')" in sql and f"'{TIMESTAMP_HEADER}'" in sql
    assert sql.startswith("concat(coalesce(headers, array()), ") and sql.endswith(" AS headers")


def test_codecs_with_and_without_levels():
    assert parse_codecs("none, lz4,zstd:6,gzip:-1") == [("none", None), ("lz4", None), ("zstd", 6), ("gzip", -1)]
    for bad, why in (("brotli", "unknown codec"), ("snappy:3", "no compression levels"), ("zstd:x", "integer"),
                     (" , ", "no codec")):
        with pytest.raises(ValueError, match=why):
            parse_codecs(bad)


def test_producer_options_name_the_codecs_own_level_and_the_interceptor_only_when_asked():
    opts = producer_options("b:9092", "dst", "zstd", 6, batch_bytes=1_048_576, linger_ms=500, interceptor=True)
    assert opts == {"topic": "dst", "kafka.bootstrap.servers": "b:9092", "kafka.compression.type": "zstd",
                    "kafka.batch.size": "1048576", "kafka.linger.ms": "500", "kafka.enable.idempotence": "true",
                    "kafka.acks": "all", "kafka.compression.zstd.level": "6",
                    "kafka.interceptor.classes": INTERCEPTOR_CLASS}
    plain = producer_options("b:9092", "dst", "lz4", None, batch_bytes=16384, linger_ms=5, interceptor=False)
    assert "kafka.interceptor.classes" not in plain and not any(".level" in k for k in plain)
    with pytest.raises(ValueError, match="no compression levels"):
        producer_options("b:9092", "dst", "none", 1, batch_bytes=1, linger_ms=0, interceptor=True)


def _rec(offset, ts=1_000, ts_type=CREATE_TIME, key=b"k", value=b"v", headers=(("a", b"1"), ("a", b"2"), ("n", None))):
    return Rec(offset, key, value, list(headers), ts, ts_type)


def test_an_exact_copy_is_equal_everywhere_and_log_append_time_is_copied_as_create_time():
    src = [_rec(0), _rec(1, ts_type=LOG_APPEND_TIME), _rec(2, key=None, value=None, headers=())]
    dst = [_rec(10), _rec(11), _rec(12, key=None, value=None, headers=())]  # offsets may differ
    f = diff_partition(0, src, dst)
    assert (f.n_equal, f.n_total, f.first_difference, f.exact) == (3, 3, None, True)


def test_header_order_duplicates_and_nulls_count():
    src = [_rec(0)] * 4
    dst = [_rec(0, headers=(("a", b"2"), ("a", b"1"), ("n", None))),  # order
           _rec(1, headers=(("a", b"1"), ("n", None))),  # a duplicate lost
           _rec(2, headers=(("a", b"1"), ("a", b"2"), ("n", b""))),  # null became empty
           _rec(3)]
    f = diff_partition(1, src, dst)
    assert (f.n_equal, f.n_total) == (1, 4) and f.mismatches == {"headers": 3}
    assert f.first_difference.startswith("partition 1, source offset 0 / copy offset 0: headers ")


def test_wall_clock_timestamps_and_the_timestamp_type_are_differences_named_in_the_first_one():
    f = diff_partition(2, [_rec(0, ts=1_000), _rec(1)], [_rec(0, ts=9_999), _rec(1, ts_type=LOG_APPEND_TIME)])
    assert (f.n_equal, f.n_total) == (0, 2) and f.mismatches == {"timestamp": 1, "timestamp type": 1}
    assert f.first_difference == "partition 2, source offset 0 / copy offset 0: timestamp 1000 expected, 9999 copied"
    assert "0/2 equal (differing: " in f.summary()


def test_missing_and_extra_records_are_not_equal():
    short = diff_partition(0, [_rec(0), _rec(1)], [_rec(0)])
    assert (short.n_equal, short.n_total, dict(short.mismatches)) == (1, 2, {"missing": 1})
    assert "source offset 1 has no copy" in short.first_difference
    long = diff_partition(0, [_rec(0)], [_rec(0), _rec(1)])
    assert (long.n_equal, long.n_total, dict(long.mismatches)) == (1, 2, {"extra": 1})


def test_edge_records_are_mixed_in_at_fixed_places_and_leave_the_rest_alone():
    def gen():
        return datagen.generate("nginx", seed=0, keys=True, headers=True, start_ms=1_767_225_600_000)

    plain = list(itertools.islice(gen(), 2000))
    mixed = list(itertools.islice(edge_records(gen()), 2000))
    changed = [i for i, (a, b) in enumerate(zip(plain, mixed, strict=False)) if a != b]
    assert changed == [250, 500, 750, 999, 1250, 1500, 1750, 1999]
    assert mixed[250].value is None and mixed[500].key == b"" and mixed[750].headers[-1] == ("trace", None)
    name, value = mixed[999].headers[-1]
    assert name == TIMESTAMP_HEADER and decode_timestamp(value) == plain[999].timestamp_ms - 86_400_000
    assert mixed == list(itertools.islice(edge_records(gen()), 2000))  # deterministic


def test_master_slug():
    assert [master_slug(m) for m in ("local[2]", "local[*]", "spark://h:7077", "yarn")] == [
        "local2", "local", "h7077", "yarn"]
