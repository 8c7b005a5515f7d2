"""The `--html DIR` report: the frontier and settings helpers, the plotted data, the page, the PNGs."""

from __future__ import annotations

import math

import pytest
from numpy.testing import assert_allclose
from PIL import Image

from transcoder.evaluate.grid import KIB, MIB, Setting, batch_label
from transcoder.evaluate.html import (
    batch_size_figure,
    format_number,
    format_ratio,
    frontier,
    frontier_figure,
    plotted_settings,
    write_report,
)
from transcoder.evaluate.measure import CellResult

SIZES = (16 * KIB, 64 * KIB, 1 * MIB)
#: setting -> (ratio at 1 MiB, compress MB/s, decompress MB/s); gzip-9 is slower than gzip-6 and no smaller.
FIGURES: dict[tuple[str, int | None], tuple[float, float | None, float | None]] = {
    ("none", None): (1.0, None, None),
    ("gzip", 1): (4.1, 60.0, 300.0),
    ("gzip", 6): (4.6, 25.0, 320.0),
    ("gzip", 9): (4.58, 8.0, 320.0),
    ("snappy", None): (2.4, 450.0, 1200.0),
    ("lz4", None): (2.6, 520.0, 2500.0),
    ("zstd", 1): (4.4, 380.0, 1100.0),
    ("zstd", 3): (4.9, 250.0, 1000.0),
    ("zstd", 9): (5.4, 60.0, 1000.0),
    ("zstd", 19): (6.1, 3.0, 900.0),
}
SHRINK = {16 * KIB: 0.75, 64 * KIB: 0.9, 1 * MIB: 1.0}  # smaller batches compress less
RECORDS, RECORD_BYTES = 100_000, 19_000_000
RECOMMENDATION = {"text": "Use zstd-3 with 1 MiB batches: 4.9x smaller than uncompressed at 250 MB/s per core.",
                  "codec": "zstd", "level": 3, "batch_bytes": 1 * MIB, "ratio": 4.9, "saved_bytes_per_day": 12345678}


