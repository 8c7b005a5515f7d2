"""One local KRaft node as a process, alone or one of a cluster: its server.properties, its storage, its JVM, how
it is started, stopped and killed, and where its state lives. transcoder.dev.local_kafka (one broker) and
transcoder.dev.local_cluster (N nodes) are built on it.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections import deque
from pathlib import Path

from transcoder.dev.kafka_jars import DEFAULT_VERSION, default_cache_dir
from transcoder.errors import LocalKafkaError, PortInUseError

#: A test session's broker spends most of its CPU on C2 compiling and idle threads waking (on 2 cores: 9.9 CPU s
#: to start, 3.5 a minute idle, 10.4 to serve 300,000 records and two lanes copying them; lean: 5.9, 1.4, 5.2):
#: C1 only, a serial GC, fewer network and request threads, the controller's no-op record every 5 s, not 0.5.
LEAN_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
LEAN_PROPERTIES = {"num.network.threads": "1", "num.io.threads": "2", "metadata.max.idle.interval.ms": "5000"}


def loopback_listeners(port: int, controller_port: int) -> tuple[list[str], list[str], list[str]]:
    """A node's PLAINTEXT client listener and CONTROLLER listener on loopback: listeners, advertised listeners and
    the protocol map, as lists a caller may extend."""
    return ([f"PLAINTEXT://127.0.0.1:{port}", f"CONTROLLER://127.0.0.1:{controller_port}"],
            [f"PLAINTEXT://127.0.0.1:{port}"], ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"])


def kraft_node_properties(node_id: int, voters: dict[int, int], data_dir: Path, listeners: list[str],
                          advertised: list[str], protocols: list[str]) -> dict[str, str]:
    """What every local KRaft node is, alone or in a cluster: broker and controller in one process, the static
    quorum `voters` (node id -> controller port on loopback), small internal topics, topics created on purpose."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(voters.items())),
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": ",".join(protocols),
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        # Internal topics need not be large on a development machine.
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        # Topics are created on purpose, so a typo in a topic name is an error, not a new topic.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        # The log cleaner looks for dirty compacted logs every second (default 15 s): compaction shows soon.
        "log.cleaner.backoff.ms": "1000",
    }


def replication_properties(nodes: int) -> dict[str, str]:
    """Replication of every topic, internal or not, on a cluster of `nodes`: three replicas where there are three
    nodes (acks=all then needs two), one on a single node (internal topics cannot be replicated there)."""
    factor = min(3, nodes)
    min_isr = max(1, factor - 1)
    return {
        "default.replication.factor": str(factor),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(factor),
        "transaction.state.log.replication.factor": str(factor),
        "transaction.state.log.min.isr": str(min_isr),
        "share.coordinator.state.topic.replication.factor": str(factor),
        "share.coordinator.state.topic.min.isr": str(min_isr),
    }


def kafka_uuid() -> str:
    """A Kafka Uuid string, never starting with '-' (kafka-storage would take it for an option), as
    Kafka's own Uuid.randomUuid() ensures."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def default_state_dir() -> Path:
    return default_cache_dir() / "local-kafka"


class StateDir:
    """Where a local broker or cluster keeps its state (a JSON file named `STATE_FILE` in `state_dir`), which Kafka
    version it runs and where its jars are cached."""

    STATE_FILE = ""

    def __init__(self, state_dir: Path | None = None, *, version: str = DEFAULT_VERSION,
                 cache_dir: Path | None = None) -> None:
        self.state_dir = Path(state_dir or default_state_dir())
        self.version = version
        self.cache_dir = cache_dir

    @property
    def state_path(self) -> Path:
        return self.state_dir / self.STATE_FILE


def pid_is_our_broker(pid: int, config_file: str) -> bool:
    """True only if `pid` is alive and is the java process started with our config file."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in cmdline and config_file.encode() in cmdline


def _tail(path: Path, n: int) -> list[str]:
    try:
        with path.open(errors="replace") as f:
            return list(deque(f, maxlen=n))
    except OSError:
        return []


