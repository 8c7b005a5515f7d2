"""`transcoder validate` and `transcoder run`: the service, from one config file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from transcoder import logs
from transcoder.cli.main import main
from transcoder.engines import ENGINES, choices_help
from transcoder.errors import TranscoderError

if TYPE_CHECKING:
    from transcoder.config import Config
    from transcoder.engine import Engine
    from transcoder.kafka.provisioning import Prepared


def _load_config(path: Path) -> Config:
    from transcoder import config as cfg

    return cfg.load(path)


def _print_plan(prepared: Prepared, conf: Config) -> None:
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
    for skipped in prepared.plan.skipped:
        console.print(f"routes.{skipped.route}.source_pattern passes over {skipped.topic}: {skipped.why}")


ENGINE = click.option("--engine", type=click.Choice(list(ENGINES)), default=next(iter(ENGINES)), show_default=True,
                      envvar="TRANSCODER_ENGINE", help=choices_help(ENGINES))
MASTER = click.option("--master", default=None,
                      help="Spark master URL for --engine spark (overrides spark.master; under spark-submit, "
                           "spark-submit's own --master applies).")


def _engine(conf: Config, engine: str, master: str | None) -> Engine:
    """The engine named by --engine, built from the config (transcoder.engines)."""
    entry = ENGINES[engine]
    if master is not None and not entry.takes_master:
        takers = " or ".join(name for name, e in ENGINES.items() if e.takes_master)
        raise click.UsageError(f"--master applies to --engine {takers} only")
    return entry.build(conf, master)


@main.command()
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The YAML config file.")
@ENGINE
@MASTER
def validate(config_path: Path, engine: str, master: str | None) -> None:
    """Run every pre-flight check and print the plan; copy nothing, create nothing.

    With --engine spark, also start Spark (the Kafka connector resolved) and check each lane's checkpoint.
    """
    conf = _load_config(config_path)
    runner = _engine(conf, engine, master)
    prepared = runner.prepare(create=False)
    _print_plan(prepared, runner.config)
    for line in runner.preflight(prepared):
        click.echo(line)
    click.echo("ok: every pre-flight check passed")


@main.command()
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The YAML config file.")
@click.option("--until-caught-up", is_flag=True,
              help="Stop once every lane has copied and committed the source end offsets seen at start "
                   "(on Spark: Trigger.AvailableNow).")
@ENGINE
@MASTER
def run(config_path: Path, until_caught_up: bool, engine: str, master: str | None) -> None:
    """Copy the configured topics until signalled (SIGTERM/SIGINT drain, commit and exit 0).

    With --until-caught-up: a progress bar per lane on a terminal (records, rate, share done, offsets left, time
    left), and a summary line per lane on stdout at the end (records, MB in and out, ratio, CPU per 1M records).
    """
    import signal
    import time

    import structlog

    from transcoder.cli.progress import copy_progress

    # A signal while the config is read and the engine built (a slow start: a busy node, a config on a slow mount)
    # is kept, not left to the default action (killed by the signal, nothing said): the service stops as soon as it
    # exists, having copied nothing, and exits 0 as after any SIGTERM.
    asked: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: asked.append(signum))
    conf = _load_config(config_path)
    service = _engine(conf, engine, master)
    conf = service.config
    log = structlog.get_logger("transcoder")

    def on_signal(signum: int, _frame: Any) -> None:
        service.stop()  # only sets a flag; the lanes drain and commit

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if asked:
        log.info("stop_asked_during_start_up", signal=signal.Signals(asked[0]).name,
                 note="the service stops at once: nothing is copied")
        service.stop()
    log.info("service_starting", config=str(config_path), cluster=conf.cluster.redacted(), lanes=conf.lanes,
             until_caught_up=until_caught_up, engine=engine)
    service.serve()
    started = time.monotonic()
    try:
        with copy_progress(until_caught_up) as progress:
            service.run(until_caught_up=until_caught_up, progress=progress)
    except TranscoderError as exc:
        if service.abandoned:  # a failed lane's stop did not return (lane_stop_stuck)
            _exit_now(exc.exit_code, logs.redact(f"transcoder: error: {exc}"))
        raise
    log.info("service_stopped", records={lane.spec.name: lane.status.records for lane in service.lanes})
    if until_caught_up:
        _summary(service, time.monotonic() - started)
    if service.abandoned:
        _exit_now(0)


def _summary(service: Engine, elapsed_s: float) -> None:
    """A one-shot run's last lines: a line per lane on stdout (as Kafka's perf tools end), and the same figures as a
    `lane_summary` log event each (JSON when piped)."""
    import structlog

    from transcoder.report.run_summary import from_status

    log = structlog.get_logger("transcoder")
    for lane in from_status(service.status(), elapsed_s):
        log.info("lane_summary", **lane.as_dict())
        click.echo(lane.line())


def _exit_now(code: int, line: str | None = None) -> None:
    """A lane still waits on Kafka past shutdown_timeout_s (shutdown_timeout_exceeded, lane_stop_stuck): exit now,
    without the interpreter's clean-up, which would close its clients and wait on Kafka again."""
    import os

    if line is not None:
        click.echo(line, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
