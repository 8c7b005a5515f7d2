"""Exit codes a script can act on: one table (errors.ExitCode), one place that exits (cli.main's handler), the
published page current, and per command: Kafka unreachable exits 5, a config error 2, no broker anywhere.

The commands run in this process (click's CliRunner) against a port nothing listens on, with the wait for Kafka's
first answer cut to half a second (kafka.clients.CONNECT_TIMEOUT_S): the real clients fail to connect, as they would
at the default 10 s.
"""

from __future__ import annotations

import ast
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from transcoder import errors, logs
from transcoder.cli import main
from transcoder.cli.exit_codes import COMMANDS, PAGE, REGENERATE, render
from transcoder.cli.migrate import verification_failed
from transcoder.cli.run import interrupted
from transcoder.errors import ExitCode
from transcoder.kafka import clients
from transcoder.migrate.compare import LOST_IN_SOURCE, RECREATED, VALUE, Mismatch

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "transcoder"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed once the socket is: nothing listens there


NO_BROKER = f"127.0.0.1:{_closed_port()}"


@pytest.fixture
def cli(monkeypatch):
    """Invoke `transcoder ...` in this process; its exit status, stdout and stderr. The process-wide set-up the CLI
    does (logging, the SIGUSR1 stack dump, `run`'s signal handlers) is kept from outliving the test."""
    monkeypatch.setattr(clients, "CONNECT_TIMEOUT_S", 0.5)
    monkeypatch.setattr(logs, "configure", lambda *args, **kwargs: None)
    monkeypatch.setattr(logs, "stacks_on_signal", lambda *args, **kwargs: None)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(main, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    yield invoke
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _config(tmp_path: Path, *, codec: str = "lz4") -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"cluster: {{bootstrap_servers: '{NO_BROKER}'}}\ngroup_id: g\nmetrics: {{port: 0}}\n"
                    f"routes: [{{source: s, destinations: [{{codec: {codec}}}]}}]\nmigration: {{}}\n")
    return str(path)


def _one_error_line(err: str) -> str:
    """The one error line on stderr (a deprecated option's warning line may stand beside it), no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.startswith("transcoder: error: ")]
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------ the table and the one place


def test_the_table_is_the_documented_set():
    assert {c.name: int(c) for c in ExitCode} == {"OK": 0, "FAILED": 1, "USAGE": 2, "REFUSED": 3, "DATA_LOSS": 4,
                                                  "UNAVAILABLE": 5, "SIGINT": 130, "SIGTERM": 143}
    assert all(c.meaning.strip() for c in ExitCode)
    assert ExitCode.for_signal(signal.SIGTERM) == 143 == 128 + signal.SIGTERM
    assert ExitCode.for_signal(signal.SIGINT) == 130 == 128 + signal.SIGINT


@pytest.mark.parametrize(("error", "code"), [
    (errors.TranscoderError, 1), (errors.TopicError, 1), (errors.DeliveryError, 1), (errors.MigrationError, 1),
    (errors.ConfigError, 2), (errors.InputError, 2), (errors.RefusedError, 3), (errors.DataLossError, 4),
    (errors.KafkaUnavailableError, 5), (errors.SparkUnavailableError, 5), (errors.UnavailableError, 5),
])
def test_each_error_class_names_its_status(error, code):
    assert error("x").exit_code == code


def test_every_error_class_exits_with_a_member_of_the_table():
    def subclasses(cls: type) -> list[type]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    found = {cls.__name__: cls.exit_code for cls in subclasses(errors.TranscoderError)}
    assert not [name for name, code in found.items() if not isinstance(code, ExitCode)], found


def _exits(tree: ast.AST) -> list[ast.AST]:
    """Calls that end the process with a status of their own: sys.exit, os._exit, exit/quit, ctx.exit, SystemExit,
    click's Exit; and those of them given an int literal."""
    found = []
    for node in ast.walk(tree):
        call = node.exc if isinstance(node, ast.Raise) and node.exc is not None else node
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in ("exit", "_exit", "quit", "SystemExit", "Exit"):
            found.append(call)
    return found


