"""Pure: measured topic figures -> the per-codec comparison table (rich, Markdown or JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class TopicFigures:
    """What was measured of one topic: records (end - start offsets) and bytes on disk (DescribeLogDirs)."""

    topic: str
    codec: str
    records: int
    disk_bytes: int


@dataclass(frozen=True)
class Row:
    topic: str
    codec: str
    records: int
    disk_bytes: int
    avg_record_disk_bytes: float | None
    ratio_to_source: float | None  # source disk bytes / this topic's disk bytes: how many times smaller
    ratio_to_uncompressed: float | None  # uncompressed record bytes / this topic's disk bytes


def _ratio(num: float | None, den: float) -> float | None:
    """num / den, or None when there is nothing to divide by (an empty topic has no ratio)."""
    return num / den if num is not None and den else None


def comparison(source: TopicFigures, destinations: list[TopicFigures], uncompressed_bytes: int | None) -> list[Row]:
    rows = []
    for f in [source, *destinations]:
        rows.append(Row(
            topic=f.topic, codec=f.codec, records=f.records, disk_bytes=f.disk_bytes,
            avg_record_disk_bytes=_ratio(f.disk_bytes, f.records),
            ratio_to_source=_ratio(source.disk_bytes, f.disk_bytes),
            ratio_to_uncompressed=_ratio(uncompressed_bytes or None, f.disk_bytes),
        ))
    return rows


_HEADERS = ("topic", "codec", "records", "on-disk bytes", "avg record on disk", "ratio to source",
            "ratio to uncompressed")


def _fmt(value: float | None, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def _cells(r: Row) -> tuple[str, ...]:
    return (r.topic, r.codec, f"{r.records:,}", f"{r.disk_bytes:,}", _fmt(r.avg_record_disk_bytes, ",.1f", " B"),
            _fmt(r.ratio_to_source, ".2f", "x"), _fmt(r.ratio_to_uncompressed, ".2f", "x"))


def _markdown(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _table(headers: tuple[str, ...], rows: list[tuple[str, ...]], title: str, text_columns: int) -> object:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, h in enumerate(headers):
        t.add_column(h, justify="left" if i < text_columns else "right")
    for r in rows:
        t.add_row(*r)
    return t


def markdown(rows: list[Row]) -> str:
    return _markdown(_HEADERS, [_cells(r) for r in rows])


def as_json(rows: list[Row] | list[DestinationRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2)


def table(rows: list[Row], title: str = "per-codec comparison") -> object:
    return _table(_HEADERS, [_cells(r) for r in rows], title, 2)


# ---------------------------------------------------------------- `transcoder report`: a running instance
@dataclass(frozen=True)
class DestinationRow:
    """One destination of a running instance, from its /status document."""

    lane: str
    destination: str
    codec: str
    records: int
    cpu_seconds_per_million_records: float | None  # the lane's, all parts
    disk_bytes: int | None
    avg_record_disk_bytes: float | None
    ratio_to_source_disk: float | None  # source bytes on disk / destination bytes on disk
    ratio_to_uncompressed: float | None  # uncompressed record bytes sent / compressed bytes sent (wire)
    lag_records: int
    latency_p99_seconds: float | None  # of records newer than the lane's start
    latency_samples: int
    backlog_latency_samples: int  # sampled records older than the lane's start: left out of the latency
    broker_recompression: str | None


def from_status(doc: dict) -> list[DestinationRow]:
    rows = []
    for lane in doc.get("lanes", []):
        lag = sum(lane.get("lag_records", {}).values())
        for d in lane.get("destinations", []):
            disk, src_disk = d.get("disk_bytes"), d.get("source_disk_bytes")
            rows.append(DestinationRow(
                lane=lane["name"], destination=d["topic"], codec=d["codec"], records=d.get("records_out", 0),
                cpu_seconds_per_million_records=lane.get("cpu_seconds_per_million_records"),
                disk_bytes=disk,
                avg_record_disk_bytes=_ratio(disk, d.get("topic_records") or 0),
                ratio_to_source_disk=_ratio(src_disk, disk or 0),
                ratio_to_uncompressed=_ratio(d.get("record_bytes_out") or None, d.get("compressed_bytes") or 0),
                lag_records=lag, latency_p99_seconds=d.get("latency_p99_seconds"),
                latency_samples=d.get("latency_samples", 0),
                backlog_latency_samples=d.get("backlog_latency_samples", 0),
                broker_recompression=d.get("broker_recompression"),
            ))
    return rows


_STATUS_HEADERS = ("lane", "destination", "codec", "records", "CPU s / 1M records", "on-disk bytes",
                   "avg record on disk", "ratio to source (disk)", "ratio to uncompressed (wire)", "lag (records)",
                   "p99 latency (new records)", "broker recompression")


def _status_cells(r: DestinationRow) -> tuple[str, ...]:
    return (r.lane, r.destination, r.codec, f"{r.records:,}", _fmt(r.cpu_seconds_per_million_records, ",.2f"),
            _fmt(r.disk_bytes, ","), _fmt(r.avg_record_disk_bytes, ",.1f", " B"),
            _fmt(r.ratio_to_source_disk, ".2f", "x"), _fmt(r.ratio_to_uncompressed, ".2f", "x"),
            f"{r.lag_records:,}", _latency_cell(r), r.broker_recompression or "no")


def _latency_cell(r: DestinationRow) -> str:
    """p99 end-to-end latency of records newer than the lane's start; a backfill's age is not latency."""
    if r.latency_p99_seconds is None:
        return "backlog only" if r.backlog_latency_samples else "-"
    cell = _fmt(r.latency_p99_seconds, ",.3f", " s")
    return f"{cell} ({r.backlog_latency_samples:,} backlog samples left out)" if r.backlog_latency_samples else cell


def status_markdown(rows: list[DestinationRow]) -> str:
    return _markdown(_STATUS_HEADERS, [_status_cells(r) for r in rows])


def status_table(rows: list[DestinationRow], title: str = "transcoder report") -> object:
    return _table(_STATUS_HEADERS, [_status_cells(r) for r in rows], title, 3)
