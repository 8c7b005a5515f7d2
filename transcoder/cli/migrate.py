"""`transcoder migrate`: a staged migration of consumer groups from a source topic to its copy, and back.

plan -> start -> verify -> cutover (group by group) -> finish; rollback at any time. Every step reads the
service's YAML (one destination is the target), keeps its state in the migration's state topic, and
prints a table (or --format json).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from transcoder.cli.help import InOrder
from transcoder.cli.main import main
from transcoder.cli.migrate_report import report
from transcoder.cli.migrate_watch import watch
from transcoder.cli.options import Choice
from transcoder.errors import DataLossError, Interrupted, RefusedError, TranscoderError
from transcoder.migrate.gates import NEVER_OVERRIDDEN, OVERRIDABLE

CONFIG = click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
                      envvar="TRANSCODER_CONFIG", help="The service's YAML config (with a `migration:` section).")
DESTINATION = click.option("--destination", "-d", default=None,
                           help="The destination (its name, or its topic) to migrate to; may be omitted when the "
                                "config has one.")
FORMAT = click.option("--format", "fmt", type=Choice(["table", "json"]), default="table", show_default=True,
                      help="How the result is printed on stdout.")
GROUPS = click.option("--group", "-g", "group_ids", multiple=True, help="A consumer group (repeatable).")
ALL_GROUPS = click.option("--all-groups", is_flag=True, help="Every group of the migration (start: every group "
                                                             "with committed offsets on the source).")
WAIT = click.option("--wait", "wait", is_flag=True, help="Wait until the group has no active members.")
WAIT_TIMEOUT = click.option("--wait-timeout", type=float, default=600.0, show_default=True,
                            help="Seconds --wait waits at most.")


def _console() -> Any:
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 160)


@contextlib.contextmanager
def _stoppable(command: str) -> Iterator[None]:
    """Run a controller step so that SIGTERM/SIGINT end it cleanly: the handler only raises Interrupted (once; a
    second signal while the step cleans up is ignored), the lease is released by the controller's `with` (every
    `with` on the way out runs), and the process exits 128 + the signal's number (143, 130: ExitCode.SIGTERM,
    SIGINT) with one line."""
    got: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if got:
            return
        got.append(signum)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        raise Interrupted(exc.signum, f"migrate {command} stopped by {name} (its lease released on the way out, or "
                                      "the failure logged): run it again to resume") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _controller(config_path: Path, destination: str | None, command: str) -> Any:
    from transcoder import config as cfg
    from transcoder.migrate.controller import Controller

    return Controller(cfg.load(config_path), destination, command=command)


def _offsets(d: dict[int, int]) -> str:
    return ", ".join(f"{p}:{o}" for p, o in sorted(d.items())) or "-"


def _json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str))


@main.group(cls=InOrder, order=("plan", "start", "verify", "cutover", "rollback", "status", "finish", "report",
                                 "watch"))
def migrate() -> None:
    """Move consumer groups from a topic to its copy with exact offsets: plan, start, verify, cutover, rollback,
    status, finish, then report (predicted against realized); and watch in-place rollouts."""


@migrate.command()
@CONFIG
@DESTINATION
@GROUPS
@FORMAT
def plan(config_path: Path, destination: str | None, group_ids: tuple[str, ...], fmt: str) -> None:
    """What the migration would do: topics, groups, pre-flight, expected disk and network, the stages."""
    from transcoder import config as cfg
    from transcoder.migrate import plan as planning

    p = planning.make_plan(cfg.load(config_path), destination, groups=list(group_ids) or None,
                           config_path=str(config_path))
    if fmt == "json":
        _json(planning.as_dict(p))
    else:
        planning.render_table(p, _console())


@migrate.command()
@CONFIG
@DESTINATION
@GROUPS
@ALL_GROUPS
@click.option("--force-restart", is_flag=True,
              help="Start although the destination has groups' commits but the migration has no state (its state "
                   "topic was lost): cutovers still refuse to move a group backwards.")
@FORMAT
def start(config_path: Path, destination: str | None, group_ids: tuple[str, ...], all_groups: bool,
          force_restart: bool, fmt: str) -> None:
    """Record the migration and its groups (each at stage `source`); the lanes record the offset map."""
    with _stoppable("start"), _controller(config_path, destination, "start") as c:
        migration, chosen, running = c.start(group_ids, all_groups=all_groups, force_restart=force_restart)
    if fmt == "json":
        _json({"migration": migration, "groups": chosen, "copy_running": running})
        return
    click.echo(f"migration {migration['source']} -> {migration['destination']} ({migration['codec']}): "
               f"{migration['stage']}; groups: {', '.join(chosen)}")
    if not running:
        click.echo(f"the copy is not running (lane group {c.r.lane_group} has no members): start it with "
                   f"`transcoder run --config {config_path}`; its lanes record the offset map")


def _verify_table(results: dict[int, Any]) -> Any:
    from rich.table import Table

    t = Table(title="verification", title_justify="left")
    for col in ("partition", "from", "verified through", "copied end", "compared", "duplicates",
                "cleaned (src/dst)", "unmapped", "result"):
        t.add_column(col, justify="right" if col not in ("result",) else "left")
    for p, r in sorted(results.items()):
        t.add_row(str(p), str(r.start), str(r.verified_through), str(r.end), f"{r.compared:,}", f"{r.duplicates:,}",
                  f"{r.cleaned_in_source:,}/{r.cleaned_in_destination:,}", f"{r.unmapped_in_destination:,}",
                  "equal" if r.mismatch is None else r.mismatch.line)
    return t


def _verify_dict(results: dict[int, Any]) -> dict[str, Any]:
    from dataclasses import asdict

    return {str(p): {**asdict(r), "mismatch": r.mismatch.line if r.mismatch else None}
            for p, r in sorted(results.items())}


@migrate.command(name="verify")
@CONFIG
@DESTINATION
@FORMAT
@click.option("--follow", "-f", is_flag=True, help="Keep verifying what is copied, every --interval seconds.")
@click.option("--interval", type=float, default=30.0, show_default=True,
              help="Seconds between verification passes (--follow).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="With --follow: serve transcoder_migration_* metrics on this port.")
@click.option("--web-config-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="With --metrics-port: TLS and basic auth of the endpoints, from this web config file in "
                   "exporter-toolkit's format (default: the config's metrics.web_config_file).")
@click.option("--progress-every", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds between progress lines on stderr (records compared so far, of how many) while a "
                   "verification runs.")
def verify_cmd(config_path: Path, destination: str | None, fmt: str, follow: bool, interval: float,
               metrics_port: int | None, web_config_file: Path | None, progress_every: float) -> None:
    """Compare the copy with the source, record by record (key, value, headers, timestamp), range by range.

    Exit 0: equal up to what is copied; 3: a difference (named: partition, offsets, field); 4: records lost from
    the source before they were copied.
    """
    if web_config_file is not None and metrics_port is None:
        from transcoder.errors import ConfigError

        raise ConfigError("--web-config-file needs --metrics-port")
    stop = threading.Event()
    metrics = None
    seen: dict[tuple[int, int], Any] = {}  # mismatches reported, by (partition, source offset)
    command = "verify --follow" if follow else "verify"
    with _stoppable(command), _controller(config_path, destination, command) as c:
        if follow:  # --follow ends on a signal as it always has: the pass finishes, exit 0, the lease released
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
        if follow and metrics_port is not None:
            metrics = _serve_migration_metrics(metrics_port, c.config.metrics, web_config_file)
        from transcoder.migrate.verify import ProgressLine

        progress = ProgressLine(f"verify {c.r.source} -> {c.r.destination}", lambda line: click.echo(line, err=True),
                                every_s=progress_every)
        while True:
            results = c.verify(progress)
            found = [r.mismatch for _, r in sorted(results.items()) if r.mismatch is not None]
            new = [m for m in found if (m.partition, m.source_offset) not in seen]
            seen.update(((m.partition, m.source_offset), m) for m in found)
            if metrics is not None:
                metrics.verified(c.r.destination, {p: r.verified_through for p, r in results.items()},
                                 mismatches=len(new))
                stages: dict[str, int] = {}
                for key, rec in c.state().items():
                    if key.startswith("group/"):
                        stages[rec.get("stage", "source")] = stages.get(rec.get("stage", "source"), 0) + 1
                metrics.group_stages(c.r.destination, stages)
                _payoff_metrics(metrics, c)
            if fmt == "json":
                _json({"destination": c.r.destination, "partitions": _verify_dict(results),
                       "mismatch": found[0].line if found else None})
            else:
                _console().print(_verify_table(results))
            for m in new:
                click.echo(f"mismatch: {m.line}", err=True)
            # --follow keeps going (the next pass starts again at a mismatch: it is reported once)
            if not follow or stop.wait(interval):
                break
    if seen:
        raise verification_failed(list(seen.values()))


def verification_failed(found: list[Any]) -> TranscoderError:
    """What ends a verification that found mismatches (compare.Mismatch, each printed already): DataLossError (4)
    when records were lost from the source before they were copied, else RefusedError (3): the copy differs."""
    first = next((m for m in found if m.lost), found[0])
    more = f" (and {len(found) - 1} more mismatches)" if len(found) > 1 else ""
    if first.lost:
        return DataLossError(f"verification found records lost from the source before they were copied: "
                             f"{first.line}{more}", partition=first.partition, offset=first.source_offset)
    return RefusedError(f"verification found the copy differs from the source: {first.line}{more}",
                        partition=first.partition, offset=first.source_offset)


def _payoff_metrics(metrics: Any, c: Any) -> None:
    """`migrate report`'s figures as metrics (predicted and realized ratio and bytes per record)."""
    figures = {f.name: f for f in c.report().figures}
    ratio, stored = figures["ratio"], figures["stored bytes per record"]
    metrics.payoff(c.r.destination, predicted_ratio=ratio.predicted, realized_ratio=ratio.realized,
                   predicted_bytes_per_record=stored.predicted, realized_bytes_per_record=stored.realized)


