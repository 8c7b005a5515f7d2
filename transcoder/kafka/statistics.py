"""Pure: librdkafka statistics (the JSON of `stats_cb`) -> the figures transcoder exports.

Producer statistics give, per topic, windowed histograms of the produced batches: `batchsize`
(bytes on the wire, i.e. compressed) and `batchcnt` (records per batch); each emission covers
the interval since the previous one, so their `sum` and `cnt` add up to running totals.
Partition `txbytes` is cumulative: the records' own bytes handed to the broker, uncompressed.
Consumer statistics give, per partition, `consumer_lag` = high watermark - committed offset.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: librdkafka window-histogram percentiles, in the order they bound the distribution
_PERCENTILES = (("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("p99_99", 0.9999))


@dataclass(frozen=True)
class Window:
    """One interval of one histogram: how many values, their sum, and the percentile curve."""

    count: int
    total: float
    minimum: float
    maximum: float
    percentiles: tuple[tuple[float, float], ...]  # (fraction, value), ascending

    @classmethod
    def of(cls, h: Mapping[str, Any]) -> Window:
        return cls(count=int(h.get("cnt", 0)), total=float(h.get("sum", 0)), minimum=float(h.get("min", 0)),
                   maximum=float(h.get("max", 0)),
                   percentiles=tuple((f, float(h[k])) for k, f in _PERCENTILES if k in h))

    @classmethod
    def from_values(cls, values: Sequence[float]) -> Window:
        """The window of values known one by one (batches transcoder built itself): exact percentiles."""
        if not values:
            return cls(count=0, total=0.0, minimum=0.0, maximum=0.0, percentiles=())
        ordered = sorted(values)
        n = len(ordered)
        return cls(count=n, total=float(sum(ordered)), minimum=float(ordered[0]), maximum=float(ordered[-1]),
                   percentiles=tuple((f, float(ordered[min(n - 1, max(0, math.ceil(f * n) - 1))]))
                                     for _, f in _PERCENTILES))

    def cumulative_counts(self, bounds: Sequence[float]) -> list[float]:
        """Estimated number of values <= each bound (for a Prometheus histogram's buckets).

        Exact at min, max and librdkafka's percentiles; linear between them.
        """
        if self.count <= 0:
            return [0.0] * len(bounds)
        curve = [(self.minimum, 0.0), *((v, f) for f, v in self.percentiles), (self.maximum, 1.0)]
        # make the curve monotone in value (percentiles can repeat or, from rounding, dip)
        points: list[tuple[float, float]] = []
        for v, f in curve:
            if points and v <= points[-1][0]:
                points[-1] = (points[-1][0], max(points[-1][1], f))
            else:
                points.append((v, f))
        values = [v for v, _ in points]
        out = []
        for b in bounds:
            if b < values[0]:
                frac = 0.0
            elif b >= values[-1]:
                frac = 1.0
            else:
                i = bisect_left(values, b)
                if values[i] == b:
                    frac = points[i][1]
                else:
                    (v0, f0), (v1, f1) = points[i - 1], points[i]
                    frac = f0 + (f1 - f0) * (b - v0) / (v1 - v0)
            out.append(frac * self.count)
        return out


@dataclass(frozen=True)
class TopicProduce:
    """What one statistics emission says of one destination topic."""

    batch_bytes: Window  # compressed bytes per produced batch, this interval
    batch_records: Window  # records per produced batch, this interval
    record_bytes_total: int  # uncompressed record bytes sent so far (cumulative)
    records_total: int  # records sent so far (cumulative)


def producer_topics(stats: Mapping[str, Any]) -> dict[str, TopicProduce]:
    out = {}
    for name, t in stats.get("topics", {}).items():
        parts = [p for k, p in t.get("partitions", {}).items() if k != "-1"]  # -1: the unassigned queue
        out[name] = TopicProduce(
            batch_bytes=Window.of(t.get("batchsize", {})),
            batch_records=Window.of(t.get("batchcnt", {})),
            record_bytes_total=sum(int(p.get("txbytes", 0)) for p in parts),
            records_total=sum(int(p.get("txmsgs", 0)) for p in parts),
        )
    return out


def consumer_lag(stats: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    """Records between the committed offset and the high watermark, per assigned partition.

    Partitions librdkafka has no figure for yet (lag -1: nothing committed or no watermark) are
    left out rather than reported as zero.
    """
    out = {}
    for name, t in stats.get("topics", {}).items():
        for key, p in t.get("partitions", {}).items():
            if key == "-1" or not p.get("desired", True):
                continue
            lag = int(p.get("consumer_lag", -1))
            if lag >= 0:
                out[(name, int(key))] = lag
    return out


def stable_offsets(stats: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    """The last stable offset (read_committed's end) per assigned partition librdkafka has one for: lag is
    computed from it where the consumer commits no offsets itself (exactly-once: they go in transactions)."""
    out = {}
    for name, t in stats.get("topics", {}).items():
        for key, p in t.get("partitions", {}).items():
            if key == "-1" or not p.get("desired", True):
                continue
            end = int(p.get("ls_offset", -1))
            if end >= 0:
                out[(name, int(key))] = end
    return out