def format_storage(nodes: list[tuple[Path, Path]], libs: Path, cluster_id: str, extra: list[str]) -> None:
    """Format the KRaft storage of each (config file, data dir) with one cluster id, all at once (a JVM each)."""
    procs = [(data_dir, subprocess.Popen(
        [_java(), "-cp", os.path.join(libs, "*"), "kafka.tools.StorageTool", "format",
         "-t", cluster_id, "-c", str(config_file), *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for config_file, data_dir in nodes]
    failed = []
    for data_dir, proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            failed.append(f"formatting KRaft storage in {data_dir} failed: {(err or out).strip().splitlines()[-1:]}")
    if failed:
        raise LocalKafkaError(failed[0])


def spawn(config_file: str, log_file: str, libs: str, *, heap: str, lean: bool,
          request_log: bool = False) -> subprocess.Popen:
    """Start one Kafka node on `config_file`, its output appended to `log_file`."""
    with Path(log_file).open("ab") as log:
        return subprocess.Popen(
            [_java(), f"-Xmx{heap}", "-Xms256m", *(LEAN_JVM if lean else ()), "-Djava.awt.headless=true",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
             f"-Dorg.slf4j.simpleLogger.log.kafka.request.logger={'debug' if request_log else 'warn'}",
             "-cp", os.path.join(libs, "*"), "kafka.Kafka", config_file],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a Ctrl-C in our shell does not reach it
        )


def startup_failure(code: int, log_file: str, what: str, ports: str) -> LocalKafkaError:
    """The one-line error for a node that exited with `code` while starting: a port taken, else its log's first
    error."""
    log = "".join(_tail(Path(log_file), 200))
    if "Address already in use" in log:
        return PortInUseError(f"{what} could not bind {ports}: address already in use")
    last = [ln.strip() for ln in log.splitlines() if "ERROR" in ln or "Exception" in ln]
    return LocalKafkaError(f"{what} exited with status {code} during start-up"
                           + (f": {last[0]}" if last else "") + f" (log: {log_file})")


def wait_state(pid: int, state: str, timeout: float = 5.0) -> None:
    """Until /proc says `pid` is in `state` (T: stopped), or `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:1] == [state]:
                return
        except OSError:
            return
        time.sleep(0.05)


def stop_pid(pid: int, *, config_file: str, timeout: float = 30.0) -> bool:
    """SIGTERM our broker `pid` (a controlled shutdown), wait for it to exit, SIGKILL it after `timeout`. True when
    it exited on SIGTERM (or was not running), False when it had to be killed."""
    if not pid_is_our_broker(pid, config_file):
        return True
    os.kill(pid, signal.SIGCONT)  # a paused (SIGSTOPped) node handles SIGTERM only once continued
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_is_our_broker(pid, config_file):
            reap(pid)
            return True
        reap(pid)
        time.sleep(0.2)
    kill_pid(pid)
    return False


def kill_pid(pid: int) -> None:
    """SIGKILL `pid`, as a crash would, and wait until it has released its ports (reaped if it is our child)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(300):
        reap(pid)
        # Not pid_is_our_broker: a dying process's cmdline is empty once its memory is freed, but its listening
        # sockets close only after that; a restart must find the ports free.
        if _exited(pid):
            break
        time.sleep(0.1)
    reap(pid)


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise LocalKafkaError("java is not on PATH: the local broker needs a JDK (17 or newer)")
    return java


def _exited(pid: int) -> bool:
    """True once `pid` has released everything: gone, or a zombie whose other threads have exited too (the JVM's
    main thread turns zombie first; the sockets close with the last thread)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"]) and threads <= 1


def reap(pid: int) -> None:
    """Collect the exit status if the broker is our child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class Silent:
    """librdkafka logs 'connection refused' while the broker starts; that is expected there."""

    def log(self, *_args: object, **_kw: object) -> None:
        pass
