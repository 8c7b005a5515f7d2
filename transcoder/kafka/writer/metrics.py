"""What a sink (kafka.writer) reports to the metrics, and how it samples the latency of the
records of a delivered batch."""

from __future__ import annotations

from typing import Any, Protocol

from transcoder.kafka.statistics import Window


class WriterMetrics(Protocol):
    """What a sink reports (metrics.registry.LaneMetrics has it); declared here so kafka imports no metrics."""

    def acked(self, destination: str, codec: str, n: int) -> None: ...
    def produced(self, destination: str, codec: str, batch_bytes: Window, batch_records: Window,
                 record_bytes_total: int) -> None: ...
    def latency(self, destination: str, seconds: float, weight: float = 1.0) -> None: ...
    def backfill(self, destination: str, weight: float = 1.0) -> None: ...
    def error(self, reason: str) -> None: ...
    def dead_lettered(self) -> None: ...


#: A batch's latency is sampled from this many of its records at most (one per stratum of equal size, each weighted
#: by its share of the batch's 1-in-LATENCY_SAMPLING samples): every record has the same chance, whatever its batch.
BATCH_LATENCY_STRATA = 16
LATENCY_SAMPLING = 16


def sampled_stamps(section: Any, lo: int, hi: int) -> list[tuple[int, float]]:
    """(timestamp in ms, weight) of the records sampled from records `lo..hi` of a batch: the middle record of each
    of up to BATCH_LATENCY_STRATA runs of equal size, weighted by its run's records / LATENCY_SAMPLING."""
    m = hi - lo
    k = min(m, BATCH_LATENCY_STRATA)
    out = []
    for j in range(k):
        a, b = lo + j * m // k, lo + (j + 1) * m // k
        out.append((section.record((a + b - 1) // 2)[1], (b - a) / LATENCY_SAMPLING))
    return out


def batch_latencies(section: Any, n: int, acked_ms: float) -> list[tuple[float, float]]:
    """(age in ms at `acked_ms`, weight) of the records sampled from a delivered batch of `n` records (sampled_stamps).
    A batch's records waited from their own timestamps: its newest one alone says what the oldest waited least."""
    return [(acked_ms - ts, weight) for ts, weight in sampled_stamps(section, 0, n)]


def first_new(section: Any, n: int, start_ms: float) -> int:
    """The index of the batch's first record stamped at or after `start_ms` (n: none is). A partition's records are
    in offset order and, written by producers (CreateTime), their timestamps mostly are too: found by bisection,
    log2(n) reads, where a record out of order only moves the boundary (each sample is classified again on its own
    timestamp)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if section.record(mid)[1] >= start_ms:
            hi = mid
        else:
            lo = mid + 1
    return lo


def new_and_backlog(section: Any, n: int, acked_ms: float, start_ms: float) -> tuple[list[tuple[float, float]], float]:
    """The latency samples of a delivered batch's records stamped at or after `start_ms` (the lane's start: new
    records), and the weight of the samples of older ones (backlog: their age is not the pipeline's latency).

    A batch that mixes both (the backlog's tail and the first new records, re-batched together) is split where the
    new records begin, and each part sampled across its records: every record has the same chance whichever part it
    is in, none is timed or left out by its neighbours' age. Weights add up to n / LATENCY_SAMPLING."""
    if n <= 0:
        return [], 0.0
    if section.max_timestamp < start_ms:  # all backlog: nothing to read
        return [], n / LATENCY_SAMPLING
    split = 0 if section.record(0)[1] >= start_ms else first_new(section, n, start_ms)
    samples: list[tuple[float, float]] = []
    backlog = 0.0
    for a, b in ((0, split), (split, n)):
        if a == b:
            continue
        for ts, weight in sampled_stamps(section, a, b):
            if ts >= start_ms:  # its own timestamp, whichever part it was sampled from
                samples.append((acked_ms - ts, weight))
            else:
                backlog += weight
    return samples, backlog
