"""The bench's live trickle: its rate as asked on the command line, fixed or a share of the copy's own rate; and
the per-thread CPU a copy's busiest thread is read from."""

from __future__ import annotations

import os
import threading
import time

import click
import pytest

from bench import measure
from bench.__main__ import _rate
from bench.copiers import machine_busy, thread_cpu
from bench.figures import CopyRun
from bench.run import Trickle
from bench.spans import Span


def copy(warm: Span | None) -> CopyRun:
    return CopyRun(copier="transcoder", codec="zstd", records=6_000_000, uncompressed_bytes=1, seconds=10.0,
                   cpu_seconds=1.0, startup_seconds=1.0, disk_bytes=1, warm=warm)


def test_a_share_of_the_copy_s_warmed_rate_or_of_its_whole_rate_without_a_warmed_span():
    half = Trickle(records=1000, share=0.5)
    assert half.rate_for(copy(Span(start=3.0, records=4_000_000, seconds=5.0, cpu_seconds=1.0))) == 400_000
    assert half.rate_for(copy(None)) == 300_000  # 6M records in 10 s
    assert Trickle(records=1000, rate=2000.0).rate_for(copy(None)) == 2000.0


@pytest.mark.parametrize(("given", "parsed"), [("2000", (2000.0, None)), ("50%", (0.0, 0.5)), ("100%", (0.0, 1.0))])
def test_latency_rate_takes_records_per_second_or_a_share(given, parsed):
    assert _rate(given) == parsed


@pytest.mark.parametrize("given", ["0", "-5", "0%", "150%", "fast", "%"])
def test_a_bad_latency_rate_is_refused_in_one_line(given):
    with pytest.raises(click.BadParameter, match="records/s above 0, or a share"):
        _rate(given)


def test_thread_cpu_names_each_thread_of_a_process_with_its_own_cpu():
    got: dict[str, float] = {}

    def spin() -> None:
        while time.thread_time() < 0.3:
            pass
        got["tid"] = threading.get_native_id()
        got["cpu"] = thread_cpu(os.getpid())[threading.get_native_id()]

    t = threading.Thread(target=spin)
    t.start()
    t.join()
    assert 0.29 <= got["cpu"] <= 0.5, got  # its own CPU, not the process's
    assert got["tid"] != threading.get_native_id() and threading.get_native_id() in thread_cpu(os.getpid())


def test_the_busiest_thread_keeps_the_last_reading_of_a_process_that_exited(monkeypatch):
    # pid 7's thread 70 uses 0.9 s of each second and the process exits after its reading at t=2; thread 71 of pid 8
    # uses 0.3 s of each second to the end at t=4
    readings = iter([{7: {70: 1.0}, 8: {71: 0.0}}, {7: {70: 1.9}, 8: {71: 0.3}}, {7: {70: 2.8}, 8: {71: 0.6}},
                     {7: {}, 8: {71: 0.9}}, {7: {}, 8: {71: 1.2}}])
    now: dict[int, dict[int, float]] = {}

    def thread_cpu(pid: int) -> dict[int, float]:
        return now[pid]

    monkeypatch.setattr(measure, "thread_cpu", thread_cpu)
    watch = measure._BusiestThread(lambda: [7, 8], every=0.5)
    assert watch.cores(1.0) is None  # never read
    for t in (0.0, 1.0, 2.0, 3.0):
        now.update(next(readings))
        watch.read(t)
    watch.read(3.2)  # within `every` of the last reading: not read
    now.update(next(readings))
    assert watch.cores(4.0) == pytest.approx(1.8 / 4)  # thread 70: 2.8 - 1.0 over 4 s (thread 71: 1.2 / 4)


def test_the_machine_s_busy_seconds_count_this_process_s_work():
    before, cpu0 = machine_busy(), time.process_time()
    while time.process_time() - cpu0 < 0.3:
        pass
    assert machine_busy() - before >= 0.25  # the spin, give or take a clock tick (other processes add to it)
