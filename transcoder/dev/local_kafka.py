"""The local development broker: Apache Kafka from Maven Central, one KRaft node on loopback.

Used by `deploy/local/kafka`, the test session and the demo. Nothing here talks to a
production cluster. Jars are resolved with Maven into a cache outside git; once a version is
cached, `up` takes no network.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

from transcoder.errors import LocalKafkaError, PortInUseError

#: Newest Kafka 4.x whose whole dependency graph is on Maven Central (4.4.0 was published
#: without its kafka-tools-api artifact and does not resolve yet).
DEFAULT_VERSION = "4.3.1"
#: slf4j-api line the broker is built against; the binding must match it or logging is lost.
SLF4J_VERSION = "1.7.36"

#: What the broker needs on its classpath: Kafka, its tools (DumpLogSegments), an slf4j binding.
BROKER_ARTIFACTS = ("org.apache.kafka:kafka_2.13:{kafka}", "org.apache.kafka:kafka-tools:{kafka}",
                    "org.slf4j:slf4j-simple:{slf4j}")

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.transcoder.local</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"

_COMPLETE_MARKER = ".complete"
_STATE_FILE = "state.json"


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "transcoder"


def default_state_dir() -> Path:
    return default_cache_dir() / "local-kafka"


def fetch(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> Path:
    """Return the directory holding the broker's jars, resolving them with Maven on first use."""
    libs = (cache_dir or default_cache_dir()) / "kafka" / version / "libs"
    return resolve_jars(libs, [a.format(kafka=version, slf4j=SLF4J_VERSION) for a in BROKER_ARTIFACTS],
                        what=f"Kafka {version}")


def resolve_jars(libs: Path, artifacts: list[str], *, what: str) -> Path:
    """Resolve `group:artifact:version` coordinates and their runtime dependencies into `libs` with Maven.

    A no-op once `libs` is complete (later runs need no network and no Maven).
    """
    if (libs / _COMPLETE_MARKER).exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError(f"Maven (mvn) is not on PATH: it is needed once to fetch {what}")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=libs.parent, prefix=".fetch-") as tmp:
        pom = Path(tmp) / "pom.xml"
        deps = "\n".join(_DEPENDENCY.format(*a.split(":")) for a in artifacts)
        pom.write_text(_POM.format(name=libs.parent.name or "libs", dependencies=deps))
        staged = Path(tmp) / "libs"
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staged}", "-DincludeScope=runtime"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "[ERROR]" in ln]
            why = lines[0].replace("[ERROR]", "").strip() if lines else f"mvn exited {proc.returncode}"
            raise LocalKafkaError(f"could not fetch {what} from Maven Central: {why}")
        (staged / _COMPLETE_MARKER).write_text("\n".join(artifacts))
        if libs.exists():  # a half-written cache from an interrupted fetch
            shutil.rmtree(libs)
        staged.rename(libs)
    return libs


@dataclass(frozen=True)
class BrokerState:
    """What `up` leaves behind so that `status`, `down` and tests find the broker."""

    pid: int
    version: str
    bootstrap: str
    port: int
    controller_port: int
    data_dir: str
    log_file: str
    config_file: str
    libs: str

    @property
    def classpath(self) -> str:
        return os.path.join(self.libs, "*")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} on 127.0.0.1 is already in use ({exc.strerror}); "
                "stop what holds it or choose another port"
            ) from exc


