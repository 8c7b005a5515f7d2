"""The standalone master URL's addresses, as the Spark engine checks them before it starts Spark."""

from __future__ import annotations

import socket

import pytest

from transcoder.errors import ExitCode, SparkUnavailableError
from transcoder.spark.session import check_reachable, standalone_masters


@pytest.mark.parametrize(("master", "addresses"), [
    ("spark://h:7077", [("h", 7077)]),
    ("spark://h1:7077,h2:7078", [("h1", 7077), ("h2", 7078)]),
    ("spark://[::1]:7077", [("::1", 7077)]),
    ("local[2]", []),
    ("k8s://https://api:6443", []),
])
def test_standalone_masters(master, addresses):
    assert standalone_masters(master) == addresses


def test_a_closed_port_is_one_line_naming_each_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SparkUnavailableError, match=rf"no master answers \(127\.0\.0\.1:{port}: Connection refused\)"
                       ) as refused:
        check_reachable(f"spark://127.0.0.1:{port}", timeout=2)
    assert refused.value.exit_code == ExitCode.UNAVAILABLE == 5  # Spark unreachable: the command exits 5


def test_one_listening_standby_is_enough():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen()
        check_reachable(f"spark://127.0.0.1:{dead},127.0.0.1:{live.getsockname()[1]}", timeout=2)
