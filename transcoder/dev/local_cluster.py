"""The local development cluster: N KRaft nodes (broker and controller each) on loopback, for tests that need
replication, a leader to lose, a node to kill, stop or pause (tests/cluster) and `transcoder local-kafka up --brokers`.
Nothing here talks to a production cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from transcoder.dev.broker_process import (
    LEAN_PROPERTIES,
    Silent,
    StateDir,
    format_storage,
    kafka_uuid,
    kill_pid,
    kraft_node_properties,
    loopback_listeners,
    pid_is_our_broker,
    reap,
    replication_properties,
    spawn,
    startup_failure,
    stop_pid,
    wait_state,
)
from transcoder.dev.kafka_jars import fetch
from transcoder.dev.local_kafka import LocalKafka
from transcoder.dev.ports import check_port_free, fixed_ports
from transcoder.errors import LocalKafkaError

#: The most nodes `LocalCluster.up` starts (and `local-kafka up --brokers` accepts): each is a JVM of its own.
MAX_BROKERS = 9
_CLUSTER_STATE_FILE = "cluster.json"

#: What a local cluster changes from Kafka's defaults beyond a single node's, and why.
CLUSTER_PROPERTIES = {
    # A SIGKILLed or paused node is fenced, its replicas dropped from the ISRs and its leaderships moved, once its
    # session with the controller expires: 6 s instead of 9 (heartbeats every second instead of every 2), so a fault
    # test waits less, with room left for the pauses of a busy 2-core machine running three JVMs.
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",
    # SIGTERM is a controlled shutdown (`stop`): the controller moves the node's leaderships away before it exits.
    # Kafka 4 has no setting for its length any more (controlled.shutdown.max.retries and .retry.backoff.ms were
    # ZooKeeper mode's; a KRaft broker waits up to a fixed 5 min for the controller's approval, which never comes
    # once the quorum is lost), so `stop` bounds it with its own timeout and `down` does not wait for it.
    "controlled.shutdown.enable": "true",
    # Leadership moves only when a test moves it (kill, stop, pause, elect_preferred): the periodic preferred-leader
    # rebalance fires every leader.imbalance.check.interval.seconds (300 s) counted from the controller's start, at a
    # moment no test chooses; any interval short enough to help would move leaders under a running fault test and
    # hide whether a preferred election the test asked for happened. Tests elect preferred leaders themselves.
    "auto.leader.rebalance.enable": "false",
    # Records go only when a test deletes them: with the default retention.ms (7 days), a record whose timestamp is
    # older (tests write fixed ones) goes with the next retention check (every 5 min, at a moment no test chooses):
    # a partition's first records vanished under a test in 1 run of 6. A topic's own retention.ms still applies.
    "log.retention.ms": "-1",
}


def cluster_node_properties(node_id: int, ports: dict[int, tuple[int, int]], data_dir: Path, *,
                            lean: bool = False) -> str:
    """server.properties of node `node_id` of a local cluster whose nodes have `ports` (node id -> (client port,
    controller port)): every node a voter of the static quorum, replication as
    `replication_properties(len(ports))`."""
    port, controller_port = ports[node_id]
    listeners, advertised, protocols = loopback_listeners(port, controller_port)
    props = {
        **kraft_node_properties(node_id, {n: c for n, (_, c) in ports.items()}, data_dir, listeners, advertised,
                                protocols),
        **replication_properties(len(ports)),
        **CLUSTER_PROPERTIES,
        **(LEAN_PROPERTIES if lean else {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


@dataclass(frozen=True)
class NodeState:
    """One node of a local cluster: its pid as last started, its ports and files."""

    node_id: int
    pid: int
    port: int
    controller_port: int
    data_dir: str
    log_file: str
    config_file: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def running(self) -> bool:
        return pid_is_our_broker(self.pid, self.config_file)


@dataclass(frozen=True)
class ClusterState:
    """What `LocalCluster.up` leaves behind, so that another process (`local-kafka down`, a test) finds the nodes."""

    version: str
    cluster_id: str
    libs: str
    heap: str
    lean: bool
    members: tuple[NodeState, ...]

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated."""
        return ",".join(m.bootstrap for m in self.members)

    @property
    def nodes(self) -> list[int]:
        return [m.node_id for m in self.members]

    def node(self, node_id: int) -> NodeState:
        for m in self.members:
            if m.node_id == node_id:
                return m
        raise LocalKafkaError(f"the local cluster has no node {node_id} (its nodes: {self.nodes})")

    def with_pid(self, node_id: int, pid: int) -> ClusterState:
        return replace(self, members=tuple(replace(m, pid=pid) if m.node_id == node_id else m for m in self.members))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        raw = json.loads(text)
        return cls(**{**raw, "members": tuple(NodeState(**m) for m in raw["members"])})


