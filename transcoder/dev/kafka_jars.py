"""The local broker's jars: Apache Kafka (or any Maven artifacts) resolved from Maven Central into a cache
outside git. Once a version is cached, nothing here needs the network or Maven.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from transcoder.errors import LocalKafkaError

#: Newest Kafka 4.x whose whole dependency graph is on Maven Central (4.4.0 was published
#: without its kafka-tools-api artifact and does not resolve yet).
DEFAULT_VERSION = "4.3.1"
#: slf4j-api line the broker is built against; the binding must match it or logging is lost.
SLF4J_VERSION = "1.7.36"

#: What the broker needs on its classpath: Kafka, its tools (DumpLogSegments), an slf4j binding.
BROKER_ARTIFACTS = ("org.apache.kafka:kafka_2.13:{kafka}", "org.apache.kafka:kafka-tools:{kafka}",
                    "org.slf4j:slf4j-simple:{slf4j}")

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.transcoder.local</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"

_COMPLETE_MARKER = ".complete"


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "transcoder"


def fetch(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> Path:
    """Return the directory holding the broker's jars, resolving them with Maven on first use."""
    libs = (cache_dir or default_cache_dir()) / "kafka" / version / "libs"
    return resolve_jars(libs, [a.format(kafka=version, slf4j=SLF4J_VERSION) for a in BROKER_ARTIFACTS],
                        what=f"Kafka {version}")


def resolve_jars(libs: Path, artifacts: list[str], *, what: str) -> Path:
    """Resolve `group:artifact:version` coordinates and their runtime dependencies into `libs` with Maven.

    A no-op once `libs` is complete (later runs need no network and no Maven).
    """
    if (libs / _COMPLETE_MARKER).exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError(f"Maven (mvn) is not on PATH: it is needed once to fetch {what}")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=libs.parent, prefix=".fetch-") as tmp:
        pom = Path(tmp) / "pom.xml"
        deps = "\n".join(_DEPENDENCY.format(*a.split(":")) for a in artifacts)
        pom.write_text(_POM.format(name=libs.parent.name or "libs", dependencies=deps))
        staged = Path(tmp) / "libs"
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staged}", "-DincludeScope=runtime"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "[ERROR]" in ln]
            why = lines[0].replace("[ERROR]", "").strip() if lines else f"mvn exited {proc.returncode}"
            raise LocalKafkaError(f"could not fetch {what} from Maven Central: {why}")
        (staged / _COMPLETE_MARKER).write_text("\n".join(artifacts))
        if libs.exists():  # a half-written cache from an interrupted fetch
            shutil.rmtree(libs)
        staged.rename(libs)
    return libs

