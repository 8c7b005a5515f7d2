"""Pure: a partition's records cut into batches as transcoder's producers cut them, and each batch framed
and compressed exactly as Kafka stores it (codecs.encode_batch, the framing the service uses for zstd
13-22), so the sizes evaluate reports are the sizes a broker would hold.

Cutting uses the service's own accumulator (pipeline.batching): a batch closes when the next record
would take its estimated size (records plus librdkafka's per-record overhead) past `max_bytes`, or at
`max_records`. Linger does not apply: a sample is all there at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from transcoder.codecs import encode_batch
from transcoder.evaluate.grid import Setting
from transcoder.pipeline.batching import Accumulator

#: A record as evaluate holds it: key, value, headers, timestamp (epoch ms) — encode_batch's record shape.
Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def record_size(r: Record) -> int:
    """Key + value + header names and values: the bytes the service counts for a record."""
    key, value, headers, _ = r
    return (len(key) if key else 0) + (len(value) if value else 0) + sum(
        len(k) + (len(v) if v is not None else 0) for k, v in headers)


def cut(records: Iterable[Record], *, max_bytes: int, max_records: int = 100_000) -> list[list[Record]]:
    """One partition's records (in offset order) as the batches a producer at these settings builds."""
    acc: Accumulator[Record] = Accumulator(max_bytes=max_bytes, max_records=max_records, linger_s=math.inf)
    tp = ("sample", 0)
    batches: list[list[Record]] = []
    for r in records:
        acc.add(tp, r, record_size(r), 0.0)
        batches.extend(acc.take(0.0).values())
    while True:
        rest = acc.take(0.0, flush=True).get(tp)
        if not rest:
            return batches
        batches.append(rest)


@dataclass(frozen=True)
class Sizes:
    """What one setting stores for a partition's batches."""

    batches: int
    records: int
    record_bytes: int  # key + value + headers
    uncompressed_bytes: int  # the batches framed without compression (what `none` stores)
    compressed_bytes: int  # the batches framed with the setting's codec and level (what the broker stores)

    @property
    def ratio(self) -> float:
        """Uncompressed batch bytes over compressed: the destination's saving at this setting."""
        return self.uncompressed_bytes / self.compressed_bytes if self.compressed_bytes else math.nan


def sizes(batches: Sequence[list[Record]], setting: Setting) -> Sizes:
    """Frame and compress every batch at `setting`; their sizes."""
    plain = packed = n = nbytes = 0
    for batch in batches:
        plain += len(encode_batch(batch))
        packed += len(encode_batch(batch, codec=setting.codec, level=setting.level))
        n += len(batch)
        nbytes += sum(record_size(r) for r in batch)
    return Sizes(batches=len(batches), records=n, record_bytes=nbytes, uncompressed_bytes=plain,
                 compressed_bytes=packed)