def _server_properties(port: int, controller_port: int, data_dir: Path) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        # A single node: internal topics cannot be replicated, and need not be large.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Topics are created on purpose, so a typo in a topic name is an error, not a new topic.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        # The log cleaner looks for dirty compacted logs every second (default 15 s): compaction shows soon.
        "log.cleaner.backoff.ms": "1000",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _kafka_uuid() -> str:
    """A Kafka Uuid string, never starting with '-' (kafka-storage would take it for an option), as
    Kafka's own Uuid.randomUuid() ensures."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _pid_is_our_broker(pid: int, config_file: str) -> bool:
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


class LocalKafka:
    """One local KRaft broker whose state lives in `state_dir`."""

    def __init__(self, state_dir: Path | None = None, *, version: str = DEFAULT_VERSION,
                 cache_dir: Path | None = None) -> None:
        self.state_dir = Path(state_dir or default_state_dir())
        self.version = version
        self.cache_dir = cache_dir

    @property
    def _state_path(self) -> Path:
        return self.state_dir / _STATE_FILE

    def state(self) -> BrokerState | None:
        """The running broker's state, or None when none runs (a stale state file is ignored)."""
        try:
            st = BrokerState(**json.loads(self._state_path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise LocalKafkaError(f"unreadable broker state {self._state_path}: {exc}") from exc
        return st if _pid_is_our_broker(st.pid, st.config_file) else None

    def up(self, *, port: int | None = None, controller_port: int | None = None,
           timeout: float = 90.0, heap: str = "1g") -> BrokerState:
        running = self.state()
        if running is not None:
            raise LocalKafkaError(
                f"a local broker already runs at {running.bootstrap} (pid {running.pid}); "
                f"run `deploy/local/kafka down` first"
            )
        for p in (port, controller_port):
            if p is not None:
                _check_port_free(p)
        libs = fetch(self.version, self.cache_dir)
        port = port or _free_port()
        controller_port = controller_port or _free_port()
        if controller_port == port:
            raise LocalKafkaError("the broker and controller ports must differ")

        self.state_dir.mkdir(parents=True, exist_ok=True)
        data_dir = self.state_dir / "data"
        config_file = self.state_dir / "server.properties"
        log_file = self.state_dir / "broker.log"
        config_file.write_text(_server_properties(port, controller_port, data_dir))
        classpath = os.path.join(libs, "*")
        java = shutil.which("java")
        if java is None:
            raise LocalKafkaError("java is not on PATH: the local broker needs a JDK (17 or newer)")

        if not (data_dir / "meta.properties").exists():
            fmt = subprocess.run(
                [java, "-cp", classpath, "kafka.tools.StorageTool", "format",
                 "-t", _kafka_uuid(), "-c", str(config_file)],
                capture_output=True, text=True, check=False,
            )
            if fmt.returncode != 0:
                raise LocalKafkaError(
                    f"formatting KRaft storage in {data_dir} failed: "
                    f"{(fmt.stderr or fmt.stdout).strip().splitlines()[-1:]}"
                )

        with log_file.open("ab") as log:
            proc = subprocess.Popen(
                [java, f"-Xmx{heap}", "-Xms256m", "-Djava.awt.headless=true",
                 "-Dorg.slf4j.simpleLogger.showDateTime=true",
                 "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
                 "-Dorg.slf4j.simpleLogger.log.kafka.request.logger=warn",
                 "-cp", classpath, "kafka.Kafka", str(config_file)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a Ctrl-C in our shell does not reach it
            )
        state = BrokerState(
            pid=proc.pid, version=self.version, bootstrap=f"127.0.0.1:{port}", port=port,
            controller_port=controller_port, data_dir=str(data_dir), log_file=str(log_file),
            config_file=str(config_file), libs=str(libs),
        )
        self._state_path.write_text(json.dumps(asdict(state), indent=2))
        try:
            self._wait_ready(proc, state, timeout)
        except BaseException:
            self._stop_pid(proc.pid, config_file=str(config_file))
            self._state_path.unlink(missing_ok=True)
            raise
        return state

    def _wait_ready(self, proc: subprocess.Popen, state: BrokerState, timeout: float) -> None:
        # Imported here: `fetch` and `down` must work even where confluent-kafka is missing.
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": state.bootstrap, "log_level": 0,
                             "logger": _Silent()})
        deadline = time.monotonic() + timeout
        while True:
            code = proc.poll()
            if code is not None:
                log = "".join(_tail(Path(state.log_file), 200))
                if "Address already in use" in log:
                    raise PortInUseError(
                        f"the local broker could not bind {state.bootstrap} or controller port "
                        f"{state.controller_port}: address already in use"
                    )
                last = [ln.strip() for ln in log.splitlines() if "ERROR" in ln or "Exception" in ln]
                raise LocalKafkaError(
                    f"the local broker exited with status {code} during start-up"
                    + (f": {last[0]}" if last else "") + f" (log: {state.log_file})"
                )
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise LocalKafkaError(
                    f"the local broker at {state.bootstrap} did not answer a metadata request "
                    f"within {timeout:.0f}s (log: {state.log_file})"
                )
            time.sleep(0.3)

    def down(self, *, keep_data: bool = False, timeout: float = 30.0) -> BrokerState | None:
        """Stop the broker `up` started (and only it). Returns its state, or None if none ran."""
        try:
            raw = json.loads(self._state_path.read_text())
        except FileNotFoundError:
            return None
        st = BrokerState(**raw)
        self._stop_pid(st.pid, config_file=st.config_file, timeout=timeout)
        self._state_path.unlink(missing_ok=True)
        if not keep_data:
            shutil.rmtree(st.data_dir, ignore_errors=True)
        return st

    @staticmethod
    def _stop_pid(pid: int, *, config_file: str, timeout: float = 30.0) -> None:
        if not _pid_is_our_broker(pid, config_file):
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_is_our_broker(pid, config_file):
                break
            _reap(pid)
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            for _ in range(50):
                _reap(pid)
                if not _pid_is_our_broker(pid, config_file):
                    break
                time.sleep(0.1)
        _reap(pid)

    def dump_log_segment(self, segment: Path, *, deep: bool = False) -> str:
        """Kafka's own DumpLogSegments output for one stored segment file."""
        st = self.state()
        libs = Path(st.libs) if st else fetch(self.version, self.cache_dir)
        cmd = [shutil.which("java") or "java", "-cp", os.path.join(libs, "*"),
               "org.apache.kafka.tools.DumpLogSegments", "--files", str(segment)]
        if deep:
            cmd += ["--deep-iteration", "--print-data-log"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LocalKafkaError(f"DumpLogSegments failed on {segment}: {proc.stderr.strip()[-500:]}")
        return proc.stdout


def _reap(pid: int) -> None:
    """Collect the exit status if the broker is our child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class _Silent:
    """librdkafka logs 'connection refused' while the broker starts; that is expected there."""

    def log(self, *_args: object, **_kw: object) -> None:
        pass
