"""The summary a one-shot run (`run --until-caught-up`) ends with, a line per lane: records, bytes in and out, the
compression ratio, CPU per 1M records and the time taken, read from the /status document (the same figures
`transcoder report` and /metrics show)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class DestinationOut:
    """What a lane wrote to one destination: /status's `record_bytes_out` and `compressed_bytes` (librdkafka's
    statistics of the destination's producer)."""

    topic: str
    records: int
    record_bytes: float
    compressed_bytes: float

    @property
    def ratio(self) -> float | None:
        """Record bytes per compressed byte: the report's "ratio to uncompressed (wire)"; None before a batch."""
        return self.record_bytes / self.compressed_bytes if self.compressed_bytes else None


@dataclass(frozen=True)
class LaneSummary:
    lane: str
    state: str
    #: records copied (read and handed to every destination): /status `records`
    records: int
    #: their bytes, key + value + headers: /status `source_bytes`
    bytes_in: int
    destinations: tuple[DestinationOut, ...]
    cpu_seconds_per_million_records: float | None
    elapsed_seconds: float

    @property
    def bytes_out(self) -> float:
        """Compressed bytes written, every destination together."""
        return sum(d.compressed_bytes for d in self.destinations)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bytes_out": self.bytes_out,
                "destinations": [{**asdict(d), "ratio": d.ratio} for d in self.destinations]}

    def line(self) -> str:
        """One line: `lane NAME: N records, X MB in, Y MB out (R x), C s CPU per 1M records, T s`; with several
        destinations, each one's bytes out and ratio by its topic."""
        outs = [f"{_mb(d.compressed_bytes)} out{_ratio(d.ratio)}" for d in self.destinations]
        if len(self.destinations) > 1:
            outs = [f"{d.topic} {out}" for d, out in zip(self.destinations, outs, strict=True)]
        cpu = self.cpu_seconds_per_million_records
        parts = [f"{self.records:,} records", f"{_mb(self.bytes_in)} in", *outs,
                 "CPU per 1M records unknown" if cpu is None else f"{cpu:,.2f} s CPU per 1M records",
                 f"{self.elapsed_seconds:,.1f} s"]
        state = "" if self.state == "caught-up" else f" ({self.state})"
        return f"lane {self.lane}{state}: " + ", ".join(parts)


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.2f} MB"


def _ratio(ratio: float | None) -> str:
    return "" if ratio is None else f" ({ratio:,.2f}x)"


def from_status(doc: dict[str, Any], elapsed_seconds: float) -> list[LaneSummary]:
    """Each lane of a /status document (metrics.status.document) as its summary; `elapsed_seconds`: the run's."""
    return [LaneSummary(
        lane=ln["name"], state=ln["state"], records=ln["records"], bytes_in=ln["source_bytes"],
        destinations=tuple(DestinationOut(d["topic"], d["records_out"], d["record_bytes_out"], d["compressed_bytes"])
                           for d in ln["destinations"]),
        cpu_seconds_per_million_records=ln["cpu_seconds_per_million_records"], elapsed_seconds=elapsed_seconds,
    ) for ln in doc["lanes"]]
