"""`transcoder local-kafka`: fetch, start, inspect and stop the local development broker."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from transcoder.cli.main import main
from transcoder.errors import ConfigError


@main.group("local-kafka")
@click.option("--state-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              help="Where the broker's config, data, log and pid live (default ~/.cache/transcoder/local-kafka).")
@click.option("--version", "kafka_version", envvar="TRANSCODER_KAFKA_VERSION", default=None,
              help="Apache Kafka version to fetch from Maven Central.")
@click.pass_context
def local_kafka(ctx: click.Context, state_dir: Path | None, kafka_version: str | None) -> None:
    """A real Apache Kafka broker (KRaft, one node) on 127.0.0.1, for development and tests."""
    from transcoder.dev.local_kafka import DEFAULT_VERSION, LocalKafka

    ctx.obj = LocalKafka(state_dir, version=kafka_version or DEFAULT_VERSION)


@local_kafka.command("fetch")
@click.pass_obj
def local_kafka_fetch(kafka: Any) -> None:
    """Resolve the broker's jars with Maven into the cache (a no-op when cached)."""
    from transcoder.dev.local_kafka import fetch

    click.echo(fetch(kafka.version, kafka.cache_dir))


@local_kafka.command("up")
@click.option("--port", type=int, default=None, help="Client port (default: a free one).")
@click.option("--controller-port", type=int, default=None, help="KRaft controller port (default: a free one).")
@click.option("--timeout", type=float, default=90.0, show_default=True,
              help="Seconds to wait for the broker to answer.")
@click.option("--secured", is_flag=True,
              help="Also open a SASL_SSL listener (SCRAM-SHA-512 and -256, PLAIN, OAUTHBEARER with unsecured "
                   "JWTs) and an mTLS listener, with a CA, certificates "
                   "and a password generated into the state directory.")
@click.pass_obj
def local_kafka_up(kafka: Any, port: int | None, controller_port: int | None, timeout: float, secured: bool) -> None:
    """Start the broker; print its bootstrap address as the last line."""
    st = kafka.up(port=port, controller_port=controller_port, timeout=timeout, secured=secured)
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
    """Print the bootstrap address and data directory; exit 1 when no broker runs."""
    st = kafka.state()
    if st is None:
        click.echo(f"not running (state dir {kafka.state_dir})", err=True)
        sys.exit(1)
    click.echo(f"bootstrap {st.bootstrap}\ndata_dir {st.data_dir}\npid {st.pid}\nversion {st.version}\n"
               f"log {st.log_file}")
    if st.sasl_ssl_bootstrap:
        click.echo("\n".join(_secured_lines(st)))


@local_kafka.command("logs")
@click.option("-n", "--lines", type=int, default=100, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines, like tail -f.")
@click.pass_obj
def local_kafka_logs(kafka: Any, lines: int, follow: bool) -> None:
    """Print the end of the broker's log."""
    from collections import deque

    log = kafka.state_dir / "broker.log"
    if not log.exists():
        raise ConfigError(f"no broker log at {log}: the broker was never started there")
    with log.open(errors="replace") as f:
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
    """Stop the broker `up` started (nothing else), and remove its data unless --keep-data."""
    st = kafka.down(keep_data=keep_data)
    click.echo("no local broker was running" if st is None else f"stopped Kafka pid {st.pid} at {st.bootstrap}",
               err=True)