def _serve_migration_metrics(port: int, settings: Any, web_config_file: Path | None) -> Any:
    """MigrationMetrics on `port`, at the config's metrics.host, with its web config (or `web_config_file`)."""
    from transcoder.metrics.registry import MigrationMetrics

    m = MigrationMetrics()
    m.serve(port, settings.host, web_config_file=web_config_file or settings.web_config_file,
            auth_probes=settings.auth_probes)
    return m


@migrate.command()
@CONFIG
@DESTINATION
@GROUPS
@ALL_GROUPS
@click.option("--percent", type=click.FloatRange(0, 100, min_open=True), default=None,
              help="Move this share of the migration's groups (those not moved yet, in the order registered).")
@WAIT
@WAIT_TIMEOUT
@click.option("--override", "override_gates", multiple=True, type=click.Choice(OVERRIDABLE),
              help="Move the group although this gate fails (repeatable): " + ", ".join(OVERRIDABLE)
                   + "; logged and recorded with the group. " + ", ".join(NEVER_OVERRIDDEN)
                   + " are never overridden.")
@click.option("--force", is_flag=True, hidden=True,
              help="Deprecated: --override for every gate that can be overridden.")
@click.option("--dry-run", is_flag=True,
              help="Evaluate every gate of each group and print the offsets the cutover would commit; change "
                   "nothing. Exit 0 when every group would move, 3 when any would be refused.")
