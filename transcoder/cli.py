"""The `transcoder` command: parse, set up logging, build objects, dispatch."""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from transcoder import __version__, logs
from transcoder.errors import ConfigError, TranscoderError


class _Cli(click.Group):
    """Turns every TranscoderError into one line on stderr and its exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TranscoderError as exc:
            click.echo(f"transcoder: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


class ByteSize(click.ParamType):
    """A size such as 1000, 250MB, 1.5GiB (k/M/G are powers of 1000, Ki/Mi/Gi of 1024)."""

    name = "size"
    _units = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
              "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*", str(value), re.IGNORECASE)
        if not m:
            self.fail(f"{value!r} is not a size (e.g. 1000, 250MB, 1GiB)", param, ctx)
        return int(float(m.group(1)) * self._units[(m.group(2) or "").lower()])


def _properties(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {item!r}")
        out[key.strip()] = val.strip()
    return out


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="transcoder")
@click.option("--log-level", default="info", show_default=True, envvar="TRANSCODER_LOG_LEVEL",
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
def main(log_level: str) -> None:
    """Copy Kafka topics into per-codec destination topics and measure what each codec costs and saves."""
    logs.configure(log_level)


# ---------------------------------------------------------------- local-kafka
@main.group("local-kafka")
@click.option("--state-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              help="Where the broker's config, data, log and pid live (default ~/.cache/transcoder/local-kafka).")
@click.option("--version", "kafka_version", envvar="TRANSCODER_KAFKA_VERSION", default=None,
              help="Apache Kafka version to fetch from Maven Central.")
@click.pass_context
def local_kafka(ctx: click.Context, state_dir: Path | None, kafka_version: str | None) -> None:
    """A real Apache Kafka broker (KRaft, one node) on 127.0.0.1, for development and tests."""
    from transcoder.localkafka import DEFAULT_VERSION, LocalKafka

    ctx.obj = LocalKafka(state_dir, version=kafka_version or DEFAULT_VERSION)


@local_kafka.command("fetch")
@click.pass_obj
def local_kafka_fetch(kafka: Any) -> None:
    """Resolve the broker's jars with Maven into the cache (a no-op when cached)."""
    from transcoder.localkafka import fetch

    click.echo(fetch(kafka.version, kafka.cache_dir))


@local_kafka.command("up")
@click.option("--port", type=int, default=None, help="Client port (default: a free one).")
@click.option("--controller-port", type=int, default=None, help="KRaft controller port (default: a free one).")
@click.option("--timeout", type=float, default=90.0, show_default=True, help="Seconds to wait for the broker to answer.")
@click.pass_obj
def local_kafka_up(kafka: Any, port: int | None, controller_port: int | None, timeout: float) -> None:
    """Start the broker; print its bootstrap address as the last line."""
    st = kafka.up(port=port, controller_port=controller_port, timeout=timeout)
    click.echo(f"Kafka {st.version} running, pid {st.pid}, data {st.data_dir}, log {st.log_file}", err=True)
    click.echo(st.bootstrap)


@local_kafka.command("status")
@click.pass_obj
def local_kafka_status(kafka: Any) -> None:
    """Print the bootstrap address and data directory; exit 1 when no broker runs."""
    st = kafka.state()
    if st is None:
        click.echo(f"not running (state dir {kafka.state_dir})", err=True)
        sys.exit(1)
    click.echo(f"bootstrap {st.bootstrap}\ndata_dir {st.data_dir}\npid {st.pid}\nversion {st.version}\nlog {st.log_file}")


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


# ---------------------------------------------------------------- seed
def _bootstrap(bootstrap: str | None, local_state_dir: Path | None) -> str:
    if bootstrap:
        return bootstrap
    from transcoder.localkafka import LocalKafka

    st = LocalKafka(local_state_dir).state()
    if st is None:
        raise ConfigError("no --bootstrap-servers given (or TRANSCODER_BOOTSTRAP_SERVERS), "
                          "and no local broker runs: start one with `deploy/local/kafka up`")
    return st.bootstrap


def _start_ms(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ConfigError(f"--start {value!r} is not an ISO-8601 timestamp") from exc
    if dt.tzinfo is None:
        raise ConfigError(f"--start {value!r} needs a time zone, e.g. 2026-01-01T00:00:00Z")
    return int(dt.timestamp() * 1000)


@main.command()
@click.option("--topic", "-t", required=True, help="Topic to write; created when missing.")
@click.option("--bootstrap-servers", "-b", envvar="TRANSCODER_BOOTSTRAP_SERVERS",
              help="Kafka bootstrap servers (default: the running local broker).")
@click.option("-X", "props", multiple=True, metavar="KEY=VALUE",
              help="Any librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable).")
@click.option("--kind", "-k", help="Built-in generator: nginx, nginx-error, json-logs, dns, metrics, entities.")
@click.option("--file", "-f", "file", type=click.Path(path_type=Path),
              help="A file or a directory of files; one record per line, or NDJSON (.gz read too).")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "lines", "ndjson"]), help="How --file is read (auto: by suffix).")
