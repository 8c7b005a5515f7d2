"""The config model: clusters, routes, destinations, batching, errors, metrics; validated up front, frozen.

Secrets (SASL passwords, TLS keys) are held as SecretStr and revealed only in the dict handed to
librdkafka (`Cluster.librdkafka`); `redacted()` is what may be logged or printed.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from transcoder.codecs.names import Codec, built_here, check_level
from transcoder.config.secrets import REFERENCE, SECRET_PROPERTIES, remember, resolve_references

#: Properties transcoder sets itself on every client: a user value would break a guarantee.
_OWNED_PROPERTIES = frozenset({
    "enable.idempotence", "compression.type", "compression.codec", "compression.level",
    "linger.ms", "queue.buffering.max.ms", "batch.size", "batch.num.messages", "group.id",
    "enable.auto.commit", "enable.auto.offset.store", "partition.assignment.strategy",
    "bootstrap.servers", "metadata.broker.list", "on_delivery", "error_cb", "stats_cb",
})

class _Model(BaseModel):
    """Every problem of a config is reported at once: a model's cross-field checks (`problems`) run on the fields
    that are valid even when others are not (pydantic runs `after` validators only once every field is valid)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def problems(self) -> Iterator[str]:
        """This model's cross-field problems, in words. A check that needs a field that is not valid (absent
        from a partly valid model: AttributeError) ends the iteration; that field's own error is reported."""
        return iter(())

    @model_validator(mode="after")
    def _cross_fields(self) -> Self:
        found = list(self.problems())
        if found:
            raise ValueError("; ".join(found))
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            invalid = {e["loc"][0] for e in errors if e["loc"]}
            if not invalid or not isinstance(data, Mapping):  # no field invalid: the cross-field checks ran
                raise
            found = list(_partial_problems(cls, data, invalid, info.context))
            if not found:
                raise
            details = [InitErrorDetails(type=e["type"], loc=e["loc"], input=e["input"],
                                        **({"ctx": e["ctx"]} if "ctx" in e else {}))  # type: ignore[typeddict-item]
                       for e in errors]
            details.append(InitErrorDetails(type="value_error", loc=(), input=data,
                                            ctx={"error": ValueError("; ".join(found))}))
            try:
                merged = ValidationError.from_exception_data(cls.__name__, details)
            except (KeyError, TypeError, ValueError):  # an error type pydantic cannot rebuild: the original
                raise exc from None
            raise merged from None


def _partial_problems(cls: type[_Model], data: Mapping[str, Any], invalid: set[Any],
                      context: dict[str, Any] | None) -> Iterator[str]:
    """`cls`'s cross-field problems among its valid fields: each field of `data` not in `invalid` validated on its
    own, the others left out (a check needing one of them stops there)."""
    valid: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if name in invalid or name not in data:
            continue
        try:
            valid[name] = TypeAdapter(Annotated[field.annotation, field]).validate_python(data[name], context=context)
        except ValidationError:
            continue
    partial = cls.model_construct(**valid)  # fields absent from data take their defaults; invalid ones are absent
    for name in cls.model_fields:
        if name in data and name not in valid:
            partial.__dict__.pop(name, None)
    found = partial.problems()
    while True:
        try:
            yield next(found)
        except (StopIteration, AttributeError):  # AttributeError: a field the check needs is not valid
            return


