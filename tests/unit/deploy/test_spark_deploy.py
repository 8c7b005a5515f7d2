"""deploy/spark agrees with the code and with itself.

The example config validates, every version equals the pyspark pin, the mounts are where the config
reads, and the image is built from pinned wheels, as user 10001, without compilers at run time.
"""

from __future__ import annotations

import copy
import fnmatch
import importlib.util
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.support import kube
from transcoder import config
from transcoder.config import SECRET_PROPERTIES
from transcoder.config.secrets import REFERENCE
from transcoder.spark import session

ROOT = Path(__file__).resolve().parents[3]
SPARK_DIR = ROOT / "deploy/spark"
MANIFEST = SPARK_DIR / "sparkapplication.yaml"
DOCKERFILE = SPARK_DIR / "Dockerfile"
CONFIG_FILE = "/etc/transcoder/config.yaml"
IMAGE_USER = 10001
COMPILERS = ("build-essential", "gcc", "g++", "clang", "make", "cmake", "python3-dev")
# spark-operator's CRD, from its Go module (the Go module proxy; GitHub is not needed); core/v1 is
# tests.support.kube's Kubernetes release.
SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2@v2.5.2"
SPARK_OPERATOR_CRD = "charts/spark-operator-chart/crds/sparkoperator.k8s.io_sparkapplications.yaml"


def pinned_spark() -> str:
    pins = re.findall(r"^pyspark==(\S+)\s*$", (ROOT / "constraints.txt").read_text(), flags=re.MULTILINE)
    assert len(pins) == 1, f"constraints.txt pins pyspark {len(pins)} times"
    return pins[0]


def manifests() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d is not None]
    kinds = [d["kind"] for d in docs]
    assert len(set(kinds)) == len(kinds), kinds
    return {d["kind"]: d for d in docs}


def app_spec() -> dict[str, Any]:
    return manifests()["SparkApplication"]["spec"]


def parsed_config(tmp_path: Path) -> tuple[config.Config, dict[str, Any]]:
    """The ConfigMap's config, parsed with each ${file:...} secret replaced by a file holding 's3cret'."""
    text = manifests()["ConfigMap"]["data"]["config.yaml"]
    raw = yaml.safe_load(text)
    for n, path in enumerate(sorted({m.group(2).split(":")[0] for m in REFERENCE.finditer(text)
                                     if m.group(1) == "file"})):
        secret = tmp_path / f"secret-{n}"
        secret.write_text("s3cret\n")
        text = text.replace(f"${{file:{path}", f"${{file:{secret}")
    return config.parse(yaml.safe_load(text), environ={}), raw


def mounts(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """mountPath -> the volume mounted there (from spec.volumes)."""
    volumes = {v["name"]: v for v in app_spec()["volumes"]}
    found = {}
    for mount in pod.get("volumeMounts", []):
        assert mount["name"] in volumes, f"volumeMount {mount['name']} names no volume in spec.volumes"
        found[mount["mountPath"]] = volumes[mount["name"]]
    return found


def mount_of(pod: dict[str, Any], path: str) -> tuple[str, dict[str, Any]] | None:
    """(mountPath, volume) of the file or directory `path`, or None (the image's own filesystem)."""
    best = None
    for mount_path, volume in mounts(pod).items():
        if PurePosixPath(path).is_relative_to(mount_path) and (best is None or len(mount_path) > len(best[0])):
            best = (mount_path, volume)
    return best


def mounted_at(pod: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The volume the file or directory `path` is on, or None."""
    found = mount_of(pod, path)
    return found[1] if found else None


# The Dockerfile, in stages.
def stages() -> list[dict[str, Any]]:
    return kube.dockerfile_stages(DOCKERFILE)


def dockerfile_args() -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults."""
    args = {}
    for line in DOCKERFILE.read_text().split("\nFROM", 1)[0].splitlines():
        if m := re.fullmatch(r"ARG\s+(\w+)=(\S+)", line.strip()):
            args[m.group(1)] = m.group(2)
    return args


def expand(value: str) -> str:
    args = dockerfile_args()
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], value)


def final_chain() -> list[dict[str, Any]]:
    """The final stage and the stages it is built FROM, down to an external image."""
    by_name = {s["name"]: s for s in stages() if s["name"]}
    chain = [stages()[-1]]
    while chain[-1]["base"] in by_name:
        chain.append(by_name[chain[-1]["base"]])
    return chain


