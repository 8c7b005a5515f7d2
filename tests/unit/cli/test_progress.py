"""Progress as the commands show it: bars on a terminal only, a log line every 30 s elsewhere, the words beside them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from structlog.testing import capture_logs

from transcoder.cli import progress as cli_progress
from transcoder.cli.progress import CopyBars, CopyLog, SeedBar, bars, copy_progress, copy_text, duration
from transcoder.pipeline.progress import LaneProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lane(records: int, remaining: int | None, state: str = "running", name: str = "zstd") -> LaneProgress:
    """A lane of a run that started from the beginning: what it copied and what is left make the whole."""
    return LaneProgress(lane=name, state=state, records=records, source_bytes=100 * records, remaining=remaining,
                        total=None if remaining is None else records + remaining)


def test_the_words_beside_a_bar():
    assert duration(None) == "-:--:--"
    assert duration(0) == "0:00:00"
    assert duration(3725.4) == "1:02:05"
    assert copy_text(lane(25_000, 75_000), 5000.0) == "25,000 records  5,000/s  25%  75,000 left  ETA 0:00:15"
    assert copy_text(lane(0, 1000), None) == "0 records  -/s  0%  1,000 left  ETA -:--:--"
    assert copy_text(lane(4000, 0, "caught-up"), 2000.0) == "4,000 records  2,000/s  100%  0 left  ETA 0:00:00"
    assert copy_text(lane(10, 5, "failed"), 1.0).endswith("  failed")
    assert copy_text(lane(10, None), 2.0) == "10 records  2/s"  # no end to reach: no share, nothing left


def test_copy_bars_draw_a_bar_per_lane_from_the_lanes_own_figures():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    clock = Clock()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[text]}"),
                  console=console, auto_refresh=False) as progress:
        bars_ = CopyBars(progress, clock=clock)
        for t in range(11):  # 1,000 records a second in lane zstd, 500 in lane lz4
            clock.now += 1
            bars_([lane(1000 * t, 20_000 - 1000 * t), lane(500 * t, 10_000 - 500 * t, name="lz4")])
        tasks = {t.description: t for t in progress.tasks}
        assert set(tasks) == {"zstd", "lz4"}
        assert (tasks["zstd"].completed, tasks["zstd"].total) == (0.5, 1.0)
        assert tasks["zstd"].fields["text"] == "10,000 records  1,000/s  50%  10,000 left  ETA 0:00:10"
        assert tasks["lz4"].fields["text"] == "5,000 records  500/s  50%  5,000 left  ETA 0:00:10"
        progress.refresh()
    assert "10,000 records  1,000/s  50%" in out.getvalue()


def test_without_a_terminal_the_run_logs_its_progress_every_interval_and_draws_nothing(monkeypatch, capsys):
    monkeypatch.setattr(cli_progress, "on_terminal", lambda: False)
    with copy_progress(one_shot=True) as observer:
        assert isinstance(observer, CopyLog)
    with copy_progress(one_shot=False) as observer:
        assert observer is None  # a continuous run: no end to show progress to
    with bars(TextColumn("x"), BarColumn()) as progress:
        task = progress.add_task("x", total=10)
        progress.update(task, completed=5)
    with SeedBar("t", 100, None) as seed_bar:
        seed_bar(50, 5000)
    assert capsys.readouterr() == ("", "")  # not a character: no bar, no escape code

    clock = Clock()
    log = CopyLog(interval_s=30, clock=clock)
    with capture_logs() as events:
        for t in range(1, 62):  # 61 s at 100 records a second
            clock.now += 1
            log([lane(100 * t, 10_000 - 100 * t)])
    assert [e["event"] for e in events] == ["copy_progress", "copy_progress"]  # at 30 s and 60 s
    assert {k: events[-1][k] for k in ("lane", "records", "records_per_s", "remaining_offsets", "percent", "eta_s")} \
        == {"lane": "zstd", "records": 6000, "records_per_s": 100.0, "remaining_offsets": 4000, "percent": 60.0,
            "eta_s": 40}


@pytest.mark.parametrize(("count", "max_bytes", "total", "completed"), [(100, None, 100, 40), (None, 8000, 8000, 4000),
                                                                      (None, None, None, 40)])
def test_seed_bar_counts_records_and_bytes_against_what_was_asked(monkeypatch, count, max_bytes, total, completed):
    monkeypatch.setattr(cli_progress, "on_terminal", lambda: True)
    bar = SeedBar("web.access", count, max_bytes)
    bar.progress.live.console.file = io.StringIO()  # drawn, but not onto the test's stderr
    with bar:
        bar(40, 4000)
        task = bar.progress.tasks[0]
        assert (task.total, task.completed, task.fields["text"]) == (total, completed, "40 records, 0.0 MB")
