"""`transcoder validate` and `transcoder run`: the service, from one config file."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from transcoder import logs
from transcoder.cli.main import main
from transcoder.cli.options import Choice
from transcoder.engines import ENGINES, choices_help
from transcoder.errors import ExitCode, Interrupted, TranscoderError

if TYPE_CHECKING:
    from transcoder.config import Config
    from transcoder.engine import Engine
    from transcoder.engine.validation import Check
    from transcoder.pipeline.routes import Plan


def _load_config(path: Path) -> Config:
    from transcoder import config as cfg

    return cfg.load(path)


def _print_plan(data: dict[str, Any]) -> None:
    """The plan (validation.plan_data) as a table, and the dead-letter topic, the lanes' group ids and the topics a
    pattern passes over."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="transcoder plan" + (" (offline: nothing asked of the clusters)" if data["offline"] else ""),
                  title_justify="left")
    for col in ("lane", "source", "destination", "codec", "batch", "partitions", "topic", "configs"):
        table.add_column(col)
    for route in data["routes"]:
        for d in route["destinations"]:
            b = d["batch"]
            batch = f"{b['max_bytes']}B/{b['max_records']}rec/{b['linger_ms']}ms"
            for t in d["topics"]:
                cfgs = "" if t["configs"] is None else ", ".join(f"{k}={v}" for k, v in t["configs"].items())
                table.add_row(d["lane"], t["source"], t["topic"], d["label"], batch,
                              "?" if t["partitions"] is None else str(t["partitions"]), t["action"] or "?", cfgs)
            if not d["topics"]:  # a pattern's, offline: named after each topic it matches
                table.add_row(d["lane"], f"/{route['source_pattern']}/", d["topic_template"], d["label"], batch,
                              "?", "?", "")
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(table)
    dlq = data["dead_letter"]
    if dlq is not None:
        console.print(f"dead-letter topic: {dlq['topic']} ({dlq['action'] or 'not checked offline'})")
    console.print(f"lanes: {data['lanes_mode']}, group ids: {', '.join(lane['group_id'] for lane in data['lanes'])}")
    for skipped in data["skipped"]:
        console.print(f"routes.{skipped['route']}.source_pattern passes over {skipped['topic']}: {skipped['why']}")


ENGINE = click.option("--engine", type=Choice(list(ENGINES)), default=next(iter(ENGINES)), show_default=True,
                      envvar="TRANSCODER_ENGINE", help=choices_help(ENGINES))
MASTER = click.option("--master", default=None,
                      help="Spark master URL for --engine spark (overrides spark.master; under spark-submit, "
                           "spark-submit's own --master applies).")


def _check_master(engine: str, master: str | None) -> None:
    if master is not None and not ENGINES[engine].takes_master:
        takers = " or ".join(name for name, e in ENGINES.items() if e.takes_master)
        raise click.UsageError(f"--master applies to --engine {takers} only")


def _engine(conf: Config, engine: str, master: str | None) -> Engine:
    """The engine named by --engine, built from the config (transcoder.engines)."""
    _check_master(engine, master)
    return ENGINES[engine].build(conf, master)


@main.command()
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The YAML config file.")
@ENGINE
@MASTER
@click.option("--offline", is_flag=True,
              help="Only the checks that need no connection (the config, its secret references, librdkafka's verdict "
                   "on the client properties, the routes); say what is not checked. Opens no connection: for CI.")
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: the plan for people; json: the plan and every check's outcome as one JSON document "
                   "(its shape: docs/running.md), printed on a refusal too.")
def validate(config_path: Path, engine: str, master: str | None, offline: bool, output_format: str) -> None:
    """Run every pre-flight check and print the plan; copy nothing, create nothing.

    With --engine spark, also start Spark (the Kafka connector resolved) and check each lane's checkpoint.
    Exit 0 when every check passed, 2 when the config is refused, another code when the clusters refuse.
    """
    from transcoder.config.loading import with_spark_master
    from transcoder.engine import validation
    from transcoder.errors import ConfigError

    as_json = output_format == "json"

    def emit(data: dict[str, Any]) -> None:
        if as_json:
            click.echo(logs.redact(json.dumps({"config": str(config_path), **data}, indent=2)))

    try:
        conf = _load_config(config_path)
        if master is not None and offline:  # checked as the engine would, without building it
            _check_master(engine, master)
            conf = with_spark_master(conf, master)
    except ConfigError as exc:
        emit(validation.refused_data(exc, engine=engine, offline=offline))
        raise
    plan, checks = validation.offline_checks(conf)
    if offline or validation.failed(checks):
        if offline:
            checks += validation.not_checked_offline(
                conf, None if engine == next(iter(ENGINES)) else
                f"the {engine} engine's own (spark: the session starts with the Kafka connector, each lane's "
                "checkpoint belongs to this config)")
        data = validation.plan_data(conf, plan, None, checks, engine=engine, offline=offline)
        _report(data, as_json, emit)
        return
    _validate_online(_engine(conf, engine, master), engine, plan, checks, as_json, emit)


