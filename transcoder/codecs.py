"""Kafka's compression codecs: names, attribute ids, producer levels, and v2 record-batch framing (pure)."""

from __future__ import annotations

import struct
from typing import Literal

Codec = Literal["none", "gzip", "snappy", "lz4", "zstd"]
CODECS: tuple[Codec, ...] = ("none", "gzip", "snappy", "lz4", "zstd")

#: The low three bits of a v2 record batch's attributes (Kafka's CompressionType ids).
ATTRIBUTE_ID: dict[Codec, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: Levels transcoder accepts for each codec. None: the codec has no levels.
LEVELS: dict[Codec, tuple[int, int] | None] = {
    "none": None,
    "gzip": (0, 9),
    "snappy": None,
    "lz4": (0, 12),
    "zstd": (1, 22),
}

#: librdkafka caps `compression.level` at 12 for every codec: zstd 13..22 batches are built by
#: transcoder itself (codecs.encode_batch, sent by batchproducer.BatchProducer).
LIBRDKAFKA_MAX_LEVEL = 12


def built_here(codec: Codec, level: int | None) -> bool:
    """True when batches of this codec and level are built by transcoder, not librdkafka."""
    return codec == "zstd" and level is not None and level > LIBRDKAFKA_MAX_LEVEL

#: Produce request version that first allowed zstd (Kafka 2.1, KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7


def check_level(codec: Codec, level: int | None) -> None:
    """Raise ValueError if `level` is not one transcoder can produce for `codec`."""
    if level is None:
        return
    bounds = LEVELS[codec]
    if bounds is None:
        raise ValueError(f"codec {codec} has no compression levels; remove `level`")
    lo, hi = bounds
    if not lo <= level <= hi:
        raise ValueError(f"level {level} is outside {lo}..{hi}, the range of {codec} levels")


def broker_recompresses(topic_compression_type: str, produced: Codec) -> bool:
    """True when a topic's compression.type makes the broker recompress batches produced with `produced`.

    The broker keeps a batch as produced only when the topic says `producer`, or names the same
    codec (for `uncompressed`, no codec).
    """
    t = topic_compression_type.strip().lower()
    if t == "producer":
        return False
    if t == "uncompressed":
        return produced != "none"
    return t != produced


CODEC_OF_ID: dict[int, Codec] = {v: k for k, v in ATTRIBUTE_ID.items()}


def stored_recompressed(stored_id: int, produced: Codec, topic_compression_type: str) -> bool:
    """True when a stored batch's codec shows the broker recompressed what was produced.

    A batch stored uncompressed on a `producer` topic is librdkafka's choice (it sends a batch
    uncompressed when compressing would not shrink it), not the broker's.
    """
    stored = CODEC_OF_ID.get(stored_id)
    if stored == produced:
        return False
    if stored == "none" and topic_compression_type.strip().lower() == "producer":
        return False
    return True


# ---------------------------------------------------------------- v2 record batches (KIP-98 format)
# Building batches here lets transcoder compress at levels librdkafka refuses (zstd 13-22); the
# framing follows Kafka's DefaultRecordBatch.

_TIMESTAMP_TYPE_BIT = 0x08


def _zigzag_varint(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                   headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused, always 0
    body += _zigzag_varint(timestamp_delta)
    body += _zigzag_varint(offset_delta)
    for blob in (key, value):
        if blob is None:
            body += _zigzag_varint(-1)
        else:
            body += _zigzag_varint(len(blob)) + blob
    body += _zigzag_varint(len(headers))
    for name, hvalue in headers:
        raw = name.encode()
        body += _zigzag_varint(len(raw)) + raw
        body += _zigzag_varint(-1) if hvalue is None else _zigzag_varint(len(hvalue)) + hvalue
    return _zigzag_varint(len(body)) + bytes(body)


def compress(codec: Codec, data: bytes, level: int | None = None) -> bytes:
    """Compress a batch's records section as Kafka expects it (zstd: one frame; gzip: one member)."""
    if codec == "none":
        return data
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    if codec == "gzip":
        import gzip

        return gzip.compress(data, compresslevel=6 if level is None else level)
    raise ValueError(f"building {codec} batches is not supported here; librdkafka produces them")


def encode_batch(records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]], *,
                 codec: Codec = "none", level: int | None = None, base_offset: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One v2 record batch of (key, value, headers, timestamp ms) records, CreateTime, not transactional.

    Zstd levels above 12 and gzip 0-9 are accepted (zstandard and zlib take them); offsets are
    relative (the broker assigns the real ones).
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    if codec == "zstd" and level is not None and not 1 <= level <= 22:
        raise ValueError(f"zstd level {level} is outside 1..22")
    base_ts = records[0][3]
    max_ts = max(r[3] for r in records)
    section = b"".join(_encode_record(i, ts - base_ts, key, value, headers)
                       for i, (key, value, headers, ts) in enumerate(records))
    payload = compress(codec, section, level)
    attributes = ATTRIBUTE_ID[codec]
    after_crc = (
        struct.pack(">hiqqqhii", attributes, len(records) - 1, base_ts, max_ts, producer_id, producer_epoch,
                    base_sequence, len(records))
        + payload
    )
    from kafka.record.util import calc_crc32c  # Castagnoli CRC, as Kafka's batches use

    crc = calc_crc32c(after_crc)
    head = struct.pack(">ibI", -1, 2, crc)  # partitionLeaderEpoch (set by the broker), magic, crc
    batch_length = len(head) + len(after_crc)
    return struct.pack(">qi", base_offset, batch_length) + head + after_crc
