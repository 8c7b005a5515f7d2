"""`transcoder evaluate --html DIR`: a static report (index.html and two PNG plots) of the measured grid.

`frontier.png` plots ratio against compress speed per core at the largest batch size measured, one colour
per codec, with each codec's own Pareto frontier drawn as a line. `batch-size.png` plots ratio against
batch size, one line per setting (or, when there are many, per codec only its default, fastest and
highest-ratio levels). `index.html` has the summary, the recommendation, both plots and every cell.

The pure parts (`frontier`, `plotted_settings`, the formatting helpers) are separate from drawing.
matplotlib is imported only when a figure is drawn, and only through `Figure` + the Agg canvas, so
importing this module stays cheap and no global pyplot state is touched. PNGs carry no software or date
metadata, so the same cells give the same bytes.
"""

from __future__ import annotations

import html
import math
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from transcoder.codecs import CODECS, LEVELS
from transcoder.errors import ConfigError
from transcoder.evaluate.grid import KIB, Setting, batch_label
from transcoder.evaluate.measure import CellResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MAX_SETTINGS", "batch_size_figure", "check_directory", "format_number", "format_ratio", "frontier",
           "frontier_figure", "plotted_settings", "write_report"]

P = TypeVar("P")

#: Above this many settings, the batch-size plot shows per codec only its default, fastest and
#: highest-ratio levels.
MAX_SETTINGS = 8

FRONTIER_PNG = "frontier.png"
BATCH_SIZE_PNG = "batch-size.png"
INDEX_HTML = "index.html"

_FIGSIZE = (9.0, 6.0)  # inches, at _DPI: 900 x 600 px
_DPI = 100
_STYLE: dict[str, tuple[str, str]] = {  # codec -> (colour, marker)
    "none": ("tab:gray", "x"),
    "gzip": ("tab:blue", "o"),
    "snappy": ("tab:orange", "s"),
    "lz4": ("tab:green", "^"),
    "zstd": ("tab:red", "D"),
}
_SHADES = {"none": "Greys", "gzip": "Blues", "snappy": "Oranges", "lz4": "Greens", "zstd": "Reds"}
_DASH = "\u2013"  # what the table shows for a figure that does not exist
_LEVELLED = frozenset(c for c, bounds in LEVELS.items() if bounds is not None)  # codecs with levels


# --- pure helpers -----------------------------------------------------------------------------------------


def _identity(p: object) -> tuple[float, float]:
    return p  # type: ignore[return-value]


def frontier(points: Iterable[P], key: Callable[[P], tuple[float, float]] = _identity) -> list[P]:
    """The Pareto frontier of `points` where more is better on both axes, by increasing x.

    A point is on the frontier when no other point is at least as good on both axes and better on one
    (for the plot: no other level of the codec is as fast and as compact, and strictly better at either).
    Points with a missing or NaN coordinate are left out; equal points are all kept.
    `key` gives a point's (x, y); by default the points are (x, y) pairs themselves.
    """
    valid = []
    for p in points:
        x, y = key(p)
        if x is None or y is None or math.isnan(x) or math.isnan(y):
            continue
        valid.append((float(x), float(y), p))
    out = [(x, y, p) for x, y, p in valid
           if not any(qx >= x and qy >= y and (qx > x or qy > y) for qx, qy, _ in valid)]
    out.sort(key=lambda t: (t[0], -t[1]))
    return [p for _, _, p in out]


def _settings(cells: Iterable[CellResult]) -> list[Setting]:
    """Every setting of the cells, in order of first appearance."""
    return list(dict.fromkeys(Setting(c.codec, c.level) for c in cells))  # type: ignore[arg-type]


def _at_largest(cells: Iterable[CellResult]) -> dict[Setting, CellResult]:
    """Each setting's cell at the largest batch size measured for it."""
    out: dict[Setting, CellResult] = {}
    for c in cells:
        s = Setting(c.codec, c.level)  # type: ignore[arg-type]
        if s not in out or c.batch_bytes > out[s].batch_bytes:
            out[s] = c
    return out


def plotted_settings(cells: Sequence[CellResult], limit: int = MAX_SETTINGS) -> list[Setting]:
    """The settings the batch-size plot shows, in the cells' order.

    All of them when there are at most `limit`; otherwise, per codec, its default level (level None), its
    fastest level and its highest-ratio level, each judged at the largest batch size measured (ties go
    to the setting met first). A codec without speeds (`none`) keeps only its default and highest-ratio.
    """
    every = _settings(cells)
    if len(every) <= limit:
        return every
    at = _at_largest(cells)
    keep: set[Setting] = set()
    for codec in dict.fromkeys(s.codec for s in every):
        mine = [s for s in every if s.codec == codec]
        keep.update(s for s in mine if s.level is None)
        timed = [s for s in mine if at[s].compress_mb_s is not None]
        if timed:
            keep.add(max(timed, key=lambda s: at[s].compress_mb_s or 0.0))
        rated = [s for s in mine if not math.isnan(at[s].ratio)]
        if rated:
            keep.add(max(rated, key=lambda s: at[s].ratio))
    return [s for s in every if s in keep]