class Cluster(_Model):
    """A Kafka cluster and the librdkafka properties to reach it (security.protocol, sasl.*, ssl.*)."""

    bootstrap_servers: str = Field(min_length=1)
    config: dict[str, str | int | float | bool | SecretStr] = Field(default_factory=dict)

    @field_validator("config", mode="before")
    @classmethod
    def _secrets(cls, raw: Any, info: ValidationInfo) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        environ = (info.context or {}).get("environ", os.environ)
        out: dict[str, Any] = {}
        for key, value in raw.items():
            key = str(key)
            if key in _OWNED_PROPERTIES:
                raise ValueError(f"{key} is set by transcoder itself; remove it from the config")
            is_ref = isinstance(value, str) and bool(REFERENCE.search(value))
            if key in SECRET_PROPERTIES and not is_ref:
                raise ValueError(f"{key} is a secret and must not be inline: use ${{env:VAR}} or ${{file:/path}}")
            if is_ref:
                try:
                    value = resolve_references(value, environ)
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
            out[key] = SecretStr(str(value)) if key in SECRET_PROPERTIES else value
        remember(out)  # never printed from now on, in any form (transcoder.logs.REDACTOR)
        return out

    def librdkafka(self) -> dict[str, Any]:
        """Properties for a confluent-kafka client, secrets revealed. Never log this dict."""
        conf = {k: (v.get_secret_value() if isinstance(v, SecretStr) else v) for k, v in self.config.items()}
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf

    def redacted(self) -> dict[str, Any]:
        """The same properties with every secret shown as '***': safe to log and print."""
        return {"bootstrap.servers": self.bootstrap_servers,
                **{k: ("***" if isinstance(v, SecretStr) else v) for k, v in self.config.items()}}


class Batch(_Model):
    """Re-batching of a destination producer (librdkafka batch.size, batch.num.messages, linger.ms)."""

    #: librdkafka's largest message.max.bytes (its batch.size may be larger, but no batch outgrows this).
    LIBRDKAFKA_MAX_MESSAGE_BYTES: ClassVar[int] = 1_000_000_000
    #: The room a producer's message.max.bytes keeps above its batch.size (max_bytes): librdkafka bounds a whole
    #: ProduceRequest by message.max.bytes, so a full batch needs room for the request's own framing (request
    #: header, client and transactional ids, topic and partition) too. A producer of this batch sets
    #: message.max.bytes to max_bytes + this (or more).
    PRODUCER_MARGIN_BYTES: ClassVar[int] = 65_536
    #: The largest max_bytes: a producer with more would be refused by librdkafka, after topics were created.
    MAX_BYTES: ClassVar[int] = LIBRDKAFKA_MAX_MESSAGE_BYTES - PRODUCER_MARGIN_BYTES

    max_bytes: PositiveInt = 1_048_576
    max_records: int = Field(default=100_000, ge=1, le=1_000_000)
    linger_ms: int = Field(default=500, ge=0, le=900_000)

    @field_validator("max_bytes")
    @classmethod
    def _fits_librdkafka(cls, v: int) -> int:
        if v > cls.MAX_BYTES:
            raise ValueError(f"{v} is too large: at most {cls.MAX_BYTES} (the producer's message.max.bytes is "
                             f"max_bytes + {cls.PRODUCER_MARGIN_BYTES}, and librdkafka allows at most "
                             f"{cls.LIBRDKAFKA_MAX_MESSAGE_BYTES})")
        return v


_TEMPLATE_FIELDS = {"source", "codec", "level"}


