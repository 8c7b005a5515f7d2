"""transcoder.codecs.names: codec names, Kafka attribute ids, level bounds and when a broker recompresses."""

from __future__ import annotations

from typing import get_args

import pytest
import transcoder_native

from transcoder.codecs import (
    ATTRIBUTE_ID,
    BUILT_HERE,
    CODEC_OF_ID,
    CODECS,
    LEVELS,
    LIBRDKAFKA_MAX_LEVEL,
    TABLE,
    ZSTD_MIN_PRODUCE_VERSION,
    Codec,
    broker_recompresses,
    built_here,
    check_level,
    compress,
    decompress,
    is_codec,
)


def test_codecs_order():
    assert CODECS == ("none", "gzip", "snappy", "lz4", "zstd")


def test_the_codec_literal_names_the_native_tables_codecs():
    """A codec added to native/'s table (or to the Literal) alone fails here: the type checker's Codec and the
    codecs transcoder produces are the same names, in the table's order."""
    assert get_args(Codec) == tuple(row["name"] for row in transcoder_native.codec_table()) == CODECS
    assert all(is_codec(c) for c in CODECS) and not is_codec("brotli") and not is_codec("ZSTD")


def test_the_table_rows():
    assert {c: (r.default_level, r.fast_min) for c, r in TABLE.items()} == {
        "none": (None, None), "gzip": (6, None), "snappy": (None, None), "lz4": (0, None), "zstd": (3, -131072)}
    assert [r.evaluated for r in TABLE.values()] == [
        (None,), tuple(range(1, 10)), (None,), (None, 3, 6, 9, 12), tuple(range(1, 23))]
    assert CODEC_OF_ID == {i: c for c, i in ATTRIBUTE_ID.items()}
    assert LIBRDKAFKA_MAX_LEVEL == 12
    assert BUILT_HERE == {"zstd": (13, 22)}


@pytest.mark.parametrize("codec", CODECS)
def test_native_decompress_reads_what_every_codec_compresses(codec):
    """native/'s decompress (framing.decompress's fallback for a codec no Python consumer library reads) agrees
    with the consumers' libraries."""
    section = b"GET /index.html 200 " * 500
    packed = compress(codec, section)
    assert transcoder_native.decompress(codec, packed) == decompress(codec, packed) == section


def test_attribute_ids_are_kafkas():
    assert ATTRIBUTE_ID == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert list(ATTRIBUTE_ID) == list(CODECS)


def test_levels_table():
    assert LEVELS == {"none": None, "gzip": (0, 9), "snappy": None, "lz4": (0, 12), "zstd": (1, 22)}


@pytest.mark.parametrize("codec,level,expected", [
    ("zstd", 13, True), ("zstd", 22, True), ("zstd", 12, False), ("zstd", None, False), ("zstd", 1, False),
    ("gzip", 9, False), ("lz4", 12, False), ("none", None, False),
])
def test_only_zstd_above_librdkafkas_cap_is_built_here(codec, level, expected):
    assert built_here(codec, level) is expected


def test_zstd_needs_produce_v7():
    assert ZSTD_MIN_PRODUCE_VERSION == 7


@pytest.mark.parametrize("codec", CODECS)
def test_no_level_is_always_fine(codec):
    assert check_level(codec, None) is None


@pytest.mark.parametrize("codec,level", [
    ("gzip", 0), ("gzip", 5), ("gzip", 9), ("lz4", 0), ("lz4", 12), ("zstd", 1), ("zstd", 3), ("zstd", 12),
    ("zstd", 13), ("zstd", 19), ("zstd", 22),
])
def test_levels_in_bounds(codec, level):
    assert check_level(codec, level) is None


@pytest.mark.parametrize("codec,level,bounds", [
    ("gzip", -1, "0..9"), ("gzip", 10, "0..9"), ("lz4", -1, "0..12"), ("lz4", 13, "0..12"),
    ("zstd", 0, "1..22"), ("zstd", 23, "1..22"),
])
def test_levels_out_of_bounds(codec, level, bounds):
    with pytest.raises(ValueError) as info:
        check_level(codec, level)
    assert str(info.value) == f"level {level} is outside {bounds}, the range of {codec} levels"


@pytest.mark.parametrize("codec", ["none", "snappy"])
@pytest.mark.parametrize("level", [0, 1, -1])
def test_codecs_without_levels(codec, level):
    with pytest.raises(ValueError) as info:
        check_level(codec, level)
    assert str(info.value) == f"codec {codec} has no compression levels; remove `level`"


F, T = False, True
#: topic compression.type -> does the broker recompress a batch produced with (none, gzip, snappy, lz4, zstd)?
RECOMPRESSES = {
    "producer":     (F, F, F, F, F),
    "uncompressed": (F, T, T, T, T),
    "gzip":         (T, F, T, T, T),
    "snappy":       (T, T, F, T, T),
    "lz4":          (T, T, T, F, T),
    "zstd":         (T, T, T, T, F),
}


@pytest.mark.parametrize("topic_type,produced,expected", [
    (t, c, row[i]) for t, row in RECOMPRESSES.items() for i, c in enumerate(CODECS)
])
def test_broker_recompresses_truth_table(topic_type, produced, expected):
    assert broker_recompresses(topic_type, produced) is expected


@pytest.mark.parametrize("topic_type,produced,expected", [
    (" ZSTD ", "zstd", False), ("Producer", "gzip", False), ("PRODUCER\n", "lz4", False),
    ("UNCOMPRESSED", "none", False), (" Uncompressed", "snappy", True), ("Gzip", "zstd", True), ("LZ4\t", "lz4", False),
])
def test_broker_recompresses_ignores_case_and_space(topic_type, produced, expected):
    assert broker_recompresses(topic_type, produced) is expected


@pytest.mark.parametrize("stored,produced,topic_type,expected", [
    (4, "zstd", "producer", False),   # stored as produced
    (0, "zstd", "producer", False),   # librdkafka sent an incompressible batch uncompressed
    (1, "zstd", "producer", True),    # gzip where zstd was produced: recompressed
    (1, "zstd", "gzip", True),
    (0, "lz4", "uncompressed", True),  # the broker decompressed it
    (3, "lz4", "lz4", False),
    (2, "none", "producer", True),
])
def test_stored_recompressed(stored, produced, topic_type, expected):
    from transcoder.codecs import stored_recompressed

    assert stored_recompressed(stored, produced, topic_type) is expected
