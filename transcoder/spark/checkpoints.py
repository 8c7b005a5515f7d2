"""Checkpoints of the Spark engine: one directory per lane, and a mark of the config that wrote it.

A streaming query resumes from its checkpoint's offsets whatever its source now is; a checkpoint
written for other sources or destinations would skip or repeat records silently. Each lane's
directory therefore holds `transcoder-lane.json` (what the lane reads and writes), and a run whose
lane differs is refused before a query starts. Paths are Hadoop URIs (a local path, file:, hdfs:,
s3a:, ...): read and written through Spark's Hadoop FileSystem, as Spark reads the checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from transcoder.config import Config
from transcoder.errors import ConfigError
from transcoder.pipeline.routes import LaneSpec

MARK = "transcoder-lane.json"
#: The mark's format: its field `v`, 1 in the marks this version writes. A mark without it was written before the
#: version was recorded: version 1, read as it is; a higher version was written by a newer transcoder and is refused
#: (docs/upgrading.md). What else the checkpoint holds is Spark's, in Spark's versioned formats.
MARK_VERSION = 1
#: The version line of Spark's offset log (`offsets/<n>`) this module reads (Spark 3 and 4 write v1).
SPARK_OFFSET_LOG_VERSION = "v1"


def root(config: Config) -> str:
    """Where the lanes' checkpoints live: spark.checkpoint_location, else under the cache, per group id."""
    if config.spark.checkpoint_location:
        return config.spark.checkpoint_location.rstrip("/")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return str(base / "transcoder" / "spark-checkpoints" / config.group_id)


def lane_location(config: Config, lane: LaneSpec) -> str:
    return f"{root(config)}/{lane.name}"


def mark(lane: LaneSpec) -> dict[str, Any]:
    """What a lane's checkpoint is for: its sources and destination topics. Codecs, levels and batching
    may change between runs (a destination rolled over to another codec goes on where it stopped)."""
    return {
        "lane": lane.name,
        "group_id": lane.group_id,
        "sources": sorted(lane.sources),
        "destinations": sorted({t.topic_for(s) for t in lane.targets for s in t.sources}),
    }


def mismatch(location: str, found: dict[str, Any], expected: dict[str, Any]) -> str | None:
    """Why a checkpoint's mark does not fit this config's lane (or was written by a newer transcoder), or None."""
    v = found.get("v", 1)  # marks written before the version was recorded: 1
    if isinstance(v, int) and not isinstance(v, bool) and v > MARK_VERSION:
        return (f"checkpoint {location} was written by a newer transcoder ({MARK} format version {v}; this one "
                f"reads version {MARK_VERSION}): upgrade transcoder to go on from it (docs/upgrading.md), or set "
                "spark.checkpoint_location to a new path")
    if v != MARK_VERSION:
        return (f"checkpoint {location} has a {MARK} of format version {v!r}, not {MARK_VERSION}: it was not "
                "written by transcoder; set spark.checkpoint_location to a new path")
    for key in ("sources", "destinations"):
        if found.get(key) != expected[key]:
            return (f"checkpoint {location} was written by another config (lane {found.get('lane')}: {key} "
                    f"{', '.join(found.get(key) or []) or 'none'}; this config's lane {expected['lane']} has "
                    f"{', '.join(expected[key])}): set spark.checkpoint_location to a new path, or delete the "
                    "checkpoint to copy from `start` again")
    return None


def offset_log(text: str, path: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset from one file of Spark's offset log at `path`: its version line, a metadata
    line, then one JSON line per source ({topic: {partition: offset}}). ConfigError, in one line, for a log of
    another version than SPARK_OFFSET_LOG_VERSION (a newer Spark's)."""
    lines = text.splitlines()
    found = lines[0].strip() if lines else ""
    if found != SPARK_OFFSET_LOG_VERSION:
        raise ConfigError(f"Spark offset log {path} has version {found or '(none)'!s}, not "
                          f"{SPARK_OFFSET_LOG_VERSION}: it was written by a Spark this transcoder does not read; run "
                          "the Spark the checkpoint was written with, or set spark.checkpoint_location to a new path")
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            for topic, parts in parsed.items():
                if isinstance(parts, dict):
                    out.update({(topic, int(p)): int(o) for p, o in parts.items()})
    return out


class CheckpointStore:
    """The lanes' marks, read and written through the session's Hadoop FileSystem."""

    def __init__(self, session: Any) -> None:
        self.jvm = session.sparkContext._jvm
        self.hadoop_conf = session.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, location: str) -> tuple[Any, Any]:
        path = self.jvm.org.apache.hadoop.fs.Path(location)
        return path.getFileSystem(self.hadoop_conf), path

    def read(self, location: str) -> dict[str, Any] | None:
        fs, path = self._fs(f"{location}/{MARK}")
        if not fs.exists(path):
            return None
        text = self._text(fs, path)
        try:
            found = json.loads(text)
        except ValueError:
            raise ConfigError(f"checkpoint mark {location}/{MARK} is not JSON: delete the checkpoint or choose another "
                              "spark.checkpoint_location") from None
        return found if isinstance(found, dict) else {}

    def _text(self, fs: Any, path: Any) -> str:
        stream = fs.open(path)
        try:
            return str(self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def committed(self, location: str) -> dict[tuple[str, int], int] | None:
        """The source offsets up to which the lane's last committed micro-batch wrote (None: none committed).

        Spark's checkpoint: `commits/<n>` marks micro-batch n done; `offsets/<n>` holds its end offsets,
        a version line, a metadata line, then one JSON line per source ({topic: {partition: offset}}).
        """
        fs, commits = self._fs(f"{location}/commits")
        if not fs.exists(commits):
            return None
        done = [int(st.getPath().getName()) for st in fs.listStatus(commits) if st.getPath().getName().isdigit()]
        if not done:
            return None
        ofs, path = self._fs(f"{location}/offsets/{max(done)}")
        if not ofs.exists(path):
            return None
        return offset_log(self._text(ofs, path), f"{location}/offsets/{max(done)}")

    def has_offsets(self, location: str) -> bool:
        fs, path = self._fs(f"{location}/offsets")
        return bool(fs.exists(path))

    def claim(self, location: str, lane: LaneSpec) -> None:
        """Mark a lane's checkpoint as this config's; ConfigError if another config's checkpoint is there."""
        expected = mark(lane)
        found = self.read(location)
        if found is None:
            if self.has_offsets(location):
                raise ConfigError(f"checkpoint {location} holds offsets but no {MARK}: it was not written by "
                                  "transcoder; set spark.checkpoint_location to a new path")
            fs, path = self._fs(f"{location}/{MARK}")
            out = fs.create(path, True)
            try:
                out.write(bytearray(json.dumps({"v": MARK_VERSION, **expected}, indent=2).encode()))
            finally:
                out.close()
            return
        problem = mismatch(location, found, expected)
        if problem:
            raise ConfigError(problem)
