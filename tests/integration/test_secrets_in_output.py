"""At `--log-level debug` (and with `--debug-clients`, every client's own debug lines too), no command prints a
secret, in any form, whatever the SASL mechanism, and the copy goes on as at info, with no record in the log.

Each SASL mechanism of the session broker's SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
with an unsecured JWT) through `seed`, `validate`, `run --until-caught-up` (record sets: kafka-python's raw Fetch
and Produce, where the broker allows it) and `evaluate`; everything they write (stdout, stderr) is searched for the
secret, its base64 and hex forms, and those of SASL PLAIN's `user\\0user\\0password`.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.cluster import Cluster

SECRET_ENV = "TRANSCODER_TEST_SECRET"
DEBUG = ("--log-level", "debug", "--debug-clients")


@pytest.fixture
def secured(kafka: Cluster) -> Cluster:
    kafka.require_secured()
    return kafka


def forms(secret: str) -> list[str]:
    """A secret as a log line could carry it: itself, base64 (standard, URL-safe, unpadded), hex."""
    raw = secret.encode()
    b64, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return [secret, b64, b64.rstrip("="), url.rstrip("="), raw.hex(), raw.hex().upper()]


def sasl_section(kafka: Cluster, mechanism: str) -> tuple[dict, dict[str, str], list[str]]:
    """The config's `cluster` for one mechanism (its secret as ${env:...}), the environment, the needles."""
    if mechanism == "OAUTHBEARER":
        # The unsecured JWT's config is the secret (sasl.oauthbearer.config is a secret property).
        secret = f"principal={kafka.sasl_username} scope=tok-{secrets.token_hex(12)}"
        config = {"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": "true",
                  "sasl.oauthbearer.config": f"${{env:{SECRET_ENV}}}"}
        needles = forms(secret) + forms(secret.split("scope=")[1])
    else:
        secret = kafka.sasl_password
        config = {"sasl.mechanism": mechanism, "sasl.username": kafka.sasl_username,
                  "sasl.password": f"${{env:{SECRET_ENV}}}"}
        user = kafka.sasl_username
        needles = [f for s in (secret, f"{user}\0{user}\0{secret}", f"\0{user}\0{secret}") for f in forms(s)]
    section = {"bootstrap_servers": kafka.sasl_ssl_bootstrap,
               "config": {"security.protocol": "SASL_SSL", "ssl.ca.location": str(kafka.ca_file), **config}}
    return section, {SECRET_ENV: secret}, needles


def write_config(path: Path, cluster: dict, source: str, **extra: object) -> Path:
    path.write_text(json.dumps({  # JSON is YAML
        "cluster": cluster, "group_id": f"sec-{time.monotonic_ns()}", "commit_interval_ms": 200,
        "routes": [{"source": source, "destinations": [{"codec": "zstd"}]}],
        "metrics": {"port": 0, "host": "127.0.0.1"}, **extra}))
    return path


def assert_same_records(read_topic, source: str, dest: str, n: int) -> None:
    want = [(m.partition(), m.key(), m.value()) for m in read_topic(source)]
    got = [(m.partition(), m.key(), m.value()) for m in read_topic(dest)]
    assert len(want) == n
    assert got == want


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_no_command_prints_a_secret_at_debug(secured, mechanism, tmp_path, read_topic):
    kafka = secured
    cluster, env, needles = sasl_section(kafka, mechanism)
    source = f"secret-{mechanism.lower()}-{time.monotonic_ns()}"
    n = 300
    props = ["-b", cluster["bootstrap_servers"], *[a for k, v in cluster["config"].items() for a in ("-X", f"{k}={v}")]]
    outputs: dict[str, str] = {}

    seeded = run_cli(*DEBUG, "seed", "--kind", "nginx", "--count", str(n), "--topic", source, "--partitions", "2",
                     *props, env=env)
    outputs["seed"] = seeded.stdout + seeded.stderr
    assert seeded.returncode == 0, seeded.stderr[-3000:]

    # validate (API versions, DescribeLogDirs), run's record sets (raw Fetch and Produce) and evaluate go through
    # kafka-python too: with OAUTHBEARER, its token provider sends librdkafka's unsecured JWT (transcoder.kafka.
    # oauthbearer), a secret built from the secret config.
    conf = write_config(tmp_path / "config.yaml", cluster, source)
    for level in (("--log-level", "debug"), DEBUG):
        validated = run_cli(*level, "validate", "-c", str(conf), env=env)
        outputs[f"validate {level}"] = validated.stdout + validated.stderr
        assert validated.returncode == 0, validated.stderr[-3000:]

    ran = run_cli(*DEBUG, "run", "-c", str(conf), "--until-caught-up", env=env, timeout=180)
    outputs["run"] = ran.stdout + ran.stderr
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert_same_records(read_topic, source, f"{source}.zstd", n)

    evaluated = run_cli(*DEBUG, "evaluate", "--topic", source, "--records", "200", "--codecs", "lz4",
                        "--batch-sizes", "64KiB", "--repeats", "1", "--format", "json", *props, env=env)
    outputs["evaluate"] = evaluated.stdout + evaluated.stderr
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]

    assert any("SASL" in out or "sasl" in out for out in outputs.values())  # the clients' debug lines were on
    for command, out in outputs.items():
        # OAUTHBEARER's token (librdkafka's unsecured JWT: its constant header, then the claims) is a secret too
        assert not re.search(r"eyJhbGciOiJub25lIn0\.[A-Za-z0-9_-]{8}", out), f"{command} printed the token"
        for needle in needles:
            assert needle not in out, f"{command} printed a secret ({needle[:6]}...): " \
                                      f"{out[max(0, out.find(needle) - 300):out.find(needle)]!r}"


@pytest.mark.parametrize("level", [("--log-level", "debug"), DEBUG], ids=["debug", "debug-clients"])
def test_a_copy_at_debug_copies_every_record_and_logs_none(kafka, level, tmp_path, topic_factory, read_topic):
    source = topic_factory(partitions=2)
    n = 400
    seeded = run_cli("seed", "--kind", "nginx", "--count", str(n), "--topic", source, "-b", kafka.bootstrap)
    assert seeded.returncode == 0, seeded.stderr
    conf = write_config(tmp_path / "config.yaml", {"bootstrap_servers": kafka.bootstrap}, source)
    ran = run_cli(*level, "run", "-c", str(conf), "--until-caught-up", timeout=180)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert_same_records(read_topic, source, f"{source}.zstd", n)
    log = ran.stdout + ran.stderr
    assert '"service_starting"' in log  # transcoder's own events are there
    values = [m.value() for m in read_topic(source)]
    for value in values:  # no record, nor a piece of one (the middle 40 bytes), in any form a dump would show
        middle = value[len(value) // 2 - 20:len(value) // 2 + 20]
        for form in (middle.decode(errors="replace"), repr(middle)[2:-1], middle.hex()):
            assert form not in log, f"the log holds a record: {form!r}"
    if level == DEBUG:
        assert "FetchRequest" in log and "ProduceRequest" in log  # kafka-python's requests, by type
