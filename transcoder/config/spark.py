"""The Spark engine's own settings (the `spark` section); the rest of the config is shared by both engines."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, PositiveInt, field_validator

from transcoder.config.base import StrictModel


class SparkConfig(StrictModel):
    """The Spark engine's own settings (`transcoder run --engine spark`); the rest of the config is shared."""

    master: str = Field(default="local[*]", min_length=1)
    """Spark master URL (Spark's `spark.master`): `local[*]` (every core of this machine), `local[N]`, `local` (one
    core), `spark://host:port`, `k8s://...`, `mesos://...` or `yarn`."""
    checkpoint_location: str | None = Field(default=None, min_length=1)
    """Where the streaming queries keep their checkpoints, a directory per lane. Unset:
    `$XDG_CACHE_HOME/transcoder/spark-checkpoints/<group_id>` (`~/.cache` when XDG_CACHE_HOME is not set)."""
    trigger_interval_ms: int = Field(default=0, ge=0)
    """Micro-batch trigger interval in milliseconds; 0: the next micro-batch starts as soon as the previous one
    ends."""
    max_offsets_per_trigger: PositiveInt | None = None
    """At most this many source records per micro-batch of a lane, shared among its partitions (Spark's
    `maxOffsetsPerTrigger`); unset: every record available."""
    commit_group: bool = False
    """Also commit each task's source offsets to the lane's consumer group once its records are acknowledged, so
    kafka-consumer-groups, lag monitors and the migration gates see the copy's progress (the checkpoint still
    decides where a restart goes on). Under exactly-once the transactions commit them anyway, and with a
    `migration` section they are always committed (its `copied` and `lag` gates read them)."""
    read: Literal["kafka", "transcoder"] = "transcoder"
    """Who reads the source: `transcoder` (the default), transcoder's own raw fetcher in each task, over offset
    ranges the driver plans per micro-batch (Spark keeps the scheduling, retries and the checkpoint); `kafka`,
    Spark's Kafka source (its Java consumer in the executors, records handed to the Python writers as Arrow
    columns: several times the CPU per record)."""
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Extra Spark settings (`spark.executor.memory`, `spark.sql.shuffle.partitions`, ...). `spark.master` (give
    `master` instead) and `spark.jars.packages`, `spark.jars.ivy`, `spark.jars.ivySettings` are set by transcoder and
    refused here."""

    @field_validator("master")
    @classmethod
    def _master(cls, v: str) -> str:
        if not re.fullmatch(r"local(\[(\*|[1-9][0-9]*)\])?|(spark|k8s|mesos)://\S+|yarn", v):
            raise ValueError(f"{v!r} is not a Spark master URL "
                             "(local[*], local[N], spark://host:port, k8s://..., yarn)")
        return v

    @field_validator("conf")
    @classmethod
    def _conf(cls, v: dict[str, Any]) -> dict[str, Any]:
        owned = sorted(k for k in v
                       if k in ("spark.master", "spark.jars.packages", "spark.jars.ivy", "spark.jars.ivySettings"))
        if owned:
            hint = ": give the master URL as spark.master" if owned[0] == "spark.master" else ""
            raise ValueError(f"{owned[0]} is set by transcoder itself{hint}")
        return v
