"""How far a one-shot copy (`run --until-caught-up`) is: the offsets left below the end offsets seen at start, the
share done, the rate and the time left. Pure: the engines hand in where each lane stands, from the same counters
/status and /metrics read (the records counter, the committed offsets)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from transcoder.pipeline.partitions import Partition

#: The rate is of the records copied over this many seconds (as rich's and tqdm's speed estimates): long enough
#: to smooth a commit interval's steps, short enough that a stall shows within it.
RATE_WINDOW_S = 30.0


@dataclass(frozen=True)
class LaneProgress:
    """One lane's progress, as an engine reports it to a progress observer."""

    lane: str
    #: the lane's state (LaneStatus.state): starting, running, caught-up, stopped, failed
    state: str
    #: records copied by this run: the lane's records counter (transcoder_records_in_total, /status `records`)
    records: int
    #: their bytes (key + value + headers): /status `source_bytes`
    source_bytes: int
    #: offsets left below the start end offsets (`remaining`); None: no end to reach (a continuous run)
    remaining: int | None
    #: the offsets the source partitions held when the run started (`span`); None: no end to reach
    total: int | None

    @property
    def fraction(self) -> float | None:
        """The share done, 0 to 1 (`fraction_done`); None without an end to reach."""
        return fraction_done(self.total, self.remaining)


def remaining(ends: Mapping[Partition, tuple[int, int]], position: Mapping[Partition, int]) -> int:
    """Offsets left: for each source partition, its high watermark when the run started minus where the lane stands
    (its committed offset; before its first commit, the partition's low watermark then), never below 0. Offsets, not
    records: on a compacted topic, or one with transaction markers, fewer records than that are left."""
    return sum(max(0, high - max(low, position.get(tp, low))) for tp, (low, high) in ends.items())


def span(ends: Mapping[Partition, tuple[int, int]]) -> int:
    """The offsets the source partitions held when the run started: each one's high minus low watermark."""
    return sum(max(0, high - low) for low, high in ends.values())


def fraction_done(total: int | None, left: int | None) -> float | None:
    """The share of the source's offsets at start (`total`, `span`) that is copied and committed: 1 - `left` /
    `total`. Of the whole topic, not of this run: a run that resumes from an earlier commit starts where that
    commit was (once it has read it), not at 0. 1.0 when there was nothing to copy; None when either is unknown."""
    if total is None or left is None:
        return None
    return 1.0 if total <= 0 else max(0.0, min(1.0, 1 - left / total))


def eta_seconds(left: int | None, rate: float | None) -> float | None:
    """Seconds until `left` offsets are copied at `rate` records per second: 0 when none are left; None when
    either is unknown, or nothing is being copied (a rate of 0)."""
    if left is None:
        return None
    if left <= 0:
        return 0.0
    if not rate or rate <= 0:
        return None
    return left / rate


class Rate:
    """Records per second over the readings of the last `window_s` seconds: (time, records copied so far) pairs
    added as they are read, the rate the slope between the oldest kept and the newest."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._readings: deque[tuple[float, int]] = deque()

    def add(self, t: float, count: int) -> None:
        """A reading: `count` records copied so far at monotonic time `t`."""
        self._readings.append((t, count))
        # keep one reading at or before the window's start, so the slope spans the whole window
        while len(self._readings) > 2 and self._readings[1][0] <= t - self.window_s:
            self._readings.popleft()

    def per_second(self) -> float | None:
        """Records per second over the window; None before two readings apart in time."""
        if len(self._readings) < 2:
            return None
        (t0, c0), (t1, c1) = self._readings[0], self._readings[-1]
        return None if t1 <= t0 else max(0.0, (c1 - c0) / (t1 - t0))
