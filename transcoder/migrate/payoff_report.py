"""`transcoder migrate report` rendered: a table (rich), markdown, JSON, and a self-contained HTML page with its plots
(PNG inlined as data: URIs, so the page is one file an operator can hand on)."""

from __future__ import annotations

import base64
import html
import io
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from transcoder.migrate.payoff import Figure, Payoff, Reading, fmt
from transcoder.migrate.plan import human_bytes
from transcoder.report.tables import markdown_rows, rich_rows

FIGURE_HEADERS = ("figure", "predicted", "realized", "difference", "how")


def when(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _difference(f: Figure) -> str:
    return "-" if f.difference is None else f"{f.difference * 100:+.1f}%"


def figure_rows(p: Payoff) -> list[tuple[str, ...]]:
    return [(f.name, fmt(f.predicted, f.unit), fmt(f.realized, f.unit), _difference(f), f.note) for f in p.figures]


def summary_lines(p: Payoff) -> list[str]:
    """What the report says before its tables: the migration, its stages, verification, savings."""
    s = p.savings
    out = [f"migration {p.source} -> {p.migration} ({p.codec}): {p.stage}; started {when(p.started_ms)}"
           + ("" if p.finished_ms is None else f", finished {when(p.finished_ms)}")]
    moved = sum(1 for g in p.groups if g.stage == "destination")
    out.append(f"groups: {moved} of {len(p.groups)} on the destination"
               + "".join(f"; {g.group} {g.stage}" + ("" if g.moved_ms is None else f" since {when(g.moved_ms)}")
                         for g in p.groups))
    out.append("verified through: " + (", ".join(f"{q}:{o}" for q, o in sorted(p.verified_through.items()))
                                       or "not yet") + ("" if p.mismatch is None else f"; MISMATCH: {p.mismatch}"))
    if p.prediction is None:
        out.append("prediction: none recorded (`migrate start` predicts on the source's records; it found none, or "
                   "the migration was started by an earlier version)")
    else:
        out.append(f"predicted at {when(p.prediction.at_ms)} on {p.prediction.sample}, batches of "
                   f"{p.prediction.batch_max_bytes:,} B")
    out += [f.line() for f in p.figures if f.predicted is not None or f.realized is not None]
    if s.disk_saved_bytes is not None:
        per_day = "" if s.disk_saved_bytes_per_day is None else \
            f", {human_bytes(s.disk_saved_bytes_per_day)} per day at {s.records_per_day:,.0f} records a day"
        out.append(f"disk saved: {human_bytes(s.disk_saved_bytes)} for the source's records as the copy stores "
                   f"them{per_day}")
    if s.cpu_s is not None:
        out.append(f"CPU paid: {s.cpu_s:,.1f} s of the copier's lane")
    for g, at, lag in p.cutovers:
        out.append(f"cutover of {g} at {when(at)}: the copy lagged "
                   + ("an unknown number of" if lag is None else f"{lag:,}") + " records")
    return out


def markdown(p: Payoff) -> str:
    lines = [f"# Migration {p.source} -> {p.migration}", ""]
    lines += [f"- {line}" for line in summary_lines(p)]
    lines += ["", markdown_rows(FIGURE_HEADERS, figure_rows(p)), "", "## Readings", "",
              markdown_rows(READING_HEADERS, [reading_row(r) for r in p.readings])]
    return "\n".join(lines) + "\n"


READING_HEADERS = ("at", "step", "source B/record", "copy B/record", "disk ratio", "source disk", "copy disk",
                   "copy lag")


def reading_row(r: Reading) -> tuple[str, ...]:
    return (when(r.at_ms), r.step, fmt(r.source.bytes_per_record, "B"), fmt(r.copy.bytes_per_record, "B"),
            fmt(r.disk_ratio, "x"), human_bytes(r.source.disk_bytes), human_bytes(r.copy.disk_bytes),
            "-" if r.lag_records is None else f"{r.lag_records:,}")


def tables(p: Payoff) -> list[Any]:
    return [rich_rows(FIGURE_HEADERS, figure_rows(p), "predicted against realized", 1),
            rich_rows(READING_HEADERS, [reading_row(r) for r in p.readings], "readings", 2)]


def as_dict(p: Payoff) -> dict[str, Any]:
    doc = asdict(p)
    doc["figures"] = [{**asdict(f), "difference": f.difference} for f in p.figures]
    doc["verified_through"] = {str(k): v for k, v in p.verified_through.items()}
    if p.prediction is not None:
        doc["prediction"] = {**doc["prediction"], "ratio": p.prediction.ratio,
                             "bytes_per_record": p.prediction.bytes_per_record,
                             "disk_ratio": p.prediction.disk_ratio}
    doc["readings"] = [{**asdict(r), "disk_ratio": r.disk_ratio, "ratio": r.ratio,
                        "source_bytes_per_record": r.source.bytes_per_record,
                        "copy_bytes_per_record": r.copy.bytes_per_record,
                        "wire_bytes_per_record": r.wire_bytes_per_record, "cpu_s_per_1m": r.cpu_s_per_1m}
                       for r in p.readings]
    return doc


# ---------------------------------------------------------------- the HTML page
def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _figure(title: str) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(8, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title)
    return fig, ax


def disk_figure(readings: Sequence[Reading]) -> Any:
    """Bytes on disk over time, source against copy (gids `disk:source`, `disk:copy`)."""
    fig, ax = _figure("bytes on disk, all replicas")
    xs = [(r.at_ms - readings[0].at_ms) / 3_600_000 for r in readings] if readings else []
    for role, ys in (("source", [r.source.disk_bytes or 0 for r in readings]),
                     ("copy", [r.copy.disk_bytes or 0 for r in readings])):
        (line,) = ax.plot(xs, [y / 1e6 for y in ys], marker="o", label=role)
        line.set_gid(f"disk:{role}")
    ax.set_xlabel("hours since the first reading")
    ax.set_ylabel("MB")
    ax.legend()
    return fig


def figures_figure(figures: Sequence[Figure]) -> Any:
    """Each figure's difference, realized against predicted, in percent (0: as predicted; gid `ratio:<name>`, the
    bar's width the percentage), labelled with both values."""
    fig, ax = _figure("realized against predicted (%)")
    shown = [f for f in figures if f.difference is not None]
    pcts = [(f.difference or 0.0) * 100 for f in shown]
    bars = ax.barh([f.name for f in shown], pcts, color=["#2a7" if abs(p) <= 3 else "#c63" for p in pcts])
    for f, bar, pct in zip(shown, bars, pcts, strict=True):
        bar.set_gid(f"ratio:{f.name}")
        ax.annotate(f"{pct:+.1f}%  ({fmt(f.predicted, f.unit)} -> {fmt(f.realized, f.unit)})", (pct, bar.get_y()
                    + bar.get_height() / 2), xytext=(4 if pct >= 0 else -4, 0), textcoords="offset points",
                    ha="left" if pct >= 0 else "right", va="center", fontsize=8)
    edge = max([5.0, *(abs(p) * 1.6 for p in pcts)])
    ax.set_xlim(-edge, edge)
    ax.axvline(0.0, color="#444", linewidth=1)
    ax.set_xlabel("(realized - predicted) / predicted, %")
    return fig


def lag_figure(readings: Sequence[Reading], cutovers: Sequence[tuple[str, int, int | None]]) -> Any:
    """The copy's lag at each reading, cutovers marked (gids `lag`, `cutover:<group>`)."""
    fig, ax = _figure("the copy's lag (records), cutovers marked")
    t0 = readings[0].at_ms if readings else 0
    pts = [((r.at_ms - t0) / 3_600_000, r.lag_records) for r in readings if r.lag_records is not None]
    (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o")
    line.set_gid("lag")
    for g, at, _ in cutovers:
        ax.axvline((at - t0) / 3_600_000, color="#c33", linestyle="--").set_gid(f"cutover:{g}")
    ax.set_xlabel("hours since the first reading")
    return fig


def page(p: Payoff) -> str:
    """The self-contained HTML report."""
    e = html.escape

    def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        head = "".join(f"<th>{e(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{head}</tr>{body}</table>"

    plots = [("Disk over time", disk_figure(p.readings)), ("Predicted against realized", figures_figure(p.figures)),
             ("Lag around each cutover", lag_figure(p.readings, p.cutovers))]
    figs = "".join(f"<h2>{e(t)}</h2><figure><img alt=\"{e(t)}\" src=\"{_png(f)}\"></figure>" for t, f in plots)
    return ("<!doctype html><html><head><meta charset=\"utf-8\">"
            f"<title>{e(f'Migration {p.source} -> {p.migration}')}</title><style>{_CSS}</style></head><body>"
            f"<h1>{e(f'Migration {p.source} → {p.migration}')}</h1><ul>"
            + "".join(f"<li>{e(line)}</li>" for line in summary_lines(p)) + "</ul>"
            "<h2>Predicted against realized</h2>" + table(FIGURE_HEADERS, figure_rows(p))
            + figs + "<h2>Readings</h2>" + table(READING_HEADERS, [reading_row(r) for r in p.readings])
            + "</body></html>\n")


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}"
        "th{background:#f3f3f3;text-align:left}figure img{max-width:100%;border:1px solid #ddd}")
