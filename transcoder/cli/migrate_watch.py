"""`transcoder migrate watch`: an in-place rollout (producers switched to a codec one by one, nothing copied), seen
in the codecs the broker stores the topic's recent batches in, with its compression.type checked."""

from __future__ import annotations

import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from transcoder.cli.main import ByteSize, bootstrap, properties
from transcoder.cli.options import TIME_FORMS, Choice, Partitions, Time, When, option, partition_list
from transcoder.codecs import CODECS
from transcoder.errors import ConfigError, Interrupted, KafkaUnavailableError, TranscoderError

FORMATS = ("table", "json")


def _cluster(ctx: click.Context, config_path: Path | None, servers: str | None, props: tuple[str, ...],
             local_state_dir: Path | None) -> tuple[dict[str, Any], Any]:
    """librdkafka properties of the topic's cluster: the config's `cluster` (where producers write), or -b; and
    the config (None without --config)."""
    if config_path is not None:
        if ctx.get_parameter_source("bootstrap_servers") == ParameterSource.COMMANDLINE:
            raise ConfigError("give --config or --bootstrap-servers, not both")
        from transcoder import config as cfg

        config = cfg.load(config_path)
        return {**config.cluster.librdkafka(), **properties(props)}, config
    return {"bootstrap.servers": bootstrap(servers, local_state_dir), **properties(props)}, None


def _payoff(kept: Any, mix: Any) -> Any:
    """The sample's predicted against realized (None: --predict-records 0); the prediction taken on the first
    sample (migrate.watch_payoff.KeptPrediction)."""
    if kept is None:
        return None
    from confluent_kafka import KafkaException

    from transcoder.migrate import watch_payoff

    try:
        prediction, where = kept.get(mix)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"cannot take the prediction for {mix.topic}: {exc.args[0]}",
                                    topic=mix.topic) from exc
    return watch_payoff.watch_payoff(prediction, where, mix)


def _print(mix: Any, fmt: str, follow: bool, payoff: Any = None) -> None:
    from transcoder.migrate import watch as w

    if fmt == "json":
        doc = {**mix.as_dict(), "payoff": None if payoff is None else payoff.as_dict()}
        click.echo(json.dumps(doc, separators=(",", ":")) if follow else json.dumps(doc, indent=2))
        return
    from rich.console import Console

    from transcoder.report.tables import rich_rows

    headers, rows = w.table(mix)
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(rich_rows(headers, rows, f"{mix.topic}: stored codecs since {w.iso(mix.since_ms)} "
                                           f"(sampled at {w.iso(mix.sampled_at_ms)})", 2))
    for p in mix.partitions:
        if p.note:
            console.print(f"partition {p.partition}: {p.note}", markup=False)
    if not all(p.complete for p in mix.partitions):
        console.print(f"covered: the share of each partition's offsets read ({w.WINDOWS} evenly spread runs of "
                      "stored batches within --max-bytes); raise --max-bytes to read more", markup=False)
    console.print(f"compression.type: {mix.compression_type}", markup=False)
    console.print(mix.verdict.text, markup=False, soft_wrap=True)
    if payoff is not None:
        console.print(f"predicted against realized ({mix.target}):", markup=False)
        for line in payoff.lines():
            console.print(line, markup=False, soft_wrap=True)


@click.command("watch")
@click.option("--topic", "-t", required=True, help="The topic whose producers switch codec in place.")
@click.option("--config", "-c", "config_path", type=click.Path(path_type=Path),
              help="A transcoder config file: its `cluster` (default: --bootstrap-servers).")
@click.option("--bootstrap-servers", "-b", envvar="TRANSCODER_BOOTSTRAP_SERVERS",
              help="Kafka bootstrap servers (default: the running local broker).")
@click.option("-X", "props", multiple=True, metavar="KEY=VALUE", help="Any librdkafka property (repeatable).")
@click.option("--since", type=Time(past=True), default="1h", show_default=True,
              help=f"Records written from this time on ({TIME_FORMS}; with --follow a duration's window slides).")
@option("--partition", "partitions", type=Partitions(), multiple=True, callback=partition_list, metavar="N[,N...]",
        was=("--partitions",), help="A partition to sample, e.g. 0 or 0,3 (repeatable; default: all).")
@click.option("--target", type=Choice(CODECS), default="zstd", show_default=True,
              help="The codec the rollout moves producers to.")
@click.option("--target-level", type=int,
              help="The compression level producers use with --target (default: the codec's default level).")
@click.option("--predict-records", type=click.IntRange(min=0), default=10_000, show_default=True,
              help="Predict --target's figures (as `transcoder evaluate` measures them) on the last this-many "
                   "records of each partition, at the producers' batching, on the first sample; 0: no prediction.")
@click.option("--max-bytes", type=ByteSize(), default="4MiB", show_default=True,
              help="Stored bytes read per partition and sample, in 16 runs spread over the offsets since --since "
                   "(a smaller range is read whole).")
@click.option("--format", "fmt", type=Choice(FORMATS), default="table", show_default=True,
              help="json: one document (with --follow, one line per sample).")
@click.option("--follow", "-f", is_flag=True, help="Sample again every --interval until interrupted.")
@click.option("--interval", type=float, default=60.0, show_default=True, help="Seconds between samples (--follow).")
@option("--samples", "count", type=click.IntRange(min=1), was=("--count",),
        help="With --follow, stop after this many samples.")