@FORMAT
def cutover(config_path: Path, destination: str | None, group_ids: tuple[str, ...], all_groups: bool,
            percent: float | None, wait: bool, wait_timeout: float, override_gates: tuple[str, ...], force: bool,
            dry_run: bool, fmt: str) -> None:
    """Move groups to the destination: commit each one's translated offsets there, once its gates pass.

    The gates: members, copied, lag, verified, mismatch, errors, rewind (docs/migration.md). A refusal names, per
    failed gate, the --override that would move the group past it, or that none does and what to do instead.
    """
    overrides = set(override_gates)
    if force:
        overrides.update(OVERRIDABLE)
        click.echo(f"transcoder: warning: --force is deprecated: it overrides {', '.join(OVERRIDABLE)} (never "
                   f"{', '.join(NEVER_OVERRIDDEN)}); name the gates instead: "
                   + " ".join(f"--override {n}" for n in OVERRIDABLE), err=True)
    wait_s = wait_timeout if wait else None
    if dry_run:
        c = _controller(config_path, destination, "cutover --dry-run")  # reads only: holds no lease
        try:
            with _stoppable("cutover --dry-run"):
                plans = c.cutover_dry_run(group_ids, all_groups=all_groups, percent=percent, wait_s=wait_s,
                                          overrides=overrides)
        finally:
            c.close()
        _print_dry_run(plans, fmt)
        refused = [p.group for p in plans if p.outcome == "refused"]
        if refused:
            raise RefusedError(f"cutover --dry-run: {len(refused)} of {len(plans)} group(s) would be refused "
                               f"({', '.join(refused)}); nothing was changed")
        return
    with _stoppable("cutover"), _controller(config_path, destination, "cutover") as c:
        moved = c.cutover(group_ids, all_groups=all_groups, percent=percent, wait_s=wait_s, overrides=overrides)
    _print_moves(moved, fmt, "source offsets", "destination offsets")


def _print_dry_run(plans: list[Any], fmt: str) -> None:
    if fmt == "json":
        _json([{"group": p.group, "stage": p.stage, "outcome": p.outcome, "source_offsets": p.source_offsets,
                "destination_offsets": p.destination_offsets, "forced": p.forced, "detail": p.detail,
                "gates": [{"gate": o.name, "result": o.result, "detail": o.detail, "how": o.how} for o in p.gates]}
               for p in plans])
        return
    from rich.table import Table

    console = _console()
    for p in plans:
        offsets = "-" if p.destination_offsets is None else _offsets(p.destination_offsets)
        console.print(f"group {p.group} ({p.stage}): {p.outcome}; source offsets {_offsets(p.source_offsets)} -> "
                      f"destination offsets {offsets}" + (f"; forced: {', '.join(p.forced)}" if p.forced else ""),
                      markup=False, highlight=False)
        if p.detail:
            console.print(p.detail, markup=False, highlight=False)
        if not p.gates:
            continue
        t = Table(title_justify="left")
        for col in ("gate", "result", "detail", "to pass"):
            t.add_column(col)
        for o in p.gates:
            t.add_row(o.name, o.result, o.detail, o.how or "-")
        console.print(t)