def _template_fields(template: str) -> set[str]:
    """The fields of a topic template; ValueError unless it is only plain {source}, {codec}, {level}."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"topic template {template!r} is malformed: {exc}") from None
    fields = set()
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in _TEMPLATE_FIELDS or spec or conversion:
            raise ValueError(f"topic template {template!r} may use only {{source}}, {{codec}}, {{level}}")
        fields.add(name)
    return fields


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _check_topic_name(name: str, what: str) -> str:
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"{what} is not a valid Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)")
    return name


class Destination(_Model):
    codec: Codec
    #: Names the lane (isolated mode), its consumer group and metrics; default: the destination topic.
    name: str | None = Field(default=None, min_length=1, max_length=200)
    level: int | None = None
    topic: str | None = None
    batch: Batch = Field(default_factory=Batch)
    #: Accept an existing destination whose compression.type makes the broker recompress.
    allow_broker_recompression: bool = False

    def problems(self) -> Iterator[str]:
        try:
            check_level(self.codec, self.level)
        except ValueError as exc:
            yield str(exc)
        if self.topic is not None:
            try:
                fields = _template_fields(self.topic)
                if "level" in fields and self.level is None:
                    raise ValueError(f"topic template {self.topic!r} uses {{level}} but no level is set")
                _check_topic_name(self.topic.format(source="s", codec=self.codec, level=self.level),
                                  f"topic template {self.topic!r}")
            except ValueError as exc:
                yield str(exc)

    @property
    def label(self) -> str:
        """codec, or codec-level: how this destination is named in topics, groups and metrics."""
        return self.codec if self.level is None else f"{self.codec}-{self.level}"

    def topic_for(self, source: str) -> str:
        if self.topic is None:
            return f"{source}.{self.label}"
        return self.topic.format(source=source, codec=self.codec, level=self.level)


class Route(_Model):
    source: str | None = Field(default=None, min_length=1)
    source_pattern: str | None = Field(default=None, min_length=1)
    destinations: list[Destination] = Field(min_length=1)

    def problems(self) -> Iterator[str]:
        if (self.source is None) == (self.source_pattern is None):
            yield "give exactly one of source or source_pattern"
        if self.source is not None:
            try:
                _check_topic_name(self.source, f"source {self.source!r}")
            except ValueError as exc:
                yield str(exc)
        if self.source_pattern is not None:
            try:
                re.compile(self.source_pattern)
            except re.error as exc:
                yield f"source_pattern {self.source_pattern!r} is not a regex: {exc}"


class ErrorsConfig(_Model):
    tolerance: Literal["none", "all"] = "none"
    dlq_topic: str | None = None

    def problems(self) -> Iterator[str]:
        if self.tolerance == "all" and not self.dlq_topic:
            yield "tolerance all needs a dlq_topic, or failed records would be dropped"
        if self.dlq_topic:
            try:
                _check_topic_name(self.dlq_topic, f"dlq_topic {self.dlq_topic!r}")
            except ValueError as exc:
                yield str(exc)


class MetricsConfig(_Model):
    port: int = Field(default=9308, ge=0, le=65535)  # 0: no HTTP endpoint
    host: str = "0.0.0.0"
    #: librdkafka statistics interval: batch sizes, compressed bytes and lag are this fresh.
    stats_interval_ms: int = Field(default=5000, ge=100)
    #: How often on-disk topic sizes are read (DescribeLogDirs); 0: never.
    disk_interval_s: float = Field(default=60.0, ge=0)


class SparkConfig(_Model):
    """The Spark engine's own settings (`transcoder run --engine spark`); the rest of the config is shared."""

    #: Spark master URL: local[*] (every core of this machine), local[N], spark://host:port, k8s://...
    master: str = Field(default="local[*]", min_length=1)
    #: Where the streaming queries keep their checkpoints (one per lane); default under the cache directory.
    checkpoint_location: str | None = Field(default=None, min_length=1)
    #: Micro-batch trigger interval; 0: the next micro-batch starts as soon as the previous one ends.
    trigger_interval_ms: int = Field(default=0, ge=0)
    #: Records read per partition set and micro-batch at most (Spark's maxOffsetsPerTrigger); None: all available.
    max_offsets_per_trigger: PositiveInt | None = None
    #: Also commit each task's source offsets to the lane's consumer group once its records are acknowledged, so
    #: kafka-consumer-groups, lag monitors and the migration gates see the copy's progress (the checkpoint still
    #: decides where a restart goes on). Under exactly-once the transactions commit them anyway, and with a
    #: `migration:` section they are always committed (its `copied` and `lag` gates read them).
    commit_group: bool = False
    #: Who reads the source: `kafka`, Spark's Kafka source (its Java consumer in the executors, records handed to
    #: the Python writers as Arrow columns); `transcoder`, transcoder's own raw fetcher in each task, over offset
    #: ranges the driver plans per micro-batch (Spark keeps the scheduling, retries and the checkpoint).
    read: Literal["kafka", "transcoder"] = "kafka"
    #: Extra Spark settings (spark.executor.memory, spark.sql.shuffle.partitions, ...).
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict)

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


#: The default sample of live scoring: a destination's batch.max_bytes, at most this.
DEFAULT_SAMPLE_BYTES_CAP = 4 * 1024 * 1024
#: The largest sample live scoring may hold per destination (it is copied in memory and compressed per candidate).
MAX_SAMPLE_BYTES = 64 * 1024 * 1024


class Candidate(_Model):
    """A codec and level the service scores on samples of what it copies (`evaluate.candidates`)."""

    codec: Codec
    level: int | None = None  # None: the codec's default level

    def problems(self) -> Iterator[str]:
        try:
            check_level(self.codec, self.level)
        except ValueError as exc:
            yield str(exc)

    @property
    def label(self) -> str:
        return self.codec if self.level is None else f"{self.codec}-{self.level}"


