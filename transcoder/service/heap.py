"""Freed heap handed back to the system while the service runs.

glibc keeps what the copy frees (Fetch answers of up to a MiB, sealed batches, decoded record sets) in its heaps
for reuse; scattered among live blocks, those pages are never returned by `free` alone, so the process's RSS creeps
up over hours though what it holds does not grow. Measured in a 30-minute soak at 2,000 records/s: RSS +2.5 MB per
10 minutes after warm-up with glibc's default arenas and with MALLOC_ARENA_MAX=2 alike, Python's own allocations
flat (tracemalloc), and one malloc_trim(0) gave back 7.0 MB, to below the RSS at the end of warm-up
(bench/results/2026-11-26-memory-soak.md). The service calls it once a minute.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("transcoder.service")

#: How often the service hands freed heap back (a trim walks the heaps: well under a millisecond at ~100 MB).
TRIM_INTERVAL_S = 60.0


def malloc_trim() -> Callable[[], int] | None:
    """glibc's malloc_trim(0) (1 when it returned memory), or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: int(trim(0))


class HeapTrim:
    """Calls `trim` at most once per `interval_s`, from a loop that turns often (the service's main thread)."""

    def __init__(self, trim: Callable[[], int] | None = None, *, interval_s: float = TRIM_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._trim = trim if trim is not None else malloc_trim()
        self._interval, self._clock = interval_s, clock
        self._next = clock() + interval_s
        self.trims = 0

    def tick(self) -> None:
        if self._trim is None:
            return
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._interval
        released = self._trim()
        self.trims += 1
        log.debug("heap_trimmed", released=bool(released))
