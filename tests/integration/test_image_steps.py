"""The Dockerfile's install steps, run outside Docker: its build stage's pip commands make wheels from what it
COPYs, its runtime stage's pip commands install them into a clean venv, and that venv's `transcoder` copies a topic.

The pip commands are read from the Dockerfile's RUN lines, so this follows the Dockerfile as it changes. Building
the wheels reaches PyPI (pip's cache is off, as in the image).
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import venv
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from tests.support import kube
from tests.support.configs import raw_config

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
PARTITIONS = 3
RECORDS = 600


class Image:
    """A stage's file system under `root` on this machine: a path in the image is root / path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workdir = PurePosixPath("/")

    def host(self, path: str) -> Path:
        return self.root / PurePosixPath(self.workdir, path).relative_to("/")

    def copy(self, arguments: str) -> None:
        """COPY src... dest from the build context (the repository), .dockerignore's patterns left out."""
        *sources, dest = shlex.split(arguments)
        assert not any(s.startswith("--") for s in sources), f"COPY {arguments}: options are not followed here"
        # Only the `**/name` patterns reach inside a copied directory; the others name top-level paths not copied.
        ignore = shutil.ignore_patterns(*(p.removeprefix("**/") for p in _dockerignore() if p.startswith("**/")))
        for source in sources:
            target = self.host(dest) / Path(source).name if dest.endswith("/") else self.host(dest)
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target, ignore=ignore)
            else:
                shutil.copy2(ROOT / source, target)

    def pip(self, python: Path, command: str) -> subprocess.CompletedProcess[str]:
        """`pip ...` of a RUN line with `python -m pip`, in the WORKDIR, paths in the image mapped under root."""
        words = shlex.split(command)
        assert words[0] == "pip", command
        args: list[str] = []
        for word in words[1:]:
            if word.startswith("/"):
                matches = sorted(glob.glob(str(self.host(word))))
                assert matches or not glob.has_magic(word), f"{word} matches nothing"
                args += matches or [str(self.host(word))]
            else:
                args.append(word)
        cwd = self.host(".")
        cwd.mkdir(parents=True, exist_ok=True)
        return subprocess.run([str(python), "-m", "pip", *args], cwd=cwd, env=_clean_env(), capture_output=True,
                              text=True, timeout=900, check=False)


def _dockerignore() -> list[str]:
    lines = ((ROOT / ".dockerignore").read_text().splitlines())
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _clean_env() -> dict[str, str]:
    """This environment without what would make a venv's python see other packages or pip other wheels."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CONSTRAINT",
            "PIP_REQUIREMENT", "PIP_USER", "PIP_TARGET", "PIP_PREFIX"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # cargo's build directory of the repository's own native/ build (make venv): the crates' compiled C and Rust are
    # reused (about 80 CPU s less); the extension itself is still built from the sources the stage COPYs
    if (ROOT / "native/target").is_dir():
        env["CARGO_TARGET_DIR"] = str(ROOT / "native/target")
    return env


def _new_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin/python"


def _run_stage(stage: dict[str, Any], image: Image, python: Path) -> list[str]:
    """WORKDIR, COPY (from the context) and the pip commands of the stage's RUN lines; the pip commands run."""
    ran = []
    for line in stage["lines"]:
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "WORKDIR":
            image.workdir = PurePosixPath(image.workdir, arguments.strip())
        elif keyword.upper() == "COPY" and "--from=" not in arguments:
            image.copy(arguments)
        elif keyword.upper() == "RUN":
            for command in (c.strip() for c in arguments.split("&&")):
                if command.startswith("pip "):
                    done = image.pip(python, command)
                    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                    ran.append(command)
    return ran


def test_image_install_steps_give_a_transcoder_that_copies(kafka, topic_factory, producer_factory, read_topic,
                                                           tmp_path):
    stages = kube.dockerfile_stages(DOCKERFILE)
    build, runtime = next(s for s in stages if s["name"] == "build"), stages[-1]
    copies_from_build = [c for c in kube.instructions(runtime, "COPY") if c.startswith("--from=build ")]
    assert [c.split()[1:] for c in copies_from_build] == [["/wheels", "/wheels"]], copies_from_build

    # The build stage, then its /wheels copied into the runtime stage's file system, then the runtime stage.
    built = Image(tmp_path / "build")
    ran = _run_stage(build, built, _new_venv(tmp_path / "build-python"))
    assert any(c.startswith("pip wheel ") for c in ran), f"the build stage runs no pip wheel: {build['lines']}"
    wheels = sorted(p.name for p in built.host("/wheels").glob("*.whl"))
    assert any(w.startswith("transcoder-") for w in wheels), wheels
    runtime_image = Image(tmp_path / "runtime")
    shutil.copytree(built.host("/wheels"), runtime_image.host("/wheels"))
    runtime_python = _new_venv(tmp_path / "runtime-python")
    ran = _run_stage(runtime, runtime_image, runtime_python)
    assert any(c.startswith("pip install ") and "--no-index" in c for c in ran), runtime["lines"]

    # The installed package answers, not the repository's.
    bin_dir = runtime_python.parent
    where = subprocess.run([str(runtime_python), "-c",
                            "import transcoder, confluent_kafka; print(transcoder.__file__)"],
                           cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "runtime-python"), where
    helped = subprocess.run([str(bin_dir / "transcoder"), "--help"], cwd=tmp_path, env=_clean_env(),
                            capture_output=True, text=True, timeout=120, check=False)
    assert helped.returncode == 0, helped.stderr
    assert "run" in helped.stdout.split()

    # A short copy against the session's broker, with the image's entry point and a config file.
    source = topic_factory(partitions=PARTITIONS)
    producer = producer_factory(**{"linger.ms": 5})
    for i in range(RECORDS):
        key = None if i % 7 == 0 else f"k{i % 50}".encode()
        value = None if i % 11 == 0 else f'{{"n": {i}, "path": "/items/{i % 13}"}}'.encode() * (1 + i % 4)
        producer.produce(source, key=key, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    route = {"source": source, "destinations": [{"codec": "zstd", "level": 3}]}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(raw_config(kafka, [route])))
    copied = subprocess.run([str(bin_dir / "transcoder"), "run", "--config", str(config_path), "--until-caught-up"],
                            cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=300, check=False)
    assert copied.returncode == 0, copied.stderr[-3000:]

    def records(topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
        return [(m.partition(), m.key(), m.value()) for m in read_topic(topic)]

    expected = records(source)
    assert len(expected) == RECORDS
    got = records(f"{source}.zstd-3")
    assert len(got) == len(expected)
    for n, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"record {n}: {have!r} != {want!r}"
