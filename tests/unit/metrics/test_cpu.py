"""Thread CPU accounting from /proc: parsing, ownership by creation, totals kept after exit."""

from __future__ import annotations

import threading
import time

from transcoder.metrics.cpu import ThreadLedger, parse_stat, thread_cpu


def test_parse_stat_with_a_name_holding_spaces_and_parentheses():
    line = ("4242 (rdk:broker (1) x) S 1 2 3 4 5 6 7 8 9 10 " + "250 50" + " 0 0 20 0 1 0 100 0 0\n")
    name, cpu = parse_stat(line)
    assert name == "rdk:broker (1) x"
    assert cpu == (250 + 50) / __import__("os").sysconf("SC_CLK_TCK")


def test_cpu_is_attributed_to_the_owner_of_the_threads_it_created():
    ledger = ThreadLedger()
    done = threading.Event()

    def burn() -> None:
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass
        done.wait(10)

    def make() -> threading.Thread:
        t = threading.Thread(target=burn, name="burner")
        t.start()
        return t

    t = ledger.create("burner-owner", make)
    deadline = time.monotonic() + 30
    while thread_cpu(t.native_id) < 0.25 and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu = ledger.cpu_by_owner()  # read while the thread is alive
    assert cpu["burner-owner"] >= 0.25
    done.set()
    t.join()
    # After the thread exits its CPU is still counted.
    assert ledger.cpu_by_owner()["burner-owner"] >= 0.25


def test_a_threads_cpu_is_read_finer_than_the_10_ms_ticks_of_proc():
    # A librdkafka or fetcher thread that ran a few ms between two readings must show it: in ticks it may read 0
    # (a lane's `consume` part stood still over 60,000 more records that way).
    done, burned = threading.Event(), threading.Event()

    def burn() -> None:
        end = time.thread_time() + 0.003
        while time.thread_time() < end:
            pass
        burned.set()
        done.wait(10)

    t = threading.Thread(target=burn)
    t.start()
    try:
        assert burned.wait(10)
        got = thread_cpu(t.native_id)
        assert got is not None and 0.003 <= got < 1.0
        assert got * 1e6 % 10_000 != 0  # not a whole number of 10 ms ticks
    finally:
        done.set()
        t.join()
