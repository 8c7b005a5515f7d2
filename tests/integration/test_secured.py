"""Secured brokers: the copy, seed, evaluate and report over SASL_SSL (SCRAM-SHA-512) and over mTLS on the session's
broker; a wrong password, an untrusted certificate and a mismatched protocol in one line; the secrets in no output.

Every secret is given as a reference (the password as ${env:...}, the key password as ${file:...}); every output a
user or a scraper sees (stdout, stderr, structured logs, /status, /metrics, `validate`, `report`) is searched for
the password, the key password and each line of the private key's PEM body.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.cluster import Cluster
from tests.support.http import get
from transcoder import config as cfg
from transcoder.dev import certs
from transcoder.dev.ports import free_port
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.clients import connect_admin

PASSWORD_ENV = "TRANSCODER_TEST_SASL_PASSWORD"


@pytest.fixture
def secured(kafka: Cluster) -> Cluster:
    kafka.require_secured()
    return kafka


def secrets_of(kafka: Cluster) -> list[str]:
    """What must never be printed: the SCRAM password, the key password, each line of the private key."""
    assert kafka.client_key_file is not None and kafka.client_key_password_file is not None
    body = [ln for ln in kafka.client_key_file.read_text().splitlines() if ln and not ln.startswith("-----")]
    return [kafka.sasl_password, kafka.client_key_password_file.read_text().strip(), *body]


def assert_no_secret(kafka: Cluster, *outputs: str, extra: Iterable[str] = ()) -> None:
    needles = [*secrets_of(kafka), *extra]
    for i, out in enumerate(outputs):
        for s in needles:
            assert s not in out, f"output {i} holds a secret ({s[:4]}...): {out[:300]!r}"


def cluster_section(kafka: Cluster, mode: str) -> dict:
    """The config's `cluster`, secrets as references only."""
    if mode == "sasl_ssl":
        return {"bootstrap_servers": kafka.sasl_ssl_bootstrap, "config": {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": kafka.sasl_username,
            "sasl.password": f"${{env:{PASSWORD_ENV}}}", "ssl.ca.location": str(kafka.ca_file)}}
    return {"bootstrap_servers": kafka.ssl_bootstrap, "config": {
        "security.protocol": "SSL", "ssl.ca.location": str(kafka.ca_file),
        "ssl.certificate.location": str(kafka.client_cert_file), "ssl.key.location": str(kafka.client_key_file),
        "ssl.key.password": f"${{file:{kafka.client_key_password_file}}}"}}


def cli_props(kafka: Cluster, mode: str) -> list[str]:
    """The same settings as -X options of `seed` and `evaluate`, secrets as the same references (run with
    env_for(kafka)): nothing secret on the command line."""
    section = cluster_section(kafka, mode)
    return ["-b", section["bootstrap_servers"],
            *[a for k, v in section["config"].items() for a in ("-X", f"{k}={v}")]]


def write_config(path: Path, kafka: Cluster, mode: str, source: str, *, port: int = 0, **cluster_config: str) -> Path:
    section = cluster_section(kafka, mode)
    section["config"].update(cluster_config)
    path.write_text(json.dumps({  # JSON is YAML
        "cluster": section, "group_id": f"sec-{time.monotonic_ns()}", "commit_interval_ms": 200,
        "routes": [{"source": source, "destinations": [{"codec": "zstd"}, {"codec": "lz4"}]}],
        "metrics": {"port": port, "host": "127.0.0.1", "stats_interval_ms": 500, "disk_interval_s": 1},
    }))
    return path


def env_for(kafka: Cluster, **extra: str) -> dict[str, str]:
    return {PASSWORD_ENV: kafka.sasl_password, **extra}