class LocalCluster(StateDir):
    """A local KRaft cluster of combined (broker, controller) nodes, ids 1..N, whose state lives in `state_dir`.

    Every topic gets three replicas (or one per node, with fewer), acks=all needs two in sync; see
    CLUSTER_PROPERTIES. The nodes' ports lie outside the ephemeral range (`fixed_ports`), so a node stopped or killed
    starts again on the same ports, the same data and the same config.
    """

    STATE_FILE = _CLUSTER_STATE_FILE

    def recorded(self) -> ClusterState | None:
        """The cluster `up` started last from this state directory, whether or not its nodes run."""
        try:
            return ClusterState.from_json(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as exc:
            raise LocalKafkaError(f"unreadable cluster state {self.state_path}: {exc}") from exc

    def state(self) -> ClusterState | None:
        """The cluster while at least one of its nodes runs, else None."""
        st = self.recorded()
        return st if st is not None and any(m.running() for m in st.members) else None

    def _require(self) -> ClusterState:
        st = self.recorded()
        if st is None:
            raise LocalKafkaError(f"no local cluster was started from {self.state_dir}")
        return st

    def _record(self, st: ClusterState) -> ClusterState:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(st.to_json())
        tmp.replace(self.state_path)  # whole or not at all, for a reader in another process
        return st

    @property
    def bootstrap(self) -> str:
        return self._require().bootstrap

    @property
    def nodes(self) -> list[int]:
        return self._require().nodes

    def port(self, node: int) -> int:
        """The node's client port."""
        return self._require().node(node).port

    def pid(self, node: int) -> int:
        """The node's pid as last started (it may have been killed or stopped since: see `running`)."""
        return self._require().node(node).pid

    def running(self, node: int) -> bool:
        return self._require().node(node).running()

    def up(self, brokers: int = 3, heap: str = "512m", timeout: float = 180.0, *, lean: bool = False) -> ClusterState:
        """Start `brokers` nodes and wait until every one is registered and unfenced and a topic replicated on
        min(3, brokers) of them can be created. Data kept by `down(keep_data=True)` is started again as it was
        (same ports, same cluster id). `lean`: LEAN_JVM and LEAN_PROPERTIES, for tests."""
        if not 1 <= brokers <= MAX_BROKERS:
            raise LocalKafkaError(f"a local cluster has 1 to {MAX_BROKERS} brokers, not {brokers}")
        running = self.state()
        if running is not None:
            raise LocalKafkaError(f"a local cluster already runs at {running.bootstrap}; "
                                  "run `transcoder local-kafka down` first")
        single = LocalKafka(self.state_dir, version=self.version, cache_dir=self.cache_dir).state()
        if single is not None:
            raise LocalKafkaError(f"a local broker already runs at {single.bootstrap} from {self.state_dir}; "
                                  "run `transcoder local-kafka down` first")
        libs = fetch(self.version, self.cache_dir)
        kept = self.recorded()
        if kept is not None and kept.nodes == list(range(1, brokers + 1)) and all(
                (Path(m.data_dir) / "meta.properties").exists() for m in kept.members):
            for m in kept.members:
                check_port_free(m.port)
                check_port_free(m.controller_port)
            st = replace(kept, version=self.version, libs=str(libs), heap=heap, lean=lean)
            fresh = False
        else:
            st = self._fresh(brokers, libs, heap, lean)
            fresh = True
        self.state_dir.mkdir(parents=True, exist_ok=True)
        ports = {m.node_id: (m.port, m.controller_port) for m in st.members}
        for m in st.members:
            Path(m.config_file).parent.mkdir(parents=True, exist_ok=True)
            Path(m.config_file).write_text(cluster_node_properties(m.node_id, ports, Path(m.data_dir), lean=lean))
        if fresh:
            format_storage([(Path(m.config_file), Path(m.data_dir)) for m in st.members], libs, st.cluster_id, [])
        procs: dict[int, subprocess.Popen] = {}
        try:
            for m in st.members:
                procs[m.node_id] = spawn(m.config_file, m.log_file, st.libs, heap=heap, lean=lean)
                st = self._record(st.with_pid(m.node_id, procs[m.node_id].pid))
            self._wait_registered(st, procs, st.nodes, timeout)
        except BaseException:
            for proc in procs.values():
                if proc.poll() is None:  # not a pid already reaped, which the system may have given another process
                    kill_pid(proc.pid)
            self.state_path.unlink(missing_ok=True)
            raise
        return st

    def _fresh(self, brokers: int, libs: Path, heap: str, lean: bool) -> ClusterState:
        """A new cluster's state: a cluster id, ports outside the ephemeral range, empty data directories."""
        ports = fixed_ports(2 * brokers)
        members = []
        for k in range(1, brokers + 1):
            home = self.state_dir / f"node-{k}"
            shutil.rmtree(home / "data", ignore_errors=True)
            members.append(NodeState(node_id=k, pid=0, port=ports[2 * k - 2], controller_port=ports[2 * k - 1],
                                     data_dir=str(home / "data"), log_file=str(home / "broker.log"),
                                     config_file=str(home / "server.properties")))
        return ClusterState(version=self.version, cluster_id=kafka_uuid(), libs=str(libs), heap=heap, lean=lean,
                            members=tuple(members))

    def _wait_registered(self, st: ClusterState, procs: dict[int, subprocess.Popen], nodes: list[int],
                         timeout: float) -> None:
        """Until `nodes` are registered and unfenced (listed by DescribeCluster: KRaft lists unfenced brokers only),
        asked at their own listeners; with the whole cluster, until a topic replicated on min(3, N) nodes can be
        created too. A node exiting meanwhile is a one-line error naming it."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": ",".join(st.node(n).bootstrap for n in nodes), "log_level": 0},
                            logger=Silent())
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        def check_exits() -> None:
            for n, proc in procs.items():
                code = proc.poll()
                if code is not None:
                    m = st.node(n)
                    raise startup_failure(code, m.log_file, f"node {n} of the local cluster",
                                           f"{m.bootstrap} or controller port {m.controller_port}")

        while True:
            check_exits()
            try:
                seen = {node.id for node in admin.describe_cluster(request_timeout=3).result().nodes}
            except KafkaException:
                pass
            if seen >= set(nodes):
                break
            if time.monotonic() > deadline:
                missing = sorted(set(nodes) - seen)
                raise LocalKafkaError(
                    f"node(s) {', '.join(map(str, missing))} of the local cluster did not register (unfenced) "
                    f"within {timeout:.0f}s (log: {st.node(missing[0]).log_file})")
            time.sleep(0.3)
        if set(nodes) == set(st.nodes):
            # a node registers before its client listener binds: one that cannot bind exits while this probes
            _probe_topic(admin, min(3, len(nodes)), deadline, check_exits)
            # and a node's port taken by another process that listens answers nothing: each node is asked at its
            # own listener alone (on a loaded machine the node's exit can come after the probe's topic)
            for n in nodes:
                _answers_alone(st.node(n).bootstrap, n, deadline, check_exits)

    def kill(self, node: int) -> NodeState:
        """SIGKILL the node, as a crash would (unflushed writes may be lost), and wait until it is gone (reaped when
        this process started it). `start` brings it back."""
        m = self._running_node(node)
        kill_pid(m.pid)
        return m

    def stop(self, node: int, timeout: float = 60.0) -> NodeState:
        """SIGTERM the node (a controlled shutdown: its leaderships move first) and wait for it to exit; a node not
        gone within `timeout` is killed and this raises, saying so."""
        m = self._running_node(node)
        if not stop_pid(m.pid, config_file=m.config_file, timeout=timeout):
            raise LocalKafkaError(f"node {node} of the local cluster did not exit within {timeout:.0f}s of SIGTERM "
                                  f"and was killed (log: {m.log_file})")
        return m

    def start(self, node: int, timeout: float = 120.0) -> NodeState:
        """Start a stopped or killed node again (same config, ports and data) and wait until it is registered and
        unfenced again: serving requests, its replicas catching up (the ISR takes them back as they do)."""
        st = self._require()
        m = st.node(node)
        if m.running():
            raise LocalKafkaError(f"node {node} of the local cluster still runs (pid {m.pid}); stop or kill it first")
        check_port_free(m.port)
        check_port_free(m.controller_port)
        proc = spawn(m.config_file, m.log_file, st.libs, heap=st.heap, lean=st.lean)
        st = self._record(st.with_pid(node, proc.pid))
        try:
            self._wait_registered(st, {node: proc}, [node], timeout)
        except BaseException:
            if proc.poll() is None:
                kill_pid(proc.pid)
            raise
        return st.node(node)

    def pause(self, node: int) -> NodeState:
        """SIGSTOP the node: it holds its connections and answers nothing, as a process stalled by GC or a stuck
        disk would; its controller session expires after broker.session.timeout.ms and it is fenced."""
        m = self._running_node(node)
        os.kill(m.pid, signal.SIGSTOP)
        wait_state(m.pid, "T")
        return m

    def resume(self, node: int) -> NodeState:
        """SIGCONT a paused node."""
        m = self._running_node(node)
        os.kill(m.pid, signal.SIGCONT)
        return m

    def _running_node(self, node: int) -> NodeState:
        m = self._require().node(node)
        if not m.running():
            raise LocalKafkaError(f"node {node} of the local cluster is not running")
        return m

    def down(self, *, keep_data: bool = False, timeout: float = 30.0) -> ClusterState | None:
        """Stop every node `up` started (and only those) and remove their data unless `keep_data`. Returns the
        cluster's state, or None if none of its nodes ran.

        With the data removed the nodes are killed: a clean shutdown would only cost time (the last nodes' controlled
        shutdowns wait for a quorum that is gone). With `keep_data` they get SIGTERM together, so their logs are
        flushed and closed, and whatever has not exited after `timeout` is killed."""
        st = self.recorded()
        if st is None:
            return None
        alive = [m for m in st.members if m.running()]
        if keep_data:
            for m in alive:
                os.kill(m.pid, signal.SIGCONT)
                os.kill(m.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while any(m.running() for m in alive) and time.monotonic() < deadline:
                for m in alive:
                    reap(m.pid)
                time.sleep(0.2)
        for m in alive:
            if m.running():
                kill_pid(m.pid)
            reap(m.pid)
        if not keep_data:
            for m in st.members:
                shutil.rmtree(m.data_dir, ignore_errors=True)
            self.state_path.unlink(missing_ok=True)
        return st if alive else None


def _answers_alone(bootstrap: str, node: int, deadline: float, check: Callable[[], None]) -> None:
    """Until DescribeCluster asked at `bootstrap` alone is answered by node `node`, retrying until `deadline`.
    `check` is called before each try (it raises when a node exited)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}, logger=Silent())
    while True:
        check()
        try:
            if admin.describe_cluster(request_timeout=3).result().nodes:
                return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise LocalKafkaError(f"node {node} of the local cluster does not answer at {bootstrap} (another "
                                  "process listening on its port?)")
        time.sleep(0.3)


def _probe_topic(admin: Any, replicas: int, deadline: float, check: Callable[[], None] = lambda: None) -> None:
    """Create and delete a topic of `replicas` replicas, retrying until `deadline`: the controller refuses one
    (INVALID_REPLICATION_FACTOR) until it counts that many unfenced brokers itself. `check` is called before each
    try (it raises when a node exited)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    name = f"local-cluster-probe-{uuid.uuid4().hex[:8]}"
    last = ""
    while True:
        check()
        try:
            admin.create_topics([NewTopic(name, 1, replicas)], operation_timeout=10)[name].result()
            break
        except KafkaException as exc:
            last = str(exc.args[0]) if exc.args else str(exc)
            if "TOPIC_ALREADY_EXISTS" in last or "already exists" in last:
                break
        if time.monotonic() > deadline:
            raise LocalKafkaError(f"the local cluster could not create a topic of {replicas} replicas: {last}")
        time.sleep(0.5)
    for fut in admin.delete_topics([name], operation_timeout=10).values():
        try:
            fut.result()
        except KafkaException:
            pass  # a probe left behind harms nothing
