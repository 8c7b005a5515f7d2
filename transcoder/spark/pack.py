"""`transcoder spark pack`: the environment executors need, in one archive for `spark.archives`.

The archive holds `site-packages/` with transcoder (the package this driver runs, editable installs included), its
compiled module and every distribution they need at the versions installed here. pyspark and py4j are left out:
Spark gives each executor its own. With

    spark.archives: <archive>#transcoder-env
    spark.executorEnv.PYTHONPATH: transcoder-env/site-packages
    spark.pyspark.python: python3.11

each executor unpacks it into its working directory, where its Python workers start, and Spark puts the
executors' PYTHONPATH after its own pyspark on the workers' path. (A launcher script in the archive would need its
executable bit, which Spark's unpacking does not keep.) The workers need the driver's Python version (`python3.11`
here) on their PATH, as with venv-pack; the compiled wheels must suit their platform (a driver and workers of one
image do).
"""

from __future__ import annotations

import io
import json
import platform
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module, metadata
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from transcoder.errors import ConfigError

#: distributions Spark provides to every executor itself
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
#: the name the archive is unpacked under (the `#` part of spark.archives)
ALIAS = "transcoder-env"
#: archive formats Spark unpacks, by suffix, with tarfile's mode
FORMATS: dict[str, Literal["w:gz", "w"]] = {".tar.gz": "w:gz", ".tgz": "w:gz", ".tar": "w"}


@dataclass(frozen=True)
class Packed:
    path: Path
    distributions: tuple[str, ...]  # "name version", sorted
    files: int
    python: str

    def settings(self) -> dict[str, str]:
        return {"spark.archives": f"{self.path}#{ALIAS}", "spark.executorEnv.PYTHONPATH": f"{ALIAS}/site-packages",
                "spark.pyspark.python": self.python}


def closure(root: str = "transcoder", extras: tuple[str, ...] = ("spark",)) -> list[metadata.Distribution]:
    """The installed distributions `root` with `extras` needs, itself first (requirement markers evaluated for this
    interpreter, extras followed); a required distribution that is not installed is a ConfigError."""
    seen: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if (key, wanted) in done:
            continue
        done.add((key, wanted))
        try:
            dist = seen.get(key) or metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(f"cannot pack: {name} is required but not installed in {platform.python_version()}'s "
                              "environment") from None
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (wanted or {""})):
                todo.append((req.name, frozenset(req.extras)))
    root_key = canonicalize_name(root)
    return [seen[root_key], *sorted((d for k, d in seen.items() if k != root_key),
                                    key=lambda d: canonicalize_name(d.metadata["Name"]))]


def _editable(dist: metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    return bool(text and json.loads(text).get("dir_info", {}).get("editable"))


def _package_files(root: str) -> Iterator[tuple[Path, str]]:
    """The root package's files as this interpreter imports them (an editable install's source tree included),
    without caches."""
    top = Path(import_module(root.replace("-", "_")).__file__ or "").parent
    for file in sorted(top.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts:
            yield file, str(Path(top.name) / file.relative_to(top))


def _installed_files(dist: metadata.Distribution) -> Iterator[tuple[Path, str]]:
    """(file on disk, path under site-packages) of an installed distribution: its recorded files inside
    site-packages, without caches."""
    if _editable(dist):
        raise ConfigError(f"cannot pack {dist.metadata['Name']}: it is installed editable (pip install -e); "
                          "install it normally")
    for f in dist.files or []:
        rel = str(f)
        if rel.startswith("..") or "__pycache__" in Path(rel).parts:
            continue  # scripts and data outside site-packages; byte-code is written again on the executors
        yield Path(str(dist.locate_file(f))), rel


def _metadata_file(dist: metadata.Distribution) -> tuple[str, bytes]:
    """The root's METADATA (for its version on the executors), whatever form it is installed in (a wheel's
    .dist-info, an editable install's .egg-info)."""
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    # the file as written, not the parsed message printed again: email's header folding refuses a long description
    # with lines such as `cluster:` (a README's YAML) once importlib.metadata has made it a header
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if text is None:
        raise ConfigError(f"{dist.metadata['Name']} {dist.version} has no METADATA or PKG-INFO to pack")
    return f"{name}-{dist.version}.dist-info/METADATA", text.encode()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def pack(output: Path, *, python: str | None = None, root: str = "transcoder",
         extras: tuple[str, ...] = ("spark",)) -> Packed:
    """Write the archive (format by suffix: .tar.gz, .tgz or .tar) and say what it holds."""
    mode = next((m for suffix, m in FORMATS.items() if output.name.endswith(suffix)), None)
    if mode is None:
        raise ConfigError(f"cannot pack into {output}: the archive's name must end in {', '.join(FORMATS)}")
    python = python or "python{}.{}".format(*platform.python_version_tuple()[:2])
    dists = [d for d in closure(root, extras) if canonicalize_name(d.metadata["Name"]) not in PROVIDED_BY_SPARK]
    count = 0
    tmp = output.with_name(output.name + ".partial")
    try:
        with tarfile.open(tmp, mode, compresslevel=6) if mode != "w" else tarfile.open(tmp, mode) as tar:
            root_dist, others = dists[0], dists[1:]
            name, text = _metadata_file(root_dist)
            _add_bytes(tar, f"site-packages/{name}", text, 0o644)
            count += 1
            members = [_package_files(root), *(_installed_files(d) for d in others)]
            for file, rel in (m for files in members for m in files):
                if file.is_file():
                    tar.add(file, arcname=f"site-packages/{rel}", recursive=False)
                    count += 1
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {output}: {exc.strerror or exc}") from None
    names = tuple(sorted(f"{d.metadata['Name']} {d.version}" for d in dists))
    return Packed(path=output.resolve(), distributions=names, files=count, python=python)
