"""CPU time of this process's threads, and which client each belongs to.

Each thread's CPU clock is read in nanoseconds (clock_gettime on the thread's own CPU-time clock, the id
pthread_getcpuclockid gives, made from its kernel thread id); where the kernel refuses that clock,
/proc/self/task/<tid>/stat, which counts in ticks of 10 ms: a thread that ran 5 ms may read 0.

librdkafka names its threads rdk:main, rdk:broker<N>... alike in every client, so a thread is
attributed to a client by diffing the task list around the client's creation (after a
metadata request, which makes it start a thread per broker). Threads that appear later (a
broker added to the cluster) are counted under "unattributed".
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path

from transcoder.codecs import POOL_THREAD_PREFIX, pool_cpu_by_thread

_TICKS = os.sysconf("SC_CLK_TCK")
TASKS = Path("/proc/self/task")


def parse_stat(text: str) -> tuple[str, float]:
    """(thread name, user + system CPU seconds) from one /proc/<pid>/task/<tid>/stat line."""
    # The name is in parentheses and may itself hold spaces or parentheses: split at the last ')'.
    open_, close = text.index("("), text.rindex(")")
    name = text[open_ + 1:close]
    fields = text[close + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), counted from 1
    return name, (utime + stime) / _TICKS


def thread_ids() -> set[int]:
    return {int(p.name) for p in TASKS.iterdir() if p.name.isdigit()}


def _name(tid: int) -> str:
    """Thread `tid`'s name ('' once it has exited)."""
    try:
        return (TASKS / str(tid) / "comm").read_text().strip()
    except OSError:
        return ""


def cpu_clock_id(tid: int) -> int:
    """The CPU-time clock of kernel thread `tid` of this process (Linux's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED):
    what glibc's pthread_getcpuclockid returns, for a thread known only by its kernel id, as librdkafka's are)."""
    return (~tid << 3) | 0b110  # CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2)


def thread_cpu(tid: int) -> float | None:
    """CPU seconds of thread `tid` of this process; None once it has exited."""
    try:
        return time.clock_gettime(cpu_clock_id(tid))
    except OSError:
        pass  # exited, or a kernel without per-thread CPU clocks: /proc tells which
    try:
        return parse_stat((TASKS / str(tid) / "stat").read_text())[1]
    except (OSError, ValueError):
        return None  # the thread has exited


class ThreadLedger:
    """Owner of each thread, and CPU seconds per owner, kept when threads exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[int, Hashable] = {}
        self._last: dict[int, float] = {}  # tid -> CPU seconds last read (a dead thread keeps its total)
        self._pool: set[int] = set()  # the compression pool's threads: counted through pool_cpu_by_thread

    def claim(self, owner: Hashable, tids: set[int]) -> None:
        with self._lock:
            for tid in tids:
                self._owner.setdefault(tid, owner)

    def create(self, owner: Hashable, make: Callable[[], object],
               warm: Callable[[object], None] | None = None) -> object:
        """Build a client, let `warm` start its threads, and claim the new threads for `owner`."""
        before = thread_ids()
        client = make()
        if warm is not None:
            warm(client)
        self.claim(owner, thread_ids() - before)
        return client

    def cpu_by_owner(self) -> dict[Hashable, float]:
        """CPU seconds per owner since its threads started (threads no one claimed: 'unattributed'), with what the
        compiled compression pool spent for each of its threads (the pool's own threads left out: their CPU is
        in those sums, whichever client's thread asked)."""
        with self._lock:
            for tid in thread_ids():
                if tid in self._pool:
                    continue
                if tid not in self._last and _name(tid).startswith(POOL_THREAD_PREFIX):
                    self._pool.add(tid)
                    continue
                got = thread_cpu(tid)
                if got is not None:
                    self._last[tid] = got
            out: dict[Hashable, float] = {}
            for tid, cpu in self._last.items():
                owner = self._owner.get(tid, "unattributed")
                out[owner] = out.get(owner, 0.0) + cpu
            for tid, cpu in pool_cpu_by_thread().items():
                owner = self._owner.get(tid, "unattributed")
                out[owner] = out.get(owner, 0.0) + cpu
            return out
