"""The local development broker: Apache Kafka from Maven Central (transcoder.dev.kafka_jars), one KRaft node on
loopback, optionally with secured (SASL_SSL, mTLS) and proxied listeners.

Used by `deploy/local/kafka`, the test session and the demo; transcoder.dev.local_cluster runs N nodes. Nothing here
talks to a production cluster. Once the jars of a version are cached, `up` takes no network.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from transcoder.dev import certs
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
    replication_properties,
    spawn,
    startup_failure,
    stop_pid,
)
from transcoder.dev.kafka_jars import fetch
from transcoder.dev.ports import check_port_free, fixed_ports
from transcoder.errors import LocalKafkaError

_STATE_FILE = "state.json"
#: The SCRAM user of the secured listeners (`up(secured=True)`); its password is generated once per state dir.
SCRAM_USER = "transcoder"
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: Every SASL mechanism the SASL_SSL listener offers: SCRAM (both digests) and PLAIN for SCRAM_USER and its
#: password; OAUTHBEARER with Kafka's unsecured JWT validator (the default when no validator is configured:
#: any unsigned token is accepted, its `sub` claim the principal) for clients' `enable.sasl.oauthbearer.unsecure.jwt`.
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER")


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


def server_properties(port: int, controller_port: int, data_dir: Path,
                       proxied: tuple[int, int] | None = None,
                       secured: tuple[int, int, certs.CertPaths] | None = None, sasl_password: str = "",
                       lean: bool = False) -> str:
    """server.properties; `proxied`: (bound port, advertised port) of a PROXIED listener, else none;
    `secured`: (SASL_SSL port, SSL port, certificates) of the secured listeners, else none, with `sasl_password`
    SCRAM_USER's password for PLAIN (the file is then private to its owner)."""
    listeners, advertised, protocols = loopback_listeners(port, controller_port)
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
        **kraft_node_properties(1, {1: controller_port}, data_dir, listeners, advertised, protocols),
        **replication_properties(1),
        # One node, its own controller: fencing it (no heartbeat for 9 s, the default) helps nothing, and on a
        # starved machine it refused a topic's creation ("All brokers are currently fenced", fresh-clone CI).
        "broker.session.timeout.ms": "30000",
        **(LEAN_PROPERTIES if lean else {}),
        **extra,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class LocalKafka(StateDir):
    """One local KRaft broker whose state lives in `state_dir`."""

    STATE_FILE = _STATE_FILE

    def state(self) -> BrokerState | None:
        """The running broker's state, or None when none runs (a stale state file is ignored)."""
        try:
            st = BrokerState(**json.loads(self.state_path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise LocalKafkaError(f"unreadable broker state {self.state_path}: {exc}") from exc
        return st if pid_is_our_broker(st.pid, st.config_file) else None

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
        # ports outside the ephemeral range (`fixed_ports`): `restart` binds them again after a kill, and a port the
        # kernel hands out (bind(0), any outgoing connection) could be taken meanwhile (seen: "address already in
        # use" restarting the tests' broker 12 s after its SIGKILL, five test sessions beside it)
        port = port or fixed_ports(1)[0]
        controller_port = controller_port or fixed_ports(1)[0]
        if controller_port == port:
            raise LocalKafkaError("the broker and controller ports must differ")

        self.state_dir.mkdir(parents=True, exist_ok=True)
        data_dir = self.state_dir / "data"
        config_file = self.state_dir / "server.properties"
        log_file = self.state_dir / "broker.log"
        proxied = (fixed_ports(1)[0], proxy_port) if proxy_port is not None else None
        secured_at = None
        scram: list[str] = []
        password_file = self.state_dir / "secured" / "sasl-password"
        if secured:
            paths = certs.ensure(self.state_dir / "secured")
            if not password_file.exists():
                fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(16))  # hex: nothing StorageTool's [name=..,password=..] would split on
            sasl_port, ssl_port = fixed_ports(2)
            secured_at = (sasl_port, ssl_port, paths)
            scram = [a for m in _SCRAM_MECHANISMS
                     for a in ("--add-scram", f"{m}=[name={SCRAM_USER},password={password_file.read_text().strip()}]")]
        # Owner-only: with `secured`, PLAIN's password is in it.
        fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(server_properties(port, controller_port, data_dir, proxied, secured_at,
                                       password_file.read_text().strip() if secured else "", lean))
        formatted_now = False
        if not (data_dir / "meta.properties").exists():
            format_storage([(config_file, data_dir)], libs, kafka_uuid(), scram)
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
        proc = spawn(state.config_file, state.log_file, state.libs, heap=heap, lean=state.lean,
                      request_log=state.request_log)
        state = replace(state, pid=proc.pid)
        self.state_path.write_text(json.dumps(asdict(state), indent=2))
        try:
            deadline = time.monotonic() + timeout
            self._wait_ready(proc, state, timeout)
            if add_scram_user:
                _upsert_scram_user(state)
            if state.sasl_ssl_bootstrap is not None:
                self._wait_ready(proc, state, max(deadline - time.monotonic(), 5.0), secured=True)
        except BaseException:
            stop_pid(proc.pid, config_file=state.config_file)
            self.state_path.unlink(missing_ok=True)
            raise
        return state

    def kill(self) -> BrokerState:
        """SIGKILL the running broker, as a crash would: its data stays, unflushed writes may be lost.
        `restart` starts it again on the same ports and data."""
        st = self.state()
        if st is None:
            raise LocalKafkaError(f"no local broker runs from {self.state_dir}")
        kill_pid(st.pid)
        return st

    def restart(self, *, timeout: float = 120.0, heap: str = "1g") -> BrokerState:
        """Start the broker that ran last from this state directory again: same config, ports and data
        (after `kill`, or a crash). Refuses while it still runs."""
        if self.state() is not None:
            raise LocalKafkaError(f"the local broker from {self.state_dir} still runs; stop or kill it first")
        try:
            st = BrokerState(**json.loads(self.state_path.read_text()))
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
        admins = [AdminClient({**c, "log_level": 0}, logger=Silent()) for c in confs]
        deadline = time.monotonic() + timeout
        while True:
            code = proc.poll()
            if code is not None:
                raise startup_failure(code, state.log_file, "the local broker",
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
            raw = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        st = BrokerState(**raw)
        stop_pid(st.pid, config_file=st.config_file, timeout=timeout)
        self.state_path.unlink(missing_ok=True)
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
            err = proc.stderr.strip()
            first = next((line for line in err.splitlines() if "Exception" in line or "Error" in line), "")
            raise LocalKafkaError(f"DumpLogSegments failed on {segment}: {first[:300]} ... {err[-300:]}")
        return proc.stdout


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
    admin = AdminClient({"bootstrap.servers": state.bootstrap, "log_level": 0}, logger=Silent())
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