@click.option("--metrics-port", type=click.IntRange(0, 65535),
              help="With --follow, serve /metrics (transcoder_stored_codec_ratio, transcoder_migration_predicted_"
                   "ratio and _bytes_per_record, transcoder_migration_realized_bytes_per_record) and /status.")
@click.option("--metrics-host", default="0.0.0.0", show_default=True, help="Address --metrics-port listens on.")
@click.option("--web-config-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="With --metrics-port: TLS and basic auth of the endpoints, from this web config file in "
                   "exporter-toolkit's format.")
@click.option("--local-kafka-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              hidden=True, help="State dir of the local broker to use when no bootstrap is given.")
@click.pass_context
def watch(ctx: click.Context, topic: str, config_path: Path | None, bootstrap_servers: str | None,
          props: tuple[str, ...], since: When, partitions: list[int] | None, target: str, target_level: int | None,
          predict_records: int, max_bytes: int, fmt: str, follow: bool, interval: float, count: int | None,
          metrics_port: int | None, metrics_host: str, web_config_file: Path | None,
          local_kafka_dir: Path | None) -> None:
    """Show the mix of codecs the broker stores the topic's batches in since a time, per partition (by records
    and by bytes), and whether its compression.type lets producers' codecs through; and what `evaluate` predicts
    for --target on the topic's records against the bytes per record of the batches stored in it (with --config,
    the prediction is kept in the migration state topic: later watches show the same one)."""
    from transcoder.codecs.names import check_level
    from transcoder.migrate import watch as w
    from transcoder.migrate import watch_payoff

    if not follow and (metrics_port is not None or count is not None):
        raise ConfigError("--metrics-port and --samples need --follow")
    if web_config_file is not None and metrics_port is None:
        raise ConfigError("--web-config-file needs --metrics-port")
    if interval <= 0:
        raise ConfigError(f"--interval must be positive, not {interval:g}")
    try:
        check_level(target, target_level)  # type: ignore[arg-type]  # a CODECS name: click.Choice
    except ValueError as exc:
        raise ConfigError(f"--target-level: {exc}") from None
    cluster, config = _cluster(ctx, config_path, bootstrap_servers, props, local_kafka_dir)
    with ExitStack() as stack:
        watcher = stack.enter_context(w.Watcher(cluster, topic, partitions=partitions, target=target,
                                                max_bytes=max_bytes))
        kept = None
        if predict_records:
            store = None
            if config is not None:
                from transcoder.migrate.state import StateStore

                store = stack.enter_context(StateStore(config, topic))
            kept = watch_payoff.KeptPrediction(
                lambda mix: watch_payoff.predict(watcher, mix, level=target_level,
                                                 records_per_partition=predict_records,
                                                 now_ms=int(time.time() * 1000)),
                topic=topic, codec=target, level=target_level, store=store)
        if not follow:
            mix = watcher.sample(since.ms())
            _print(mix, fmt, follow, _payoff(kept, mix))
            return
        _follow(watcher, kept, since, fmt, interval, count, metrics_port, metrics_host, web_config_file)


def _follow(watcher: Any, kept: Any, since: When, fmt: str, interval: float, count: int | None, port: int | None,
            host: str, web_config_file: Path | None = None) -> None:
    """Sample every `interval` s, print each sample, export it; a failed sample is one line on stderr and the
    next one is tried (the cluster may come back), until interrupted or `count` samples."""
    from transcoder.metrics.registry import MigrationMetrics
    from transcoder.migrate import watch as w
    from transcoder.migrate.watch_payoff import export_payoff

    metrics = MigrationMetrics()
    latest: dict[str, Any] = {}
    endpoints = None
    if port is not None:
        from transcoder.metrics.endpoints import Endpoints

        endpoints = Endpoints(metrics.exposition, healthy=lambda: (True, f"watching {watcher.topic}"),
                              ready=lambda: (bool(latest), "sampled" if latest else "no sample yet"),
                              status=lambda: dict(latest), web_config_file=web_config_file)
        try:
            bound = endpoints.start(host, port)
        except OSError as exc:
            raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        click.echo(f"serving /metrics and /status on {endpoints.scheme}://{host}:{bound}", err=True)
    taken = 0
    try:
        while True:
            started = time.monotonic()
            try:
                mix = watcher.sample(since.ms())
            except TranscoderError as exc:
                click.echo(f"transcoder: sample failed: {exc}", err=True)
            else:
                try:
                    payoff = _payoff(kept, mix)
                except TranscoderError as exc:  # the mix is still shown; the prediction is tried again next time
                    click.echo(f"transcoder: prediction failed: {exc}", err=True)
                    payoff = None
                w.export(metrics, mix)
                if payoff is not None:
                    export_payoff(metrics, watcher.topic, payoff)
                latest.clear()
                latest.update({**mix.as_dict(), "payoff": None if payoff is None else payoff.as_dict()})
                _print(mix, fmt, True, payoff)
            taken += 1
            if count is not None and taken >= count:
                return
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except (KeyboardInterrupt, Interrupted):  # --follow ends on a signal: its normal end, exit 0
        return
    finally:
        if endpoints is not None:
            endpoints.stop()
