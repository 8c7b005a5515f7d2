"""The Spark driver JVM's output (its stdout and stderr, one pipe) while transcoder starts it, and Spark's reason
when it does not start.

While a SparkSession starts, what the JVM prints (Ivy's resolution, Spark's warnings and stack traces: a master
that does not answer is 160 lines) goes to a file; once the session has started, to this process's stderr as
before, and the file is removed. A start that fails keeps the file: the one-line error names it, and carries the
reason Spark logged (`start_failure_reason`) rather than the exception pyspark raises after it.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any


class DriverOutput:
    """Reads the driver JVM's output from a pipe on a thread of its own. `hold()` starts a file that takes the lines
    from then on; `release(keep=...)` sends the lines after it to stderr (fd 2) again, the file removed unless
    `keep`. Until the first `hold`, lines go to stderr."""

    def __init__(self) -> None:
        self._read_fd, self.write_fd = os.pipe()
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self.path: Path | None = None
        #: the JVM was launched on this pipe (or its launch failed): the pipe is not offered again
        self.launched = False
        #: lines the pump has written to stderr so far
        self.forwarded = 0
        self._thread = threading.Thread(target=self._pump, name="spark-driver-output", daemon=True)
        self._thread.start()

    def popen_kwargs(self) -> dict[str, Any]:
        """For pyspark's launch_gateway: the JVM's stdout and stderr both into this pipe."""
        import subprocess

        return {"stdout": self.write_fd, "stderr": subprocess.STDOUT}

    def close_write_end(self) -> None:
        """The JVM has its copy of the pipe's write end (or did not start): ours is closed, so the pump sees the
        pipe's end when the JVM exits."""
        if not self.launched:
            self.launched = True
            os.close(self.write_fd)

    def hold(self) -> Path:
        """From now on, the lines go to a new file (0600, in the temporary directory); its path."""
        fd, name = tempfile.mkstemp(prefix="transcoder-spark-driver-", suffix=".log")
        with self._lock:
            self._close_file()
            self._file = os.fdopen(fd, "wb")
            self.path = Path(name)
        return self.path

    def release(self, *, keep: bool) -> Path | None:
        """The lines after this go to stderr; the held file is closed, and removed unless `keep` (its path, if kept)."""
        with self._lock:
            path = self.path
            self._close_file()
            self.path = None
        if path is not None and not keep:
            path.unlink(missing_ok=True)
            return None
        return path

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _pump(self) -> None:
        with os.fdopen(self._read_fd, "rb", buffering=0) as pipe:
            for line in iter(pipe.readline, b""):
                with self._lock:
                    if self._file is not None:
                        self._file.write(line)
                        self._file.flush()
                        continue
                try:
                    os.write(2, line)
                except OSError:  # stderr closed: the line is dropped, the JVM must not block on a full pipe
                    pass
                self.forwarded += 1


_KILLED = re.compile(r"Application has been killed\. Reason: (.+)$")
_MASTER = re.compile(r"Failed to connect to master (\S+)")
_CAUSE = re.compile(r"^(?:Caused by: )?[\w.$]+(?:Exception|Error): (.+)$")
_LEVEL = re.compile(r"\b(ERROR|WARN|INFO)\b")


def start_failure_reason(lines: Iterable[str]) -> str | None:
    """Pure: Spark's own reason, in the driver's log, for a session that did not start because its master did not
    take the application (None: no such reason; the exception pyspark raised says the rest). The reason the scheduler
    gave for killing the application (`All masters are unresponsive! Giving up.`), with the last master it failed to
    reach and the root cause of that (`Connection refused`)."""
    killed = master = cause = None
    after_master = False
    for raw in lines:
        line = raw.strip()
        if m := _KILLED.search(line):
            killed = m.group(1).strip()
        elif m := _MASTER.search(line):
            master, cause, after_master = m.group(1), None, True
        elif after_master and (m := _CAUSE.match(line)):
            cause = m.group(1).strip()  # the last one of the trace: its root cause
        elif after_master and _LEVEL.search(line) and not line.startswith(("at ", "...")):
            after_master = False  # the next log line: the trace has ended
    reached = None if master is None else f"failed to connect to master {master}" + (f": {cause}" if cause else "")
    if killed is None:
        return reached
    return f"{killed} ({reached})" if reached else killed


def reason_in(path: Path | None) -> str | None:
    """`start_failure_reason` of a held log file (None: no file, or no reason in it)."""
    if path is None:
        return None
    try:
        with path.open(errors="replace") as f:
            return start_failure_reason(f)
    except OSError:
        return None
