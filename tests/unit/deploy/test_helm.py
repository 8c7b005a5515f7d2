"""helm/transcoder and deploy/k8s: the chart lints, its schema refuses misspelt values, what it renders holds a valid
config with its secrets where the config reads them, and every manifest is valid Kubernetes of a named release."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.support import kube
from transcoder import config
from transcoder.config import SECRET_PROPERTIES
from transcoder.config.secrets import REFERENCE
from transcoder.errors import ConfigError
from transcoder.service.runner import SHUTDOWN_MARGIN_S

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm/transcoder"
CREATED = CHART / "ci/created-secret-values.yaml"
EXISTING = CHART / "ci/existing-secret-values.yaml"
WEB = CHART / "ci/web-config-values.yaml"
MANIFEST = ROOT / "deploy/k8s/transcoder.yaml"
# The ServiceMonitor's CRD, from prometheus-operator's Go module (the Go module proxy).
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator@v0.78.2"
SERVICEMONITOR_CRD = "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"


def values(path: Path = CHART / "values.yaml") -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def rendered(*files: Path, sets: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    docs = kube.documents(kube.render(CHART, values=files, sets=sets).stdout)
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs), [d["kind"] for d in docs]
    return by_kind


def pod_spec(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return docs["Deployment"]["spec"]["template"]["spec"]


def container(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (only,) = pod_spec(docs)["containers"]
    return only


def secret_files(docs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """mountPath -> the name of the Secret mounted there."""
    volumes = {v["name"]: v for v in pod_spec(docs)["volumes"]}
    return {m["mountPath"]: volumes[m["name"]]["secret"]["secretName"]
            for m in container(docs)["volumeMounts"] if "secret" in volumes[m["name"]]}


def parse_rendered_config(docs: dict[str, dict[str, Any]], tmp_path: Path, files: dict[str, str],
                          environ: dict[str, str]) -> config.Config:
    """The ConfigMap's config as a pod reads it: each ${file:...} under a Secret's mountPath read from `files`
    (key -> content) written to tmp_path, and ${env:...} from the container's env resolved from `environ`."""
    text = docs["ConfigMap"]["data"]["config.yaml"]
    mounts = secret_files(docs)
    for m in REFERENCE.finditer(text):
        if m.group(1) == "file":
            path = PurePosixPath(m.group(2).split(":")[0])
            mount = next((p for p in mounts if path.is_relative_to(p)), None)
            assert mount is not None, f"{path} is on no Secret volume"
            key = str(path.relative_to(mount))
            (tmp_path / key).write_text(files[key])
            text = text.replace(f"${{file:{path}", f"${{file:{tmp_path / key}")
        else:
            assert m.group(2) in {e["name"] for e in container(docs).get("env", [])}, f"no env {m.group(2)}"
    return config.parse(yaml.safe_load(text), environ=environ)


def test_chart_lints_with_each_values_file():
    for files in ([], [CREATED], [EXISTING], [WEB]):
        lint = kube.lint(CHART, values=files)
        assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize(("option", "misspelt"), [
    ("replicaCount=3", "replicaCount"),
    ("terminationGracePeriodSecond=90", "terminationGracePeriodSecond"),
    ("podDisruptionBudget.maxUnavailble=1", "maxUnavailble"),
    ("image.tags=0.2.0", "tags"),
    ("secret.existingSecrets=kafka", "existingSecrets"),
    ("resources.request.cpu=1", "request"),
    ("config.shutdown_timeout=45", "shutdown_timeout"),
    ("webConfig.existingSecrets=web", "existingSecrets"),
])
def test_a_misspelt_value_fails_lint(option, misspelt):
    lint = kube.lint(CHART, sets=[option])
    assert lint.returncode != 0
    assert f"Additional property {misspelt} is not allowed" in lint.stdout + lint.stderr


@pytest.mark.parametrize(("options", "complaint"), [
    (("podDisruptionBudget.maxUnavailable=1", "podDisruptionBudget.minAvailable=1"), "podDisruptionBudget"),
    (("secret.existingSecret=kafka", "secret.create.password=x"), "secret"),
    (("env.KAFKA_USER.secretName=users",), "env.KAFKA_USER"),  # a secretKeyRef without its key
    (("replicas=two",), "replicas"),
    (("webConfig.existingSecret=web", "config.metrics.web_config_file=/etc/web.yml"), "config.metrics.web_config_file"),
    (("webConfig.scheme=https",), "webConfig.scheme"),
])
def test_contradictory_or_incomplete_values_fail(options, complaint):
    done = kube.render(CHART, sets=options, check=False)
    assert done.returncode != 0
    assert complaint in done.stderr


def test_schema_lists_the_config_models_top_level_keys():
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]["config"]["properties"]) == set(config.Config.model_fields)
    assert set(schema["properties"]) == set(values()) | {"global", "terminationGracePeriodSeconds"}


