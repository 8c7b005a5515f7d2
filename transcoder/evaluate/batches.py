"""Pure: a partition's records cut into batches as transcoder's producers cut them (evaluate.measure then
frames and compresses each batch exactly as Kafka stores it, with the framing the service uses for zstd
13-22, so the sizes evaluate reports are the sizes a broker would hold).

Cutting follows the service's batched lanes (native/'s Rebatcher): a batch closes when the next record, framed,
would take it past `max_bytes`, or at `max_records`. The Java producer's rule (MirrorMaker 2) is `cut_java`.
Linger does not apply: a sample is all there at once.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from transcoder.codecs import (
    BATCH_OVERHEAD,
    Codec,
    compress,
    encode_record,
    records_section,
)

#: A record as evaluate holds it: key, value, headers, timestamp (epoch ms) — encode_batch's record shape.
Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def record_size(r: Record) -> int:
    """Key + value + header names and values: the bytes the service counts for a record."""
    key, value, headers, _ = r
    return (len(key) if key else 0) + (len(value) if value else 0) + sum(
        len(k) + (len(v) if v is not None else 0) for k, v in headers)


def _encoded_len(batch: list[Record], r: Record) -> int:
    """The bytes record `r` takes as the next v2 record of `batch` (offset and timestamp deltas from its first)."""
    key, value, headers, ts = r
    return len(encode_record(len(batch), ts - batch[0][3] if batch else 0, key, value, headers))


def cut(records: Iterable[Record], *, max_bytes: int, max_records: int = 100_000) -> list[list[Record]]:
    """One partition's records (in offset order) as the batches the service's lanes build at these settings:
    the rule of native/'s Rebatcher, which a batched lane re-batches fetched records with. A record joins the
    open batch while the batch, framed (its 61-byte header and its records as v2 encodes them), stays within
    `max_bytes`, and while it has fewer than `max_records`; a batch holds at least one record."""
    batches: list[list[Record]] = []
    current: list[Record] = []
    framed = BATCH_OVERHEAD
    for r in records:
        size = _encoded_len(current, r)
        if current and (len(current) >= max_records or framed + size > max_bytes):
            batches.append(current)
            current, framed = [], BATCH_OVERHEAD
            size = _encoded_len(current, r)
        current.append(r)
        framed += size
    if current:
        batches.append(current)
    return batches


# ---------------------------------------------------------------- the Java producer's rule (MirrorMaker 2)
# Kafka's MemoryRecordsBuilder: a record fits while batch.size >= 61 + uncompressed bytes x the estimated
# compression ratio x 1.05 + the record's own (uncompressed) size; the estimate, per topic and codec, starts
# at 1.0 and after each batch moves towards what that batch achieved (CompressionRatioEstimator: up by at
# least 0.05 when a batch compressed worse, down by at most 0.005 when better). All in float32, as in Java.
JAVA_ESTIMATION_FACTOR = 1.05
JAVA_IMPROVING_STEP = 0.005
JAVA_DETERIORATE_STEP = 0.05


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def _java_estimate(current: float, observed: float) -> float:
    if observed > current:
        return max(_f32(current + _f32(JAVA_DETERIORATE_STEP)), observed)
    if observed < current:
        return max(_f32(current - _f32(JAVA_IMPROVING_STEP)), observed)
    return current


def cut_java(records: Iterable[Record], *, batch_size: int, codec: Codec, level: int | None = None,
             lag: int = 0) -> list[list[Record]]:
    """One partition's records as a Java producer (Kafka 2.1+) with batch.size = `batch_size` and this codec
    cuts them when linger never closes a batch first.

    The producer updates its estimate when its sender drains a batch, and a batch takes the estimate of the
    moment it is opened: `lag` is how many full batches wait in the accumulator, not yet drained, when the
    next one opens. 0 (the sender keeps up) is what `evaluate` reports: the fewest, largest batches."""
    if lag < 0:
        raise ValueError("lag must be at least 0")
    factor = _f32(JAVA_ESTIMATION_FACTOR)
    estimates = [1.0]  # estimates[i]: the estimate once i batches are drained
    estimate = 1.0
    batches: list[list[Record]] = []
    current: list[Record] = []
    written = 0  # uncompressed bytes of the records appended

    def close() -> None:
        nonlocal estimate
        batches.append(current)
        if codec != "none":
            section = records_section(current)
            packed = compress(codec, section, level, gzip_as_zlib=True)  # java.util.zip's gzip is zlib's
            estimates.append(_java_estimate(estimates[-1], _f32(len(packed) / len(section))))
        estimate = estimates[max(0, min(len(batches) - lag, len(estimates) - 1))]

    for r in records:
        size = _encoded_len(current, r)
        if current:
            estimated = BATCH_OVERHEAD + (written if codec == "none" else int(_f32(_f32(written * estimate) * factor)))
            if batch_size <= estimated or batch_size < estimated + size:  # isFull() or not hasRoomFor()
                close()
                current, written = [], 0
                size = _encoded_len(current, r)
        current.append(r)
        written += size
    if current:
        close()
    return batches
