"""`transcoder local-kafka`: fetch, start, inspect and stop the local development broker, or cluster."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import click

from transcoder.cli.help import InOrder
from transcoder.cli.main import main
from transcoder.cli.options import option
from transcoder.errors import ConfigError, Interrupted, UnavailableError


@main.group("local-kafka", cls=InOrder, order=("fetch", "up", "status", "logs", "down"))
@click.option("--state-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              help="Where the broker's config, data, log and pid live (default ~/.cache/transcoder/local-kafka).")
@option("--kafka-version", "kafka_version", envvar="TRANSCODER_KAFKA_VERSION", default=None, was=("--version",),
        help="Apache Kafka version to fetch from Maven Central.")
@click.pass_context
def local_kafka(ctx: click.Context, state_dir: Path | None, kafka_version: str | None) -> None:
    """A real Apache Kafka broker (KRaft, one node), or a cluster of them (`up --brokers 3`), on 127.0.0.1, for
    development and tests."""
    from transcoder.dev.kafka_jars import DEFAULT_VERSION
    from transcoder.dev.local_kafka import LocalKafka

    ctx.obj = LocalKafka(state_dir, version=kafka_version or DEFAULT_VERSION)


@local_kafka.command("fetch")
@click.pass_obj
def local_kafka_fetch(kafka: Any) -> None:
    """Resolve the broker's jars with Maven into the cache (a no-op when cached)."""
    from transcoder.dev.kafka_jars import fetch

    click.echo(fetch(kafka.version, kafka.cache_dir))


def _cluster(kafka: Any) -> Any:
    """The cluster whose state lives beside the single broker's (one state directory, either one running)."""
    from transcoder.dev.local_cluster import LocalCluster

    return LocalCluster(kafka.state_dir, version=kafka.version, cache_dir=kafka.cache_dir)


@local_kafka.command("up")
@click.option("--brokers", type=int, default=1, show_default=True, metavar="N",
              help="Nodes (1-9). With more than one: a cluster of combined broker+controller nodes, ids 1..N, "
                   "every topic on 3 replicas (N under 3: N) with min.insync.replicas 2 (1); the bootstrap list "
                   "of all nodes is printed. Ports are chosen outside the ephemeral range, one broker or N, so a "
                   "broker killed comes back on its own.")
@click.option("--port", type=int, default=None,
              help="Client port (default: a free one outside the ephemeral range; one broker only).")
@click.option("--controller-port", type=int, default=None,
              help="KRaft controller port (default: a free one outside the ephemeral range; one broker only).")
@click.option("--timeout", type=float, default=None,
              help="Seconds to wait for the broker to answer (default 90; with --brokers over 1, 180 for every "
                   "node to register).")
@click.option("--secured", is_flag=True,
              help="Also open a SASL_SSL listener (SCRAM-SHA-512 and -256, PLAIN, OAUTHBEARER with unsecured "
                   "JWTs) and an mTLS listener, with a CA, certificates "
                   "and a password generated into the state directory.")
