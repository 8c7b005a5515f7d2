"""The real `transcoder` command, run in a child process."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `transcoder` command in a child process: real exit codes, real stderr."""
    return subprocess.run([sys.executable, "-m", "transcoder", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TRANSCODER_LOG_LEVEL": "warning", **(env or {})})