def test_no_command_exits_but_through_the_table():
    """Every exit status comes from ExitCode, through an error's exit_code and the CLI's handler: no sys.exit, no
    SystemExit anywhere in the package; the handler's ctx.exit and run's os._exit take ExitCode values only."""
    allowed = {("cli/main.py", "ctx.exit(exc.exit_code)"), ("cli/main.py", "ctx.exit(stopped.exit_code)"),
               ("cli/main.py", "ctx.exit(ConfigError.exit_code)"), ("cli/main.py", "ctx.exit(ExitCode.OK)"),
               ("cli/run.py", "os._exit(code)")}
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        found |= {(str(path.relative_to(PACKAGE)), ast.unparse(call)) for call in _exits(tree)}
    assert found == allowed, f"exits outside the table's one place: {sorted(found - allowed)}"


def test_the_published_page_is_the_generators_output():
    page = ROOT / PAGE
    assert page.is_file(), f"{PAGE} is missing: generate it with `{REGENERATE}`"
    assert page.read_text() == render(), f"{PAGE} is out of date: regenerate it with `{REGENERATE}`"
    for c in ExitCode:
        assert f"| {int(c)} | `{c.name}` | {c.meaning} |" in render()


def _command_paths(cmd: click.Command, path: tuple[str, ...] = ()) -> list[str]:
    if isinstance(cmd, click.Group):
        return [p for name, sub in cmd.commands.items() for p in _command_paths(sub, (*path, name))]
    return [" ".join(path)]


def test_the_page_has_a_row_for_every_command():
    assert sorted(COMMANDS) == sorted(_command_paths(main))


# ------------------------------------------------------------------ per command, no broker


#: Each command that connects to Kafka, as it is given the unreachable cluster (a config, or -b).
UNREACHABLE = {
    "validate": ("validate", "-c", "{config}"),
    "run": ("run", "-c", "{config}", "--until-caught-up"),
    "seed": ("seed", "--kind", "nginx", "--count", "10", "--topic", "t", "-b", NO_BROKER),
    "evaluate": ("evaluate", "-b", NO_BROKER, "-t", "t"),
    "migrate plan": ("migrate", "plan", "-c", "{config}"),
    "migrate start": ("migrate", "start", "-c", "{config}", "--all-groups"),
    "migrate verify": ("migrate", "verify", "-c", "{config}"),
    "migrate cutover": ("migrate", "cutover", "-c", "{config}", "--all-groups"),
    "migrate rollback": ("migrate", "rollback", "-c", "{config}", "--all-groups"),
    "migrate status": ("migrate", "status", "-c", "{config}"),
    "migrate finish": ("migrate", "finish", "-c", "{config}"),
    "migrate report": ("migrate", "report", "-c", "{config}"),
    "migrate watch": ("migrate", "watch", "-b", NO_BROKER, "-t", "t"),
}


def test_every_command_documented_to_exit_5_is_tested_here():
    documented = {name for name, (codes, _) in COMMANDS.items() if ExitCode.UNAVAILABLE in codes}
    assert documented == {*UNREACHABLE, "report", "local-kafka status"}


@pytest.mark.parametrize("command", list(UNREACHABLE))
def test_kafka_unreachable_exits_5(cli, tmp_path, command):
    args = [a.format(config=_config(tmp_path)) for a in UNREACHABLE[command]]
    started = time.monotonic()
    code, _, err = cli(*args)
    line = _one_error_line(err)
    assert code == ExitCode.UNAVAILABLE, (code, line)
    assert f"cannot reach Kafka at {NO_BROKER} within 0.5s" in line, line
    assert time.monotonic() - started < 15  # the wait is the connect timeout's, not longer


def test_report_with_nothing_at_the_url_exits_5(cli):
    url = f"http://127.0.0.1:{_closed_port()}"
    code, _, err = cli("report", "--url", url, "--timeout", "2")
    assert code == ExitCode.UNAVAILABLE
    assert f"cannot read {url}/status" in _one_error_line(err)


def test_local_kafka_status_without_a_broker_exits_5(cli, tmp_path):
    code, out, err = cli("local-kafka", "--state-dir", str(tmp_path / "none"), "status")
    assert (code, out) == (ExitCode.UNAVAILABLE, "")
    assert "no local broker runs" in _one_error_line(err)


CONFIGURED = ["validate", "run", "migrate plan", "migrate start", "migrate verify", "migrate cutover",
              "migrate rollback", "migrate status", "migrate finish", "migrate report"]


@pytest.mark.parametrize("command", CONFIGURED)
def test_a_config_error_exits_2(cli, tmp_path, command):
    args = [a.format(config=_config(tmp_path, codec="nope")) for a in UNREACHABLE[command]]
    code, _, err = cli(*args)
    assert code == ExitCode.USAGE, err
    assert "codec" in err and "Traceback" not in err, err  # the key at fault named
    assert "cannot reach Kafka" not in err, err  # refused before any connection


