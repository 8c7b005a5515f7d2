"""Bad input that needs no broker gets one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from tests.support.cli import one_line, run_cli

#: Nothing listens here: every check below fails before transcoder would connect.
NO_BROKER = "127.0.0.1:1"


def _config(tmp_path: Path, **extra: object) -> str:
    raw = {"cluster": {"bootstrap_servers": NO_BROKER}, "routes": [{"source": "s", "destinations": [{"codec": "lz4"}]}],
           "metrics": {"port": 0}, **extra}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_metrics_port_in_use_is_one_line_naming_the_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = _config(tmp_path, metrics={"port": port, "host": "127.0.0.1"})
        proc = run_cli("run", "--config", path, "--until-caught-up", timeout=60)
    assert proc.returncode != 0
    line = one_line(proc)
    assert f"127.0.0.1:{port}" in line and "metrics.port" in line and "9308" in line, line


def test_metrics_host_that_does_not_resolve_isone_line(tmp_path):
    path = _config(tmp_path, metrics={"port": 9, "host": "no-such-host.invalid"})
    proc = run_cli("run", "--config", path, timeout=60)
    assert proc.returncode != 0
    line = one_line(proc)
    assert "no-such-host.invalid:9" in line and "metrics.host" in line, line


@pytest.mark.parametrize("command", ["run", "validate"])
def test_config_that_is_not_utf8_isone_line(tmp_path, command):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe\x00cluster: {}\n")
    proc = run_cli(command, "--config", str(path), timeout=60)
    assert proc.returncode == 2
    line = one_line(proc)
    assert str(path) in line and "UTF-8" in line, line


@pytest.mark.parametrize("command", ["run", "validate"])
def test_impossible_yaml_date_isone_line(tmp_path, command):
    path = _config(tmp_path)
    Path(path).write_text(Path(path).read_text() + "start: 2020-13-45\n")
    proc = run_cli(command, "--config", path, timeout=60)
    assert proc.returncode == 2
    line = one_line(proc)
    assert path in line and "month must be in 1..12" in line, line


@pytest.mark.parametrize("command", ["run", "validate"])
def test_directory_as_config_isone_line(tmp_path, command):
    proc = run_cli(command, "--config", str(tmp_path), timeout=60)
    assert proc.returncode == 2
    assert "Is a directory" in one_line(proc)


@pytest.mark.parametrize("command", ["run", "validate"])
def test_wrong_types_in_yaml_are_a_line_each(tmp_path, command):
    path = tmp_path / "config.yaml"
    path.write_text(f"cluster: {{bootstrap_servers: {NO_BROKER}}}\nroutes: [{{source: s, destinations: "
                    "[{codec: lz4, batch: 5}]}]\nmetrics: {port: abc}\n")
    proc = run_cli(command, "--config", str(path), timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr, proc.stderr
    first, *lines = proc.stderr.strip().splitlines()
    assert first == f"transcoder: error: {path}: 2 problems:", proc.stderr
    assert [line.split(": ")[0] for line in lines] == ["  routes.0.destinations.0.batch", "  metrics.port"], lines
