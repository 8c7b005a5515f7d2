"""What a writer (transcoder.kafka.writer.Writer) reports to the metrics, and how it samples the latency of the
records of a delivered batch."""

from __future__ import annotations

from typing import Any, Protocol

from transcoder.kafka.statistics import Window


class WriterMetrics(Protocol):
    """What the writer reports (metrics.registry.LaneMetrics has it); declared here so kafka imports no metrics."""

    def acked(self, destination: str, codec: str, n: int) -> None: ...
    def produced(self, destination: str, codec: str, batch_bytes: Window, batch_records: Window,
                 record_bytes_total: int) -> None: ...
    def latency(self, destination: str, seconds: float, weight: float = 1.0) -> None: ...
    def backfill(self, destination: str) -> None: ...
    def error(self, reason: str) -> None: ...
    def dead_lettered(self) -> None: ...


#: A batch's latency is sampled from this many of its records at most (one per stratum of equal size, each weighted
#: by its share of the batch's 1-in-LATENCY_SAMPLING samples): every record has the same chance, whatever its batch.
BATCH_LATENCY_STRATA = 16
LATENCY_SAMPLING = 16


def batch_latencies(section: Any, n: int, acked_ms: float) -> list[tuple[float, float]]:
    """(age in ms at `acked_ms`, weight) of the records sampled from a delivered batch of `n` records: the middle
    record of each of up to BATCH_LATENCY_STRATA runs of equal size, weighted by its run's records / LATENCY_SAMPLING.
    A batch's records waited from their own timestamps: its newest one alone says what the oldest waited least."""
    k = min(n, BATCH_LATENCY_STRATA)
    out = []
    for j in range(k):
        lo, hi = j * n // k, (j + 1) * n // k
        ts = section.record((lo + hi - 1) // 2)[1]
        out.append((acked_ms - ts, (hi - lo) / LATENCY_SAMPLING))
    return out