def env(stage_chain: list[dict[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for stage in reversed(stage_chain):  # the base first, later ENVs win
        for line in kube.instructions(stage, "ENV"):
            for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', line):
                found[key] = value.strip('"')
    return found


def test_every_document_parses_and_names_itself():
    docs = manifests()
    assert set(docs) == {"ConfigMap", "PersistentVolumeClaim", "SparkApplication", "Service"}
    for kind, doc in docs.items():
        assert doc["apiVersion"] and doc["metadata"]["name"], kind
    assert docs["SparkApplication"]["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert docs["SparkApplication"]["spec"]["type"] == "Python"
    assert docs["SparkApplication"]["spec"]["mode"] == "cluster"
    assert docs["SparkApplication"]["spec"]["pythonVersion"] == "3"
    assert isinstance(yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"]), dict)


def test_configmap_config_is_valid_with_its_secret_in_a_file(tmp_path):
    conf, raw = parsed_config(tmp_path)
    assert conf.cluster.librdkafka()["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(conf)
    for cluster in (raw["cluster"], raw.get("destination_cluster") or {}):
        for key, value in cluster.get("config", {}).items():
            if key in SECRET_PROPERTIES:
                assert REFERENCE.fullmatch(str(value)), f"{key} is inline: use ${{file:...}} or ${{env:...}}"
    # Every secret file is on a Secret volume of the driver.
    driver = app_spec()["driver"]
    for m in REFERENCE.finditer(manifests()["ConfigMap"]["data"]["config.yaml"]):
        if m.group(1) == "file":
            volume = mounted_at(driver, m.group(2).split(":")[0])
            assert volume is not None and "secret" in volume, f"{m.group(2)} is on no Secret volume of the driver"
    assert "master" not in raw["spark"], "spark-submit's master overrides the config's: leave it out, as commented"


def test_checkpoints_are_on_the_claim_mounted_by_the_driver(tmp_path):
    conf, _ = parsed_config(tmp_path)
    location = conf.spark.checkpoint_location
    assert location, "spark.checkpoint_location must be set: the default is under the pod's own disk"
    volume = mounted_at(app_spec()["driver"], location)
    claim = manifests()["PersistentVolumeClaim"]
    assert volume is not None and "persistentVolumeClaim" in volume, f"{location} is not on a PersistentVolumeClaim"
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    # ReadWriteOnce: only the driver writes checkpoints, and only it mounts the claim.
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert all("persistentVolumeClaim" not in v for v in mounts(app_spec()["executor"]).values())


def test_versions_equal_the_pyspark_pin():
    pin = pinned_spark()
    spec = app_spec()
    assert spec["sparkVersion"] == pin
    image, tag = spec["image"].rsplit(":", 1)
    assert tag.endswith(f"-spark{pin}"), f"image tag {tag} does not name Spark {pin}"
    assert spec["deps"]["packages"] == [session.connector_coordinates(pin)]
    assert spec["sparkConf"].get("spark.jars.packages", session.connector_coordinates(pin)) == \
        session.connector_coordinates(pin)
    assert dockerfile_args()["SPARK_VERSION"] == pin
    official = expand(stages()[0]["base"])
    assert official == f"apache/spark:{pin}-scala{session.SCALA_VERSION}-java17-ubuntu", official
    # The image tag the README and the Dockerfile's comments build is the one the SparkApplication runs.
    assert f"-t {image}:{tag} " in DOCKERFILE.read_text()
    assert f"{image}:{tag}" in (SPARK_DIR / "README.md").read_text()
    assert session.connector_coordinates(pin) in (SPARK_DIR / "README.md").read_text()


def test_main_application_file_is_the_spark_entry_of_the_image_python():
    spec = app_spec()
    main = spec["mainApplicationFile"]
    m = re.fullmatch(r"local:///usr/local/lib/python(3\.\d+)/site-packages/transcoder/cli/spark_submit\.py", main)
    assert m, main
    python = expand(dockerfile_args()["PYTHON_IMAGE"])
    assert python.startswith(f"python:{m.group(1)}-"), f"{main} is not under the image's Python ({python})"
    minimum = re.search(r'requires-python\s*=\s*">=(3\.\d+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert tuple(map(int, m.group(1).split("."))) >= tuple(map(int, minimum.split(".")))
    assert spec["arguments"] == ["--config", CONFIG_FILE]


def test_the_entry_file_runs_the_spark_engine_with_the_application_arguments(monkeypatch):
    from transcoder import cli
    from transcoder.cli import spark_submit

    seen = []
    monkeypatch.setattr(cli, "main", lambda args: seen.append(args))
    spark_submit.main(app_spec()["arguments"])
    assert seen == [["run", "--engine", "spark", "--config", CONFIG_FILE]]


def test_config_is_mounted_where_the_driver_reads_it():
    driver = app_spec()["driver"]
    found = mount_of(driver, CONFIG_FILE)
    assert found is not None, f"{CONFIG_FILE} is on no volume of the driver"
    mount_path, volume = found
    assert volume.get("configMap", {}).get("name") == manifests()["ConfigMap"]["metadata"]["name"]
    assert str(PurePosixPath(CONFIG_FILE).relative_to(mount_path)) in manifests()["ConfigMap"]["data"]
    for pod in (driver, app_spec()["executor"]):
        assert all(m.get("readOnly") for m in pod["volumeMounts"] if "persistentVolumeClaim" not in mounts(pod)[
            m["mountPath"]]), "config and secrets are mounted read-only"


def test_driver_serves_the_metrics_port(tmp_path):
    conf, _ = parsed_config(tmp_path)
    port = conf.metrics.port
    driver = app_spec()["driver"]
    assert [p["containerPort"] for p in driver["ports"]] == [port]
    assert driver["annotations"]["prometheus.io/port"] == str(port)
    service = manifests()["Service"]["spec"]
    assert [(p["port"], p["targetPort"]) for p in service["ports"]] == [(port, port)]
    assert service["selector"].items() <= driver["labels"].items(), "the Service selects no driver"
    assert not service["selector"].items() <= app_spec()["executor"]["labels"].items(), "it selects executors"
    assert f"EXPOSE {port}" in DOCKERFILE.read_text()
    # SIGTERM drains for shutdown_timeout_s: the grace period must be longer.
    assert driver["terminationGracePeriodSeconds"] > conf.shutdown_timeout_s


def test_pods_run_as_the_image_user_and_restart_on_failure():
    spec = app_spec()
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["podSecurityContext"]["runAsUser"] == IMAGE_USER, role
        assert pod["podSecurityContext"]["runAsNonRoot"] is True, role
        assert pod["securityContext"]["allowPrivilegeEscalation"] is False, role
        assert pod["cores"] >= 1 and re.fullmatch(r"\d+[kmg]", pod["memory"]), role
    assert spec["executor"]["instances"] >= 1
    policy = spec["restartPolicy"]
    assert policy["type"] == "OnFailure"
    assert policy["onFailureRetries"] > 0 and policy["onFailureRetryInterval"] > 0


def test_dockerfile_installs_pinned_wheels_with_the_spark_extra():
    all_stages = stages()
    build = next(s for s in all_stages if s["name"] == "build")
    wheel = " ".join(kube.instructions(build, "RUN"))
    assert "-c constraints.txt" in wheel and "'.[spark]'" in wheel
    assert any("pip install" in r and "--no-index" in r and "'transcoder[spark]'" in r
               for s in final_chain() for r in kube.instructions(s, "RUN"))
    assert 'ENTRYPOINT ["/opt/entrypoint.sh"]' in DOCKERFILE.read_text()
    copies = [c for s in final_chain() for c in kube.instructions(s, "COPY")]
    assert any(c.startswith("--from=spark-dist ") and "/opt/entrypoint.sh" in c for c in copies)
    assert any(expand(s["base"]).startswith("apache/spark:") for s in all_stages if s["name"] == "spark-dist")


def test_final_stage_runs_as_10001_with_java_17_and_no_compiler():
    chain = final_chain()
    assert kube.instructions(chain[0], "USER") == [str(IMAGE_USER)]
    assert all(s["name"] != "build" for s in chain), "the final image is built on the build stage"
    runs = " ".join(r for s in chain for r in kube.instructions(s, "RUN"))
    assert "openjdk-17-jre-headless" in runs
    for compiler in COMPILERS:
        assert not re.search(rf"(?<![\w.-]){re.escape(compiler)}(?![\w.-])", runs), f"{compiler} in the final image"
    # The compilers really are in the build stage: the check above looks where they would be named.
    build = next(s for s in stages() if s["name"] == "build")
    assert "build-essential" in " ".join(kube.instructions(build, "RUN"))
    assert not expand(chain[-1]["base"]).startswith("apache/spark:"), "Python 3.10 there; transcoder needs 3.11"


def test_image_ivy_cache_is_transcoders(monkeypatch):
    """spark-submit's Ivy directory (SPARK_SUBMIT_OPTS) is where transcoder resolves and the build step
    puts the connector, so a driver pod needs no Maven Central."""
    variables = env(final_chain())
    monkeypatch.setenv("XDG_CACHE_HOME", variables["XDG_CACHE_HOME"])
    assert f"-Divy.home={session.ivy_dir()}" in variables["SPARK_SUBMIT_OPTS"].split()
    assert variables["SPARK_HOME"] == "/opt/spark"
    connector = next(s for s in stages() if s["name"] == "connector")
    assert kube.instructions(connector, "USER") == [str(IMAGE_USER)]
    assert any("resolve_connector.py" in r for r in kube.instructions(connector, "RUN"))
    assert any(c.startswith("--from=connector ") and variables["XDG_CACHE_HOME"] in c
               for c in kube.instructions(final_chain()[0], "COPY"))


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule, simplified: the last pattern matching the path or a parent decides."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
            ignored = not negated
    return ignored


def _ignore_patterns(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_build_context_holds_what_the_dockerfile_copies():
    patterns = _ignore_patterns(SPARK_DIR / "Dockerfile.dockerignore")
    sources = []
    for stage in stages():
        for copy_line in kube.instructions(stage, "COPY"):
            words = [w for w in copy_line.split() if not w.startswith("--")]
            if "--from=" not in copy_line:
                sources += words[:-1]
    assert "deploy/spark/resolve_connector.py" in sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _ignored(source, patterns), f"{source} is left out of the build context"
    # Whatever the service image's context leaves out stays out (.venv, .git, tests, ...).
    for pattern in _ignore_patterns(ROOT / ".dockerignore"):
        assert _ignored(pattern.replace("**/", "x/"), patterns), pattern
    assert _ignored("deploy/spark/README.md", patterns)


def _resolve_connector_module():
    spec = importlib.util.spec_from_file_location("resolve_connector", SPARK_DIR / "resolve_connector.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resolve_connector_refuses_an_ivy_directory_that_is_not_transcoders(monkeypatch, tmp_path):
    module = _resolve_connector_module()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Divy.home=/somewhere/else")
    with pytest.raises(SystemExit, match=re.escape(f"-Divy.home={tmp_path}/transcoder/ivy")):
        module.resolve()
    assert module.KAFKA_PROVIDER == "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def test_spark_engine_accepts_the_example_cluster_config(tmp_path):
    from transcoder.spark import source

    conf, _ = parsed_config(tmp_path)
    options = source.read_options(conf, ["nginx-logs"])
    assert options["kafka.bootstrap.servers"] == conf.cluster.bootstrap_servers
    assert "required username=" in options["kafka.sasl.jaas.config"]


# kubeconform: the manifests against spark-operator's CRD and Kubernetes' own OpenAPI, strictly (tests/support/kube).
@pytest.fixture(scope="module")
def kubeconform_schemas(tmp_path_factory) -> Path:
    kube.kubeconform()
    out = tmp_path_factory.mktemp("schemas")
    kube.write_crd_schemas(out, yaml.safe_load((kube.module_dir(SPARK_OPERATOR_MODULE, out) /
                                                SPARK_OPERATOR_CRD).read_text()))
    kube.write_kubernetes_schemas(out, ["v1"])
    return out


def test_kubeconform_validates_the_manifests(kubeconform_schemas):
    result = kube.validate(kubeconform_schemas, MANIFEST)
    assert result["returncode"] == 0, json.dumps(result["resources"], indent=2)
    assert result["summary"] == {"valid": 4, "invalid": 0, "errors": 0, "skipped": 0}, result


@pytest.mark.parametrize(("kind", "path", "value"), [
    ("SparkApplication", ["spec", "mainApplicationFle"], "local:///x.py"),  # a misspelt field
    ("SparkApplication", ["spec", "restartPolicy", "type"], "OnFail"),  # not in the enum
    ("Service", ["spec", "ports", 0, "port"], "metrics"),  # a name where a number belongs
    ("PersistentVolumeClaim", ["spec", "accesModes"], ["ReadWriteOnce"]),
])
def test_kubeconform_rejects_a_broken_manifest(kubeconform_schemas, tmp_path, kind, path, value):
    docs = copy.deepcopy([d for d in yaml.safe_load_all(MANIFEST.read_text()) if d])
    result = kube.validate_broken(kubeconform_schemas, docs, kind, path, value, tmp_path)
    assert result["returncode"] != 0
    assert result["summary"]["invalid"] == 1 and result["summary"]["valid"] == 3, result


def test_executors_get_the_image_python_and_the_secret():
    spec = app_spec()
    assert spec["sparkConf"]["spark.pyspark.python"] == "python3"
    assert env(final_chain())["PYSPARK_PYTHON"] == "python3"
    secret_dirs = {p for p, v in mounts(spec["driver"]).items() if "secret" in v}
    assert secret_dirs and secret_dirs <= {p for p, v in mounts(spec["executor"]).items() if "secret" in v}
    assert os.path.isabs(next(iter(secret_dirs)))
