"""Topic admin: look topics up, create them with the partitions and configs asked for."""

from __future__ import annotations

import time

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from transcoder.codecs import ZSTD_MIN_PRODUCE_VERSION, broker_recompresses
from transcoder.errors import TopicError
from transcoder.routes import Plan


@dataclass(frozen=True)
class TopicShape:
    name: str
    partitions: int


#: Errors that pass once a leader is elected or metadata catches up. librdkafka flags request-level
#: errors retriable itself, but per-partition errors in admin results (list_offsets, describe) come back
#: built from the bare code, with retriable() False.
TRANSIENT_CODES = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
})


def _retriable(exc: BaseException) -> bool:
    if not (isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError)):
        return False
    err = exc.args[0]
    return err.retriable() or err.code() in TRANSIENT_CODES


#: Retry an admin call while Kafka says the error is retriable (a leader moving, a topic being created).
admin_retry = retry(
    retry=retry_if_exception(_retriable), stop=stop_after_attempt(8),
    wait=wait_exponential(multiplier=0.2, max=5), reraise=True,
)


@admin_retry
def describe(admin: AdminClient, name: str, *, timeout: float = 10.0) -> TopicShape | None:
    """The topic's partition count, or None if it does not exist."""
    md = admin.list_topics(topic=name, timeout=timeout)
    t = md.topics.get(name)
    if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    if t.error is not None:
        raise TopicError(f"topic {name}: {_plain(t.error)}")
    return TopicShape(name=name, partitions=len(t.partitions))


@admin_retry
def _create(admin: AdminClient, topic: NewTopic, timeout: float) -> None:
    fut = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[topic.topic]
    try:
        fut.result()
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        if _retriable(exc):
            raise
        raise TopicError(f"cannot create topic {topic.topic}: {_plain(err)}") from exc


def ensure(admin: AdminClient, name: str, *, partitions: int | None, replication_factor: int = -1,
           config: Mapping[str, str] | None = None, timeout: float = 30.0) -> tuple[TopicShape, bool]:
    """Create `name` if missing; return its shape and whether it was created.

    An existing topic is used as it is; asking for a different partition count is an error,
    because records would not land where the caller expects.
    """
    existing = describe(admin, name)
    if existing is not None:
        if partitions is not None and existing.partitions != partitions:
            raise TopicError(
                f"topic {name} exists with {existing.partitions} partitions, not the {partitions} asked for; "
                "drop --partitions to use it as it is, or choose another topic"
            )
        return existing, False
    _create(admin, NewTopic(name, num_partitions=partitions or 1, replication_factor=replication_factor,
                            config=dict(config or {})), timeout)
    deadline = time.monotonic() + timeout
    while (shape := describe(admin, name)) is None:  # metadata reaches the broker asked a moment later
        if time.monotonic() >= deadline:
            raise TopicError(f"topic {name} was created but is not visible in metadata after {timeout:.0f} s")
        time.sleep(0.1)
    return shape, True


#: Source topic configs a destination inherits, so that a copy behaves like its source
#: (compaction, retention, segment rolling, size limit).
COPIED_CONFIGS = (
    "cleanup.policy", "retention.ms", "retention.bytes", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
    "max.message.bytes", "segment.bytes", "segment.ms", "segment.index.bytes", "segment.jitter.ms",
    "message.timestamp.type",
)


def destination_configs(source_configs: Mapping[str, str], explicit: set[str]) -> dict[str, str]:
    """Configs to create a destination with, from its source's effective configs.

    Copied: what was set on the source topic itself (`explicit`), and max.message.bytes always
    (the destination must accept every record the source did). A LogAppendTime source gets a
    CreateTime destination, set explicitly (not left to the broker default): the destination
    must keep the source's timestamps, which the producer sends as CreateTime.
    compression.type is `producer`: the broker then stores each batch as transcoder compressed it.
    """
    out = {k: source_configs[k] for k in COPIED_CONFIGS
           if k in source_configs and (k in explicit or k == "max.message.bytes")}
    if source_configs.get("message.timestamp.type") == "LogAppendTime":
        out["message.timestamp.type"] = "CreateTime"
    out["compression.type"] = "producer"
    return out


_AUTH_ERRORS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "not authorized (topic ACL): grant DESCRIBE, DESCRIBE_CONFIGS and "
                                           "READ on sources, CREATE and WRITE on destinations",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "not authorized (cluster ACL)",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "not authorized (consumer group ACL)",
    KafkaError.SASL_AUTHENTICATION_FAILED: "authentication failed: check sasl.* settings",
}


def _plain(err: KafkaError) -> str:
    return _AUTH_ERRORS.get(err.code(), err.str())


@dataclass(frozen=True)
class TopicConfigs:
    effective: dict[str, str]
    explicit: set[str]  # set on the topic itself, not inherited from broker defaults


@admin_retry
def describe_configs(admin: AdminClient, names: list[str], *, timeout: float = 30.0) -> dict[str, TopicConfigs]:
    if not names:
        return {}
    res = {n: ConfigResource(ConfigResource.Type.TOPIC, n) for n in names}
    futures = admin.describe_configs(list(res.values()), request_timeout=timeout)
    out = {}
    for name, r in res.items():
        try:
            entries = futures[r].result()
        except KafkaException as exc:
            err = exc.args[0]
            if _retriable(exc):
                raise
            raise TopicError(f"cannot describe configs of topic {name}: {_plain(err)}") from exc
        out[name] = TopicConfigs(
            effective={k: e.value for k, e in entries.items() if e.value is not None},
            explicit={k for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value},
        )
    return out


