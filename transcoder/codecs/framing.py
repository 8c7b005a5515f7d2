"""Pure: Kafka-compatible compression and v2 record-batch framing (KIP-98), for batches transcoder builds itself."""

from __future__ import annotations

from collections.abc import Callable

import transcoder_native

from transcoder.codecs.names import CODECS, Codec

# ---------------------------------------------------------------- v2 record batches (KIP-98 format)
# Building batches here lets transcoder compress at levels librdkafka refuses (zstd 13-22); the framing
# follows Kafka's DefaultRecordBatch, compiled (native/: Rust, PyO3), where batches are compressed in parallel.

Headers = tuple[tuple[str, bytes | None], ...]
#: key, value, headers, timestamp (ms); items after the fourth are ignored
RecordTuple = tuple[bytes | None, bytes | None, Headers, int]


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Headers) -> bytes:
    """One v2 record (its length varint included), as it sits in a batch's records section."""
    out: bytes = transcoder_native.encode_record(offset_delta, timestamp_delta, key, value, headers)
    return out


#: Bytes of a v2 batch outside its records section: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
#: attributes, lastOffsetDelta, base and max timestamps, producerId, producerEpoch, baseSequence, record count.
BATCH_OVERHEAD: int = transcoder_native.BATCH_OVERHEAD


def records_section(records: list[RecordTuple]) -> bytes:
    """A batch's records, framed as v2 records (offset and timestamp deltas from the first), uncompressed."""
    out: bytes = transcoder_native.records_section(records)
    return out


def compress(codec: Codec, data: bytes, level: int | None = None, *, gzip_as_zlib: bool = False) -> bytes:
    """Compress a batch's records section as transcoder's lanes write it (native/), which every Kafka client reads.

    zstd: one frame (libzstd). gzip: one member (libdeflate, Kafka's level L at libdeflate's L + 1 for 1-8).
    lz4: one LZ4 frame of independent 64 KiB blocks, no content size or checksum (librdkafka's LZ4F preferences;
    Kafka's Java client writes the same frame shape). snappy: raw snappy, as librdkafka writes it (the Java
    client writes xerial's framing, and reads raw too). `gzip_as_zlib`: gzip as zlib writes it, as librdkafka
    and the Java client do (exactly-once lanes, MirrorMaker 2). ValueError for an unknown codec or level.
    """
    if codec == "gzip" and gzip_as_zlib:
        import gzip

        return gzip.compress(data, compresslevel=6 if level is None else level)
    out: bytes = transcoder_native.compress(codec, data, level)
    return out


def _unzstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def _gunzip(data: bytes) -> bytes:
    import gzip

    return gzip.decompress(data)


def _unlz4(data: bytes) -> bytes:
    import lz4.frame

    out: bytes = lz4.frame.decompress(data)
    return out


def _unsnappy(data: bytes) -> bytes:
    import snappy

    return bytes(snappy.uncompress(data))


#: Codecs decompressed by the library a Python consumer reads them with (evaluate times these); any other codec of
#: the table by native/.
_CONSUMER_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "zstd": _unzstd, "gzip": _gunzip, "lz4": _unlz4, "snappy": _unsnappy}


def decompress(codec: Codec, data: bytes) -> bytes:
    """A records section back from what `compress` (or any Kafka client) wrote for `codec`."""
    if codec == "none":
        return data
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}")
    consumer = _CONSUMER_DECOMPRESS.get(codec)
    if consumer is not None:
        return consumer(data)
    out: bytes = transcoder_native.decompress(codec, data)
    return out


def encode_batch(records: list[RecordTuple], *, codec: Codec = "none", level: int | None = None,
                 base_offset: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, transactional: bool = False) -> bytes:
    """One v2 record batch of (key, value, headers, timestamp ms) records, CreateTime; `transactional`: written in
    a transaction (attribute bit 0x10, the CRC-32C computed after it).

    Zstd 1-22, gzip 0-9 (libdeflate) and lz4 0-12 are accepted; offsets are relative (the broker assigns the
    real ones). ValueError for an empty batch, an unknown codec or a level out of range.
    """
    out: bytes = transcoder_native.encode_batch(records, codec=codec, level=level, base_offset=base_offset,
                                                producer_id=producer_id, producer_epoch=producer_epoch,
                                                base_sequence=base_sequence, transactional=transactional)
    return out


def encode_batches(jobs: list[tuple[list[RecordTuple], int, int, int]], *, codec: Codec = "none",
                   level: int | None = None, transactional: bool = False) -> list[bytes]:
    """Many batches at once, compressed in parallel on all cores (the GIL released): each job is (records,
    producer_id, producer_epoch, base_sequence); `transactional` as `encode_batch`, for all of them. The batches
    come back in the order of `jobs`."""
    out: list[bytes] = transcoder_native.encode_batches(jobs, codec=codec, level=level, transactional=transactional)
    return out