def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in lines if ln.startswith("transcoder: error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.parametrize("mode", ["sasl_ssl", "mtls"])
def test_seed_copy_status_metrics_report_and_evaluate_over_a_secured_listener(secured, mode, tmp_path,
                                                                              read_topic):
    kafka = secured
    source = f"secured-{mode}-{time.monotonic_ns()}"
    n = 4000
    seeded = run_cli("seed", "--kind", "nginx", "--count", str(n), "--topic", source, "--partitions", "2",
                     *cli_props(kafka, mode), env=env_for(kafka))
    assert seeded.returncode == 0, seeded.stderr
    outputs = [seeded.stdout, seeded.stderr]

    port = free_port()
    conf = write_config(tmp_path / "config.yaml", kafka, mode, source, port=port)
    # debug, the clients' own debug lines too: every output searched below holds no secret at any level
    env = {**os.environ, **env_for(kafka), "TRANSCODER_LOG_LEVEL": "debug", "TRANSCODER_DEBUG_CLIENTS": "1"}
    validated = run_cli("validate", "-c", str(conf), env=env)
    assert validated.returncode == 0, validated.stderr
    assert f"{source}.zstd" in validated.stdout
    outputs += [validated.stdout, validated.stderr]

    url = f"http://127.0.0.1:{port}"
    # Its output to files, not pipes: a full pipe would block the service's logging (debug is verbose).
    out_file, err_file = (tmp_path / "run.out").open("w+"), (tmp_path / "run.err").open("w+")
    service = subprocess.Popen([sys.executable, "-m", "transcoder", "run", "-c", str(conf)], env=env,
                               stdout=out_file, stderr=err_file, text=True)

    def stop() -> tuple[str, str]:
        if service.poll() is None:
            service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
        return (tmp_path / "run.out").read_text(), (tmp_path / "run.err").read_text()

    try:
        def copied() -> bool:
            code, body = get(url + "/status")
            outs = [d["records_out"] for ln in json.loads(body)["lanes"] for d in ln["destinations"]] \
                if code == 200 else []
            return len(outs) == 2 and all(o == n for o in outs)

        deadline = time.monotonic() + 180
        while not copied():
            assert service.poll() is None, stop()[1][-4000:]
            assert time.monotonic() < deadline, "the secured copy did not finish in time"
            time.sleep(0.3)
        def disk_polled() -> bool:  # DescribeLogDirs (kafka-python) over the secured listener too
            return any(ln.startswith("transcoder_topic_disk_bytes{") and f'topic="{source}.zstd"' in ln
                       for ln in get(url + "/metrics")[1].splitlines())

        while not disk_polled():
            assert time.monotonic() < deadline, "no on-disk size read over the secured listener"
            time.sleep(0.3)
        status, metrics, ready = get(url + "/status")[1], get(url + "/metrics")[1], get(url + "/readyz")
        assert ready[0] == 200, ready
        assert "transcoder_records_out_total" in metrics
        while True:  # the destinations' record counts come from the broker figures poll (once a second)
            report = run_cli("report", "--url", url, "--format", "json")
            assert report.returncode == 0, report.stderr
            rows = {r["destination"]: r for r in json.loads(report.stdout)}
            assert set(rows) == {f"{source}.zstd", f"{source}.lz4"}
            if all(r["records"] == n and r["lag_records"] == 0 for r in rows.values()):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(1)
        table = run_cli("report", "--url", url, "--format", "markdown")
        assert table.returncode == 0 and f"{source}.zstd" in table.stdout, table.stderr
        outputs += [status, metrics, report.stdout, report.stderr, table.stdout, table.stderr]
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe service's log:\n{stop()[1][-4000:]}") from None
    finally:
        out, err = stop()
        out_file.close()
        err_file.close()
    assert service.returncode == 0, err[-2000:]
    outputs += [out, err]
    assert "service_starting" in out + err  # the structured logs were captured (and redact the cluster)

    want = [(m.key(), m.value()) for m in read_topic(source)]
    assert len(want) == n
    for dest in (f"{source}.zstd", f"{source}.lz4"):
        got = [(m.key(), m.value()) for m in read_topic(dest)]
        assert sorted(got, key=repr) == sorted(want, key=repr)

    evaluated = run_cli("evaluate", "--topic", source, "--records", "1000", "--codecs", "zstd:3", "--codecs", "lz4",
                        "--batch-sizes", "64KiB", "--repeats", "1", "--format", "json", *cli_props(kafka, mode),
                        env=env_for(kafka))
    assert evaluated.returncode == 0, evaluated.stderr
    doc = json.loads(evaluated.stdout)
    assert doc["sample"]["records"] == 2000  # the last 1,000 records of each of the 2 partitions
    assert doc["sample"]["topic"]["partitions"] == 2
    assert doc["recommendation"]["codec"] in ("zstd", "lz4")
    outputs += [evaluated.stdout, evaluated.stderr]
    assert_no_secret(kafka, *outputs)


def key_pem_config(tmp_path: Path, kafka: Cluster, source: str) -> Path:
    """mTLS with the private key itself in the config (ssl.key.pem), read from its file by reference."""
    conf = write_config(tmp_path / "config.yaml", kafka, "mtls", source)
    raw = json.loads(conf.read_text())
    del raw["cluster"]["config"]["ssl.key.location"]
    raw["cluster"]["config"]["ssl.key.pem"] = f"${{file:{kafka.client_key_file}}}"
    conf.write_text(json.dumps(raw))
    return conf


def test_the_key_itself_from_a_file_reaches_the_broker_and_is_never_printed(secured, tmp_path, topic_factory):
    kafka = secured
    parsed = cfg.load(key_pem_config(tmp_path, kafka, topic_factory()))
    _, md = connect_admin(parsed.cluster.librdkafka())
    assert md.brokers
    assert_no_secret(kafka, repr(parsed), str(parsed), json.dumps(parsed.cluster.redacted()),
                     parsed.model_dump_json(), repr(parsed.cluster.config))


def test_validate_takes_the_key_itself_from_a_file_and_never_prints_it(secured, tmp_path, topic_factory):
    kafka = secured
    source = topic_factory()
    proc = run_cli("validate", "-c", str(key_pem_config(tmp_path, kafka, source)),
                   env={"TRANSCODER_LOG_LEVEL": "info"})
    assert_no_secret(kafka, proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert f"{source}.zstd" in proc.stdout


def test_a_wrong_password_is_one_line_naming_the_authentication_failure(secured, tmp_path, topic_factory):
    kafka = secured
    wrong = "not-the-password-0123456789"
    conf = write_config(tmp_path / "config.yaml", kafka, "sasl_ssl", topic_factory())
    proc = run_cli("validate", "-c", str(conf), env=env_for(kafka, **{PASSWORD_ENV: wrong}))
    line = one_line_error(proc)
    assert "SASL authentication error" in line and "check sasl.username and sasl.password" in line, line
    assert kafka.sasl_ssl_bootstrap in line
    run = run_cli("run", "-c", str(conf), "--until-caught-up", env=env_for(kafka, **{PASSWORD_ENV: wrong}))
    assert "SASL authentication error" in one_line_error(run)
    seed = run_cli("seed", "--kind", "nginx", "--count", "10", "--topic", "never", "-b", kafka.sasl_ssl_bootstrap,
                   "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512",
                   "-X", f"sasl.username={kafka.sasl_username}", "-X", f"sasl.password=${{env:{PASSWORD_ENV}}}",
                   "-X", f"ssl.ca.location={kafka.ca_file}", env=env_for(kafka, **{PASSWORD_ENV: wrong}))
    assert "SASL authentication error" in one_line_error(seed)
    assert_no_secret(kafka, proc.stdout, proc.stderr, run.stdout, run.stderr, seed.stdout, seed.stderr,
                     extra=[wrong])


def test_an_untrusted_broker_certificate_is_one_line_naming_certificate_verification(secured, tmp_path,
                                                                                     topic_factory):
    kafka = secured
    other = certs.generate(tmp_path / "other-ca")  # a CA that did not sign the broker's certificate
    for mode in ("sasl_ssl", "mtls"):
        conf = write_config(tmp_path / f"{mode}.yaml", kafka, mode, topic_factory(),
                            **{"ssl.ca.location": str(other.ca)})
        proc = run_cli("validate", "-c", str(conf), env=env_for(kafka))
        line = one_line_error(proc)
        assert "TLS certificate verification failed" in line and str(other.ca) in line, line
        assert_no_secret(kafka, proc.stdout, proc.stderr)


def test_sasl_against_the_plaintext_listener_says_the_security_protocol_likely_mismatches(secured, tmp_path,
                                                                                          topic_factory):
    kafka = secured
    conf = tmp_path / "config.yaml"
    write_config(conf, kafka, "sasl_ssl", topic_factory())
    raw = json.loads(conf.read_text())
    raw["cluster"]["bootstrap_servers"] = kafka.bootstrap  # the PLAINTEXT listener
    conf.write_text(json.dumps(raw))
    proc = run_cli("validate", "-c", str(conf), env=env_for(kafka))
    line = one_line_error(proc)
    assert "security protocol likely mismatches" in line and "security.protocol=SASL_SSL" in line, line
    raw["cluster"]["config"]["security.protocol"] = "SASL_PLAINTEXT"
    conf.write_text(json.dumps(raw))
    line = one_line_error(run_cli("validate", "-c", str(conf), env=env_for(kafka)))
    assert "security protocol likely mismatches" in line and "SASL_PLAINTEXT" in line, line
    assert_no_secret(kafka, proc.stdout, proc.stderr)


@pytest.mark.parametrize("case", ["plaintext_to_tls", "mtls_without_client_certificate"])
def test_other_mismatches_name_what_to_check(secured, case):
    kafka = secured
    if case == "plaintext_to_tls":
        conf, want = {"bootstrap.servers": kafka.sasl_ssl_bootstrap}, "security protocol likely mismatches"
    else:
        conf = {"bootstrap.servers": kafka.ssl_bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(kafka.ca_file)}
        want = "requires a client certificate"
    with pytest.raises(KafkaUnavailableError, match=want) as info:
        connect_admin(conf, timeout=4)
    assert info.value.retriable is False
    assert "\n" not in str(info.value)
    assert_no_secret(kafka, str(info.value), repr(info.value))


def test_cli_properties_resolve_secret_references(secured):
    kafka = secured
    inline = run_cli("seed", "--kind", "nginx", "--count", "10", "--topic", "never", "-b", kafka.sasl_ssl_bootstrap,
                     "-X", "sasl.password=typed-in-0123")
    assert "must not be typed on the command line" in one_line_error(inline)
    assert "typed-in-0123" not in inline.stderr + inline.stdout
    proc = run_cli("seed", "--kind", "nginx", "--count", "10", "--topic", f"secured-ref-{time.monotonic_ns()}",
                   "-b", kafka.sasl_ssl_bootstrap, "-X", "security.protocol=SASL_SSL",
                   "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", f"sasl.username={kafka.sasl_username}",
                   "-X", f"sasl.password=${{env:{PASSWORD_ENV}}}", "-X", f"ssl.ca.location={kafka.ca_file}",
                   env=env_for(kafka))
    assert proc.returncode == 0, proc.stderr


def test_local_kafka_up_secured_prints_no_secret_and_its_listeners_survive_a_restart(tmp_path):
    from transcoder.dev.local_kafka import LocalKafka

    state_dir = tmp_path / "lk"
    env = {"TRANSCODER_LOCAL_KAFKA_DIR": str(state_dir)}
    up = run_cli("local-kafka", "up", "--secured", env=env)
    local = LocalKafka(state_dir)
    try:
        assert up.returncode == 0, up.stderr
        st = local.state()
        assert st is not None and st.sasl_ssl_bootstrap and st.ssl_bootstrap
        status = run_cli("local-kafka", "status", env=env)
        assert st.sasl_ssl_bootstrap in status.stdout and st.ssl_bootstrap in status.stdout
        password = Path(st.sasl_password_file).read_text().strip()  # type: ignore[arg-type]
        for out in (up.stdout, up.stderr, status.stdout, status.stderr, (state_dir / "state.json").read_text()):
            assert password not in out
        local.kill()
        local.restart()  # the same server.properties, certificates and SCRAM user
        for conf in (st.sasl_ssl_config(), st.ssl_config()):
            assert connect_admin(conf)[1].brokers
    finally:
        local.down()


@pytest.mark.parametrize("mode", ["sasl_ssl", "mtls"])
def test_debug_logs_hold_no_secret(secured, mode, tmp_path, topic_factory):
    kafka = secured
    conf = write_config(tmp_path / "config.yaml", kafka, mode, topic_factory())
    proc = run_cli("validate", "-c", str(conf), env=env_for(kafka, TRANSCODER_LOG_LEVEL="debug"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_no_secret(kafka, proc.stdout, proc.stderr)


@pytest.mark.spark
@pytest.mark.parametrize(("mode", "read"), [("sasl_ssl", "transcoder"), ("mtls", "kafka")])
def test_spark_copies_over_a_secured_listener_and_prints_no_secret(secured, mode, read, tmp_path, read_topic):
    """The Spark engine (the tasks' own fetchers reading, the default, over SASL_SSL SCRAM; Spark's Java Kafka source
    over mTLS, the client key given to the Java client by value; the executors' writer producing); at debug, the
    clients' debug lines too: every output of the driver, its JVM and its executors holds no secret."""
    kafka = secured
    source = f"secured-spark-{mode}-{time.monotonic_ns()}"
    n = 2000
    seeded = run_cli("seed", "--kind", "nginx", "--count", str(n), "--topic", source, "--partitions", "2",
                     *cli_props(kafka, mode), env=env_for(kafka))
    assert seeded.returncode == 0, seeded.stderr
    conf = write_config(tmp_path / "config.yaml", kafka, mode, source)
    raw = json.loads(conf.read_text())
    raw["spark"] = {"master": "local[1]", "checkpoint_location": str(tmp_path / "checkpoints"), "read": read}
    conf.write_text(json.dumps(raw))
    proc = run_cli("run", "--engine", "spark", "-c", str(conf), "--until-caught-up", timeout=400,
                   env=env_for(kafka, TRANSCODER_LOG_LEVEL="debug", TRANSCODER_DEBUG_CLIENTS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = sorted(((m.partition(), m.key(), m.value()) for m in read_topic(source)), key=repr)
    assert len(want) == n
    for dest in (f"{source}.zstd", f"{source}.lz4"):
        assert sorted(((m.partition(), m.key(), m.value()) for m in read_topic(dest)), key=repr) == want
    assert "lane_caught_up" in proc.stderr  # the structured logs were captured
    assert_no_secret(kafka, proc.stdout, proc.stderr)