def test_every_command_that_reads_a_config_is_tested_for_its_errors():
    reads = {" ".join(path) for path in (p.split() for p in _command_paths(main))
             if "--config" in {o for param in _command(path).params for o in param.opts}}
    assert reads == {*CONFIGURED, "migrate watch"}  # watch: -c or -b (tested below)


def _command(path: list[str]) -> click.Command:
    cmd: click.Command = main
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
    return cmd


def test_migrate_watch_config_error_exits_2(cli, tmp_path):
    code, _, err = cli("migrate", "watch", "-c", _config(tmp_path, codec="nope"), "-t", "t")
    assert code == ExitCode.USAGE and "codec" in err, err


def test_click_usage_errors_exit_2(cli):
    assert cli("run", "--no-such-option")[0] == ExitCode.USAGE
    assert cli("seed")[0] == ExitCode.USAGE  # --topic missing


def test_librdkafka_refusing_a_property_exits_2(cli):
    code, _, err = cli("seed", "--kind", "nginx", "--count", "1", "--topic", "t", "-b", NO_BROKER,
                       "-X", "no.such.property=1")
    assert code == ExitCode.USAGE, err
    assert "no.such.property" in _one_error_line(err)


# ------------------------------------------------------------------ what ends verify, run after a signal


def _mismatch(field: str, offset: int = 7) -> Mismatch:
    return Mismatch(0, offset, None if field != VALUE else 9, field, f"{field}: detail")


def test_verify_a_difference_is_refused_3_and_a_loss_is_4():
    differs = verification_failed([_mismatch(VALUE)])
    assert isinstance(differs, errors.RefusedError) and differs.exit_code == 3
    assert str(differs) == "verification found the copy differs from the source: partition 0: source offset 7 / " \
                           "destination offset 9: value: detail"
    for lost in (LOST_IN_SOURCE, RECREATED):
        found = verification_failed([_mismatch(VALUE, 3), _mismatch(lost, 12)])
        assert isinstance(found, errors.DataLossError) and found.exit_code == 4  # a loss outranks a difference
        assert "records lost from the source" in str(found) and "(and 1 more mismatches)" in str(found)
        assert found.offset == 12


@pytest.mark.parametrize(("until_caught_up", "signals", "states", "code"), [
    (False, [signal.SIGTERM], ["stopped", "stopped"], None),  # a service's stop: 0
    (False, [], ["stopped"], None),
    (True, [], ["caught-up", "caught-up"], None),  # caught up, no signal
    (True, [signal.SIGTERM], ["caught-up", "caught-up"], None),  # the signal came after the end
    (True, [signal.SIGTERM], ["caught-up", "stopped"], 143),
    (True, [signal.SIGINT], ["stopped"], 130),
    (True, [signal.SIGTERM], [], 143),  # stopped while starting: no lane was built
])
def test_run_stopped_by_a_signal(until_caught_up, signals, states, code):
    found = interrupted(until_caught_up, signals, states)
    assert (found.exit_code if found is not None else None) == code
    if found is not None:
        assert "before every lane caught up" in str(found)


def test_sigterm_before_a_command_finished_exits_143(tmp_path):
    """A one-shot command (`evaluate --file`, reading a FIFO nothing more is written to) stopped by SIGTERM: one
    line and exit 143, not killed by the signal with nothing said."""
    fifo = tmp_path / "input.log"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "transcoder", "evaluate", "--file", str(fifo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    fd = None
    try:
        fd = os.open(fifo, os.O_WRONLY)  # returns once transcoder has opened the FIFO to read it
        os.write(fd, b"a line\n")
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if fd is not None:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == ExitCode.SIGTERM, err
    assert _one_error_line(err) == "transcoder: error: stopped by SIGTERM before finishing"


def test_a_follow_mode_ended_by_sigterm_exits_0(tmp_path):
    """`local-kafka logs --follow` (like `migrate watch --follow`) ends on a signal as its normal end: exit 0."""
    (tmp_path / "broker.log").write_text("first line\n")
    proc = subprocess.Popen([sys.executable, "-m", "transcoder", "local-kafka", "--state-dir", str(tmp_path), "logs",
                             "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "first line\n"  # following now
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err) == (ExitCode.OK, "")
