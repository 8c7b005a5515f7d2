"""Pure: measured topic figures -> the per-codec comparison table (rich, Markdown or JSON)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a table is drawn, not with the module
    from rich.table import Table


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


def cell_text(value: float | None, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def _cells(r: Row) -> tuple[str, ...]:
    return (r.topic, r.codec, f"{r.records:,}", f"{r.disk_bytes:,}", cell_text(r.avg_record_disk_bytes, ",.1f", " B"),
            cell_text(r.ratio_to_source, ".2f", "x"), cell_text(r.ratio_to_uncompressed, ".2f", "x"))


def markdown_rows(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def rich_rows(headers: tuple[str, ...], rows: list[tuple[str, ...]], title: str, text_columns: int) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, h in enumerate(headers):
        t.add_column(h, justify="left" if i < text_columns else "right")
    for r in rows:
        t.add_row(*r)
    return t


def markdown(rows: list[Row]) -> str:
    return markdown_rows(_HEADERS, [_cells(r) for r in rows])


def as_json(rows: list[Row] | list[DestinationRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2)


def table(rows: list[Row], title: str = "per-codec comparison") -> object:
    return rich_rows(_HEADERS, [_cells(r) for r in rows], title, 2)


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
    #: bytes on disk / records the log holds (end - start offsets); None on a compacted destination, whose log holds
    #: fewer records than its offsets span (see disk_bytes_per_record_copied)
    avg_record_disk_bytes: float | None
    ratio_to_source_disk: float | None  # source bytes on disk / destination bytes on disk
    ratio_to_uncompressed: float | None  # uncompressed record bytes sent / compressed bytes sent (wire)
    lag_records: int
    latency_p99_seconds: float | None  # of records newer than the lane's start
    latency_samples: int
    backlog_latency_samples: int  # sampled records older than the lane's start: left out of the latency
    broker_recompression: str | None
    #: live scoring (evaluate: in the config): one sentence per candidate on the latest sample, and the sample
    candidates: tuple[str, ...] = ()
    candidate_sample: str | None = None
    #: the destination's log is compacted (cleanup.policy): its bytes on disk are over the records copied (the
    #: offsets its log spans), of which compaction kept fewer
    compacted: bool = False
    disk_bytes_per_record_copied: float | None = None


# ---------------------------------------------------------------- live scoring: candidate vs current, in words
def _times(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def candidate_sentence(candidate: str, candidate_ratio: float, candidate_compress_cpu_per_1m: float,
                       current_codec: str, current_ratio: float, current_compress_cpu_per_1m: float) -> str:
    """What a candidate would change, measured on the same sample as the destination's own setting:
    'zstd-9 would store this topic 1.18× smaller for 2.1× the CPU'.

    Size: candidate ratio / current ratio ("larger" below 1). CPU: the candidate's compress CPU per record over
    the current setting's; when the current codec is `none` (no CPU to compare with) the candidate's own CPU per
    record, in µs (CPU seconds per million records are µs per record).
    """
    figures = (candidate_ratio, current_ratio, candidate_compress_cpu_per_1m, current_compress_cpu_per_1m)
    if not all(isinstance(f, int | float) and math.isfinite(f) for f in figures) or min(
            candidate_ratio, current_ratio) <= 0:
        return f"{candidate}: no figure on this sample"
    smaller = candidate_ratio / current_ratio
    if f"{smaller:.2f}" == "1.00" and f"{1 / smaller:.2f}" == "1.00":
        size = "at the same size"
    elif smaller >= 1:
        size = f"{smaller:.2f}× smaller"
    else:
        size = f"{1 / smaller:.2f}× larger"
    if current_codec == "none" or current_compress_cpu_per_1m <= 0:
        cpu = f"for {candidate_compress_cpu_per_1m:.1f} µs of CPU per record"
    else:
        cpu = f"for {_times(candidate_compress_cpu_per_1m / current_compress_cpu_per_1m)}× the CPU"
    return f"{candidate} would store this topic {size} {cpu}"


def candidate_sentences(doc: dict | None) -> tuple[str, ...]:
    """The sentences of one destination's `candidates` section of /status (none before its first sample)."""
    cur = (doc or {}).get("current")
    if not doc or not cur:
        return ()
    return tuple(candidate_sentence(c["label"], c.get("ratio"), c.get("compress_cpu_s_per_1m"), cur["codec"],
                                    cur.get("ratio"), cur.get("compress_cpu_s_per_1m"))
                 for c in doc.get("candidates", []))


