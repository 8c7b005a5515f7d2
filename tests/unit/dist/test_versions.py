"""`transcoder --version`: transcoder's, the native module's and the Kafka clients' versions, one per line; and the
versions written in one place each (transcoder.__version__, native/Cargo.toml) agree with the pins."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import confluent_kafka
from click.testing import CliRunner

import transcoder
from transcoder.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_version_prints_one_line_per_component_and_exits_0() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    expected = [f"transcoder {transcoder.__version__}", f"transcoder-native {version('transcoder-native')}",
                f"confluent-kafka {version('confluent-kafka')}", f"librdkafka {confluent_kafka.libversion()[0]}",
                f"kafka-python {version('kafka-python')}"]
    assert lines[:5] == expected
    assert lines[5:] == [f"pyspark {version('pyspark')}"]  # the test venv has the [spark] extra
    assert all(re.fullmatch(r"[a-z-]+ \d+\.\d+\.\d+\S*", line) for line in lines), lines


def test_the_native_pin_is_the_crate_version_and_transcoder_s_is_its_package_s() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    crate = tomllib.loads((ROOT / "native" / "Cargo.toml").read_text())["package"]["version"]
    assert f"transcoder-native=={crate}" in [d.replace(" ", "") for d in pyproject["project"]["dependencies"]]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "transcoder.__version__"}
    assert "version" not in tomllib.loads((ROOT / "native" / "pyproject.toml").read_text())["project"]


def test_the_changelog_names_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog
    assert re.search(rf"^## \[{re.escape(transcoder.__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M)


def test_the_version_shown_to_operators_is_transcoder_s() -> None:
    """The README's version line, the chart's appVersion and default image tag, and the manifests' image name the
    version transcoder.__version__ says: a release changes them together."""
    import yaml

    v = transcoder.__version__
    assert f"transcoder {v} ([CHANGELOG](CHANGELOG.md)" in (ROOT / "README.md").read_text()
    chart = yaml.safe_load((ROOT / "helm/transcoder/Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "helm/transcoder/values.yaml").read_text())
    assert (chart["appVersion"], values["image"]["tag"]) == (v, v)
    assert f"image: transcoder:{v}\n" in (ROOT / "deploy/k8s/transcoder.yaml").read_text()