@click.option("--key-field", help="NDJSON field whose value becomes the record key.")
@click.option("--count", "-n", type=int, help="Records to write.")
@click.option("--bytes", "max_bytes", type=ByteSize(), help="Uncompressed bytes to write, e.g. 250MB.")
@click.option("--partitions", "-p", type=int, help="Partitions when creating the topic (existing topics must match).")
@click.option("--replication-factor", type=int, default=-1, show_default=True, help="-1: the broker default.")
@click.option("--topic-config", "topic_props", multiple=True, metavar="KEY=VALUE",
              help="Topic config when creating it, e.g. cleanup.policy=compact (repeatable).")
@click.option("--keys/--no-keys", default=True, show_default=True, help="Key records (entities are always keyed).")
@click.option("--headers/--no-headers", default=False, show_default=True, help="Add realistic headers.")
@click.option("--rate", type=float, help="Records per second at most (default: as fast as possible).")
@click.option("--seed", "seed_value", type=int, default=0, show_default=True, help="Generator seed.")
@click.option("--start", help="Generator timeline start, ISO-8601 (default: so that it ends about now).")
@click.option("--compression", default="none", show_default=True,
              type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), help="Codec for the seeding producer.")
@click.option("--local-kafka-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              hidden=True, help="State dir of the local broker to use when no bootstrap is given.")
def seed(topic: str, bootstrap_servers: str | None, props: tuple[str, ...], kind: str | None,
         file: Path | None, fmt: str, key_field: str | None, count: int | None, max_bytes: int | None,
         partitions: int | None, replication_factor: int, topic_props: tuple[str, ...], keys: bool,
         headers: bool, rate: float | None, seed_value: int, start: str | None, compression: str,
         local_kafka_dir: Path | None) -> None:
    """Write realistic records into a topic, from files or a built-in generator."""
    from transcoder import seed as seeding

    if (kind is None) == (file is None):
        raise ConfigError("give exactly one of --kind or --file")
    if count is not None and max_bytes is not None:
        raise ConfigError("give --count or --bytes, not both")
    if kind is not None and count is None and max_bytes is None:
        raise ConfigError("a generator is endless: give --count or --bytes")
    for name, v in (("--count", count), ("--bytes", max_bytes), ("--partitions", partitions), ("--rate", rate)):
        if v is not None and v <= 0:
            raise ConfigError(f"{name} must be positive, not {v}")
    topic_config = _properties(topic_props)
    where = lambda: ""  # noqa: E731
    if file is not None:
        source = seeding.FileSource(file, fmt=fmt, key_field=key_field)
        records = iter(source)
        where = lambda: source.where  # noqa: E731
    else:
        eps = rate or 2000.0
        start_ms = _start_ms(start)
        if start_ms is None:
            start_ms = seeding.generator_start_ms(count, max_bytes, eps, int(time.time() * 1000))
        records = seeding.generated(kind, seed_value=seed_value, keys=keys, headers=headers,
                                    start_ms=start_ms, events_per_second=eps)
        if kind == "entities":
            topic_config.setdefault("cleanup.policy", "compact")
    cluster = {"bootstrap.servers": _bootstrap(bootstrap_servers, local_kafka_dir), **_properties(props)}

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    by_bytes = max_bytes is not None or count is None
    with Progress(TextColumn(f"seeding {topic}"), BarColumn(), DownloadColumn() if by_bytes else
                  TextColumn("{task.completed:,.0f}/{task.total:,.0f} records"), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("seed", total=max_bytes if by_bytes else count)

        def progress(n: int, b: int) -> None:
            bar.update(task, completed=b if by_bytes else n)

        result = seeding.seed(records, cluster=cluster, topic=topic, count=count, max_bytes=max_bytes,
                              partitions=partitions, replication_factor=replication_factor,
                              topic_config=topic_config, compression=compression, rate=rate,
                              where=where, progress=progress)
    click.echo(result.summary())


# ---------------------------------------------------------------- run / validate
def _load_config(path: Path) -> Any:
    from transcoder import config as cfg

    return cfg.load(path)


def _print_plan(prepared: Any, conf: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="transcoder plan", title_justify="left")
    for col in ("lane", "source", "destination", "codec", "batch", "partitions", "topic", "configs"):
        table.add_column(col)
    by_topic = {d.topic: d for d in prepared.provision.destinations}
    for lane in prepared.plan.lanes:
        for target in lane.targets:
            b = target.destination.batch
            for source in target.sources:
                d = by_topic[target.topic_for(source)]
                cfgs = ", ".join(f"{k}={v}" for k, v in sorted(d.create_configs.items())) if not d.exists else (
                    f"compression.type={d.compression_type}")
                table.add_row(lane.name, source, d.topic, d.codec,
                              f"{b.max_bytes}B/{b.max_records}rec/{b.linger_ms}ms",
                              str(d.partitions), "exists" if d.exists else "create", cfgs)
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(table)
    if prepared.provision.dlq is not None:
        dlq = prepared.provision.dlq
        console.print(f"dead-letter topic: {dlq.topic} ({'exists' if dlq.exists else 'create'})")
    console.print(f"lanes: {conf.lanes}, group ids: {', '.join(lane.group_id for lane in prepared.plan.lanes)}")


@main.command()
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The YAML config file.")
def validate(config_path: Path) -> None:
    """Run every pre-flight check and print the plan; copy nothing, create nothing."""
    from transcoder.service import Service

    conf = _load_config(config_path)
    prepared = Service(conf).prepare(create=False)
    _print_plan(prepared, conf)
    click.echo("ok: every pre-flight check passed")


@main.command()
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The YAML config file.")
@click.option("--until-caught-up", is_flag=True,
              help="Stop once every lane has copied and committed the source end offsets seen at start.")
def run(config_path: Path, until_caught_up: bool) -> None:
    """Copy the configured topics until signalled (SIGTERM/SIGINT drain, commit and exit 0)."""
    import signal

    import structlog

    from transcoder.service import Service

    conf = _load_config(config_path)
    service = Service(conf)
    log = structlog.get_logger("transcoder")

    def on_signal(signum: int, _frame: Any) -> None:
        service.stop()  # only sets a flag; the lanes drain and commit

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("service_starting", config=str(config_path), cluster=conf.cluster.redacted(), lanes=conf.lanes,
             until_caught_up=until_caught_up)
    service.serve()
    service.run(until_caught_up=until_caught_up)
    log.info("service_stopped", records={lane.spec.name: lane.status.records for lane in service.lanes})


# ---------------------------------------------------------------- demo
@main.command()
@click.option("--kind", default="nginx", show_default=True, help="Generator to seed the source topic with.")
@click.option("--bytes", "size", type=ByteSize(), default="250MB", show_default=True,
              help="Uncompressed bytes to seed.")
@click.option("--partitions", type=int, default=3, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True)
def demo(kind: str, size: int, partitions: int, fmt: str) -> None:
    """Start a local Kafka, seed realistic data, copy it into one topic per codec, print the comparison."""
    import json

    from rich.console import Console

    from transcoder import demo as demo_mod
    from transcoder import report

    err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    rows, lanes = demo_mod.run(kind=kind, size_bytes=size, partitions=partitions, state_dir=None, console=err)
    if fmt == "markdown":
        click.echo(report.markdown(rows) + "\n\n" + report.status_markdown(lanes))
    elif fmt == "json":
        click.echo(json.dumps({"topics": json.loads(report.as_json(rows)),
                               "lanes": json.loads(report.as_json(lanes))}, indent=2))
    else:
        out = Console(width=None if sys.stdout.isatty() else 220)
        out.print(report.table(rows))
        out.print(report.status_table(lanes, title="transcoder report (the lanes, as `transcoder report` shows them)"))


# ---------------------------------------------------------------- report
@main.command()
@click.option("--url", default="http://localhost:9308", show_default=True, envvar="TRANSCODER_URL",
              help="A running instance's endpoint (its metrics port).")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True)
@click.option("--timeout", type=float, default=10.0, show_default=True)
def report(url: str, fmt: str, timeout: float) -> None:
    """Per destination of a running instance: records, CPU per 1M records, disk, ratios, lag, p99 latency."""
    import json
    import urllib.error
    import urllib.request

    from rich.console import Console

    from transcoder import report as report_mod

    status_url = url.rstrip("/") + "/status"
    try:
        with urllib.request.urlopen(status_url, timeout=timeout) as resp:
            doc = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TranscoderError(f"cannot read {status_url}: {getattr(exc, 'reason', exc)}") from exc
    rows = report_mod.from_status(doc)
    if fmt == "markdown":
        click.echo(report_mod.status_markdown(rows))
    elif fmt == "json":
        click.echo(report_mod.as_json(rows))
    else:
        Console(width=None if sys.stdout.isatty() else 220).print(report_mod.status_table(rows))