def _validate_online(runner: Engine, engine: str, plan: Plan | None, checks: list[Check], as_json: bool,
                     emit: Callable[[dict[str, Any]], None]) -> None:
    """validate's checks against the clusters (the engine's prepare, then its own preflight), after the offline
    ones passed: the table as before, or the plan as JSON; a refusal raised after the JSON is printed."""
    from transcoder.engine import validation

    try:
        prepared = runner.prepare(create=False)
    except TranscoderError as exc:
        checks.append(validation.Check("clusters", "failed", logs.redact(str(exc))))
        emit(validation.plan_data(runner.config, plan, None, checks, engine=engine, offline=False))
        raise
    checks.append(validation.Check(
        "clusters", "passed", "connected; the sources exist; the destinations' partitions, compression.type, "
        "max.message.bytes and message.timestamp.type; the brokers' zstd and record format; the dead-letter topic"))
    data = validation.plan_data(runner.config, prepared.plan, prepared.provision, checks, engine=engine, offline=False)
    if not as_json:
        _print_plan(data)
    try:
        lines = runner.preflight(prepared)
    except TranscoderError as exc:
        checks.append(validation.Check("engine", "failed", logs.redact(str(exc))))
        emit(validation.plan_data(runner.config, prepared.plan, prepared.provision, checks, engine=engine,
                                  offline=False))
        raise
    checks += [validation.Check("engine", "passed", line) for line in lines]
    if as_json:
        emit(validation.plan_data(runner.config, prepared.plan, prepared.provision, checks, engine=engine,
                                  offline=False))
        return
    for line in lines:
        click.echo(line)
    click.echo("ok: every pre-flight check passed")


def _report(data: dict[str, Any], as_json: bool, emit: Callable[[dict[str, Any]], None]) -> None:
    """What validate found without the clusters (offline, or a check that failed before them): the plan and the
    checks; a failed check is a ConfigError (exit 2), after the plan is printed."""
    from transcoder.errors import ConfigError

    if as_json:
        emit(data)
    else:
        _print_plan(data)
        for c in data["checks"]:
            if c["outcome"] != "failed":
                click.echo(f"{c['outcome']}: {c['check']}: {c['detail']}")
    bad = [c["detail"] if c["detail"].startswith(c["check"]) else f"{c['check']}: {c['detail']}"
           for c in data["checks"] if c["outcome"] == "failed"]
    if bad:
        raise ConfigError(bad[0] if len(bad) == 1 else
                          f"{len(bad)} checks failed:\n" + "\n".join("  " + b.replace("\n", "\n  ") for b in bad))
    if not as_json:
        unchecked = sum(c["outcome"] == "not checked" for c in data["checks"])
        click.echo(f"ok: every offline check passed ({unchecked} not checked offline: above)")


@main.command()
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The YAML config file.")
@click.option("--until-caught-up", is_flag=True,
              help="Stop once every lane has copied and committed the source end offsets seen at start "
                   "(on Spark: Trigger.AvailableNow).")
@ENGINE
@MASTER
def run(config_path: Path, until_caught_up: bool, engine: str, master: str | None) -> None:
    """Copy the configured topics until signalled (SIGTERM/SIGINT drain, commit and exit 0; with --until-caught-up,
    a signal before every lane caught up exits 143/130 once they drained and committed).

    With --until-caught-up: a progress bar per lane on a terminal (records, rate, share done, offsets left, time
    left), and a summary line per lane on stdout at the end (records, MB in and out, ratio, CPU per 1M records).
    """
    # A signal while the command's modules are imported, the config read and the engine built (a slow start: a busy
    # node, a config on a slow mount) is kept, not left to the default action (killed by the signal, nothing said)
    # nor to the CLI's (Interrupted: 143): the service stops as soon as it exists, having copied nothing, and exits
    # as after any SIGTERM (0; --until-caught-up: 143, see `interrupted`). First, before the imports: they took
    # 0.9 s of CPU here, over 4 s on a busy CI machine (a joining instance of the rebalance storm exited 143).
    asked: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: asked.append(signum))
    import time

    import structlog

    from transcoder.cli.progress import copy_progress

    conf = _load_config(config_path)
    service = _engine(conf, engine, master)
    conf = service.config
    log = structlog.get_logger("transcoder")

    def on_signal(signum: int, _frame: Any) -> None:
        asked.append(signum)
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
    cut_short = interrupted(until_caught_up, asked, [lane.status.state for lane in service.lanes])
    if service.abandoned:
        _exit_now(ExitCode.OK if cut_short is None else cut_short.exit_code,
                  None if cut_short is None else logs.redact(f"transcoder: error: {cut_short}"))
    if cut_short is not None:
        raise cut_short


def interrupted(until_caught_up: bool, signals: list[int], states: list[str]) -> Interrupted | None:
    """What a stop by signal means for `run`'s exit status. A long-running copy stopped by SIGTERM or SIGINT drains,
    commits and exits 0: that is a service's normal end (systemd counts a status of 143 as a failure unless
    SuccessExitStatus says otherwise; Kubernetes stops pods this way on every rollout). A one-shot
    `--until-caught-up` copy stopped before every lane caught up did not do what it was asked: Interrupted (143,
    130), whatever it committed on the way out. `states`: the lanes' last LaneStatus.state (none: stopped before
    any lane was built)."""
    if not until_caught_up or not signals or (states and all(s == "caught-up" for s in states)):
        return None
    name = signal.Signals(signals[0]).name
    return Interrupted(signals[0], f"run --until-caught-up stopped by {name} before every lane caught up: run it "
                                   "again to copy the rest (it resumes from the last commit)")


def _summary(service: Engine, elapsed_s: float) -> None:
    """A one-shot run's last lines: a line per lane on stdout (as Kafka's perf tools end), and the same figures as a
    `lane_summary` log event each (JSON when piped)."""
    import structlog

    from transcoder.report.run_summary import from_status

    log = structlog.get_logger("transcoder")
    for lane in from_status(service.status(), elapsed_s):
        log.info("lane_summary", **lane.as_dict())
        click.echo(lane.line())


def _exit_now(code: ExitCode, line: str | None = None) -> None:
    """A lane still waits on Kafka past shutdown_timeout_s (shutdown_timeout_exceeded, lane_stop_stuck): exit now,
    without the interpreter's clean-up, which would close its clients and wait on Kafka again."""
    import os

    if line is not None:
        click.echo(line, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