@dataclass(frozen=True)
class DestinationTopic:
    """What provisioning found or will do for one destination topic."""

    topic: str
    source: str
    target: str  # target name (lane / metrics label)
    codec: str
    partitions: int
    exists: bool
    create_configs: dict[str, str]  # used when it does not exist
    compression_type: str  # the topic's compression.type (as it is, or as it will be created)


@dataclass(frozen=True)
class Provision:
    sources: dict[str, TopicShape]
    destinations: list[DestinationTopic]
    dlq: DestinationTopic | None

    @property
    def to_create(self) -> list[DestinationTopic]:
        return [d for d in [*self.destinations, *([self.dlq] if self.dlq else [])] if not d.exists]


def zstd_problem(plan: Plan, max_produce_version: int | None) -> str | None:
    """Why zstd destinations cannot work on brokers that speak Produce only up to `max_produce_version`."""
    if max_produce_version is None or max_produce_version >= ZSTD_MIN_PRODUCE_VERSION:
        return None
    zstd = sorted({t.name for t in plan.targets if t.destination.codec == "zstd"})
    if not zstd:
        return None
    return (f"the destination brokers support Produce up to v{max_produce_version}; zstd needs v7 "
            f"(Kafka 2.1 or newer), so {', '.join(zstd)} would fail with UNSUPPORTED_COMPRESSION_TYPE: "
            "upgrade the brokers or choose another codec")


def preflight(src: AdminClient, dst: AdminClient, plan: Plan, *, dlq_topic: str | None,
              max_produce_version: int | None) -> Provision:
    """Check everything before a record is copied; TopicError naming every problem found.

    Checks: sources exist; the destination broker speaks zstd (Produce v7, Kafka 2.1) when a
    target needs it; existing destinations have the source's partition count, a
    compression.type that keeps batches as produced (or allow_broker_recompression), and a
    max.message.bytes no smaller than the source's.
    """
    problems: list[str] = []
    sources: dict[str, TopicShape] = {}
    for name in plan.sources:
        shape = describe(src, name)
        if shape is None:
            problems.append(f"source topic {name} does not exist")
        else:
            sources[name] = shape
    if problems:
        raise TopicError("; ".join(problems))
    src_cfg = describe_configs(src, list(sources))

    zstd = zstd_problem(plan, max_produce_version)
    if zstd:
        problems.append(zstd)

    dest_topics = plan.destination_topics()
    existing = {n: describe(dst, n) for n in dest_topics}
    dst_cfg = describe_configs(dst, [n for n, s in existing.items() if s is not None])
    destinations = []
    for name, (source, target) in dest_topics.items():
        d = target.destination
        want_parts = sources[source].partitions
        cfg = src_cfg[source]
        create = destination_configs(cfg.effective, cfg.explicit)
        shape = existing[name]
        if shape is None:
            destinations.append(DestinationTopic(name, source, target.name, d.label, want_parts, False, create,
                                                 create["compression.type"]))
            continue
        have = dst_cfg[name].effective
        ctype = have.get("compression.type", "producer")
        if shape.partitions != want_parts:
            problems.append(f"destination {name} has {shape.partitions} partitions but its source {source} has "
                            f"{want_parts}: records of partition p must land in p; delete it or name another topic")
        if broker_recompresses(ctype, d.codec) and not d.allow_broker_recompression:
            problems.append(
                f"destination {name} has compression.type={ctype}, so the broker would recompress every "
                f"{d.codec} batch: set it with `kafka-configs --alter --entity-type topics --entity-name {name} "
                f"--add-config compression.type=producer`, or set allow_broker_recompression: true")
        src_max = int(cfg.effective.get("max.message.bytes", "0"))
        dst_max = int(have.get("max.message.bytes", "0"))
        if dst_max < src_max:
            problems.append(f"destination {name} has max.message.bytes={dst_max}, smaller than its source's "
                            f"{src_max}: records the source accepted would be refused")
        destinations.append(DestinationTopic(name, source, target.name, d.label, shape.partitions, True, {}, ctype))

    dlq = None
    if dlq_topic:
        shape = describe(dst, dlq_topic)
        biggest = max((int(c.effective.get("max.message.bytes", "1048588")) for c in src_cfg.values()), default=0)
        dlq = DestinationTopic(dlq_topic, "", "dlq", "zstd", shape.partitions if shape else 1, shape is not None,
                               {"max.message.bytes": str(max(biggest, 1048588)), "compression.type": "producer"},
                               "producer")
    if problems:
        raise TopicError("; ".join(problems))
    return Provision(sources=sources, destinations=destinations, dlq=dlq)


def create_missing(dst: AdminClient, provision: Provision) -> list[str]:
    """Create the destinations (and DLQ) that do not exist; return their names."""
    created = []
    for d in provision.to_create:
        _create(dst, NewTopic(d.topic, num_partitions=d.partitions, replication_factor=-1,
                              config=d.create_configs), 30.0)
        created.append(d.topic)
    return created
