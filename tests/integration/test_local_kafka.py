"""deploy/local/kafka's lifecycle on a broker of its own: up, status, down, bad input (a cluster of nodes, --brokers:
tests/cluster/test_local_cluster_cli.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.local_kafka import count_records, java_processes_using, path_without_maven, round_trip
from transcoder.dev.ports import ephemeral_range


def test_up_status_down_from_the_cache(kafka, tmp_path):
    state = tmp_path / "lk"
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(state), "PATH": path_without_maven(tmp_path)}
    up = run_cli("local-kafka", "up", env=env)
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1]
        host, port = bootstrap.split(":")
        assert host == "127.0.0.1" and int(port) > 0

        status = run_cli("local-kafka", "status", env=env)
        assert status.returncode == 0
        fields = dict(line.split(" ", 1) for line in status.stdout.strip().splitlines())
        assert fields["bootstrap"] == bootstrap
        assert Path(fields["data_dir"]).joinpath("meta.properties").exists()
        assert round_trip(bootstrap) == b"hello"
        assert len(java_processes_using(state)) == 1

        # The README's flow: `up`, then `transcoder seed` with no bootstrap finds the running broker.
        seeded = run_cli("seed", "--kind", "nginx", "--count", "100000", "--topic", "t", env=env)
        assert seeded.returncode == 0, seeded.stderr
        assert count_records(bootstrap, "t") == 100_000
    finally:
        down = run_cli("local-kafka", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert java_processes_using(state) == []
    assert run_cli("local-kafka", "status", env=env).returncode == 5  # ExitCode.UNAVAILABLE: none runs


def test_up_on_a_taken_port_is_one_line_and_leaves_nothing_running(tmp_path):
    state = tmp_path / "lk"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = run_cli("local-kafka", "up", "--port", str(port), env={"TRANSCODER_LOCAL_KAFKA_DIR": str(state)})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} on 127.0.0.1 is already in use" in lines[0]
    assert java_processes_using(state) == []
    assert not (state / "state.json").exists()


def test_down_without_a_broker_is_harmless(tmp_path):
    proc = run_cli("local-kafka", "down", env={"TRANSCODER_LOCAL_KAFKA_DIR": str(tmp_path / "none")})
    assert proc.returncode == 0
    assert "no local broker was running" in proc.stderr
    assert os.path.exists(tmp_path) and not (tmp_path / "none" / "state.json").exists()


def test_brokers_out_of_range_is_one_line_and_exit_2(tmp_path):
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(tmp_path / "lk")}
    for n in ("0", "10"):
        proc = run_cli("local-kafka", "up", "--brokers", n, env=env)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"transcoder: error: --brokers takes 1 to 9 nodes, not {n}"]
    assert not (tmp_path / "lk").exists()


def test_the_session_broker_listens_outside_the_ephemeral_range(kafka):
    """`restart` binds the same ports again after a kill: a port the kernel hands out (to any bind(0) or outgoing
    connection on the machine) could be taken while the broker is down, and the restart refused ("address already
    in use", seen with five test sessions beside it). Every port the broker binds lies outside that range."""
    if kafka.local is None:
        pytest.skip("the session's own broker only")
    state = kafka.local.state()
    low, high = ephemeral_range()
    ports = [state.port, state.controller_port, *([state.proxied_port] if state.proxied_port else []),
             *state.secured_ports()]
    assert all(not low <= p <= high for p in ports), (ports, (low, high))
