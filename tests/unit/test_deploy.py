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


def test_helm_default_values_hold_a_valid_config():
    values = yaml.safe_load((ROOT / "helm/transcoder/values.yaml").read_text())
    conf = config.parse(values["config"], environ={})
    assert conf.metrics.port == 9308
    assert values["terminationGracePeriodSeconds"] > conf.shutdown_timeout_s
    deployment = (ROOT / "helm/transcoder/templates/deployment.yaml").read_text()
    assert "path: /healthz" in deployment and "path: /readyz" in deployment


def _helm() -> str | None:
    import shutil

    return shutil.which("helm") or next((str(p) for p in [Path.home() / "go/bin/helm"] if p.exists()), None)


def test_helm_chart_lints_and_renders_a_valid_config():
    import subprocess

    import pytest

    helm = _helm()
    if helm is None:
        pytest.skip("helm is not installed (.ci/run installs it with `go install`)")
    chart = str(ROOT / "helm/transcoder")
    lint = subprocess.run([helm, "lint", chart], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = subprocess.run([helm, "template", "t", chart, "--set", "kafkaSecret=kafka-creds"],
                         capture_output=True, text=True, check=True).stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(out) if d}
    assert set(docs) == {"ConfigMap", "Service", "Deployment"}
    conf = config.parse(yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"]), environ={})
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == conf.metrics.port
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/etc/transcoder", "/var/run/secrets/kafka"}
