"""The Kubernetes package as CI checks it: helm renders, kubeconform validates strictly against the OpenAPI of one
named Kubernetes release and any CRDs (every schema from a Go module: the Go module proxy, no GitHub), and the
images' Dockerfiles read as stages of instructions."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.tools import in_ci, require_tool

#: The Kubernetes release manifests are validated against: its own OpenAPI v3 documents (api/openapi-spec/v3).
KUBERNETES_VERSION = "1.31.3"
KUBERNETES_MODULE = f"k8s.io/kubernetes@v{KUBERNETES_VERSION}"
KUBERNETES_OPENAPI = "api/openapi-spec/v3"

HELM_INSTALL = ("build it with `go install helm.sh/helm/v3/cmd/helm@v3.16.4` (as .ci/run does); "
                "it is looked for in PATH and ~/go/bin")
KUBECONFORM_INSTALL = ("build it with `go install github.com/yannh/kubeconform/cmd/kubeconform@v0.6.7` (as .ci/run "
                       "does); it is looked for in PATH and ~/go/bin")
GO_INSTALL = "install Go (it fetches the schemas' modules through the Go module proxy)"


def helm() -> str:
    return require_tool("helm", HELM_INSTALL, alternatives=[Path.home() / "go/bin/helm"])


def kubeconform() -> str:
    return require_tool("kubeconform", KUBECONFORM_INSTALL, alternatives=[Path.home() / "go/bin/kubeconform"])


def _helm(command: list[str], values: Sequence[Path], sets: Sequence[str]) -> subprocess.CompletedProcess[str]:
    args = [helm(), *command]
    for path in values:
        args += ["--values", str(path)]
    for option in sets:
        args += ["--set", option]
    return subprocess.run(args, capture_output=True, text=True, check=False)


def render(chart: Path, *, values: Sequence[Path] = (), sets: Sequence[str] = (), release: str = "t",
           check: bool = True) -> subprocess.CompletedProcess[str]:
    """`helm template` of the chart with these values files and --set options; `check`: it must succeed."""
    done = _helm(["template", release, str(chart)], values, sets)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def lint(chart: Path, *, values: Sequence[Path] = (), sets: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`helm lint` (values.schema.json included) of the chart with these values files and --set options."""
    return _helm(["lint", str(chart)], values, sets)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def module_dir(module: str, cwd: Path) -> Path:
    """Where `go mod download` put the module (fetched once into Go's module cache)."""
    go = require_tool("go", GO_INSTALL)
    done = subprocess.run([go, "mod", "download", "-json", module], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        reason = f"go mod download {module} failed (the Go module proxy): {done.stdout}{done.stderr}"
        if in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return Path(json.loads(done.stdout)["Dir"])


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` on every object that lists its properties and does not
    keep unknown fields (a misspelt field is an error, as kubectl's field validation makes it), and each
    enum without repeated items (Kubernetes' OpenAPI repeats some)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("properties", "patternProperties", "definitions") else strict(v))
           for k, v in schema.items()}
    for key in ("properties", "patternProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = {name: strict(s) for name, s in schema[key].items()}
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if isinstance(schema.get("enum"), list):  # kubeconform compiles draft 4: enum items must be unique
        out["enum"] = [v for i, v in enumerate(schema["enum"]) if v not in schema["enum"][:i]]
    return out


def _file_name(kind: str, api_version: str) -> str:
    """kubeconform's `{{ .ResourceKind }}{{ .KindSuffix }}.json`: deployment-apps-v1, configmap-v1, ..."""
    group, _, version = api_version.rpartition("/")
    return f"{kind.lower()}{'-' + group.split('.')[0].lower() if group else ''}-{version}.json"


def write_kubernetes_schemas(out: Path, api_versions: Iterable[str]) -> None:
    """One schema file per kind of these API versions ("v1", "apps/v1", "policy/v1", ...) of KUBERNETES_VERSION."""
    spec = module_dir(KUBERNETES_MODULE, out) / KUBERNETES_OPENAPI
    for api_version in api_versions:
        group, _, version = api_version.rpartition("/")
        name = f"apis__{group}__{version}_openapi.json" if group else f"api__{version}_openapi.json"
        schemas = json.loads((spec / name).read_text())["components"]["schemas"]
        components = {"schemas": strict(schemas)}
        for ref, schema in schemas.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                if (gvk["group"], gvk["version"]) == (group, version):
                    document = {"$ref": f"#/components/schemas/{ref}", "components": components}
                    (out / _file_name(gvk["kind"], api_version)).write_text(json.dumps(document))


def write_crd_schemas(out: Path, crd: dict[str, Any]) -> None:
    """One schema file per served version of a CustomResourceDefinition."""
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    for version in crd["spec"]["versions"]:
        schema = strict(version["schema"]["openAPIV3Schema"])
        (out / _file_name(kind, f"{group}/{version['name']}")).write_text(json.dumps(schema))


def validate(schemas: Path, manifest: Path) -> dict[str, Any]:
    """kubeconform's JSON report of every document of `manifest` (strict: unknown and duplicate keys fail),
    with "returncode"; a kind without a schema in `schemas` is an error, not a skip."""
    done = subprocess.run([kubeconform(), "-strict", "-summary", "-output", "json", "-schema-location",
                           str(schemas / "{{ .ResourceKind }}{{ .KindSuffix }}.json"), str(manifest)],
                          capture_output=True, text=True, check=False)
    result = json.loads(done.stdout)
    result["returncode"] = done.returncode
    return result


def dockerfile_stages(path: Path) -> list[dict[str, Any]]:
    """Each FROM with its instructions: {"base", "name", "lines"}; continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", path.read_text())
    result: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.fullmatch(r"FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line, flags=re.IGNORECASE):
            result.append({"base": m.group(1), "name": m.group(2), "lines": []})
        elif result:
            result[-1]["lines"].append(line)
    return result


def instructions(stage: dict[str, Any], keyword: str) -> list[str]:
    """The arguments of each `keyword` instruction (RUN, COPY, ...) of a stage, in order."""
    return [line[len(keyword):].strip() for line in stage["lines"] if line.upper().startswith(keyword + " ")]


def validate_broken(schemas: Path, docs: list[dict[str, Any]], kind: str, path: list[Any], value: Any,
                    tmp_path: Path) -> dict[str, Any]:
    """kubeconform's report of `docs` with one value changed: the first `kind` document's `path` set to `value`."""
    node: Any = next(d for d in docs if d["kind"] == kind)
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump_all(docs))
    return validate(schemas, broken)
