"""Arrival times: the Poisson clock every generator draws its record timestamps from."""

from __future__ import annotations

import itertools
import math
import random

from transcoder.dev.datagen.draws import BLOCK


class ArrivalClock:
    """Poisson arrivals: exponential gaps with fractional milliseconds kept between records."""

    __slots__ = ("_neg_mean", "_rng", "_t")

    def __init__(self, rng: random.Random, start_ms: int, events_per_second: float) -> None:
        self._rng = rng
        self._t = float(start_ms)
        self._neg_mean = -1000.0 / events_per_second

    @property
    def now(self) -> float:
        """The next arrival time (fractional ms), without drawing anything."""
        return self._t

    def block(self, k: int = BLOCK) -> list[float]:
        """The next `k` arrival times; the first record of a stream arrives at start_ms exactly."""
        rnd = self._rng.random
        log = math.log
        m = self._neg_mean
        # 1 - random() is in (0, 1], so the log is finite and the gap non-negative.
        times = list(itertools.accumulate([m * log(1.0 - rnd()) for _ in range(k)], initial=self._t))
        self._t = times.pop()
        return times


def micros(t: float, ms: int) -> int:
    """Epoch microseconds of fractional-ms time `t`, never leaving the millisecond `ms`."""
    return ms * 1000 + min(999, int((t - ms) * 1000.0))
