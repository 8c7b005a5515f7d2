"""Progress as the commands show it: bars on stderr when it is a terminal (never in a pipe or a file; rich.progress,
cleared when done) for `run --until-caught-up`, `seed` and `evaluate`; where stderr is no terminal, `run`'s progress
as a log line every COPY_LOG_INTERVAL_S instead."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import structlog

from transcoder.engine.progress import ProgressObserver
from transcoder.pipeline.progress import LaneProgress, Rate, eta_seconds

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID

log = structlog.get_logger("transcoder.progress")

#: Without a terminal, `run --until-caught-up` logs each lane's progress this often (seconds).
COPY_LOG_INTERVAL_S = 30.0


def on_terminal() -> bool:
    """Whether the process's stderr is a terminal: bars are drawn there, and nowhere else."""
    return sys.stderr.isatty()


def bars(*columns: str | ProgressColumn) -> Progress:
    """A rich Progress on stderr, drawn only when stderr is a terminal (disabled otherwise: nothing written at all),
    cleared when it ends. While it draws, log lines are printed above it (transcoder.logs writes to the process's
    stderr as it is then, which rich's live display takes over)."""
    from rich.console import Console
    from rich.progress import Progress

    return Progress(*columns, console=Console(stderr=True), transient=True, disable=not on_terminal())


def duration(seconds: float | None) -> str:
    """H:MM:SS, as rich's and Kafka's tools show a time left; `-:--:--` when unknown."""
    if seconds is None:
        return "-:--:--"
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def copy_text(lane: LaneProgress, rate: float | None) -> str:
    """A lane's progress in words: records copied, the rate, the share done, what is left and the time left."""
    parts = [f"{lane.records:,} records", "-/s" if rate is None else f"{rate:,.0f}/s"]
    fraction = lane.fraction
    if fraction is not None and lane.remaining is not None:
        parts += [f"{fraction:.0%}", f"{lane.remaining:,} left", f"ETA {duration(eta_seconds(lane.remaining, rate))}"]
    if lane.state not in ("running", "caught-up"):
        parts.append(lane.state)
    return "  ".join(parts)


class CopyBars:
    """A progress observer (transcoder.engine.progress) drawing a bar per lane: the source's offsets at start copied
    and committed (LaneProgress.fraction), with copy_text beside it."""

    def __init__(self, progress: Progress, clock: Callable[[], float] = time.monotonic) -> None:
        self.progress = progress
        self.clock = clock
        self._tasks: dict[str, TaskID] = {}
        self._rates: dict[str, Rate] = {}

    def __call__(self, lanes: Sequence[LaneProgress]) -> None:
        now = self.clock()
        for lane in lanes:
            rate = self._rates.setdefault(lane.lane, Rate())
            rate.add(now, lane.records)
            fraction = lane.fraction
            task = self._tasks.get(lane.lane)
            if task is None:  # a bar of the share done: no total without an end (rich draws it pulsing)
                task = self._tasks[lane.lane] = self.progress.add_task(
                    lane.lane, total=None if fraction is None else 1.0, text="")
            self.progress.update(task, completed=fraction or 0.0, text=copy_text(lane, rate.per_second()))


class CopyLog:
    """A progress observer for a run without a terminal: each lane's progress logged as `copy_progress` every
    `interval_s` (records, rate, share done, offsets left, seconds left)."""

    def __init__(self, interval_s: float = COPY_LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._rates: dict[str, Rate] = {}
        self._next = clock() + interval_s

    def __call__(self, lanes: Sequence[LaneProgress]) -> None:
        now = self.clock()
        for lane in lanes:
            self._rates.setdefault(lane.lane, Rate()).add(now, lane.records)
        if now < self._next:
            return
        self._next = now + self.interval_s
        for lane in lanes:
            rate = self._rates[lane.lane].per_second()
            eta = eta_seconds(lane.remaining, rate)
            fraction = lane.fraction
            log.info("copy_progress", lane=lane.lane, state=lane.state, records=lane.records,
                     records_per_s=None if rate is None else round(rate, 1), remaining_offsets=lane.remaining,
                     percent=None if fraction is None else round(100 * fraction, 1),
                     eta_s=None if eta is None else round(eta))


@contextmanager
def copy_progress(one_shot: bool) -> Iterator[ProgressObserver | None]:
    """The observer `run` hands its engine: for a one-shot run (--until-caught-up), bars on a terminal, else a log
    line every COPY_LOG_INTERVAL_S; for a continuous run, none (it has no end to show progress to)."""
    if not one_shot:
        yield None
        return
    if not on_terminal():
        yield CopyLog()
        return
    from rich.progress import BarColumn, TextColumn

    with bars(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[text]}")) as progress:
        yield CopyBars(progress)


class SeedBar:
    """`seed`'s bar: records and bytes written to the topic, against --count or --bytes when one was given."""

    def __init__(self, topic: str, count: int | None, max_bytes: int | None) -> None:
        from rich.progress import BarColumn, TextColumn, TimeRemainingColumn

        self.by_bytes = max_bytes is not None
        self.total = max_bytes if self.by_bytes else count
        self.progress = bars(TextColumn(f"seeding {topic}"), BarColumn(), TextColumn("{task.fields[text]}"),
                             TimeRemainingColumn())
        self._task: TaskID | None = None

    def __enter__(self) -> SeedBar:
        self.progress.__enter__()
        self._task = self.progress.add_task("seed", total=self.total, text="")
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, records: int, nbytes: int) -> None:
        """The producing loop's tally: records and bytes (key + value + headers) handed to the producer so far."""
        assert self._task is not None, "SeedBar is called inside its `with`"
        self.progress.update(self._task, completed=nbytes if self.by_bytes else records,
                             text=f"{records:,} records, {nbytes / 1e6:,.1f} MB")
