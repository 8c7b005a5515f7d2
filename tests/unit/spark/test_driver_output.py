"""The Spark driver's output held in a file while Spark starts, and Spark's reason read from it (issue 42)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from transcoder.spark.driver_output import DriverOutput, start_failure_reason

#: what a driver whose master port is closed printed (spark://127.0.0.1:41234; pyspark 4.2), cut short
UNRESPONSIVE = """\
26/11/28 17:00:01 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform
26/11/28 17:00:04 WARN StandaloneAppClient$ClientEndpoint: Failed to connect to master 127.0.0.1:41234
org.apache.spark.SparkException: Exception thrown in awaitResult:
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:53)
Caused by: java.io.IOException: Failed to connect to /127.0.0.1:41234
\tat org.apache.spark.network.client.TransportClientFactory.createClient(TransportClientFactory.java:294)
\t... 4 more
Caused by: io.netty.channel.AbstractChannel$AnnotatedConnectException: finishConnect(..) failed with error(-111): \
Connection refused: /127.0.0.1:41234
Caused by: java.net.ConnectException: finishConnect(..) failed with error(-111): Connection refused
\tat io.netty.channel.unix.Errors.newConnectException0(Errors.java:166)
26/11/28 17:01:04 ERROR StandaloneSchedulerBackend: Application has been killed. Reason: All masters are \
unresponsive! Giving up.
26/11/28 17:01:04 WARN StandaloneSchedulerBackend: Application ID is not initialized yet.
26/11/28 17:01:05 ERROR SparkContext: Error initializing SparkContext.
java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
"""


def test_the_reason_is_the_schedulers_with_the_master_and_the_root_cause():
    assert start_failure_reason(UNRESPONSIVE.splitlines()) == (
        "All masters are unresponsive! Giving up. (failed to connect to master 127.0.0.1:41234: finishConnect(..) "
        "failed with error(-111): Connection refused)")


def test_other_failures_leave_the_reason_to_the_exception():
    lines = ["26/11/28 17:00:01 WARN Utils: something harmless",
             "26/11/28 17:00:02 ERROR SparkContext: Error initializing SparkContext.",
             "org.apache.spark.SparkException: Could not parse Master URL: 'mesos://h:5050'"]
    assert start_failure_reason(lines) is None


def _wait_for(check, timeout: float = 120.0) -> None:
    """Until `check()` holds; bounded generously: the pump is a thread of its own, and a loaded CI machine can leave it
    unscheduled for seconds (fresh-clone CI of b73bab4, 4 test processes and their brokers on 2 cores: 5 s ran out;
    of b1fc1f4: 30 s ran out)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_held_lines_go_to_a_file_then_to_stderr_again(capfd):
    out = DriverOutput()
    try:
        held = out.hold()
        assert held.stat().st_mode & 0o777 == 0o600
        os.write(out.write_fd, b"start-up chatter\n")
        _wait_for(lambda: held.read_bytes() == b"start-up chatter\n")
        assert out.release(keep=False) is None and not held.exists()  # started: the file goes
        os.write(out.write_fd, b"a warning while copying\n")
        # waited for by the pump's count, then read once: polling readouterr() (which truncates the capture file)
        # lost a line the pump wrote between its read and its truncate, and the wait ran out (fresh-clone CI, twice)
        _wait_for(lambda: out.forwarded == 1)
        assert "a warning while copying" in capfd.readouterr().err

        failed = out.hold()
        os.write(out.write_fd, b"ERROR the reason\n")
        _wait_for(lambda: failed.read_bytes() == b"ERROR the reason\n")
        assert out.release(keep=True) == failed and Path(failed).exists()  # a failed start: named and kept
        assert "the reason" not in capfd.readouterr().err
        failed.unlink()
    finally:
        out.close_write_end()
