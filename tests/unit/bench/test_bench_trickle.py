"""The bench's live trickle: its rate as asked on the command line, fixed or a share of the copy's own rate; and
the per-thread CPU a copy's busiest thread is read from."""

from __future__ import annotations

import os
import threading
import time

import click
import pytest

from bench.__main__ import _rate
from bench.copiers import thread_cpu
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