def _sample_note(doc: dict | None) -> str | None:
    s = (doc or {}).get("sample")
    if not s:
        return None
    return (f"{s['source']} [{s['partition']}] offsets {s['first_offset']}-{s['last_offset']}, "
            f"{s['records']:,} records")


def from_status(doc: dict) -> list[DestinationRow]:
    rows = []
    for lane in doc.get("lanes", []):
        lag = sum(lane.get("lag_records", {}).values())
        for d in lane.get("destinations", []):
            disk, src_disk = d.get("disk_bytes"), d.get("source_disk_bytes")
            per_offset = _ratio(disk, d.get("topic_records") or 0)
            compacted = bool(d.get("compacted"))
            rows.append(DestinationRow(
                lane=lane["name"], destination=d["topic"], codec=d["codec"], records=d.get("records_out", 0),
                cpu_seconds_per_million_records=lane.get("cpu_seconds_per_million_records"),
                disk_bytes=disk,
                avg_record_disk_bytes=None if compacted else per_offset,
                ratio_to_source_disk=_ratio(src_disk, disk or 0),
                ratio_to_uncompressed=_ratio(d.get("record_bytes_out") or None, d.get("compressed_bytes") or 0),
                lag_records=lag, latency_p99_seconds=d.get("latency_p99_seconds"),
                latency_samples=d.get("latency_samples", 0),
                backlog_latency_samples=d.get("backlog_latency_samples", 0),
                broker_recompression=d.get("broker_recompression"),
                candidates=candidate_sentences(d.get("candidates")),
                candidate_sample=_sample_note(d.get("candidates")),
                compacted=compacted, disk_bytes_per_record_copied=per_offset if compacted else None,
            ))
    return rows


_STATUS_HEADERS = ("lane", "destination", "codec", "records", "CPU s / 1M records", "on-disk bytes",
                   "avg record on disk", "ratio to source (disk)", "ratio to uncompressed (wire)", "lag (records)",
                   "p99 latency (new records)", "broker recompression")


def _status_cells(r: DestinationRow) -> tuple[str, ...]:
    return (r.lane, r.destination, r.codec, f"{r.records:,}", cell_text(r.cpu_seconds_per_million_records, ",.2f"),
            cell_text(r.disk_bytes, ","), _disk_record_cell(r), cell_text(r.ratio_to_source_disk, ".2f", "x"),
            cell_text(r.ratio_to_uncompressed, ".2f", "x"),
            f"{r.lag_records:,}", _latency_cell(r), r.broker_recompression or "no")


def _disk_record_cell(r: DestinationRow) -> str:
    """Average record on disk; on a compacted destination, bytes on disk per record copied, said as such: its log
    holds fewer records than were copied, and how many it holds Kafka does not say without reading it whole."""
    if r.compacted:
        return cell_text(r.disk_bytes_per_record_copied, ",.1f",
                         " B per record copied (compacted: the log holds fewer)")
    return cell_text(r.avg_record_disk_bytes, ",.1f", " B")


def _latency_cell(r: DestinationRow) -> str:
    """p99 end-to-end latency of records newer than the lane's start; a backfill's age is not latency."""
    if r.latency_p99_seconds is None:
        return "backlog only" if r.backlog_latency_samples else "-"
    cell = cell_text(r.latency_p99_seconds, ",.3f", " s")
    return f"{cell} ({r.backlog_latency_samples:,} backlog samples left out)" if r.backlog_latency_samples else cell


def _candidate_footer(rows: list[DestinationRow]) -> list[str]:
    """The live-scoring lines under the table, with the sample each destination's figures come from."""
    out = []
    for r in rows:
        if r.candidates:
            out.append(f"{r.destination} (latest sample: {r.candidate_sample}):")
            out += [f"  {line}" for line in r.candidates]
    return out


def status_markdown(rows: list[DestinationRow]) -> str:
    text = markdown_rows(_STATUS_HEADERS, [_status_cells(r) for r in rows])
    footer = _candidate_footer(rows)
    if footer:
        text += "\n\nCandidate codecs (live scoring):\n\n" + "\n".join(
            f"- {line.strip()}" if line.startswith("  ") else line for line in footer)
    return text


def status_table(rows: list[DestinationRow], title: str = "transcoder report") -> object:
    t = rich_rows(_STATUS_HEADERS, [_status_cells(r) for r in rows], title, 3)
    footer = _candidate_footer(rows)
    if not footer:
        return t
    from rich.console import Group
    from rich.text import Text

    return Group(t, Text("Candidate codecs (live scoring):\n" + "\n".join(footer)))
