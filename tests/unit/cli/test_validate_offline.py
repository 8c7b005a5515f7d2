"""`transcoder validate --offline` (every check that needs no connection, and what is not checked) and
`--format json` (the plan as data): no broker, and no client that could reach one."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from transcoder.cli import main

SECRET = "s3cr3t-Pa55word-never-printed"


@pytest.fixture
def listener():
    """A bootstrap address something listens on, to see that nothing connects to it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server


@pytest.fixture(autouse=True)
def logging_left_alone(monkeypatch):
    """The command group configures the process's logging: not this test process's, which other tests capture."""
    monkeypatch.setattr("transcoder.logs.configure", lambda *args, **kwargs: None)
    monkeypatch.setattr("transcoder.logs.stacks_on_signal", lambda *args, **kwargs: None)


@pytest.fixture(autouse=True)
def no_clients(monkeypatch):
    """Any client that could connect, or the engine (which would build them), fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("validate --offline built a client or an engine")

    monkeypatch.setattr("transcoder.kafka.clients.connect_admin", refuse)
    monkeypatch.setattr("transcoder.kafka.provisioning.connect_admin", refuse)
    monkeypatch.setattr("transcoder.kafka.provisioning.RawClient", refuse)
    monkeypatch.setattr("transcoder.cli.run._engine", refuse)


def write(tmp_path: Path, bootstrap: str, **top: Any) -> Path:
    raw = {"cluster": {"bootstrap_servers": bootstrap}, "group_id": "copy", "metrics": {"port": 0},
           "routes": [{"source": "app.logs", "destinations": [
               {"codec": "zstd", "level": 3, "batch": {"max_bytes": 65536, "max_records": 500, "linger_ms": 20}},
               {"codec": "gzip", "name": "logs-gzip"}]},
               {"source_pattern": r"web\..*", "destinations": [{"codec": "lz4", "level": 9}]}],
           **top}
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def validate(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--log-level", "warning", "validate", *args], env=env)


def addr(server: socket.socket) -> str:
    host, port = server.getsockname()
    return f"{host}:{port}"


def assert_nobody_connected(server: socket.socket) -> None:
    server.settimeout(0.3)
    with pytest.raises(TimeoutError):
        server.accept()


def test_offline_checks_and_prints_the_plan_without_a_connection(tmp_path, listener):
    path = write(tmp_path, addr(listener))
    started = time.monotonic()
    result = validate("-c", str(path), "--offline")
    assert time.monotonic() - started < 5  # validate online waits 10 s for a cluster that does not answer
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "app.logs.zstd-3" in out and "app.logs.gzip" in out and "/web\\..*/" in out
    assert "passed: routes:" in out and "not checked: sources:" in out and "not checked: clusters:" in out
    assert out.rstrip().endswith("ok: every offline check passed (3 not checked offline: above)")
    assert_nobody_connected(listener)


def test_offline_json_is_the_plan_destination_by_destination(tmp_path, listener):
    path = write(tmp_path, addr(listener), errors={"tolerance": "all", "dlq_topic": "copy.dlq"})
    result = validate("-c", str(path), "--offline", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["format"], data["config"], data["engine"], data["offline"], data["ok"]) == (
        1, str(path), "service", True, True)
    assert (data["group_id"], data["lanes_mode"], data["guarantee"], data["hot_path"]) == (
        "copy", "isolated", "at-least-once", "batches")
    literal, pattern = data["routes"]
    assert (literal["route"], literal["source"], literal["source_pattern"], literal["sources"]) == (
        0, "app.logs", None, ["app.logs"])
    zstd, gzip = literal["destinations"]
    assert {k: zstd[k] for k in ("name", "lane", "group_id", "codec", "level", "label", "topic_template")} == {
        "name": "app.logs.zstd-3", "lane": "app.logs.zstd-3", "group_id": "copy.app.logs.zstd-3", "codec": "zstd",
        "level": 3, "label": "zstd-3", "topic_template": "{source}.{codec}-{level}"}
    assert zstd["batch"] == {"max_bytes": 65536, "max_records": 500, "linger_ms": 20}
    assert zstd["topics"] == [{"source": "app.logs", "topic": "app.logs.zstd-3", "partitions": None,
                               "action": None, "configs": None}]  # the clusters were not asked
    assert (gzip["name"], gzip["codec"], gzip["level"], gzip["group_id"]) == ("logs-gzip", "gzip", None,
                                                                              "copy.logs-gzip")
    assert gzip["batch"] == {"max_bytes": 1_048_576, "max_records": 100_000, "linger_ms": 500}
    assert [t["topic"] for t in gzip["topics"]] == ["app.logs.gzip"]
    assert (pattern["source"], pattern["source_pattern"], pattern["sources"]) == (None, r"web\..*", None)
    [lz4] = pattern["destinations"]
    assert (lz4["name"], lz4["codec"], lz4["level"], lz4["topics"]) == ("route1.lz4-9", "lz4", 9, [])
    assert [lane["group_id"] for lane in data["lanes"]] == ["copy.app.logs.zstd-3", "copy.logs-gzip",
                                                             "copy.route1.lz4-9"]
    assert data["dead_letter"] == {"topic": "copy.dlq", "partitions": None, "action": None}
    outcomes = {c["check"]: c["outcome"] for c in data["checks"]}
    assert outcomes == {"config": "passed", "secret references": "passed", "cluster.config": "passed",
                        "routes": "passed", "clusters": "not checked", "sources": "not checked",
                        "destinations": "not checked", "dead-letter topic": "not checked"}
    assert data["problems"] == [] and data["skipped"] == []
    assert_nobody_connected(listener)


def test_offline_a_refused_config_is_exit_2_with_its_problems_as_json(tmp_path, listener):
    path = tmp_path / "bad.yaml"
    path.write_text(f"cluster: {{bootstrap_servers: '{addr(listener)}'}}\n"
                    "routes:\n  - source: s\n    destinaton: [{codec: zstd}]\nmetrics: {prot: 1}\n")
    result = validate("-c", str(path), "--offline", "--format", "json")
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["routes"] == [] and data["lanes"] == []
    assert data["problems"] == [
        {"path": "routes.0.destinaton", "problem": "unknown key `destinaton` (did you mean `destinations`?)",
         "where": None},
        {"path": "metrics.prot", "problem": "unknown key `prot` (did you mean `port`?)", "where": None}]
    assert [(c["check"], c["outcome"]) for c in data["checks"]] == [("config", "failed")]
    assert result.stderr.splitlines() == [
        f"transcoder: error: {path}: 2 problems:",
        "  routes.0.destinaton: unknown key `destinaton` (did you mean `destinations`?)",
        "  metrics.prot: unknown key `prot` (did you mean `port`?)"]
    assert_nobody_connected(listener)


def test_offline_a_failed_check_is_exit_2_the_plan_still_shown(tmp_path, listener):
    # librdkafka refuses two properties; two destinations write one topic: both are found without a connection
    path = write(tmp_path, addr(listener), cluster={"bootstrap_servers": addr(listener), "config": {
        "no.such.property": 1, "socket.timeout.ms": 5}},
        routes=[{"source": "a", "destinations": [{"codec": "zstd", "topic": "same"},
                                                 {"codec": "lz4", "topic": "same", "name": "other"}]}])
    result = validate("-c", str(path), "--offline", "--format", "json")
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    failed = {c["check"]: c["detail"] for c in data["checks"] if c["outcome"] == "failed"}
    assert list(failed) == ["cluster.config", "routes"]
    assert 'No such configuration property: "no.such.property"' in failed["cluster.config"]
    assert '"socket.timeout.ms" value 5 is outside allowed range' in failed["cluster.config"]
    assert failed["routes"] == "destination same is written twice (copying a and a)"
    assert data["ok"] is False and [d["codec"] for d in data["routes"][0]["destinations"]] == ["zstd", "lz4"]
    assert result.stderr.splitlines() == [
        "transcoder: error: 2 checks failed:",
        "  cluster.config (the source cluster and destination cluster): 2 problems:",
        '    No such configuration property: "no.such.property": fix or remove the property (librdkafka\'s '
        "CONFIGURATION.md lists them)",
        '    Configuration property "socket.timeout.ms" value 5 is outside allowed range 10..300000: fix or remove the '
        "property (librdkafka's CONFIGURATION.md lists them)",
        "  routes: destination same is written twice (copying a and a)"]
    table = validate("-c", str(path), "--offline")
    assert table.exit_code == 2 and "passed: config:" in table.stdout and "ok:" not in table.stdout
    assert_nobody_connected(listener)


def test_offline_secret_references_are_resolved_and_never_shown(tmp_path, listener):
    secret_file = tmp_path / "key-password"
    secret_file.write_text(SECRET + "-file\n")
    path = write(tmp_path, addr(listener), cluster={"bootstrap_servers": addr(listener), "config": {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": "${env:TC_VALIDATE_PW}", "ssl.key.password": f"${{file:{secret_file}}}"}})
    for fmt in ("table", "json"):
        result = validate("-c", str(path), "--offline", "--format", fmt, env={"TC_VALIDATE_PW": SECRET})
        assert result.exit_code == 0, result.output
        assert SECRET not in result.stdout and SECRET not in result.stderr
        assert "cluster.config.sasl.password" in result.stdout and "cluster.config.ssl.key.password" in result.stdout
    missing = validate("-c", str(path), "--offline", "--format", "json", env={"TC_VALIDATE_PW": None})
    assert missing.exit_code == 2
    assert json.loads(missing.stdout)["problems"] == [{
        "path": "cluster.config.sasl.password", "problem": "environment variable TC_VALIDATE_PW is not set",
        "where": None}]
    assert SECRET not in missing.stdout and SECRET not in missing.stderr


def test_offline_with_the_spark_engine_says_its_own_checks_are_not_done_and_checks_master(tmp_path, listener):
    path = write(tmp_path, addr(listener))
    result = validate("-c", str(path), "--offline", "--engine", "spark", "--format", "json")
    assert result.exit_code == 0, result.output
    engine = [c for c in json.loads(result.stdout)["checks"] if c["check"] == "engine"]
    assert [c["outcome"] for c in engine] == ["not checked"] and "checkpoint" in engine[0]["detail"]
    bad_master = validate("-c", str(path), "--offline", "--engine", "spark", "--master", "nowhere")
    assert bad_master.exit_code == 2 and "is not a Spark master URL" in bad_master.stderr
    service_master = validate("-c", str(path), "--offline", "--master", "local[2]")
    assert service_master.exit_code == 2 and "--master applies to --engine spark only" in service_master.stderr


def test_a_reserved_topic_problem_names_its_line_in_the_json(tmp_path, listener):
    path = tmp_path / "reserved.yaml"
    path.write_text(f"cluster: {{bootstrap_servers: '{addr(listener)}'}}\n"
                    "routes:\n"
                    "  - source: __consumer_offsets\n"          # line 3
                    "    destinations: [{codec: zstd, topic: offsets-copy}]\n")
    result = validate("-c", str(path), "--offline", "--format", "json")
    assert result.exit_code == 2
    [problem] = json.loads(result.stdout)["problems"]
    assert (problem["path"], problem["where"]) == ("routes.0.source", "line 3")
    assert problem["problem"].startswith("source __consumer_offsets is Kafka's internal topic")
