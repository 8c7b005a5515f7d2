"""Pure: evaluate's results as a terminal table, Markdown, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence

from transcoder.evaluate.grid import batch_label
from transcoder.evaluate.measure import CellResult
from transcoder.report.tables import cell_text, markdown_rows, rich_rows

HEADERS = ("setting", "batch", "records", "uncompressed", "compressed", "ratio", "B/record on disk",
           "compress MB/s/core", "decompress MB/s/core", "compress CPU s/1M", "decompress CPU s/1M")


def _row(c: CellResult, chosen: tuple[str, int | None, int] | None, max_batch: int | None) -> tuple[str, ...]:
    mark = " ◀" if chosen == (c.codec, c.level, c.batch_bytes) else ""
    over = " ⚠" if max_batch is not None and c.batch_bytes > max_batch else ""  # above Kafka's limits: see the text
    return (c.label + mark, batch_label(c.batch_bytes) + over, f"{c.records:,}", f"{c.uncompressed_bytes:,}",
            f"{c.compressed_bytes:,}", f"{c.ratio:.2f}x", f"{c.bytes_per_record:,.1f}",
            cell_text(c.compress_mb_s, ",.1f"), cell_text(c.decompress_mb_s, ",.1f"), f"{c.compress_cpu_s_per_1m:.3f}",
            f"{c.decompress_cpu_s_per_1m:.3f}")


def _chosen(recommendation: Mapping[str, object] | None) -> tuple[str, int | None, int] | None:
    if not recommendation:
        return None
    return (recommendation["codec"], recommendation["level"], recommendation["batch_bytes"])  # type: ignore[return-value]


def _max_batch(recommendation: Mapping[str, object] | None) -> int | None:
    return (recommendation or {}).get("max_batch_bytes")  # type: ignore[return-value]


def table(cells: Sequence[CellResult], title: str, recommendation: Mapping[str, object] | None = None) -> object:
    """A rich table; the recommended cell marked ◀, batch sizes above Kafka's limits ⚠."""
    return rich_rows(HEADERS, [_row(c, _chosen(recommendation), _max_batch(recommendation)) for c in cells], title, 2)


def markdown(cells: Sequence[CellResult], recommendation: Mapping[str, object] | None = None) -> str:
    out = markdown_rows(HEADERS, [_row(c, _chosen(recommendation), _max_batch(recommendation)) for c in cells])
    if recommendation:
        out += "\n\n" + "\n".join(f"> {line}" for line in str(recommendation["text"]).splitlines())
    return out


def as_json(cells: Sequence[CellResult], recommendation: Mapping[str, object] | None,
            sample: Mapping[str, object]) -> str:
    """One object: {"cells": [...], "recommendation": {...}, "sample": {...}}."""
    return json.dumps({"cells": [c.as_dict() for c in cells], "recommendation": recommendation, "sample": sample},
                      indent=2)


def as_csv(cells: Sequence[CellResult]) -> str:
    buf = io.StringIO()
    rows = [c.as_dict() for c in cells]
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