def _missing(v: float | None) -> bool:
    return v is None or math.isnan(v)


def format_ratio(v: float | None) -> str:
    """A compression ratio as the report prints it (3 decimals: neighbouring levels differ little)."""
    return _DASH if _missing(v) else f"{v:.3f}"


def format_number(v: float | None) -> str:
    """A speed, a CPU time or a size per record with about three significant digits; None or NaN: a dash."""
    if v is None or math.isnan(v):
        return _DASH
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.001:
        return f"{v:.3g}"
    return f"{v:.2e}"


def _level(codec: str, level: int | None) -> str:
    if level is not None:
        return str(level)
    return "default" if codec in _LEVELLED else _DASH


def _recommended(cells: Sequence[CellResult], recommendation: Mapping[str, object] | None) -> CellResult | None:
    if not recommendation or not {"codec", "level", "batch_bytes"} <= recommendation.keys():
        return None
    want = (recommendation["codec"], recommendation["level"], recommendation["batch_bytes"])
    return next((c for c in cells if (c.codec, c.level, c.batch_bytes) == want), None)


def _codec_order(codecs: Iterable[str]) -> list[str]:
    """The codecs once each: Kafka's order first, then any other by name."""
    seen = set(codecs)
    return [c for c in CODECS if c in seen] + sorted(seen - set(CODECS))


# --- figures ----------------------------------------------------------------------------------------------


def _figure() -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=_FIGSIZE, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _nothing(fig: Figure, title: str, why: str) -> Figure:
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, wrap=True)
    return fig


def _speed(c: CellResult) -> float:
    """A plotted cell's compress MB/s per core: only cells measured compressing are plotted."""
    assert c.compress_mb_s is not None
    return c.compress_mb_s