@click.pass_obj
def local_kafka_up(kafka: Any, brokers: int, port: int | None, controller_port: int | None, timeout: float | None,
                   secured: bool) -> None:
    """Start the broker (or --brokers N of them); print its bootstrap address (list) as the last line."""
    from transcoder.dev.local_cluster import MAX_BROKERS

    if not 1 <= brokers <= MAX_BROKERS:
        raise ConfigError(f"--brokers takes 1 to {MAX_BROKERS} nodes, not {brokers}")
    cluster = _cluster(kafka)
    if brokers > 1:
        given = [name for name, v in (("--port", port), ("--controller-port", controller_port),
                                      ("--secured", secured or None)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: for one broker only, not with --brokers {brokers}")
        cst = cluster.up(brokers=brokers, timeout=180.0 if timeout is None else timeout)
        pids = ", ".join(f"node {m.node_id} pid {m.pid}" for m in cst.members)
        click.echo(f"Kafka {cst.version} cluster of {brokers} nodes running ({pids}), state {kafka.state_dir}",
                   err=True)
        click.echo(cst.bootstrap)
        return
    running = cluster.state()
    if running is not None:
        raise ConfigError(f"a local cluster already runs at {running.bootstrap} from {kafka.state_dir}; "
                          "run `transcoder local-kafka down` first")
    st = kafka.up(port=port, controller_port=controller_port, timeout=90.0 if timeout is None else timeout,
                  secured=secured)
    click.echo(f"Kafka {st.version} running, pid {st.pid}, data {st.data_dir}, log {st.log_file}", err=True)
    if secured:
        for line in _secured_lines(st):
            click.echo(line, err=True)
    click.echo(st.bootstrap)


def _secured_lines(st: Any) -> list[str]:
    """How to reach the secured listeners: paths only, never the password or a key."""
    c = st.certs
    return [(f"SASL_SSL {st.sasl_ssl_bootstrap}: sasl.mechanism=SCRAM-SHA-512 sasl.username={st.sasl_username} "
             f"sasl.password=${{file:{st.sasl_password_file}}} ssl.ca.location={c.ca}"),
            (f"SSL (mTLS) {st.ssl_bootstrap}: ssl.ca.location={c.ca} ssl.certificate.location={c.client_cert} "
             f"ssl.key.location={c.client_key} ssl.key.password=${{file:{c.client_key_password}}}")]


@local_kafka.command("status")
@click.pass_obj
def local_kafka_status(kafka: Any) -> None:
    """Print the bootstrap address and data directory (a cluster: each node's); exit 5 when none runs."""
    cst = _cluster(kafka).state()
    if cst is not None:
        click.echo(f"bootstrap {cst.bootstrap}\nversion {cst.version}")
        for m in cst.members:
            click.echo(f"node {m.node_id} {'running' if m.running() else 'down'} pid {m.pid} port {m.port} "
                       f"data_dir {m.data_dir} log {m.log_file}")
        return
    st = kafka.state()
    if st is None:
        raise UnavailableError(f"no local broker runs (state dir {kafka.state_dir}): start one with "
                               "`transcoder local-kafka up`")
    click.echo(f"bootstrap {st.bootstrap}\ndata_dir {st.data_dir}\npid {st.pid}\nversion {st.version}\n"
               f"log {st.log_file}")
    if st.sasl_ssl_bootstrap:
        click.echo("\n".join(_secured_lines(st)))


@local_kafka.command("logs")
@click.option("-n", "--lines", type=int, default=100, show_default=True, help="Lines from the end to print.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines, like tail -f.")
@click.option("--node", type=int, default=None, help="A cluster's node (`up --brokers N`): its log.")
@click.pass_obj
def local_kafka_logs(kafka: Any, lines: int, follow: bool, node: int | None) -> None:
    """Print the end of the broker's log."""
    from collections import deque

    log = kafka.state_dir / (f"node-{node}" if node is not None else "") / "broker.log"
    if not log.exists():
        raise ConfigError(f"no broker log at {log}: the {'node' if node is not None else 'broker'} was never "
                          "started there")
    # --follow ends on a signal: its normal end, exit 0 (without --follow, 143/130 as for any command)
    ends = (KeyboardInterrupt, Interrupted) if follow else ()
    with contextlib.suppress(*ends), log.open(errors="replace") as f:
        for line in deque(f, maxlen=lines):
            click.echo(line, nl=False)
        while follow:
            line = f.readline()
            if line:
                click.echo(line, nl=False)
            else:
                time.sleep(0.5)


@local_kafka.command("down")
@click.option("--keep-data", is_flag=True, help="Keep the data directory for the next `up`.")
@click.pass_obj
def local_kafka_down(kafka: Any, keep_data: bool) -> None:
    """Stop the broker or cluster `up` started (nothing else), and remove its data unless --keep-data."""
    cst = _cluster(kafka).down(keep_data=keep_data)
    if cst is not None:
        click.echo(f"stopped the Kafka cluster of {len(cst.members)} nodes at {cst.bootstrap}", err=True)
    st = kafka.down(keep_data=keep_data)
    if st is not None:
        click.echo(f"stopped Kafka pid {st.pid} at {st.bootstrap}", err=True)
    if st is None and cst is None:
        click.echo("no local broker was running", err=True)