def cell(codec: str, level: int | None, size: int, figures=None) -> CellResult:
    ratio, c_speed, d_speed = figures or FIGURES[(codec, level)]
    batches = -(-RECORD_BYTES // size)
    uncompressed = RECORD_BYTES + 3 * RECORDS + 61 * batches
    ratio = 1.0 + (ratio - 1.0) * SHRINK[size]
    compressed = uncompressed if codec == "none" else round(uncompressed / ratio)
    return CellResult(codec=codec, level=level, batch_bytes=size, batches=batches, records=RECORDS,
                      record_bytes=RECORD_BYTES, uncompressed_bytes=uncompressed, compressed_bytes=compressed,
                      compress_cpu_s=0.0 if c_speed is None else uncompressed / 1e6 / c_speed,
                      decompress_cpu_s=0.0 if d_speed is None else uncompressed / 1e6 / d_speed)


def grid_cells() -> list[CellResult]:
    return [cell(codec, level, size) for (codec, level) in FIGURES for size in SIZES]


def by_gid(artists, gid):
    found = [a for a in artists if a.get_gid() == gid]
    assert len(found) == 1, f"{gid}: {len(found)} artists"
    return found[0]


# --- pure helpers -----------------------------------------------------------------------------------------


def test_the_frontier_is_exactly_the_points_nothing_beats_on_both_axes_by_increasing_x():
    points = [(1.0, 5.0), (2.0, 4.0), (3.0, 3.0),
              (2.0, 3.0),  # beaten by (2, 4) and (3, 3)
              (0.5, 4.5),  # beaten by (1, 5)
              (3.0, 2.0),  # as fast as (3, 3), lower ratio
              (1.0, float("nan"))]  # no speed: not a point
    assert frontier(points) == [(1.0, 5.0), (2.0, 4.0), (3.0, 3.0)]
    assert frontier([]) == []
    assert frontier([(1.0, 1.0), (1.0, 1.0)]) == [(1.0, 1.0), (1.0, 1.0)]  # equal points beat neither


def test_the_frontier_takes_a_key_and_returns_the_items():
    cells = [c for c in grid_cells() if c.codec == "gzip" and c.batch_bytes == MIB]
    front = frontier(cells, key=lambda c: (c.compress_mb_s, c.ratio))
    assert [c.label for c in front] == ["gzip-6", "gzip-1"]  # gzip-9: slower than gzip-6 and no smaller


def test_with_many_settings_the_batch_plot_keeps_per_codec_the_default_fastest_and_most_compact():
    cells = grid_cells()  # 10 settings
    assert [s.label for s in plotted_settings(cells)] == ["none", "gzip-1", "gzip-6", "snappy", "lz4", "zstd-1",
                                                         "zstd-19"]
    with_default = cells + [cell("zstd", None, size, (4.9, 250.0, 1000.0)) for size in SIZES]
    assert Setting("zstd", None) in plotted_settings(with_default)


def test_with_few_settings_the_batch_plot_shows_them_all():
    cells = [c for c in grid_cells() if c.codec in ("gzip", "zstd")]  # 7 settings
    assert plotted_settings(cells) == [Setting("gzip", 1), Setting("gzip", 6), Setting("gzip", 9), Setting("zstd", 1),
                                       Setting("zstd", 3), Setting("zstd", 9), Setting("zstd", 19)]


def test_numbers_read_as_the_command_line_and_the_table_write_them():
    assert [batch_label(n) for n in (16 * KIB, MIB, 4 * MIB, 1000, 100_000)] == [
        "16 KiB", "1 MiB", "4 MiB", "1,000 B", "100,000 B"]
    assert [format_number(v) for v in (None, float("nan"), 0.0, 1234.5, 250.0, 12.34, 1.234, 0.1234, 0.00001)] == [
        "–", "–", "0", "1,234", "250", "12.3", "1.23", "0.123", "1.00e-05"]
    assert format_ratio(4.9) == "4.900" and format_ratio(float("nan")) == "–"


# --- the figures ------------------------------------------------------------------------------------------


def test_the_frontier_plot_shows_each_codec_at_the_largest_batch_size_and_its_frontier():
    cells = grid_cells()
    fig = frontier_figure(cells, RECOMMENDATION)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    assert "1 MiB" in ax.get_title()
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        mine = [c for c in cells if c.codec == codec and c.batch_bytes == MIB]
        points = by_gid(ax.collections, f"points:{codec}").get_offsets()
        assert_allclose(points, [(c.compress_mb_s, c.ratio) for c in mine])
    assert not [a for a in ax.collections if a.get_gid() == "points:none"]  # no speed: not plotted
    gzip = by_gid(ax.lines, "frontier:gzip")
    g1, g6 = (next(c for c in cells if c.label == label and c.batch_bytes == MIB) for label in ("gzip-1", "gzip-6"))
    assert list(gzip.get_xdata()) == pytest.approx([g6.compress_mb_s, g1.compress_mb_s])
    assert list(gzip.get_ydata()) == pytest.approx([g6.ratio, g1.ratio])
    zstd = by_gid(ax.lines, "frontier:zstd")
    assert len(zstd.get_xdata()) == 4  # every zstd level here is on its frontier
    best = next(c for c in cells if (c.codec, c.level, c.batch_bytes) == ("zstd", 3, MIB))
    star = by_gid(ax.collections, "recommended")
    assert_allclose(star.get_offsets(), [(best.compress_mb_s, best.ratio)])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["gzip", "snappy", "lz4", "zstd", "recommended (zstd-3)"]
    annotations = sorted(t.get_text() for t in ax.texts)
    assert annotations == sorted(["1", "6", "9", "1", "3", "9", "19"])


def test_the_batch_size_plot_draws_each_settings_ratio_at_each_size_on_a_log2_axis():
    cells = grid_cells()
    fig = batch_size_figure(cells)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == [s.label for s in plotted_settings(cells)]
    zstd19 = by_gid(ax.lines, "setting:zstd-19")
    mine = [c for c in cells if c.label == "zstd-19"]
    assert list(zstd19.get_xdata()) == list(SIZES)
    assert list(zstd19.get_ydata()) == pytest.approx([c.ratio for c in mine])
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16 KiB", "64 KiB", "1 MiB"]


# --- the report -------------------------------------------------------------------------------------------


def test_the_report_writes_the_page_and_both_plots(tmp_path):
    cells = grid_cells()
    out = tmp_path / "report"
    written = write_report(out, cells, title="Evaluate <script>alert(1)</script> & co",
                           summary_lines=["sample: 100,000 records from topic <logs>", "engine: local"],
                           recommendation=RECOMMENDATION)
    assert written == [out / "index.html", out / "frontier.png", out / "batch-size.png"]
    for png in written[1:]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(png) as im:
            assert im.format == "PNG" and im.width >= 600 and im.height >= 400
    page = written[0].read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and '<meta charset="utf-8">' in page
    assert "<script" not in page.lower()
    assert "Evaluate &lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    assert "sample: 100,000 records from topic &lt;logs&gt;" in page
    assert RECOMMENDATION["text"] in page
    assert "<th>saved_bytes_per_day</th><td>12,345,678</td>" in page
    assert "<th>batch_bytes</th><td>1,048,576 (1 MiB)</td>" in page
    assert '<img src="frontier.png"' in page and '<img src="batch-size.png"' in page
    assert "Codec none is left out" in page
    assert "shows, per codec, only its default level, its fastest level and its highest-ratio level" in page
    rows = page.split("<tr")
    for c in cells:
        assert sum(f"<td>{c.label}</td>" in r and f">{batch_label(c.batch_bytes)}<" in r
                   and f">{format_ratio(c.ratio)}<" in r for r in rows) == 1, c
    recommended = [r for r in rows if r.startswith(' class="recommended"')]
    assert len(recommended) == 1 and "<td>zstd-3</td>" in recommended[0] and ">1 MiB<" in recommended[0]
    none_row = next(r for r in rows if "<td>none</td><td>none</td>" in r)
    assert none_row.count(">–<") == 3  # level, compress and decompress MB/s


def test_rewriting_the_same_report_gives_the_same_bytes(tmp_path):
    cells = [c for c in grid_cells() if c.codec in ("lz4", "zstd")]
    first = [p.read_bytes() for p in write_report(tmp_path / "a", cells, title="t")]
    second = [p.read_bytes() for p in write_report(tmp_path / "b", cells, title="t")]
    assert first == second


def test_a_report_of_only_none_cells_still_writes_and_says_there_is_nothing_to_plot(tmp_path):
    cells = [cell("none", None, size) for size in SIZES]
    fig = frontier_figure(cells)
    assert not fig.axes[0].collections and not fig.axes[0].lines
    assert any("Nothing to plot" in t.get_text() for t in fig.axes[0].texts)
    written = write_report(tmp_path, cells, title="only none", recommendation={"text": "Nothing to recommend."})
    assert all(p.stat().st_size > 0 for p in written)
    page = written[0].read_text(encoding="utf-8")
    assert "Nothing to plot" in page and "Nothing to recommend." in page
    assert all(math.isclose(c.ratio, 1.0, rel_tol=0.0) for c in cells)
    assert page.count(">1.000<") == 3


def test_a_report_of_no_cells_still_writes(tmp_path):
    written = write_report(tmp_path / "empty", [], title="nothing measured")
    assert [p.name for p in written] == ["index.html", "frontier.png", "batch-size.png"]
    assert all(p.exists() for p in written)


def test_with_both_batching_rules_the_plots_show_librdkafkas_and_the_table_both(tmp_path, monkeypatch):
    from dataclasses import replace

    from transcoder.evaluate import html as report

    cells = [CellResult(codec="zstd", level=3, batch_bytes=b, batches=4, records=1000, record_bytes=250_000,
                        uncompressed_bytes=260_000, compressed_bytes=c, compress_cpu_s=0.5, decompress_cpu_s=0.2)
             for b, c in ((16384, 50_000), (65536, 40_000))]
    both = cells + [replace(c, producer="java", compressed_bytes=c.compressed_bytes - 1000) for c in cells]
    drawn = []
    real = report.batch_size_figure
    monkeypatch.setattr(report, "batch_size_figure", lambda cs, settings=None: drawn.append(list(cs)) or real(cs))
    report.write_report(tmp_path, both, title="t")
    assert drawn == [cells]
    page = (tmp_path / "index.html").read_text()
    assert "zstd-3 (java)" in page