class EvaluateConfig(_Model):
    """Live scoring (`evaluate:`): every `sample_interval_s`, each destination's lane captures one window of
    consecutive records of one partition (at most `sample_bytes` of keys, values and headers), and a background
    thread compresses it as the destination's producer would cut it, with the destination's own codec and
    with each candidate, using at most `max_cpu_share` of one core. Absent: no sampling, no thread."""

    sample_interval_s: float = Field(default=60.0, gt=0)
    candidates: list[Candidate] = Field(min_length=1)
    #: Record bytes per sample and destination; default: the destination's batch.max_bytes, at most 4 MiB.
    sample_bytes: PositiveInt | None = Field(default=None, le=MAX_SAMPLE_BYTES)
    #: The scorer's CPU over its work and its pauses: after a job of c CPU seconds it waits c*(1-share)/share.
    max_cpu_share: float = Field(default=0.05, gt=0, le=1)

    @field_validator("candidates")
    @classmethod
    def _distinct(cls, v: list[Candidate]) -> list[Candidate]:
        seen: set[tuple[str, int | None]] = set()
        for c in v:
            if (c.codec, c.level) in seen:
                raise ValueError(f"candidate {c.label} is listed twice")
            seen.add((c.codec, c.level))
        return v

    def sample_bytes_for(self, batch: Batch) -> int:
        """The record bytes one sample of a destination with this batching holds at most."""
        return self.sample_bytes if self.sample_bytes is not None else min(batch.max_bytes, DEFAULT_SAMPLE_BYTES_CAP)