def test_default_render(tmp_path):
    docs = rendered()
    assert set(docs) == {"ConfigMap", "Service", "Deployment", "PodDisruptionBudget"}
    conf = parse_rendered_config(docs, tmp_path, {}, {})
    assert conf.model_dump() == config.parse(values()["config"], environ={}).model_dump()
    assert container(docs)["ports"] == [{"name": "metrics", "containerPort": conf.metrics.port}]
    assert docs["Deployment"]["spec"]["replicas"] == values()["replicas"]
    assert container(docs)["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container(docs)["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container(docs)["resources"] == values()["resources"]
    assert secret_files(docs) == {}
    pdb = docs["PodDisruptionBudget"]["spec"]
    assert pdb["maxUnavailable"] == 1 and "minAvailable" not in pdb
    assert pdb["selector"]["matchLabels"].items() <= docs["Deployment"]["spec"]["template"]["metadata"][
        "labels"].items()
    grace = pod_spec(docs)["terminationGracePeriodSeconds"]
    assert grace == math.ceil(conf.shutdown_timeout_s) + values()["terminationGracePeriodMarginSeconds"]
    assert grace > conf.shutdown_timeout_s + SHUTDOWN_MARGIN_S


@pytest.mark.parametrize("shutdown", [1, 10, 50.5, 300])
def test_grace_period_follows_shutdown_timeout(tmp_path, shutdown):
    extra = tmp_path / "values.yaml"
    extra.write_text(yaml.safe_dump({"config": {"shutdown_timeout_s": shutdown}}))
    grace = pod_spec(rendered(extra))["terminationGracePeriodSeconds"]
    assert grace == math.ceil(shutdown) + values()["terminationGracePeriodMarginSeconds"]
    assert grace > shutdown + SHUTDOWN_MARGIN_S


def test_an_explicit_grace_period_is_kept_unless_too_short():
    assert pod_spec(rendered(sets=("terminationGracePeriodSeconds=36",)))["terminationGracePeriodSeconds"] == 36
    done = kube.render(CHART, sets=("terminationGracePeriodSeconds=35",), check=False)  # 30 s + 5 s: too short
    assert done.returncode != 0
    assert "terminationGracePeriodSeconds (35) must be longer than config.shutdown_timeout_s + 5 (35)" in done.stderr


def test_created_secret_is_mounted_where_the_config_reads_it(tmp_path):
    docs = rendered(CREATED)
    chosen = values(CREATED)
    assert set(docs) == {"ConfigMap", "Service", "Deployment", "PodDisruptionBudget", "Secret", "ServiceMonitor"}
    secret = docs["Secret"]
    assert secret["stringData"] == chosen["secret"]["create"]
    assert secret_files(docs) == {chosen["secret"]["mountPath"]: secret["metadata"]["name"]}
    env = {e["name"]: e for e in container(docs)["env"]}
    assert env["KAFKA_USERNAME"]["valueFrom"]["secretKeyRef"] == {"name": "kafka-users", "key": "transcoder"}
    assert env["LOG_FORMAT"]["value"] == "json"
    conf = parse_rendered_config(docs, tmp_path, secret["stringData"], {"KAFKA_USERNAME": "copier"})
    client = conf.cluster.librdkafka()
    assert client["sasl.password"] == chosen["secret"]["create"]["sasl.password"]
    assert client["sasl.username"] == "copier"
    assert "not-a-real-password" not in repr(conf)
    for key, value in chosen["config"]["cluster"]["config"].items():
        if key in SECRET_PROPERTIES:
            assert REFERENCE.fullmatch(value), key
    # A changed secret rolls the pods, as a changed config does.
    annotations = docs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert {"checksum/config", "checksum/secret"} <= set(annotations)
    assert docs["PodDisruptionBudget"]["spec"] == {"minAvailable": 2, "selector": {
        "matchLabels": docs["Deployment"]["spec"]["selector"]["matchLabels"]}}
    assert docs["Deployment"]["spec"]["replicas"] == 3
    assert pod_spec(docs)["terminationGracePeriodSeconds"] == 51 + values()["terminationGracePeriodMarginSeconds"]
    assert container(docs)["ports"][0]["containerPort"] == conf.metrics.port == 9400
    assert docs["Service"]["spec"]["ports"][0]["port"] == conf.metrics.port


def test_existing_secret_is_mounted_and_no_secret_is_made(tmp_path):
    docs = rendered(EXISTING)
    assert set(docs) == {"ConfigMap", "Service", "Deployment"}
    assert secret_files(docs) == {"/var/run/secrets/kafka": "kafka-credentials"}
    conf = parse_rendered_config(docs, tmp_path, {"credentials.properties": "user=transcoder\npassword=pw1\n"}, {})
    assert conf.cluster.librdkafka()["sasl.password"] == "pw1"
    assert pod_spec(docs)["terminationGracePeriodSeconds"] == 120


def test_web_config_secret_is_mounted_where_the_config_reads_it_and_probes_use_https(tmp_path):
    docs = rendered(WEB)
    chosen = values(WEB)["webConfig"]
    mount = values()["webConfig"]["mountPath"]
    assert secret_files(docs) == {mount: chosen["existingSecret"]}
    conf = parse_rendered_config(docs, tmp_path, {}, {})
    assert conf.metrics.web_config_file == f"{mount}/web-config.yml"
    assert not conf.metrics.auth_probes  # the kubelet's probes send no credentials
    assert container(docs)["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}
    assert container(docs)["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTPS"}
    (endpoint,) = docs["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    monitor = values(WEB)["serviceMonitor"]
    assert (endpoint["tlsConfig"], endpoint["basicAuth"]) == (monitor["tlsConfig"], monitor["basicAuth"])
    assert not any(mount.startswith(m["mountPath"] + "/") for m in container(docs)["volumeMounts"])  # not nested


def test_an_inline_secret_in_the_values_is_refused_by_the_config():
    raw = copy.deepcopy(values(EXISTING)["config"])
    raw["cluster"]["config"]["sasl.password"] = "hunter2"
    with pytest.raises(ConfigError, match="sasl.password"):
        config.parse(raw, environ={})


# kubeconform, with Kubernetes' OpenAPI of kube.KUBERNETES_VERSION and the ServiceMonitor CRD.
@pytest.fixture(scope="module")
def schemas(tmp_path_factory) -> Path:
    kube.kubeconform()
    out = tmp_path_factory.mktemp("schemas")
    kube.write_kubernetes_schemas(out, ["v1", "apps/v1", "policy/v1"])
    crd = kube.module_dir(PROMETHEUS_OPERATOR_MODULE, out) / SERVICEMONITOR_CRD
    kube.write_crd_schemas(out, yaml.safe_load(crd.read_text()))
    return out


def manifest_of(name: str, tmp_path: Path) -> Path:
    if name == "deploy/k8s":
        return MANIFEST
    path = tmp_path / f"{name}.yaml"
    files = {"chart-defaults": [], "chart-created-secret": [CREATED], "chart-existing-secret": [EXISTING],
             "chart-web-config": [WEB]}[name]
    path.write_text(kube.render(CHART, values=files).stdout)
    return path


@pytest.mark.parametrize("name", ["deploy/k8s", "chart-defaults", "chart-created-secret", "chart-existing-secret",
                                  "chart-web-config"])
def test_manifests_are_valid_kubernetes(schemas, tmp_path, name):
    manifest = manifest_of(name, tmp_path)
    count = len(kube.documents(manifest.read_text()))
    result = kube.validate(schemas, manifest)
    assert result["returncode"] == 0, json.dumps(result["resources"], indent=2)
    assert result["summary"] == {"valid": count, "invalid": 0, "errors": 0, "skipped": 0}, result


@pytest.mark.parametrize(("kind", "path", "value"), [
    ("PodDisruptionBudget", ["spec", "maxUnavailabe"], 1),  # a misspelt field
    ("Deployment", ["spec", "template", "spec", "terminationGracePeriodSeconds"], "60s"),  # not an integer
    ("Deployment", ["spec", "template", "spec", "containers", 0, "volumeMounts", 0, "readonly"], True),
    ("Secret", ["stringData", "sasl.password"], {"inline": "x"}),  # not a string
    ("ServiceMonitor", ["spec", "endpoints", 0, "scheme"], "tcp"),  # not in the CRD's enum
])
def test_kubeconform_rejects_a_broken_render(schemas, tmp_path, kind, path, value):
    docs = kube.documents(manifest_of("chart-created-secret", tmp_path).read_text())
    result = kube.validate_broken(schemas, docs, kind, path, value, tmp_path)
    assert result["returncode"] != 0
    assert result["summary"]["invalid"] == 1 and result["summary"]["valid"] == len(docs) - 1, result
    (invalid,) = [r for r in result["resources"] if r["status"] == "statusInvalid"]
    assert invalid["kind"] == kind


def test_plain_manifests_match_the_charts_defaults():
    """deploy/k8s is the chart's defaults with a SASL Secret: the same PDB, probes' port, grace period rule."""
    docs = {d["kind"]: d for d in kube.documents(MANIFEST.read_text())}
    assert set(docs) == {"ConfigMap", "Deployment", "PodDisruptionBudget"}
    assert docs["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= \
        docs["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    conf = yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"])
    assert docs["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > \
        conf.get("shutdown_timeout_s", config.Config.model_fields["shutdown_timeout_s"].default) + SHUTDOWN_MARGIN_S
