"""Install without a toolchain: `make dist`'s wheels (native/'s, as `make venv` built it, and transcoder's) go into a
clean venv (no system site packages, no cargo or rustc on the PATH, binary wheels only: nothing is compiled), with
their dependencies from PyPI as constraints.txt pins them (pip's cache, filled by `make venv`, makes that quick), and
that venv's `transcoder` answers: `--version`, and `validate --offline` on the tour's config (no broker needed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

from tests.support import doc_blocks
from transcoder import __version__

ROOT = Path(__file__).resolve().parents[2]
#: environment that would make the clean venv see other packages, pip other wheels, or transcoder another config
DROPPED = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CONSTRAINT",
           "PIP_REQUIREMENT", "PIP_USER", "PIP_TARGET", "PIP_PREFIX", "CARGO_HOME", "RUSTUP_HOME",
           "TRANSCODER_CONFIG", "TRANSCODER_BOOTSTRAP_SERVERS"}


def _without_toolchain() -> dict[str, str]:
    """This environment with no Rust toolchain on the PATH."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("TRANSCODER__")}
    kept = [d for d in env.get("PATH", "").split(os.pathsep)
            if d and not any(os.access(Path(d, tool), os.X_OK) for tool in ("cargo", "rustc"))]
    env["PATH"] = os.pathsep.join(kept)
    assert shutil.which("cargo", path=env["PATH"]) is None and shutil.which("rustc", path=env["PATH"]) is None
    return env


def _tour_config() -> str:
    page = doc_blocks.read(ROOT / "docs" / "tour.md")
    return next(b.body for b in page.blocks if b.file_name == "tour.yaml")


def test_the_built_wheels_install_and_run_without_a_toolchain(tmp_path: Path) -> None:
    # `make dist` with this test's venv (in CI: make's own): native/'s wheel is built only when its sources changed
    made = subprocess.run(["make", "-s", "dist", f"VENV={sys.prefix}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1200, check=False)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    wheels = sorted((ROOT / "dist").glob("*.whl"))
    names = [w.name for w in wheels]
    assert len(wheels) == 2 and names[0].startswith(f"transcoder-{__version__}-py3-none-any") \
        and names[1].startswith("transcoder_native-") and "-cp311-abi3-manylinux_" in names[1], names

    env = _without_toolchain()
    venv.EnvBuilder(with_pip=True, clear=True, system_site_packages=False).create(tmp_path / "venv")
    bin_dir = tmp_path / "venv" / "bin"
    began = time.monotonic()
    installed = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                "--only-binary=:all:", "-c", str(ROOT / "constraints.txt"), *map(str, wheels)],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    took = time.monotonic() - began
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    print(f"pip install of the wheels and their dependencies into a clean venv: {took:.1f} s")

    def transcoder(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "transcoder"), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    version = transcoder("--version")
    assert version.returncode == 0, version.stderr
    lines = version.stdout.splitlines()
    assert lines[:2] == [f"transcoder {__version__}", f"transcoder-native {names[1].split('-')[1]}"], lines
    assert [line.split()[0] for line in lines[2:]] == ["confluent-kafka", "librdkafka", "kafka-python"], lines
    where = subprocess.run([str(bin_dir / "python"), "-c", "import transcoder, transcoder_native; "
                            "print(transcoder.__file__); print(transcoder_native.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where  # the wheels', not the repository's

    (tmp_path / "tour.yaml").write_text(_tour_config())
    checked = transcoder("validate", "--offline", "--config", "tour.yaml")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "web.access" in checked.stdout, checked.stdout  # the plan names the tour's source
