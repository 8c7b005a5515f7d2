"""A Spark master that does not answer: one line with Spark's reason, a non-zero exit, Spark's log in a file it names
(issue 42: 162 lines of Spark's log on the terminal and a line without the reason).

No cluster is started: a closed port is the master. Spark gives up after its own registration retries (3 x 20 s,
not configurable), so this test takes about a minute.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.configs import raw_config

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_an_unreachable_master_is_one_line_with_sparks_reason(kafka, topic_factory, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the socket is: nothing listens there
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [{"source": topic_factory(), "destinations": [{"codec": "lz4"}]}],
                                              spark={"master": f"spark://127.0.0.1:{port}",
                                                     "checkpoint_location": str(tmp_path / "checkpoints")})))
    proc = run_cli("run", "--engine", "spark", "--config", str(path), "--until-caught-up")
    assert proc.returncode != 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    m = re.fullmatch(rf"transcoder: error: cannot start Spark \(master spark://127\.0\.0\.1:{port}\): All masters are "
                     rf"unresponsive! Giving up\. \(failed to connect to master 127\.0\.0\.1:{port}: "
                     r"(?P<cause>.+)\); Spark's log: (?P<log>\S+)", lines[0])
    assert m is not None, lines[0]
    assert "Connection refused" in m["cause"]
    log = Path(m["log"])
    assert f"Failed to connect to master 127.0.0.1:{port}" in log.read_text()
    log.unlink()