@migrate.command()
@CONFIG
@DESTINATION
@GROUPS
@ALL_GROUPS
@WAIT
@WAIT_TIMEOUT
@FORMAT
def rollback(config_path: Path, destination: str | None, group_ids: tuple[str, ...], all_groups: bool,
             wait: bool, wait_timeout: float, fmt: str) -> None:
    """Move groups back to the source, where they stand on the destination (translated back)."""
    with _stoppable("rollback"), _controller(config_path, destination, "rollback") as c:
        moved = c.rollback(group_ids, all_groups=all_groups, wait_s=wait_timeout if wait else None)
    _print_moves(moved, fmt, "source offsets", "destination offsets")


def _print_moves(moved: list[Any], fmt: str, src: str, dst: str) -> None:
    if fmt == "json":
        _json([{"group": m.group, "outcome": m.outcome, "source_offsets": m.source_offsets,
                "destination_offsets": m.destination_offsets, "forced": m.forced, "detail": m.detail}
               for m in moved])
        return
    from rich.table import Table

    t = Table(title_justify="left")
    for col in ("group", "outcome", src, dst, "forced", "detail"):
        t.add_column(col)
    for m in moved:
        t.add_row(m.group, m.outcome, _offsets(m.source_offsets), _offsets(m.destination_offsets),
                  ", ".join(m.forced) or "-", m.detail)
    _console().print(t)


@migrate.command()
@CONFIG
@DESTINATION
@FORMAT
def status(config_path: Path, destination: str | None, fmt: str) -> None:
    """Per group: stage, lag on both sides, verified; totals: groups moved, disk and network saved so far."""
    from transcoder import config as cfg
    from transcoder.migrate.controller import Controller

    c = Controller(cfg.load(config_path), destination, command="status")  # reads only: holds no lease
    try:
        s = c.status()
    finally:
        c.close()
    if fmt == "json":
        _json(s)
        return
    from rich.table import Table

    m = s["migration"]
    console = _console()
    console.print(f"migration {m['source']} -> {m['destination']} ({m['codec']}): {m['stage']}; "
                  f"groups moved {s['moved']} of {s['total']}")
    t = Table(title_justify="left")
    for col in ("group", "stage", "source lag", "destination lag", "verified", "forced"):
        t.add_column(col)
    for r in s["groups"]:
        t.add_row(r["group"], r["stage"], "-" if r["source_lag"] is None else f"{r['source_lag']:,}",
                  "-" if r["destination_lag"] is None else f"{r['destination_lag']:,}",
                  "yes" if r["verified"] else "no", ", ".join(r["forced"]) or "-")
    console.print(t)
    console.print("verified through: " + (", ".join(f"{p}:{v}/{s['source_end'].get(p, '?')}"
                                                    for p, v in s["verified_through"].items()) or "not yet"))
    if s.get("savings"):
        console.print(s["savings"]["line"])
    if s["mismatch"]:
        console.print(f"[red]mismatch: {s['mismatch']}[/red]")


@migrate.command()
@CONFIG
@DESTINATION
@FORMAT
def finish(config_path: Path, destination: str | None, fmt: str) -> None:
    """Close the migration once no group reads the source; print what is left to do. Deletes nothing."""
    with _stoppable("finish"), _controller(config_path, destination, "finish") as c:
        migration = c.finish()
        src, dst = c.r.source, c.r.destination
    steps = [f"switch the producers of {src} to write {dst} directly (with the codec of the copy), or keep "
             f"transcoder running as the bridge from {src} to {dst}",
             f"once producers write {dst}: stop the copy (its lane), and shorten the retention of {src}, e.g. "
             f"kafka-configs --alter --entity-type topics --entity-name {src} --add-config retention.ms=86400000",
             f"delete {src} yourself when nothing needs it any more: transcoder never deletes a topic"]
    if fmt == "json":
        _json({"migration": migration, "next_steps": steps})
        return
    click.echo(f"migration {src} -> {dst} finished at "
               f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(migration['finished_ms'] / 1000))} UTC. "
               f"Left for you:")
    for i, step in enumerate(steps, 1):
        click.echo(f"  {i}. {step}")


migrate.add_command(report)
migrate.add_command(watch)
