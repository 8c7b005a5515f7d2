"""tests/cluster: one local 3-node KRaft cluster for the session (transcoder.dev.local_cluster.LocalCluster), fresh
RF 3 topics per test, every node running again after each test.

`make test` runs this directory in a pytest session of its own, one process, beside the main run (which ignores
it) from its start. Every test here is marked `cluster`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.three_brokers import REPLICAS, admin_client
from transcoder.dev.local_cluster import LocalCluster
from transcoder.kafka.admin import wait_leaders

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `cluster` every test of this directory; in a parallel run, all of them in one process (one cluster)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.xdist_group("cluster"))


@dataclass
class ThreeBrokers:
    """The session's cluster: its bootstrap list (every node), the LocalCluster (kill, stop, start, pause, resume
    a node), and an AdminClient on it (three_brokers.admin_client: it finds a live node for its controller
    requests within a second of one dying)."""

    bootstrap: str
    local: LocalCluster
    admin: AdminClient


@pytest.fixture(scope="session")
def cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeBrokers]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster3"))
    st = local.up(brokers=REPLICAS, lean=True)  # lean: half the CPU of each JVM (LEAN_JVM), on a 2-core machine
    try:
        yield ThreeBrokers(bootstrap=st.bootstrap, local=local, admin=admin_client(st.bootstrap))
    finally:
        local.down()


@pytest.fixture(autouse=True)
def _every_node_back(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the cluster: a node it paused resumed, a node it stopped or killed started again, so
    the next test starts with three nodes (their replicas may still be catching up: wait_healthy waits for that)."""
    yield
    if "cluster3" in request.fixturenames:
        _all_nodes_running(request.getfixturevalue("cluster3").local)


def _all_nodes_running(local: LocalCluster) -> None:
    for node in local.nodes:
        if local.running(node):
            local.resume(node)
        else:
            local.start(node)


@pytest.fixture
def cluster_topic(cluster3: ThreeBrokers, request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """make(partitions=3, config=None) -> the name of a fresh topic of REPLICAS replicas, every partition led and
    answering; the topics are deleted after the test."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:80]
    made: list[str] = []

    def make(partitions: int = 3, config: dict[str, str] | None = None) -> str:
        topic = f"{base}-{uuid.uuid4().hex[:8]}"
        cluster3.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=REPLICAS,
                                               config=config or {})], operation_timeout=30)[topic].result()
        made.append(topic)
        wait_leaders(cluster3.admin, topic)
        return topic

    yield make
    if made:
        # every node back first: a paused node named controller in the admin client's metadata would hold the
        # deletion until its timeout
        _all_nodes_running(cluster3.local)
        for fut in cluster3.admin.delete_topics(made, operation_timeout=30).values():
            try:
                fut.result()
            except KafkaException:
                pass  # a topic that outlives its test harms no other: every test makes its own names
