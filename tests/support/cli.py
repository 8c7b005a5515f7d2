"""The real `transcoder` command, run in a child process."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `transcoder` command in a child process: real exit codes, real stderr."""
    return subprocess.run([sys.executable, "-m", "transcoder", *args], capture_output=True, text=True, check=False,
                          timeout=timeout, env={**os.environ, "TRANSCODER_LOG_LEVEL": "warning", **(env or {})})


def one_line(proc: subprocess.CompletedProcess[str], *, secrets: tuple[str, ...] = ()) -> str:
    """The single stderr line of a refused command: no traceback, nothing else, none of `secrets` anywhere."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for s in secrets:
        assert s not in proc.stderr and s not in proc.stdout
    return lines[0]
