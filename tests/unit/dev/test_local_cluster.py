"""The pure pieces of the local cluster: node k of N's server.properties, and ports outside the ephemeral range."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from transcoder.dev import ports
from transcoder.dev.local_cluster import ClusterState, NodeState, cluster_node_properties
from transcoder.dev.local_kafka import server_properties
from transcoder.errors import LocalKafkaError

PORTS = {1: (20001, 20002), 2: (20003, 20004), 3: (20005, 20006)}


def _props(text: str) -> dict[str, str]:
    lines = text.splitlines()
    pairs = [line.split("=", 1) for line in lines]
    assert all(len(p) == 2 for p in pairs) and len({k for k, _ in pairs}) == len(lines), "one key=value per line"
    return dict(pairs)


@pytest.mark.parametrize("node", [1, 2, 3])
def test_node_k_of_three_is_itself_and_names_every_voter(node):
    props = _props(cluster_node_properties(node, PORTS, Path(f"/data/node-{node}")))
    port, controller = PORTS[node]
    assert props["node.id"] == str(node)
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:20002,2@127.0.0.1:20004,3@127.0.0.1:20006"
    assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
    assert props["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{port}"
    assert props["log.dirs"] == f"/data/node-{node}"


def test_three_nodes_replicate_everything_three_times_and_acknowledge_with_two():
    props = _props(cluster_node_properties(2, PORTS, Path("/d")))
    assert {k: props[k] for k in (
        "default.replication.factor", "min.insync.replicas", "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr")} == {
        "default.replication.factor": "3", "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
        "share.coordinator.state.topic.replication.factor": "3", "share.coordinator.state.topic.min.isr": "2"}
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    # leadership moves only when a test moves it; a killed node is fenced after 6 s, not 9
    assert props["auto.leader.rebalance.enable"] == "false"
    assert props["broker.session.timeout.ms"] == "6000"
    assert props["controlled.shutdown.enable"] == "true"
    assert props["log.retention.ms"] == "-1"  # no record older than 7 days deleted under a test


def test_two_nodes_replicate_twice_and_acknowledge_with_one():
    props = _props(cluster_node_properties(1, {1: (1, 2), 2: (3, 4)}, Path("/d")))
    assert props["default.replication.factor"] == "2" and props["min.insync.replicas"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"


def test_lean_nodes_take_the_test_brokers_properties():
    assert _props(cluster_node_properties(1, PORTS, Path("/d"), lean=True))["num.io.threads"] == "2"
    assert "num.io.threads" not in _props(cluster_node_properties(1, PORTS, Path("/d")))


def test_the_single_broker_is_still_one_voter_with_unreplicated_internal_topics():
    props = _props(server_properties(9092, 9093, Path("/d")))
    assert props["node.id"] == "1" and props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["offsets.topic.replication.factor"] == "1" and props["transaction.state.log.min.isr"] == "1"
    assert props["default.replication.factor"] == "1" and props["min.insync.replicas"] == "1"
    assert "auto.leader.rebalance.enable" not in props


def test_cluster_state_round_trips_through_its_file_and_names_a_missing_node():
    members = tuple(NodeState(node_id=n, pid=100 + n, port=p, controller_port=c, data_dir=f"/d{n}",
                              log_file=f"/l{n}", config_file=f"/c{n}") for n, (p, c) in PORTS.items())
    st = ClusterState(version="4.3.1", cluster_id="abc", libs="/libs", heap="512m", lean=True, members=members)
    assert ClusterState.from_json(st.to_json()) == st
    assert st.bootstrap == "127.0.0.1:20001,127.0.0.1:20003,127.0.0.1:20005"
    assert st.nodes == [1, 2, 3]
    assert st.with_pid(2, 7).node(2).pid == 7 and st.with_pid(2, 7).node(1).pid == 101
    with pytest.raises(LocalKafkaError, match=r"no node 4 \(its nodes: \[1, 2, 3\]\)"):
        st.node(4)


@pytest.mark.parametrize("text, expected", [("32768\t60999\n", (32768, 60999)), ("1024 65535", (1024, 65535))])
def test_the_ephemeral_range_is_read_as_the_kernel_writes_it(text, expected):
    assert ports.parse_port_range(text) == expected


@pytest.mark.parametrize("text", ["", "32768", "60999 32768", "a b", "0 100", "1 70000"])
def test_a_malformed_range_is_refused(text):
    with pytest.raises(ValueError, match="not a port range"):
        ports.parse_port_range(text)


def test_fixed_ports_lie_below_the_ephemeral_range_or_above_it_when_it_starts_low():
    assert ports.fixed_port_candidates((32768, 60999)) == range(10_000, 32768)
    assert ports.fixed_port_candidates((1024, 40000)) == range(40001, 65536)
    assert ports.fixed_port_candidates((12000, 64000)) == range(10_000, 12000)


def test_fixed_ports_skip_taken_and_handed_out_ports_and_never_repeat(monkeypatch):
    monkeypatch.setattr(ports, "_handed_out", {10_001})
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (10_006, 65_535))
    taken = {10_003}
    got = ports.fixed_ports(4, rng=random.Random(7), is_free=lambda p: p not in taken)
    assert sorted(got) == [10_000, 10_002, 10_004, 10_005]
    assert ports._handed_out >= set(got)
    with pytest.raises(ports.PortInUseError, match="found only 0 of 1 free loopback ports in 10000-10005"):
        ports.fixed_ports(1, rng=random.Random(7), is_free=lambda p: p not in taken)


def test_fixed_ports_are_free_outside_the_ephemeral_range_on_this_machine():
    low, high = ports.ephemeral_range()
    got = ports.fixed_ports(6)
    assert len(set(got)) == 6 and all(not low <= p <= high for p in got)
    for p in got:
        ports.check_port_free(p)
