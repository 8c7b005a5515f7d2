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


def _fmt(value: float | None, fmt: str, unit: str) -> str:
    return "-" if value is None else format(value, fmt) + unit


def _cells(r: Row) -> tuple[str, ...]:
    return (r.topic, r.codec, f"{r.records:,}", f"{r.disk_bytes:,}", _fmt(r.avg_record_disk_bytes, ",.1f", " B"),
            _fmt(r.ratio_to_source, ".2f", "x"), _fmt(r.ratio_to_uncompressed, ".2f", "x"))


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(_HEADERS) + " |", "|" + "|".join("---" for _ in _HEADERS) + "|"]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def as_json(rows: list[Row]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2)


def table(rows: list[Row], title: str = "per-codec comparison") -> object:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, h in enumerate(_HEADERS):
        t.add_column(h, justify="left" if i < 2 else "right")
    for r in rows:
        t.add_row(*_cells(r))
    return t