def frontier_figure(cells: Sequence[CellResult], recommendation: Mapping[str, object] | None = None) -> Figure:
    """Ratio against compress MB/s per core (log x) at the largest batch size, per codec, with its frontier.

    Artists carry gids for reading the plot back: `points:<codec>` (a scatter), `frontier:<codec>` (a
    line through the codec's Pareto frontier), `recommended` (the recommended cell's marker).
    """
    fig = _figure()
    title = "Ratio/speed frontier per codec"
    if not cells:
        return _nothing(fig, title, "Nothing to plot: no cells were measured.")
    largest = max(c.batch_bytes for c in cells)
    shown = [c for c in cells if c.batch_bytes == largest and c.compress_mb_s is not None and not math.isnan(c.ratio)]
    title = f"{title} (batch size {batch_label(largest)}, the largest measured)"
    if not shown:
        return _nothing(fig, title, "Nothing to plot: no codec with a measured compress speed\n"
                                    "(codec none does not compress, so it has no speed).")
    ax = fig.add_subplot()
    for codec in _codec_order(c.codec for c in shown):
        mine = [c for c in shown if c.codec == codec]
        colour, marker = _STYLE.get(codec, ("black", "o"))
        ax.scatter([_speed(c) for c in mine], [c.ratio for c in mine], color=colour, marker=marker, s=36,
                   label=codec, gid=f"points:{codec}", zorder=3)
        front = frontier(mine, key=lambda c: (_speed(c), c.ratio))
        ax.plot([_speed(c) for c in front], [c.ratio for c in front], color=colour, linewidth=1.2,
                alpha=0.8, gid=f"frontier:{codec}", label=f"_{codec} frontier", zorder=2)
        for c in mine:
            if c.level is not None:
                ax.annotate(str(c.level), (c.compress_mb_s, c.ratio), textcoords="offset points", xytext=(4, 4),
                            fontsize=7, color=colour)
    best = _recommended(cells, recommendation)
    if best is not None and best.compress_mb_s is not None:
        where = "" if best.batch_bytes == largest else f" @ {batch_label(best.batch_bytes)}"
        ax.scatter([best.compress_mb_s], [best.ratio], marker="*", s=320, facecolors="gold", edgecolors="black",
                   linewidths=1.0, zorder=4, gid="recommended", label=f"recommended ({best.label}{where})")
    ax.set_xscale("log")
    ax.set_xlabel("compress MB/s per core (uncompressed MB per CPU second, log scale)")
    ax.set_ylabel("compression ratio (uncompressed / compressed)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize=9)
    return fig


def batch_size_figure(cells: Sequence[CellResult], settings: Sequence[Setting] | None = None) -> Figure:
    """Ratio against batch size (log2 x, ticks at the sizes measured), one line per setting.

    `settings`: the lines to draw (default: `plotted_settings(cells)`). Each line has gid `setting:<label>`.
    """
    fig = _figure()
    title = "Ratio vs batch size per codec"
    chosen = plotted_settings(cells) if settings is None else list(settings)
    drawn = [s for s in chosen if any((c.codec, c.level) == (s.codec, s.level) and not math.isnan(c.ratio)
                                      for c in cells)]
    if not drawn:
        return _nothing(fig, title, "Nothing to plot: no cells were measured.")
    from matplotlib import colormaps
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    ax = fig.add_subplot()
    per_codec: dict[str, list[Setting]] = {}
    for s in drawn:
        per_codec.setdefault(s.codec, []).append(s)
    colour: str | tuple[float, float, float, float]  # a named colour, or a shade: red, green, blue, alpha
    for s in drawn:
        mine = sorted((c for c in cells if (c.codec, c.level) == (s.codec, s.level) and not math.isnan(c.ratio)),
                      key=lambda c: c.batch_bytes)
        siblings = per_codec[s.codec]
        colour, marker = _STYLE.get(s.codec, ("black", "o"))
        if len(siblings) > 1 and s.codec in _SHADES:  # shades of the codec's colour, light to dark
            colour = colormaps[_SHADES[s.codec]](0.45 + 0.5 * siblings.index(s) / (len(siblings) - 1))
        ax.plot([c.batch_bytes for c in mine], [c.ratio for c in mine], color=colour, marker=marker, markersize=5,
                linewidth=1.5, label=s.label, gid=f"setting:{s.label}")
    sizes = sorted({c.batch_bytes for c in cells})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_major_formatter(FixedFormatter([batch_label(n) for n in sizes]))
    ax.xaxis.set_minor_locator(NullLocator())
    if len(sizes) == 1:
        ax.set_xlim(sizes[0] / 2, sizes[0] * 2)
    ax.set_xlabel("batch size (log scale)")
    ax.set_ylabel("compression ratio (uncompressed / compressed)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return fig


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, format="png", dpi=_DPI, metadata={"Software": None})


# --- the page ---------------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.recommended td { background: #fff6cc; font-weight: 600; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; max-width: 900px; }
p.recommendation { font-size: 1.1em; }
"""

_COLUMNS = ("setting", "codec", "level", "batch size", "records", "uncompressed bytes", "compressed bytes",
            "ratio", "compress MB/s", "decompress MB/s", "compress CPU s/1M", "decompress CPU s/1M",
            "bytes per record")
_TEXT_COLUMNS = 3  # the first columns are text; the others are numbers, aligned right
_TABLE_NOTE = ("<p>Speeds are uncompressed MB per CPU second on one core; CPU s/1M is CPU seconds per million "
               "records; bytes per record include the batch framing. A dash: no such figure (codec none does "
               "not compress).</p>")


def _row(c: CellResult, max_batch: int | None = None) -> tuple[str, ...]:
    over = " \u26a0" if max_batch is not None and c.batch_bytes > max_batch else ""  # above Kafka's limits
    return (c.label, c.codec, _level(c.codec, c.level), batch_label(c.batch_bytes) + over, f"{c.records:,}",
            f"{c.uncompressed_bytes:,}", f"{c.compressed_bytes:,}", format_ratio(c.ratio),
            format_number(c.compress_mb_s), format_number(c.decompress_mb_s),
            format_number(c.compress_cpu_s_per_1m), format_number(c.decompress_cpu_s_per_1m),
            format_number(c.bytes_per_record))


def _value(key: str, v: object) -> str:
    if v is None:
        return "default" if key == "level" else _DASH
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int) and key.endswith("bytes"):
        return f"{v:,} ({batch_label(v)})" if v >= KIB else f"{v:,}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return format_ratio(v) if "ratio" in key else format_number(v)
    return str(v)


def _frontier_caption(cells: Sequence[CellResult]) -> str:
    if not cells:
        return "No cells were measured."
    largest = max(c.batch_bytes for c in cells)
    timed = any(c.compress_mb_s is not None for c in cells if c.batch_bytes == largest)
    text = (f"Compression ratio against compress speed (uncompressed MB per CPU second on one core, log "
            f"scale), each cell at the largest batch size measured, {batch_label(largest)}. One colour and marker "
            f"per codec; the number beside a point is its level. Each codec's line joins its Pareto frontier: the "
            f"levels that no other level of the codec beats on both speed and ratio.")
    if any(c.codec == "none" for c in cells):
        text += " Codec none is left out: it does not compress, so it has no speed (its ratio is 1)."
    if not timed:
        text += " Nothing to plot: no codec with a measured compress speed."
    return text


def _batch_caption(cells: Sequence[CellResult]) -> str:
    every, shown = _settings(cells), plotted_settings(cells)
    text = "Compression ratio against batch size (log scale), one line per setting (codec and level)."
    if len(shown) < len(every):
        largest = batch_label(max(c.batch_bytes for c in cells))
        text += (f" {len(every)} settings were measured; to keep the plot readable it shows, per codec, only its "
                 f"default level, its fastest level and its highest-ratio level (judged at {largest}): "
                 f"{', '.join(s.label for s in shown)}. The table below has every setting.")
    return text


def _page(cells: Sequence[CellResult], title: str, summary_lines: Sequence[str],
          recommendation: Mapping[str, object] | None) -> str:
    e = html.escape
    out = ["<!doctype html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{e(title)}</title>",
           f"<style>{_CSS}</style>", "</head>", "<body>", f"<h1>{e(title)}</h1>"]
    if summary_lines:
        out.append('<ul class="summary">')
        out += [f"<li>{e(line)}</li>" for line in summary_lines]
        out.append("</ul>")
    if recommendation is not None:
        out.append("<h2>Recommendation</h2>")
        text = recommendation.get("text")
        if text is not None:
            out.append(f'<p class="recommendation">{e(str(text))}</p>')
        rest = [(k, v) for k, v in recommendation.items() if k not in ("text", "warnings")]  # warnings: in the text
        if rest:
            out.append('<table class="recommendation">')
            out += [f"<tr><th>{e(str(k))}</th><td>{e(_value(str(k), v))}</td></tr>" for k, v in rest]
            out.append("</table>")
    out += ["<h2>Ratio and speed</h2>", "<figure>",
            f'<img src="{FRONTIER_PNG}" alt="ratio against compress speed per codec" width="900" height="600">',
            f"<figcaption>{e(_frontier_caption(cells))}</figcaption>", "</figure>",
            "<h2>Ratio and batch size</h2>", "<figure>",
            f'<img src="{BATCH_SIZE_PNG}" alt="ratio against batch size per setting" width="900" height="600">',
            f"<figcaption>{e(_batch_caption(cells))}</figcaption>", "</figure>",
            "<h2>Every cell</h2>",
            _TABLE_NOTE,
            '<table class="cells">', "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in _COLUMNS) + "</tr></thead>",
            "<tbody>"]
    best = _recommended(cells, recommendation)
    max_batch = (recommendation or {}).get("max_batch_bytes")  # an int where a recommendation was made
    for c in cells:
        tds = "".join(f"<td>{e(v)}</td>" if i < _TEXT_COLUMNS else f'<td class="num">{e(v)}</td>'
                      for i, v in enumerate(_row(c, max_batch if isinstance(max_batch, int) else None)))
        out.append(f'<tr class="recommended">{tds}</tr>' if c is best else f"<tr>{tds}</tr>")
    out += ["</tbody>", "</table>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def check_directory(directory: Path) -> None:
    """Make sure the report can be written to `directory` before any work is done: create it (with its parents),
    and try a file in it. ConfigError, one line, when it is a file, cannot be created or written, or holds a
    directory where one of the report's files goes. The report's own files already there are replaced."""
    directory = Path(directory)
    what = f"--html {directory}"
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{what}: is a file; give a directory for {INDEX_HTML}, {FRONTIER_PNG} and {BATCH_SIZE_PNG}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in (INDEX_HTML, FRONTIER_PNG, BATCH_SIZE_PNG):
            if (directory / name).exists() and not (directory / name).is_file():
                raise ConfigError(f"{what}: {directory / name} is not a file, and the report writes one there")
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ConfigError(f"{what}: cannot write the report there: {exc.strerror or exc}") from None


def write_report(directory: Path, cells: Sequence[CellResult], *, title: str, summary_lines: Sequence[str] = (),
                 recommendation: Mapping[str, object] | None = None) -> list[Path]:
    """Write DIR/index.html, DIR/frontier.png and DIR/batch-size.png (creating DIR); return the paths written.

    `recommendation`: its "text" is shown as a paragraph and its other keys in a small table; when it has
    "codec", "level" and "batch_bytes", that cell is marked in the frontier plot and the table.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    index, front, batch = directory / INDEX_HTML, directory / FRONTIER_PNG, directory / BATCH_SIZE_PNG
    # the plots show one batching rule (librdkafka's when `--producer both` measured both); the table all
    plotted = [c for c in cells if c.producer == "librdkafka"] or list(cells)
    for path, draw in ((front, lambda: frontier_figure(plotted, recommendation)),
                       (batch, lambda: batch_size_figure(plotted))):
        fig = draw()
        _save(fig, path)
        fig.clear()  # no pyplot: nothing else holds the figure once it is dropped
    index.write_text(_page(cells, title, summary_lines, recommendation), encoding="utf-8")
    return [index, front, batch]
