"""Pure: a partition's records cut into batches as transcoder's producers cut them (evaluate.measure then
frames and compresses each batch exactly as Kafka stores it, with the framing the service uses for zstd
13-22, so the sizes evaluate reports are the sizes a broker would hold).

Cutting uses the service's own accumulator (pipeline.batching): a batch closes when the next record
would take its estimated size (records plus librdkafka's per-record overhead) past `max_bytes`, or at
`max_records`. Linger does not apply: a sample is all there at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

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