class MigrationConfig(_Model):
    """A staged migration (`transcoder migrate`): the offset map the lanes record, the state topic, the gates.

    Present: every lane records, for every destination, which source offsets its delivered records
    came from (the offset map). The migration's target is one destination (`--destination`).
    """

    #: Topic of the offset map (source -> destination offsets at batch boundaries); default `<group_id>.offset-map`.
    offset_map_topic: str | None = None
    #: The offset map's retention: it must outlive the longest time a group may wait for its cutover.
    offset_map_retention_ms: int = Field(default=30 * 24 * 3600 * 1000, ge=60_000)
    #: Compacted topic of every stage of every group; default `<group_id>.migrations`.
    state_topic: str | None = None
    #: Cutover gate: the lane's lag (records, per source partition) must be at most this.
    max_lag_records: int = Field(default=10_000, ge=0)
    #: Cutover gate: no lane error (failed or dead-lettered record) within this window.
    error_window_s: float = Field(default=300.0, ge=0)
    #: A controller holds the migration for this long after its last heartbeat (fencing of a second one).
    lease_ms: int = Field(default=30_000, ge=1000)
    #: Records per verification range (one digest per range and partition).
    verify_range_records: int = Field(default=10_000, ge=1)
    #: > 0: a running service verifies each destination against its source this often (seconds), and exports
    #: transcoder_migration_verified_offset / _mismatches_total; 0: only `transcoder migrate verify` does.
    verify_interval_s: float = Field(default=0.0, ge=0)

    @field_validator("offset_map_topic", "state_topic")
    @classmethod
    def _topic(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else _check_topic_name(v, f"migration.{info.field_name}")


class Config(_Model):
    cluster: Cluster
    destination_cluster: Cluster | None = None
    group_id: str = Field(default="transcoder", min_length=1)
    lanes: Literal["isolated", "shared"] = "isolated"
    #: at-least-once: commits follow acknowledgements, a restart may copy some records twice;
    #: exactly-once: one transactional producer per lane, source offsets committed in its transactions,
    #: so a destination read with isolation.level=read_committed holds every source record once.
    guarantee: Literal["at-least-once", "exactly-once"] = "at-least-once"
    #: How a lane copies: `batches` (the default, for both guarantees), the record sets as the broker stores them,
    #: fetched raw, re-batched and compressed in compiled code and sent by transcoder's batch producer (README, "The
    #: hot path"), transactional under exactly-once (the `migration:` offset map in the same transactions); or
    #: `records`, consumed and produced one by one through librdkafka (its transactional producer under
    #: exactly-once).
    hot_path: Literal["records", "batches"] = "batches"
    #: exactly-once: a transaction left open by a crashed instance is aborted by the broker after this long.
    transaction_timeout_ms: int = Field(default=60_000, ge=1000, le=900_000)
    start: Literal["earliest", "latest"] | datetime = "earliest"
    #: When records a lane has not copied yet are gone from its source (OffsetOutOfRange: retention or
    #: DeleteRecords overtook the lane, or the topic was deleted and recreated): always logged (topic, partition,
    #: offsets, records lost), counted (transcoder_source_records_lost_total) and marked in the offset map (verify
    #: and cutover see the gap); then `stop` (the default) fails the lane, `run` exits non-zero, nothing past the
    #: gap is copied or committed; `continue` copies on from the source's first record after the gap.
    on_source_loss: Literal["stop", "continue"] = Field(
        default="stop", description="What a lane does when source records it has not copied yet are gone "
        "(retention, DeleteRecords, a recreated topic): stop (the default) or continue after the gap. Either way "
        "the loss is logged, counted in transcoder_source_records_lost_total and marked in the offset map.")
    routes: list[Route] = Field(min_length=1)
    errors: ErrorsConfig = Field(default_factory=ErrorsConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    #: Backpressure: stop fetching while this many record bytes wait for acknowledgement, per lane.
    max_in_flight_bytes: PositiveInt = 64 * 1024 * 1024
    #: How often acknowledged offsets are committed.
    commit_interval_ms: int = Field(default=1000, ge=50)
    #: On SIGTERM, how long to wait for in-flight records before giving up (nothing is committed past them).
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    #: The Spark engine's settings; ignored by the single-process service.
    spark: SparkConfig = Field(default_factory=SparkConfig)
    #: Live scoring of candidate codecs on samples of the copied records (either engine); None: off.
    evaluate: EvaluateConfig | None = None
    #: A staged migration: the lanes record the offset map (`transcoder migrate`); None: off.
    migration: MigrationConfig | None = None

    @property
    def batched(self) -> bool:
        """Whether lanes copy record sets rather than records (`hot_path: batches`)."""
        return self.hot_path == "batches"

    @field_validator("start")
    @classmethod
    def _aware(cls, v: Any) -> Any:
        if isinstance(v, datetime) and v.tzinfo is None:
            raise ValueError("a start timestamp needs a time zone, e.g. 2026-01-01T00:00:00Z")
        return v

    def problems(self) -> Iterator[str]:
        if self.guarantee != "exactly-once":
            return
        if self.lanes != "isolated":
            yield ("guarantee exactly-once needs lanes: isolated: a transaction belongs to one producer, "
                   "and each destination has a producer of its own (its codec)")
        if self.commit_interval_ms * 2 > self.transaction_timeout_ms:
            yield (f"guarantee exactly-once: commit_interval_ms ({self.commit_interval_ms}) must be at most "
                   f"half of transaction_timeout_ms ({self.transaction_timeout_ms}), or the broker aborts "
                   "transactions before they are committed")
        if self.errors.tolerance == "all":
            yield ("guarantee exactly-once cannot dead-letter (errors.tolerance: all): the dead-letter "
                   "topic would be written outside the transaction; use errors.tolerance: none")
        for route in self.routes if not self.batched else ():
            for d in route.destinations:
                if built_here(d.codec, d.level):
                    yield (f"guarantee exactly-once: destination {d.label} cannot be transactional "
                           "record by record: zstd levels 13-22 are batched by transcoder's own producer; "
                           "use hot_path: batches, a zstd level up to 12, or guarantee: at-least-once")

    @property
    def target_cluster(self) -> Cluster:
        return self.destination_cluster or self.cluster

    @property
    def offset_map_topic(self) -> str:
        m = self.migration
        return (m.offset_map_topic if m and m.offset_map_topic else None) or f"{self.group_id}.offset-map"

    @property
    def state_topic(self) -> str:
        m = self.migration
        return (m.state_topic if m and m.state_topic else None) or f"{self.group_id}.migrations"
