"""The shipped deployment files agree with the code: the example config validates, the image runs the CLI."""

from __future__ import annotations

from pathlib import Path

import yaml

from transcoder import config

ROOT = Path(__file__).resolve().parents[2]


def test_k8s_example_config_is_valid(tmp_path):
    docs = list(yaml.safe_load_all((ROOT / "deploy/k8s/transcoder.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    secret = tmp_path / "sasl.password"
    secret.write_text("s3cret\n")
    text = cm["data"]["config.yaml"].replace("/var/run/secrets/kafka/sasl.password", str(secret))
    conf = config.parse(yaml.safe_load(text), environ={})
    assert conf.cluster.librdkafka()["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(conf)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == conf.metrics.port
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/var/run/secrets/kafka" in mounts and "/etc/transcoder" in mounts
    # SIGTERM drains for shutdown_timeout_s: the grace period must be longer.
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > conf.shutdown_timeout_s


def test_dockerfile_installs_pinned_wheels_and_runs_as_non_root():
    text = (ROOT / "Dockerfile").read_text()
    assert "-c constraints.txt" in text
    assert "USER 10001" in text
    assert 'ENTRYPOINT ["transcoder"]' in text
    assert '"/etc/transcoder/config.yaml"' in text
    for path in ("pyproject.toml", "constraints.txt", "README.md", "transcoder"):
        assert (ROOT / path).exists()
