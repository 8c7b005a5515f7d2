"""`transcoder local-kafka` bringing up a cluster of nodes (3 JVMs, or 2): here, in the cluster session that runs
beside the main one, rather than in a main-session worker that runs its own broker beside (2.4 worker-minutes)."""

from __future__ import annotations

import socket

from confluent_kafka.admin import AdminClient

from tests.support.cli import run_cli
from tests.support.local_kafka import count_records, java_processes_using, path_without_maven, round_trip


def test_up_brokers_3_status_down(tmp_path):
    state = tmp_path / "lk"
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(state), "PATH": path_without_maven(tmp_path)}
    up = run_cli("local-kafka", "up", "--brokers", "3", env=env)
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1]
        addresses = bootstrap.split(",")
        assert len(addresses) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
        assert len(java_processes_using(state)) == 3

        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer comes
        described = admin.describe_cluster(request_timeout=10).result()
        assert sorted(n.id for n in described.nodes) == [1, 2, 3]
        assert sorted(f"{n.host}:{n.port}" for n in described.nodes) == sorted(addresses)
        assert round_trip(bootstrap) == b"hello"
        # `seed` with no bootstrap finds the running cluster, as it finds the single broker
        seeded = run_cli("seed", "--kind", "nginx", "--count", "1000", "--topic", "t", env=env)
        assert seeded.returncode == 0, seeded.stderr
        assert count_records(bootstrap, "t") == 1000

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
        assert len(java_processes_using(state)) == 3
    finally:
        down = run_cli("local-kafka", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert f"stopped the Kafka cluster of 3 nodes at {bootstrap}" in down.stderr
    assert java_processes_using(state) == []
    assert not any(state.glob("node-*/data"))
    assert run_cli("local-kafka", "status", env=env).returncode == 5  # ExitCode.UNAVAILABLE: none runs


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
    assert java_processes_using(state) == []
    assert not (state / "cluster.json").exists()
