"""Pure: Kafka-compatible compression and v2 record-batch framing (KIP-98), for batches transcoder builds itself."""

from __future__ import annotations

import struct

from crc32c import crc32c

from transcoder.codecs.names import ATTRIBUTE_ID, Codec

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


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    """One v2 record (its length varint included), as it sits in a batch's records section."""
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


#: Bytes of a v2 batch outside its records section: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
#: attributes, lastOffsetDelta, base and max timestamps, producerId, producerEpoch, baseSequence, record count.
BATCH_OVERHEAD = 61


def records_section(records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]
                    ) -> bytes:
    """A batch's records, framed as v2 records (offset and timestamp deltas from the first), uncompressed."""
    base_ts = records[0][3]
    return b"".join(encode_record(i, ts - base_ts, key, value, headers)
                    for i, (key, value, headers, ts) in enumerate(records))


def compress(codec: Codec, data: bytes, level: int | None = None) -> bytes:
    """Compress a batch's records section as librdkafka writes it, which every Kafka client reads.

    zstd: one frame. gzip: one member. lz4: one LZ4 frame of independent 64 KiB blocks, no content size
    or checksum (librdkafka's LZ4F preferences; Kafka's Java client writes the same frame shape). snappy:
    raw snappy, as librdkafka writes it (the Java client writes xerial's framing, and reads raw too).
    """
    if codec == "none":
        return data
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    if codec == "gzip":
        import gzip

        return gzip.compress(data, compresslevel=6 if level is None else level)
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.compress(data, compression_level=0 if level is None else level,
                                  block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                  content_checksum=False, store_size=False)
    if codec == "snappy":
        import snappy

        return bytes(snappy.compress(data))
    raise ValueError(f"unknown codec {codec!r}")


def decompress(codec: Codec, data: bytes) -> bytes:
    """A records section back from what `compress` (or any Kafka client) wrote for `codec`."""
    if codec == "none":
        return data
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if codec == "gzip":
        import gzip

        return gzip.decompress(data)
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    if codec == "snappy":
        import snappy

        return bytes(snappy.uncompress(data))
    raise ValueError(f"unknown codec {codec!r}")


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
    section = records_section(records)
    payload = compress(codec, section, level)
    attributes = ATTRIBUTE_ID[codec]
    after_crc = (
        struct.pack(">hiqqqhii", attributes, len(records) - 1, base_ts, max_ts, producer_id, producer_epoch,
                    base_sequence, len(records))
        + payload
    )
    crc = crc32c(after_crc)  # Castagnoli CRC, as Kafka's batches use
    head = struct.pack(">ibI", -1, 2, crc)  # partitionLeaderEpoch (set by the broker), magic, crc
    batch_length = len(head) + len(after_crc)
    return struct.pack(">qi", base_offset, batch_length) + head + after_crc
