"""Bad input against the real broker: one line on stderr, a non-zero exit, and nothing created on the broker."""

from __future__ import annotations

import pytest
import yaml

from tests.support.cli import one_line, run_cli
from tests.support.configs import raw_config

SECRET = "s3cr3t-Pa55word-never-printed"


def _write(tmp_path, raw: dict) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _one_line(proc) -> str:
    return one_line(proc, secrets=(SECRET,))


def _topics(admin) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


BAD_PROPERTIES = [
    pytest.param({"no.such.property": 1}, "no.such.property", "No such configuration property", id="unknown"),
    pytest.param({"socket.timeout.ms": "banana"}, "socket.timeout.ms", "Invalid value", id="invalid"),
    pytest.param({"socket.timeout.ms": 5}, "socket.timeout.ms", "outside allowed range 10..300000", id="range"),
]


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize("bad,name,reason", BAD_PROPERTIES)
@pytest.mark.parametrize("cluster", ["cluster", "destination_cluster"])
def test_bad_librdkafka_property_is_one_line_before_anything_is_created(
        kafka, admin, topic_factory, tmp_path, command, bad, name, reason, cluster):
    source = topic_factory(partitions=1)
    raw = raw_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}])
    good = {"bootstrap_servers": kafka.bootstrap, "config": {"sasl.password": "${env:TEST_SASL_PASSWORD}"}}
    raw["cluster"] = good
    raw[cluster] = {**good, "config": {**good["config"], **bad}}
    path = _write(tmp_path, raw)
    proc = run_cli(command, "--config", path, "--until-caught-up", env={"TEST_SASL_PASSWORD": SECRET}) \
        if command == "run" else run_cli(command, "--config", path, env={"TEST_SASL_PASSWORD": SECRET})
    assert proc.returncode != 0
    line = _one_line(proc)
    which = "source" if cluster == "cluster" else "destination"
    assert line.startswith("transcoder: error: ") and f"{cluster}.config" in line and which in line, line
    assert name in line and reason in line, line
    assert f"{source}.lz4" not in _topics(admin)


@pytest.mark.parametrize("command", ["run", "validate"])
def test_batch_too_large_for_librdkafka_is_one_line_and_creates_nothing(kafka, admin, topic_factory, tmp_path, command):
    source = topic_factory(partitions=1)
    path = _write(tmp_path, raw_config(kafka, [{"source": source, "destinations": [
        {"codec": "lz4", "batch": {"max_bytes": 2_000_000_000}}]}]))
    proc = run_cli(command, "--config", path, *(["--until-caught-up"] if command == "run" else []))
    assert proc.returncode != 0
    line = _one_line(proc)
    assert "routes.0.destinations.0.batch.max_bytes" in line and "at most 999934464" in line, line
    assert f"{source}.lz4" not in _topics(admin)


def test_dead_letter_topic_smaller_than_a_source_is_refused(kafka, topic_factory, tmp_path):
    big = topic_factory(partitions=1, config={"max.message.bytes": "5000000"})
    small = topic_factory(partitions=1)
    dlq = topic_factory(partitions=1, config={"max.message.bytes": "2000000"})
    routes = [{"source": s, "destinations": [{"codec": "lz4"}]} for s in (big, small)]
    path = _write(tmp_path, raw_config(kafka, routes, errors={"tolerance": "all", "dlq_topic": dlq}))
    proc = run_cli("validate", "--config", path)
    assert proc.returncode == 1
    line = _one_line(proc)
    assert (f"dead-letter topic {dlq} has max.message.bytes=2000000, smaller than source {big}'s 5000000" in line
            and "max.message.bytes=5000000" in line), line

    roomy = topic_factory(partitions=1, config={"max.message.bytes": "5000000"})
    path = _write(tmp_path, raw_config(kafka, routes, errors={"tolerance": "all", "dlq_topic": roomy}))
    proc = run_cli("validate", "--config", path)
    assert proc.returncode == 0, proc.stderr
    assert "every pre-flight check passed" in proc.stdout


def test_seed_with_bad_client_property_is_one_line(kafka, admin, tmp_path):
    topic = f"seed-bad-prop-{tmp_path.name}"[:200]
    proc = run_cli("seed", "--kind", "nginx", "--count", "10", "--topic", topic, "-b", kafka.bootstrap,
                   "-X", "no.such.property=1")
    assert proc.returncode != 0
    line = _one_line(proc)
    assert "no.such.property" in line and "No such configuration property" in line, line
