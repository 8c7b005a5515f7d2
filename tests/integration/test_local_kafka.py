"""deploy/local/kafka's lifecycle on brokers of its own (one; three with --brokers): up, status, down, bad input."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cli import run_cli
from transcoder.dev.ports import ephemeral_range


def _java_processes_using(state_dir: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kafka.Kafka" in cmdline and str(state_dir).encode() in cmdline:
                pids.append(int(proc.name))
    return pids


def _path_without_maven(tmp_path: Path) -> str:
    """A PATH holding java only: an `up` that needed Maven (the network) would fail."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "java").symlink_to(shutil.which("java"))
    return str(bindir)


def _round_trip(bootstrap: str) -> bytes | None:
    """Create a topic (auto-creation is off), produce one record and read it back."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the creation completes
    admin.create_topics([NewTopic("probe", 1, 1)])["probe"].result()
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce("probe", value=b"hello")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["probe"])
        for _ in range(60):
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                return msg.value()
        return None
    finally:
        c.close()


def _count(bootstrap: str, topic: str) -> int:
    """Records in a topic, read back one by one."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "count", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    try:
        c.subscribe([topic])
        n, eof = 0, False
        for _ in range(600):
            msgs = c.consume(10_000, timeout=0.5)
            for m in msgs:
                if m.error() is None:
                    n += 1
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
            if eof and not msgs:
                break
        return n
    finally:
        c.close()


def test_up_status_down_from_the_cache(kafka, tmp_path):
    state = tmp_path / "lk"
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(state), "PATH": _path_without_maven(tmp_path)}
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
        assert _round_trip(bootstrap) == b"hello"
        assert len(_java_processes_using(state)) == 1

        # The README's flow: `up`, then `transcoder seed` with no bootstrap finds the running broker.
        seeded = run_cli("seed", "--kind", "nginx", "--count", "100000", "--topic", "t", env=env)
        assert seeded.returncode == 0, seeded.stderr
        assert _count(bootstrap, "t") == 100_000
    finally:
        down = run_cli("local-kafka", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert _java_processes_using(state) == []
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
    assert _java_processes_using(state) == []
    assert not (state / "state.json").exists()


def test_down_without_a_broker_is_harmless(tmp_path):
    proc = run_cli("local-kafka", "down", env={"TRANSCODER_LOCAL_KAFKA_DIR": str(tmp_path / "none")})
    assert proc.returncode == 0
    assert "no local broker was running" in proc.stderr
    assert os.path.exists(tmp_path) and not (tmp_path / "none" / "state.json").exists()


def test_up_brokers_3_status_down(tmp_path):
    state = tmp_path / "lk"
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(state), "PATH": _path_without_maven(tmp_path)}
    up = run_cli("local-kafka", "up", "--brokers", "3", env=env)
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1]
        addresses = bootstrap.split(",")
        assert len(addresses) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
        assert len(_java_processes_using(state)) == 3

        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer comes
        described = admin.describe_cluster(request_timeout=10).result()
        assert sorted(n.id for n in described.nodes) == [1, 2, 3]
        assert sorted(f"{n.host}:{n.port}" for n in described.nodes) == sorted(addresses)
        assert _round_trip(bootstrap) == b"hello"
        # `seed` with no bootstrap finds the running cluster, as it finds the single broker
        seeded = run_cli("seed", "--kind", "nginx", "--count", "1000", "--topic", "t", env=env)
        assert seeded.returncode == 0, seeded.stderr
        assert _count(bootstrap, "t") == 1000

        status = run_cli("local-kafka", "status", env=env)
        assert status.returncode == 0, status.stderr
        lines = status.stdout.strip().splitlines()
        assert lines[0] == f"bootstrap {bootstrap}"
        assert [line.split()[:3] for line in lines[2:]] == [["node", str(n), "running"] for n in (1, 2, 3)]
        logs = run_cli("local-kafka", "logs", "--node", "2", "-n", "5", env=env)
        assert logs.returncode == 0 and len(logs.stdout.splitlines()) == 5

        # one state directory, one of the two at a time
        single = run_cli("local-kafka", "up", env=env)
        assert single.returncode == 2
        assert single.stderr.strip().splitlines() == [
            f"transcoder: error: a local cluster already runs at {bootstrap} from {state}; "
            "run `transcoder local-kafka down` first"]
        assert len(_java_processes_using(state)) == 3
    finally:
        down = run_cli("local-kafka", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert f"stopped the Kafka cluster of 3 nodes at {bootstrap}" in down.stderr
    assert _java_processes_using(state) == []
    assert not any(state.glob("node-*/data"))
    assert run_cli("local-kafka", "status", env=env).returncode == 5  # ExitCode.UNAVAILABLE: none runs


def test_brokers_out_of_range_is_one_line_and_exit_2(tmp_path):
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(tmp_path / "lk")}
    for n in ("0", "10"):
        proc = run_cli("local-kafka", "up", "--brokers", n, env=env)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"transcoder: error: --brokers takes 1 to 9 nodes, not {n}"]
    assert not (tmp_path / "lk").exists()


def test_a_cluster_node_that_cannot_bind_is_one_line_and_leaves_nothing_running(tmp_path, monkeypatch):
    from transcoder.dev import local_cluster
    from transcoder.errors import PortInUseError

    state = tmp_path / "lc"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        chosen = local_cluster.fixed_ports(3)
        # node 2's client port is taken between the choice and the bind, as another process could take it (two
        # nodes, not three: the same path for a third less CPU)
        monkeypatch.setattr(local_cluster, "fixed_ports", lambda n: [*chosen[:2], port, *chosen[2:]])
        try:
            local_cluster.LocalCluster(state).up(brokers=2, lean=True)
        except PortInUseError as exc:
            message = str(exc)
        else:
            raise AssertionError("up succeeded with a port taken")
    assert message == (f"node 2 of the local cluster could not bind 127.0.0.1:{port} or controller port "
                       f"{chosen[2]}: address already in use")
    assert _java_processes_using(state) == []
    assert not (state / "cluster.json").exists()


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
