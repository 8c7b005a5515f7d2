"""The config model: clusters, routes, destinations, batching, errors, metrics, evaluation, migration; validated
up front, frozen (config.base: every model's base; config.spark: the Spark engine's section).

Secrets (SASL passwords, TLS keys) are held as SecretStr and revealed only in the dict handed to
librdkafka (`Cluster.librdkafka`); `redacted()` is what may be logged or printed.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    PositiveInt,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import InitErrorDetails

from transcoder.codecs.names import BUILT_HERE, Codec, built_here, check_level
from transcoder.config.base import StrictModel
from transcoder.config.secrets import resolve_properties
from transcoder.config.spark import SparkConfig

#: Properties transcoder sets itself on every client: a user value would break a guarantee.
_OWNED_PROPERTIES = frozenset({
    "enable.idempotence", "compression.type", "compression.codec", "compression.level",
    "linger.ms", "queue.buffering.max.ms", "batch.size", "batch.num.messages", "group.id",
    "enable.auto.commit", "enable.auto.offset.store", "partition.assignment.strategy",
    "bootstrap.servers", "metadata.broker.list", "on_delivery", "error_cb", "stats_cb",
})


class Cluster(StrictModel):
    """A Kafka cluster and the librdkafka properties to reach it (`security.protocol`, `sasl.*`, `ssl.*`)."""

    bootstrap_servers: str = Field(min_length=1)
    """Brokers to connect to first: host:port pairs separated by commas (Kafka's `bootstrap.servers`)."""
    config: dict[str, str | int | float | bool | SecretStr] = Field(default_factory=dict)
    """Further librdkafka properties of every client of this cluster (`security.protocol`, `sasl.mechanism`,
    `ssl.ca.location`, ...). Secret properties (`sasl.password`, `sasl.jaas.config`, `ssl.key.password`, ...) are
    refused inline: give them as `${env:VAR}`, `${file:/path}` or `${file:/path:key}`. Properties transcoder sets
    itself (`bootstrap.servers`, `group.id`, `enable.idempotence`, `compression.type`, `linger.ms`, `batch.size`, ...)
    are refused."""

    @field_validator("config", mode="before")
    @classmethod
    def _secrets(cls, raw: Any, info: ValidationInfo) -> Any:
        """Every property's problem at once, each at its key (cluster.config.sasl.password: ...)."""
        if not isinstance(raw, Mapping):
            return raw
        environ = (info.context or {}).get("environ", os.environ)
        problems: dict[str, str] = {}
        for key, value in raw.items():
            if str(key) in _OWNED_PROPERTIES:
                problems[str(key)] = "set by transcoder itself; remove it from the config"
            elif not isinstance(value, str | int | float | bool):
                problems[str(key)] = ("a client property's value is a string, a number or true/false, not "
                                      + ("empty" if value is None else f"a {type(value).__name__}"))
        resolved, found = resolve_properties(
            {str(k): v for k, v in raw.items() if str(k) not in problems}, environ,
            inline="a secret must not be inline: use ${env:VAR}, ${file:/path} or ${file:/path:key}")
        problems.update(found)
        if problems:
            ordered = [k for k in map(str, raw) if k in problems]
            raise ValidationError.from_exception_data("Cluster.config", [
                InitErrorDetails(type="value_error", loc=(key,), input=key, ctx={"error": ValueError(problems[key])})
                for key in ordered])
        return resolved

    def librdkafka(self) -> dict[str, Any]:
        """Properties for a confluent-kafka client, secrets revealed. Never log this dict."""
        conf = {k: (v.get_secret_value() if isinstance(v, SecretStr) else v) for k, v in self.config.items()}
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf

    def redacted(self) -> dict[str, Any]:
        """The same properties with every secret shown as '***': safe to log and print."""
        return {"bootstrap.servers": self.bootstrap_servers,
                **{k: ("***" if isinstance(v, SecretStr) else v) for k, v in self.config.items()}}


class Batch(StrictModel):
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
    """A batch is closed at this many bytes of uncompressed records (librdkafka's `batch.size`); the producer's
    `message.max.bytes` is set at least 64 KiB above it."""
    max_records: int = Field(default=100_000, ge=1, le=1_000_000)
    """A batch is closed at this many records (librdkafka's `batch.num.messages`)."""
    linger_ms: int = Field(default=500, ge=0, le=900_000)
    """A batch that is not full is sent this many milliseconds after its first record (Kafka's `linger.ms`)."""

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


class Destination(StrictModel):
    """One compressed copy of a route's source: its codec and level, its topic and its batching."""

    codec: Codec
    """Codec the destination's batches are compressed with (Kafka's `compression.type`). A destination topic
    transcoder creates gets `compression.type=producer`, so the broker keeps the batches as written."""
    name: str | None = Field(default=None, min_length=1, max_length=200)
    """Names the destination's lane (`lanes: isolated`), its consumer group `<group_id>.<name>` and its metrics.
    Unset: the destination topic for a `source`, `route<i>.` and the topic (or the codec label) for a
    `source_pattern`."""
    level: int | None = None
    """Compression level (librdkafka's `compression.level`, the Java producer's `compression.<codec>.level`); unset:
    the codec's default. zstd levels 13 to 22, beyond librdkafka, are built by transcoder's own batch producer."""
    topic: str | None = None
    """Destination topic, a template that may use `{source}`, `{codec}` and `{level}`. Unset: `{source}.{codec}`, or
    `{source}.{codec}-{level}` when a level is set. A missing topic is created with the source's partition count and
    topic configs. Never a reserved topic (see `routes[].source`)."""
    batch: Batch = Field(default_factory=Batch)
    """How the destination's producer batches records."""
    allow_broker_recompression: bool = False
    """Start even when the existing destination topic's `compression.type` (neither `producer` nor this codec) makes
    the broker recompress what transcoder writes. false: the start is refused, naming the `kafka-configs` command
    that fixes the topic."""

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


class Route(StrictModel):
    """What to copy where: a source topic (or the topics a pattern matches) and its destinations."""

    source: str | None = Field(default=None, min_length=1)
    """The source topic. Give exactly one of `source` and `source_pattern`. Reserved topics are neither sources nor
    destinations, and a config naming one is refused with the line that names it: Kafka's internal topics (any name
    starting with `__`: `__consumer_offsets`, `__transaction_state`, ...) and this config's own, the
    `errors.dlq_topic` and, with a `migration` section, its offset-map and state topics."""
    source_pattern: str | None = Field(default=None, min_length=1)
    """A regular expression matched against whole topic names: every topic it matches is a source, except reserved
    topics (see `source`), topics internal by MirrorMaker 2's and Confluent's conventions (`__`, `.`, `_confluent` or
    `_schemas` first, `.internal` or `-internal` last; name one as a `source` to copy it) and topics this config
    writes; `transcoder validate` lists the ones it passes over. Give exactly one of `source` and
    `source_pattern`."""
    destinations: list[Destination] = Field(min_length=1)
    """The copies written of each source record, one per codec and level."""

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


class ErrorsConfig(StrictModel):
    """What a lane does with a record a destination refuses."""

    tolerance: Literal["none", "all"] = "none"
    """`none`: a refused record stops the lane, naming its topic, partition, offset and Kafka's reason; nothing at or
    after it is committed. `all`: the record goes to `dlq_topic` and the lane goes on (as Kafka Connect's
    `errors.tolerance`). `all` cannot be combined with `guarantee: exactly-once`."""
    dlq_topic: str | None = None
    """Dead-letter topic of refused records, each with its own headers plus `__transcoder.errors.*` headers saying
    where it came from and why (as Kafka Connect's `errors.deadletterqueue.topic.name`). Required with
    `tolerance: all`. Reserved: no route may read or write it, and it is neither a migration topic nor one of
    Kafka's internal topics."""

    def problems(self) -> Iterator[str]:
        if self.tolerance == "all" and not self.dlq_topic:
            yield "tolerance all needs a dlq_topic, or failed records would be dropped"
        if self.dlq_topic:
            try:
                _check_topic_name(self.dlq_topic, f"dlq_topic {self.dlq_topic!r}")
            except ValueError as exc:
                yield str(exc)


class MetricsConfig(StrictModel):
    """The HTTP endpoints (`/metrics`, `/healthz`, `/readyz`, `/status`) and how fresh their figures are."""

    port: int = Field(default=9308, ge=0, le=65535)
    """TCP port of the HTTP endpoints: Prometheus `/metrics`, `/healthz`, `/readyz` and `/status`. 0: no HTTP
    endpoint."""
    host: str = "0.0.0.0"
    """Address the HTTP endpoints listen on. `0.0.0.0` (the default, kept so that existing deployments and probes
    keep working): every interface, so anyone who reaches the port reads them, unless `web_config_file` asks for
    basic auth; `127.0.0.1`: this machine only (a scraping sidecar, `kubectl port-forward`)."""
    web_config_file: str | None = Field(default=None, min_length=1)
    """A web config file in Prometheus exporter-toolkit's format (the `web-config.yml` exporters take with
    `--web.config.file`): `tls_server_config` (`cert_file`, `key_file`, `client_ca_file`, `client_auth_type`,
    `min_version`, `max_version`) serves the endpoints over HTTPS; `basic_auth_users` (user: bcrypt hash) asks for
    basic auth. Relative paths in it are from its directory; it is read again when it or a file it names changes.
    Unset: plain HTTP, no authentication."""
    auth_probes: bool = False
    """With `basic_auth_users` in `web_config_file`: `/healthz` and `/readyz` ask for it too. Off (the default):
    they answer without it (they tell only whether the copy is healthy and ready), since Kubernetes' httpGet probes
    send no credentials; `/metrics` and `/status` always ask."""
    stats_interval_ms: int = Field(default=5000, ge=100)
    """librdkafka statistics interval in milliseconds (`statistics.interval.ms`): batch sizes, compressed bytes and
    lag are this fresh."""
    disk_interval_s: float = Field(default=60.0, ge=0)
    """How often, in seconds, the topics' sizes on disk are read from the brokers (DescribeLogDirs); 0: never."""


#: The default sample of live scoring: a destination's batch.max_bytes, at most this.
DEFAULT_SAMPLE_BYTES_CAP = 4 * 1024 * 1024
#: The largest sample live scoring may hold per destination (it is copied in memory and compressed per candidate).
MAX_SAMPLE_BYTES = 64 * 1024 * 1024


class Candidate(StrictModel):
    """A codec and level the service scores on samples of what it copies (`evaluate.candidates`)."""

    codec: Codec
    """Codec to score."""
    level: int | None = None
    """Level to score; unset: the codec's default level."""

    def problems(self) -> Iterator[str]:
        try:
            check_level(self.codec, self.level)
        except ValueError as exc:
            yield str(exc)

    @property
    def label(self) -> str:
        return self.codec if self.level is None else f"{self.codec}-{self.level}"


class EvaluateConfig(StrictModel):
    """Live scoring (`evaluate:`): every `sample_interval_s`, each destination's lane captures one window of
    consecutive records of one partition (at most `sample_bytes` of keys, values and headers), and a background
    thread compresses it as the destination's producer would cut it, with the destination's own codec and
    with each candidate, using at most `max_cpu_share` of one core. Absent: no sampling, no thread."""

    sample_interval_s: float = Field(default=60.0, gt=0)
    """Seconds between two samples of a destination."""
    candidates: list[Candidate] = Field(min_length=1)
    """The codecs and levels each sample is compressed with besides the destination's own, each listed once."""
    sample_bytes: PositiveInt | None = Field(default=None, le=MAX_SAMPLE_BYTES)
    """Record bytes per sample and destination; unset: the destination's `batch.max_bytes`, at most 4 MiB."""
    max_cpu_share: float = Field(default=0.05, gt=0, le=1)
    """Share of one CPU core the scorer uses at most, over its work and its pauses: after a job of c CPU seconds it
    waits `c * (1 - share) / share` seconds."""

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


class MigrationConfig(StrictModel):
    """A staged migration (`transcoder migrate`): the offset map the lanes record, the state topic, the gates.

    Present: every lane records, for every destination, which source offsets its delivered records
    came from (the offset map). The migration's target is one destination (`--destination`).
    """

    offset_map_topic: str | None = None
    """Topic of the offset map (source -> destination offsets at batch boundaries, and the lanes' health); unset:
    `<group_id>.offset-map`. Reserved: no route may read or write it."""
    offset_map_retention_ms: int = Field(default=30 * 24 * 3600 * 1000, ge=60_000)
    """The offset map topic's `retention.ms` (default 30 days): it must outlive the longest time a consumer group
    may wait for its cutover."""
    state_topic: str | None = None
    """Compacted topic of every stage of every group; unset: `<group_id>.migrations`. Reserved: no route may read or
    write it, and it is not the offset-map topic."""
    max_lag_records: int = Field(default=10_000, ge=0)
    """Cutover gate: the lane's lag, in records per source partition, must be at most this."""
    error_window_s: float = Field(default=300.0, ge=0)
    """Cutover gate: no lane error (a failed or dead-lettered record) within this many seconds."""
    lease_ms: int = Field(default=30_000, ge=1000)
    """A controller holds the migration for this many milliseconds after its last heartbeat, and a second controller
    is fenced meanwhile."""
    api_timeout_ms: int = Field(default=60_000, ge=1000)
    """How long each Kafka call of a `transcoder migrate` step may take, its retries included (Kafka's
    `default.api.timeout.ms`): reading and writing the state topic, describing a group, reading and committing its
    offsets. Retriable errors (a group coordinator or partition leader moving, a broker not answering) are tried
    again until then; keep it above your cluster's failover time (a broker's session timeout plus an election)."""
    predict_sample_records: int = Field(default=10_000, ge=1)
    """`migrate start` predicts the destination's ratio, bytes per record and CPU (as `transcoder evaluate` measures
    them) on the last this-many records of each source partition; `migrate report` sets them against what is
    realized."""
    verify_range_records: int = Field(default=10_000, ge=1)
    """Source offsets per verification range (one digest per range and partition)."""
    verify_interval_s: float = Field(default=0.0, ge=0)
    """Above 0: a running service verifies each destination against its source this often (seconds), and exports
    `transcoder_migration_verified_offset` and `transcoder_migration_mismatches_total`; 0: only
    `transcoder migrate verify` does."""

    @field_validator("offset_map_topic", "state_topic")
    @classmethod
    def _topic(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else _check_topic_name(v, f"migration.{info.field_name}")


class Config(StrictModel):
    """The top level of a config file: the clusters, the routes, and how the lanes copy them."""

    cluster: Cluster
    """The source cluster, where the lanes' consumer groups live; also the destination cluster unless
    `destination_cluster` is set."""
    destination_cluster: Cluster | None = None
    """The cluster the destinations are written to, with the same keys as `cluster`; unset: the source cluster."""
    group_id: str = Field(default="transcoder", min_length=1)
    """Consumer group of the lanes (Kafka's `group.id`): `<group_id>.<destination name>` per lane with
    `lanes: isolated`, `<group_id>` with `lanes: shared`. Also names the migration's topics."""
    lanes: Literal["isolated", "shared"] = "isolated"
    """`isolated`: each destination has a lane and a consumer group of its own, so a slow codec lags alone;
    `shared`: one consumer group fans each record out to every destination and commits what all have
    acknowledged."""
    guarantee: Literal["at-least-once", "exactly-once"] = "at-least-once"
    """`at-least-once`: commits follow acknowledgements, a restart may copy some records twice; `exactly-once`: one
    transactional producer per lane, source offsets committed in its transactions, so a destination read with
    `isolation.level=read_committed` holds every source record once."""
    hot_path: Literal["records", "batches"] = "batches"
    """How a lane copies: `batches`, the record sets as the broker stores them, fetched raw, re-batched and
    compressed in compiled code and sent by transcoder's batch producer (transactional under exactly-once, with the
    `migration` offset map in the same transactions); or `records`, consumed and produced one by one through
    librdkafka (its transactional producer under exactly-once)."""
    transaction_timeout_ms: int = Field(default=60_000, ge=1000, le=900_000)
    """Exactly-once: the transaction timeout of the lanes' producers (Kafka's `transaction.timeout.ms`, at most the
    brokers' `transaction.max.timeout.ms`); the broker aborts a transaction left open this long, e.g. by a crashed
    instance. At least twice `commit_interval_ms`."""
    start: Literal["earliest", "latest"] | datetime = "earliest"
    """Where a lane starts on a partition its consumer group has no committed offset for: `earliest`, `latest`, or
    the first record at or after an ISO 8601 timestamp with a time zone, e.g. `2026-01-01T00:00:00Z`."""
    on_source_loss: Literal["stop", "continue"] = "stop"
    """What a lane does when source records it has not copied yet are gone (OffsetOutOfRange: retention or
    DeleteRecords overtook the lane, or the topic was deleted and recreated). Either way the loss is logged with
    topic, partition and offsets, counted in `transcoder_source_records_lost_total` and marked in the offset map, so
    verify and cutover see the gap. `stop`: the lane fails, `run` exits non-zero, nothing past the gap is copied or
    committed; `continue`: the lane copies on from the source's first record after the gap."""
    routes: list[Route] = Field(min_length=1)
    """What to copy: each route reads a source topic (or the topics a pattern matches) and writes its
    destinations."""
    errors: ErrorsConfig = Field(default_factory=ErrorsConfig)
    """What a lane does with a record a destination refuses."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """The HTTP endpoints and how fresh their figures are."""
    max_in_flight_bytes: PositiveInt = 64 * 1024 * 1024
    """Backpressure, per lane: fetching stops while this many record bytes wait for acknowledgement, and resumes
    below half of it."""
    commit_interval_ms: int = Field(default=1000, ge=50)
    """How often, in milliseconds, acknowledged source offsets are committed; under exactly-once, how often a lane
    commits its transaction."""
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    """On SIGTERM or SIGINT, how long to wait, in seconds, for in-flight records to be acknowledged before giving up
    (nothing is committed past them)."""
    spark: SparkConfig = Field(default_factory=SparkConfig)
    """The Spark engine's settings; ignored by the single-process service."""
    evaluate: EvaluateConfig | None = None
    """Live scoring of candidate codecs on samples of the copied records (either engine); unset: off."""
    migration: MigrationConfig | None = None
    """A staged migration (`transcoder migrate`): the lanes record the offset map; unset: off."""

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
                    lo, hi = BUILT_HERE[d.codec]
                    yield (f"guarantee exactly-once: destination {d.label} cannot be transactional "
                           f"record by record: {d.codec} levels {lo}-{hi} are batched by transcoder's own producer; "
                           f"use hot_path: batches, a {d.codec} level up to {lo - 1}, or guarantee: at-least-once")

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
