"""The local development broker: Apache Kafka from Maven Central, one KRaft node on loopback.

Used by `deploy/local/kafka`, the test session and the demo. Nothing here talks to a
production cluster. Jars are resolved with Maven into a cache outside git; once a version is
cached, `up` takes no network.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from transcoder.dev import certs
from transcoder.dev.ports import check_port_free, fixed_ports, free_port
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
#: The SCRAM user of the secured listeners (`up(secured=True)`); its password is generated once per state dir.
SCRAM_USER = "transcoder"
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: Every SASL mechanism the SASL_SSL listener offers: SCRAM (both digests) and PLAIN for SCRAM_USER and its
#: password; OAUTHBEARER with Kafka's unsecured JWT validator (the default when no validator is configured:
#: any unsigned token is accepted, its `sub` claim the principal) for clients' `enable.sasl.oauthbearer.unsecure.jwt`.
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER")


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
    #: With a proxy port: the port of the PROXIED listener, which advertises `proxied_bootstrap` (a proxy's
    #: address) instead of its own, so clients that bootstrap through the proxy stay behind it.
    proxied_port: int | None = None
    proxied_bootstrap: str | None = None
    #: With `secured`: a SASL_SSL listener (SASL_MECHANISMS) and an SSL listener that requires a client
    #: certificate (mTLS), both with the broker certificate of `certs_dir` (see transcoder.dev.certs).
    sasl_ssl_bootstrap: str | None = None
    ssl_bootstrap: str | None = None
    certs_dir: str | None = None
    sasl_username: str | None = None
    #: The SCRAM password lives in this file (0600), never in the state file or a log.
    sasl_password_file: str | None = None
    #: Every request the broker completes is logged (kafka.request.logger at debug) to `log_file`: type, client,
    #: sizes and times, for counting a client's requests (bench.requests). It costs the broker CPU.
    request_log: bool = False
    lean: bool = False  #: started with LEAN_JVM and LEAN_PROPERTIES: a test session's broker, not a benchmark's

    @property
    def classpath(self) -> str:
        return os.path.join(self.libs, "*")

    @property
    def certs(self) -> certs.CertPaths | None:
        return certs.CertPaths(Path(self.certs_dir)) if self.certs_dir else None

    def sasl_ssl_config(self, mechanism: str = SCRAM_MECHANISM) -> dict[str, str]:
        """librdkafka properties for the SASL_SSL listener with one of SASL_MECHANISMS, password revealed (for
        tests and tools; never log)."""
        if self.sasl_ssl_bootstrap is None or self.certs is None or self.sasl_password_file is None:
            raise LocalKafkaError("the local broker was started without --secured")
        conf = {"bootstrap.servers": self.sasl_ssl_bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "ssl.ca.location": str(self.certs.ca)}
        if mechanism == "OAUTHBEARER":
            return {**conf, "enable.sasl.oauthbearer.unsecure.jwt": "true",
                    "sasl.oauthbearer.config": f"principal={self.sasl_username or SCRAM_USER}"}
        return {**conf, "sasl.username": self.sasl_username or SCRAM_USER,
                "sasl.password": Path(self.sasl_password_file).read_text().strip()}

    def ssl_config(self) -> dict[str, str]:
        """librdkafka properties for the mTLS listener, key password revealed (for tests and tools; never log)."""
        if self.ssl_bootstrap is None or self.certs is None:
            raise LocalKafkaError("the local broker was started without --secured")
        c = self.certs
        return {"bootstrap.servers": self.ssl_bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(c.ca), "ssl.certificate.location": str(c.client_cert),
                "ssl.key.location": str(c.client_key), "ssl.key.password": c.client_key_password.read_text().strip()}

    def secured_ports(self) -> list[int]:
        return [int(b.rsplit(":", 1)[1]) for b in (self.sasl_ssl_bootstrap, self.ssl_bootstrap) if b]


#: A test session's broker spends most of its CPU on C2 compiling and idle threads waking (on 2 cores: 9.9 CPU s
#: to start, 3.5 a minute idle, 10.4 to serve 300,000 records and two lanes copying them; lean: 5.9, 1.4, 5.2):
#: C1 only, a serial GC, fewer network and request threads, the controller's no-op record every 5 s, not 0.5.
LEAN_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
LEAN_PROPERTIES = {"num.network.threads": "1", "num.io.threads": "2", "metadata.max.idle.interval.ms": "5000"}


def _server_properties(port: int, controller_port: int, data_dir: Path,
                       proxied: tuple[int, int] | None = None,
                       secured: tuple[int, int, certs.CertPaths] | None = None, sasl_password: str = "",
                       lean: bool = False) -> str:
    """server.properties; `proxied`: (bound port, advertised port) of a PROXIED listener, else none;
    `secured`: (SASL_SSL port, SSL port, certificates) of the secured listeners, else none, with `sasl_password`
    SCRAM_USER's password for PLAIN (the file is then private to its owner)."""
    listeners, advertised, protocols = _loopback_listeners(port, controller_port)
    if proxied is not None:
        listeners.append(f"PROXIED://127.0.0.1:{proxied[0]}")
        advertised.append(f"PROXIED://127.0.0.1:{proxied[1]}")
        protocols.append("PROXIED:PLAINTEXT")
    extra: dict[str, str] = {}
    if secured is not None:
        sasl_port, ssl_port, paths = secured
        for name, p in (("SASL_SSL", sasl_port), ("SSL", ssl_port)):
            listeners.append(f"{name}://127.0.0.1:{p}")
            advertised.append(f"{name}://127.0.0.1:{p}")
            protocols.append(f"{name}:{name}")
        # PEM files straight into the JDK: no keytool, no JKS. Brokers talk PLAINTEXT among themselves.
        extra = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(paths.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(paths.ca),
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            # PLAIN's users are its JAAS options (user_NAME="password"): Kafka hides the value in its own logs.
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{SCRAM_USER}="{sasl_password}";',
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{SCRAM_USER}";',
            "listener.name.ssl.ssl.client.auth": "required",
        }
    props = {
        **_kraft_node(1, {1: controller_port}, data_dir, listeners, advertised, protocols),
        **_replication(1),
        **(LEAN_PROPERTIES if lean else {}),
        **extra,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _loopback_listeners(port: int, controller_port: int) -> tuple[list[str], list[str], list[str]]:
    """A node's PLAINTEXT client listener and CONTROLLER listener on loopback: listeners, advertised listeners and
    the protocol map, as lists a caller may extend."""
    return ([f"PLAINTEXT://127.0.0.1:{port}", f"CONTROLLER://127.0.0.1:{controller_port}"],
            [f"PLAINTEXT://127.0.0.1:{port}"], ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"])


def _kraft_node(node_id: int, voters: dict[int, int], data_dir: Path, listeners: list[str], advertised: list[str],
                protocols: list[str]) -> dict[str, str]:
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


def _replication(nodes: int) -> dict[str, str]:
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


class _StateDir:
    """Where a local broker or cluster keeps its state (a JSON file named `STATE_FILE` in `state_dir`), which Kafka
    version it runs and where its jars are cached."""

    STATE_FILE = ""

    def __init__(self, state_dir: Path | None = None, *, version: str = DEFAULT_VERSION,
                 cache_dir: Path | None = None) -> None:
        self.state_dir = Path(state_dir or default_state_dir())
        self.version = version
        self.cache_dir = cache_dir

    @property
    def _state_path(self) -> Path:
        return self.state_dir / self.STATE_FILE


class LocalKafka(_StateDir):
    """One local KRaft broker whose state lives in `state_dir`."""

    STATE_FILE = _STATE_FILE

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
           timeout: float = 90.0, heap: str = "1g", proxy_port: int | None = None,
           secured: bool = False, request_log: bool = False, lean: bool = False) -> BrokerState:
        """Start the broker. `proxy_port`: also open a PROXIED listener that advertises 127.0.0.1:proxy_port,
        where a TCP proxy forwards to the listener's own port (`BrokerState.proxied_port`): fault tests cut
        the clients that bootstrap there off the broker without stopping it. `secured`: also open a SASL_SSL
        listener (SCRAM-SHA-512, user `SCRAM_USER`) and an SSL listener requiring a client certificate, with
        certificates and a password generated into `state_dir/secured` (kept there for later `up`s).
        `request_log`: log every completed request (see `BrokerState.request_log`). `lean`: LEAN_JVM and
        LEAN_PROPERTIES, for tests (kept by `restart`)."""
        running = self.state()
        if running is not None:
            raise LocalKafkaError(
                f"a local broker already runs at {running.bootstrap} (pid {running.pid}); "
                f"run `transcoder local-kafka down` first"
            )
        for p in (port, controller_port):
            if p is not None:
                check_port_free(p)
        libs = fetch(self.version, self.cache_dir)
        port = port or free_port()
        controller_port = controller_port or free_port()
        if controller_port == port:
            raise LocalKafkaError("the broker and controller ports must differ")

        self.state_dir.mkdir(parents=True, exist_ok=True)
        data_dir = self.state_dir / "data"
        config_file = self.state_dir / "server.properties"
        log_file = self.state_dir / "broker.log"
        proxied = (free_port(), proxy_port) if proxy_port is not None else None
        secured_at = None
        scram: list[str] = []
        password_file = self.state_dir / "secured" / "sasl-password"
        if secured:
            paths = certs.ensure(self.state_dir / "secured")
            if not password_file.exists():
                fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(16))  # hex: nothing StorageTool's [name=..,password=..] would split on
            secured_at = (free_port(), free_port(), paths)
            scram = [a for m in _SCRAM_MECHANISMS
                     for a in ("--add-scram", f"{m}=[name={SCRAM_USER},password={password_file.read_text().strip()}]")]
        # Owner-only: with `secured`, PLAIN's password is in it.
        fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_server_properties(port, controller_port, data_dir, proxied, secured_at,
                                       password_file.read_text().strip() if secured else "", lean))
        formatted_now = False
        if not (data_dir / "meta.properties").exists():
            _format_storage([(config_file, data_dir)], libs, _kafka_uuid(), scram)
            formatted_now = True

        state = BrokerState(
            pid=0, version=self.version, bootstrap=f"127.0.0.1:{port}", port=port,
            controller_port=controller_port, data_dir=str(data_dir), log_file=str(log_file),
            config_file=str(config_file), libs=str(libs),
            proxied_port=proxied[0] if proxied else None,
            proxied_bootstrap=f"127.0.0.1:{proxied[1]}" if proxied else None, request_log=request_log, lean=lean,
        )
        if secured_at is not None:
            state = replace(state, sasl_ssl_bootstrap=f"127.0.0.1:{secured_at[0]}",
                            ssl_bootstrap=f"127.0.0.1:{secured_at[1]}", certs_dir=str(secured_at[2].dir),
                            sasl_username=SCRAM_USER, sasl_password_file=str(password_file))
        # Kept data was formatted without this user (or with an older password): add it over PLAINTEXT.
        return self._launch(state, heap=heap, timeout=timeout, add_scram_user=secured and not formatted_now)

    def _launch(self, state: BrokerState, *, heap: str, timeout: float, add_scram_user: bool = False) -> BrokerState:
        """Start the broker of `state` (its config file and data as they are), record its pid, wait until it answers."""
        proc = _spawn(state.config_file, state.log_file, state.libs, heap=heap, lean=state.lean,
                      request_log=state.request_log)
        state = replace(state, pid=proc.pid)
        self._state_path.write_text(json.dumps(asdict(state), indent=2))
        try:
            deadline = time.monotonic() + timeout
            self._wait_ready(proc, state, timeout)
            if add_scram_user:
                _upsert_scram_user(state)
            if state.sasl_ssl_bootstrap is not None:
                self._wait_ready(proc, state, max(deadline - time.monotonic(), 5.0), secured=True)
        except BaseException:
            _stop_pid(proc.pid, config_file=state.config_file)
            self._state_path.unlink(missing_ok=True)
            raise
        return state

    def kill(self) -> BrokerState:
        """SIGKILL the running broker, as a crash would: its data stays, unflushed writes may be lost.
        `restart` starts it again on the same ports and data."""
        st = self.state()
        if st is None:
            raise LocalKafkaError(f"no local broker runs from {self.state_dir}")
        _kill_pid(st.pid)
        return st

    def restart(self, *, timeout: float = 120.0, heap: str = "1g") -> BrokerState:
        """Start the broker that ran last from this state directory again: same config, ports and data
        (after `kill`, or a crash). Refuses while it still runs."""
        if self.state() is not None:
            raise LocalKafkaError(f"the local broker from {self.state_dir} still runs; stop or kill it first")
        try:
            st = BrokerState(**json.loads(self._state_path.read_text()))
        except FileNotFoundError:
            raise LocalKafkaError(f"no broker ran from {self.state_dir}: nothing to restart") from None
        for p in (st.port, st.controller_port, st.proxied_port, *st.secured_ports()):
            if p is not None:
                check_port_free(p)
        return self._launch(st, heap=heap, timeout=timeout)

    def _wait_ready(self, proc: subprocess.Popen, state: BrokerState, timeout: float, *,
                    secured: bool = False) -> None:
        """Until the PLAINTEXT listener answers a metadata request; `secured`: until both secured listeners do
        (a SCRAM user added at format time is known once the broker has replayed its metadata)."""
        # Imported here: `fetch` and `down` must work even where confluent-kafka is missing.
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        confs = [state.sasl_ssl_config(), state.ssl_config()] if secured else [{"bootstrap.servers": state.bootstrap}]
        admins = [AdminClient({**c, "log_level": 0}, logger=_Silent()) for c in confs]
        deadline = time.monotonic() + timeout
        while True:
            code = proc.poll()
            if code is not None:
                raise _startup_failure(code, state.log_file, "the local broker",
                                       f"{state.bootstrap} or controller port {state.controller_port}")
            try:
                while admins and admins[0].list_topics(timeout=2).brokers:
                    admins.pop(0)
                if not admins:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                where = "its secured listeners" if secured else state.bootstrap
                raise LocalKafkaError(
                    f"the local broker at {where} did not answer a metadata request "
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
        _stop_pid(st.pid, config_file=st.config_file, timeout=timeout)
        self._state_path.unlink(missing_ok=True)
        if not keep_data:
            shutil.rmtree(st.data_dir, ignore_errors=True)
        return st

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
    controller port)): every node a voter of the static quorum, replication as `_replication(len(ports))`."""
    port, controller_port = ports[node_id]
    listeners, advertised, protocols = _loopback_listeners(port, controller_port)
    props = {
        **_kraft_node(node_id, {n: c for n, (_, c) in ports.items()}, data_dir, listeners, advertised, protocols),
        **_replication(len(ports)),
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
        return _pid_is_our_broker(self.pid, self.config_file)


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


class LocalCluster(_StateDir):
    """A local KRaft cluster of combined (broker, controller) nodes, ids 1..N, whose state lives in `state_dir`.

    Every topic gets three replicas (or one per node, with fewer), acks=all needs two in sync; see
    CLUSTER_PROPERTIES. The nodes' ports lie outside the ephemeral range (`fixed_ports`), so a node stopped or killed
    starts again on the same ports, the same data and the same config.
    """

    STATE_FILE = _CLUSTER_STATE_FILE

    def recorded(self) -> ClusterState | None:
        """The cluster `up` started last from this state directory, whether or not its nodes run."""
        try:
            return ClusterState.from_json(self._state_path.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as exc:
            raise LocalKafkaError(f"unreadable cluster state {self._state_path}: {exc}") from exc

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
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(st.to_json())
        tmp.replace(self._state_path)  # whole or not at all, for a reader in another process
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
            _format_storage([(Path(m.config_file), Path(m.data_dir)) for m in st.members], libs, st.cluster_id, [])
        procs: dict[int, subprocess.Popen] = {}
        try:
            for m in st.members:
                procs[m.node_id] = _spawn(m.config_file, m.log_file, st.libs, heap=heap, lean=lean)
                st = self._record(st.with_pid(m.node_id, procs[m.node_id].pid))
            self._wait_registered(st, procs, st.nodes, timeout)
        except BaseException:
            for proc in procs.values():
                if proc.poll() is None:  # not a pid already reaped, which the system may have given another process
                    _kill_pid(proc.pid)
            self._state_path.unlink(missing_ok=True)
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
        return ClusterState(version=self.version, cluster_id=_kafka_uuid(), libs=str(libs), heap=heap, lean=lean,
                            members=tuple(members))

    def _wait_registered(self, st: ClusterState, procs: dict[int, subprocess.Popen], nodes: list[int],
                         timeout: float) -> None:
        """Until `nodes` are registered and unfenced (listed by DescribeCluster: KRaft lists unfenced brokers only),
        asked at their own listeners; with the whole cluster, until a topic replicated on min(3, N) nodes can be
        created too. A node exiting meanwhile is a one-line error naming it."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": ",".join(st.node(n).bootstrap for n in nodes), "log_level": 0},
                            logger=_Silent())
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        def check_exits() -> None:
            for n, proc in procs.items():
                code = proc.poll()
                if code is not None:
                    m = st.node(n)
                    raise _startup_failure(code, m.log_file, f"node {n} of the local cluster",
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
        _kill_pid(m.pid)
        return m

    def stop(self, node: int, timeout: float = 60.0) -> NodeState:
        """SIGTERM the node (a controlled shutdown: its leaderships move first) and wait for it to exit; a node not
        gone within `timeout` is killed and this raises, saying so."""
        m = self._running_node(node)
        if not _stop_pid(m.pid, config_file=m.config_file, timeout=timeout):
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
        proc = _spawn(m.config_file, m.log_file, st.libs, heap=st.heap, lean=st.lean)
        st = self._record(st.with_pid(node, proc.pid))
        try:
            self._wait_registered(st, {node: proc}, [node], timeout)
        except BaseException:
            if proc.poll() is None:
                _kill_pid(proc.pid)
            raise
        return st.node(node)

    def pause(self, node: int) -> NodeState:
        """SIGSTOP the node: it holds its connections and answers nothing, as a process stalled by GC or a stuck
        disk would; its controller session expires after broker.session.timeout.ms and it is fenced."""
        m = self._running_node(node)
        os.kill(m.pid, signal.SIGSTOP)
        _wait_state(m.pid, "T")
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
                    _reap(m.pid)
                time.sleep(0.2)
        for m in alive:
            if m.running():
                _kill_pid(m.pid)
            _reap(m.pid)
        if not keep_data:
            for m in st.members:
                shutil.rmtree(m.data_dir, ignore_errors=True)
            self._state_path.unlink(missing_ok=True)
        return st if alive else None


def _answers_alone(bootstrap: str, node: int, deadline: float, check: Callable[[], None]) -> None:
    """Until DescribeCluster asked at `bootstrap` alone is answered by node `node`, retrying until `deadline`.
    `check` is called before each try (it raises when a node exited)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}, logger=_Silent())
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


def _wait_state(pid: int, state: str, timeout: float = 5.0) -> None:
    """Until /proc says `pid` is in `state` (T: stopped), or `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:1] == [state]:
                return
        except OSError:
            return
        time.sleep(0.05)


#: The SCRAM mechanisms of SASL_MECHANISMS: SCRAM_USER has a credential for each.
_SCRAM_MECHANISMS = tuple(m for m in SASL_MECHANISMS if m.startswith("SCRAM-"))


def _upsert_scram_user(state: BrokerState) -> None:
    """Set the SCRAM user's password over the PLAINTEXT listener (data kept from an `up` that did not add it), one
    AlterUserScramCredentials request per mechanism: Kafka's controller refuses a request that alters one user
    twice (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"), both of its
    mechanisms included."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    assert state.sasl_password_file is not None and state.sasl_username is not None
    admin = AdminClient({"bootstrap.servers": state.bootstrap, "log_level": 0}, logger=_Silent())
    password = Path(state.sasl_password_file).read_text().strip().encode()
    for mechanism in _SCRAM_MECHANISMS:
        upsert = UserScramCredentialUpsertion(state.sasl_username,
                                              ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], 8192),
                                              password, secrets.token_bytes(16))
        try:
            for fut in admin.alter_user_scram_credentials([upsert]).values():
                fut.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - any failure here means the secured listener cannot be used
            raise LocalKafkaError(f"could not add the SCRAM user {state.sasl_username} ({mechanism}): "
                                  f"{exc}") from None


def _format_storage(nodes: list[tuple[Path, Path]], libs: Path, cluster_id: str, extra: list[str]) -> None:
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


def _spawn(config_file: str, log_file: str, libs: str, *, heap: str, lean: bool,
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


def _startup_failure(code: int, log_file: str, what: str, ports: str) -> LocalKafkaError:
    """The one-line error for a node that exited with `code` while starting: a port taken, else its log's first
    error."""
    log = "".join(_tail(Path(log_file), 200))
    if "Address already in use" in log:
        return PortInUseError(f"{what} could not bind {ports}: address already in use")
    last = [ln.strip() for ln in log.splitlines() if "ERROR" in ln or "Exception" in ln]
    return LocalKafkaError(f"{what} exited with status {code} during start-up"
                           + (f": {last[0]}" if last else "") + f" (log: {log_file})")


def _stop_pid(pid: int, *, config_file: str, timeout: float = 30.0) -> bool:
    """SIGTERM our broker `pid` (a controlled shutdown), wait for it to exit, SIGKILL it after `timeout`. True when
    it exited on SIGTERM (or was not running), False when it had to be killed."""
    if not _pid_is_our_broker(pid, config_file):
        return True
    os.kill(pid, signal.SIGCONT)  # a paused (SIGSTOPped) node handles SIGTERM only once continued
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_is_our_broker(pid, config_file):
            _reap(pid)
            return True
        _reap(pid)
        time.sleep(0.2)
    _kill_pid(pid)
    return False


def _kill_pid(pid: int) -> None:
    """SIGKILL `pid`, as a crash would, and wait until it has released its ports (reaped if it is our child)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(300):
        _reap(pid)
        # Not _pid_is_our_broker: a dying process's cmdline is empty once its memory is freed, but its listening
        # sockets close only after that; a restart must find the ports free.
        if _exited(pid):
            break
        time.sleep(0.1)
    _reap(pid)


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
