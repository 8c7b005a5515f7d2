"""A Spark master that does not answer: one line with the reason and a non-zero exit, at once (issue 42: 162 lines of
Spark's log on the terminal and a line without the reason, after Spark's own 3 x 20 s of registration retries).

No cluster is started: a closed port is the master. (A start that fails later, once Spark runs, is one line with
Spark's reason and its log's file: tests/unit/spark/test_driver_output.py.)
"""

from __future__ import annotations

import socket

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.configs import raw_config

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_an_unreachable_master_is_one_line_at_once(kafka, topic_factory, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the socket is: nothing listens there
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [{"source": topic_factory(), "destinations": [{"codec": "lz4"}]}],
                                              spark={"master": f"spark://127.0.0.1:{port}",
                                                     "checkpoint_location": str(tmp_path / "checkpoints")})))
    proc = run_cli("run", "--engine", "spark", "--config", str(path), "--until-caught-up")
    assert proc.returncode == 5  # ExitCode.UNAVAILABLE: Spark did not answer
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == (f"transcoder: error: cannot start Spark (master spark://127.0.0.1:{port}): no master answers "
                        f"(127.0.0.1:{port}: Connection refused)")
