"""`transcoder spark pack`: which distributions, which files, and a launcher that puts them first."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from importlib import metadata

import pytest

from transcoder.errors import ConfigError
from transcoder.spark.pack import closure, pack


def test_the_closure_follows_requirements_and_extras():
    names = [d.metadata["Name"].lower().replace("_", "-") for d in closure("transcoder", ("spark",))]
    assert names[0] == "transcoder"
    # runtime requirements, the spark extra and pyspark's own [sql] extra (pyarrow, pandas), markers evaluated
    for needed in ("confluent-kafka", "transcoder-native", "kafka-python", "zstandard", "pyspark", "pyarrow", "pandas"):
        assert needed in names, needed
    assert "pytest" not in names  # the dev extra is not asked for
    assert "pyarrow" not in [d.metadata["Name"].lower() for d in closure("transcoder", ())]


def test_a_pack_holds_the_distributions_files_and_its_settings_put_them_on_the_path(tmp_path):
    out = tmp_path / "env.tar"
    packed = pack(out, python=sys.executable, root="structlog", extras=())
    assert packed.distributions == (f"structlog {metadata.version('structlog')}",)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        assert "site-packages/structlog/__init__.py" in names
        assert not [n for n in names if "__pycache__" in n or not n.startswith("site-packages/")]
        assert any(n.startswith("site-packages/structlog-") and n.endswith(".dist-info/METADATA") for n in names)
        assert packed.files == len(names)
        tar.extractall(tmp_path / "x" / "transcoder-env", filter="data")
    settings = packed.settings()
    assert settings == {"spark.archives": f"{out.resolve()}#transcoder-env",
                        "spark.executorEnv.PYTHONPATH": "transcoder-env/site-packages",
                        "spark.pyspark.python": sys.executable}
    # as an executor runs it: in the directory the archive is unpacked in, the relative path first
    imported = subprocess.run([settings["spark.pyspark.python"], "-c", "import structlog; print(structlog.__file__)"],
                              cwd=tmp_path / "x", env={"PYTHONPATH": settings["spark.executorEnv.PYTHONPATH"]},
                              capture_output=True, text=True, check=True).stdout.strip()
    assert imported == str(tmp_path / "x" / "transcoder-env" / "site-packages" / "structlog" / "__init__.py")


def test_transcoder_is_packed_from_the_package_it_imports_with_its_version():
    from transcoder.spark.pack import _metadata_file, _package_files

    rels = [rel for _, rel in _package_files("transcoder")]  # here an editable install: the source tree
    assert "transcoder/spark/pack.py" in rels and "transcoder/__init__.py" in rels
    assert not [r for r in rels if "__pycache__" in r or not r.startswith("transcoder/")]
    name, text = _metadata_file(metadata.distribution("transcoder"))
    assert name == "transcoder-0.1.0.dist-info/METADATA"
    assert "Name: transcoder" in text.decode() and "Version: 0.1.0" in text.decode()


def test_the_metadata_is_packed_as_written_whatever_its_description_holds(tmp_path):
    """A README with YAML in it (`cluster:` at a line's start) as the description: importlib.metadata turns the body
    into a Description header, which email's generator refused to print (HeaderParseError), failing every pack."""
    from transcoder.spark.pack import _metadata_file

    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    written = ("Metadata-Version: 2.4\nName: demo\nVersion: 1.0\nDescription-Content-Type: text/markdown\n\n"
               "# demo\n\n```yaml\ncluster:\n  bootstrap_servers: k:9092\n```\n")
    (info / "METADATA").write_text(written)
    assert _metadata_file(metadata.PathDistribution(info)) == ("demo-1.0.dist-info/METADATA", written.encode())


def test_an_archive_spark_cannot_unpack_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"env\.zip: the archive's name must end in \.tar\.gz, \.tgz, \.tar"):
        pack(tmp_path / "env.zip")
