"""Provisioning: pre-flight checks of sources and destinations, and creating destinations like their sources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from transcoder.codecs import ZSTD_MIN_PRODUCE_VERSION, broker_recompresses
from transcoder.config import Config
from transcoder.errors import TopicError
from transcoder.kafka.admin import (
    TopicConfigs,
    TopicShape,
    create_topic,
    describe,
    describe_configs,
    wait_leaders,
)
from transcoder.kafka.clients import check_properties, connect_admin
from transcoder.kafka.protocol import RawClient
from transcoder.pipeline import routes
from transcoder.pipeline.routes import Plan, Target

log = structlog.get_logger("transcoder.provisioning")

#: Source topic configs a destination inherits, so that a copy behaves like its source
#: (compaction, retention, segment rolling, size limit).
COPIED_CONFIGS = (
    "cleanup.policy", "retention.ms", "retention.bytes", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
    "max.message.bytes", "segment.bytes", "segment.ms", "segment.index.bytes", "segment.jitter.ms",
    "message.timestamp.type",
)

#: How far a record's timestamp may be from the broker's clock when it is written, or the broker refuses its batch
#: with INVALID_TIMESTAMP: after/before (Kafka 3.6+, KIP-937; Kafka 4 defaults after to 1 h), and the older
#: difference (both ways; gone in Kafka 4), which stands for an after/before left at no limit.
TIMESTAMP_LIMITS = ("message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
                    "message.timestamp.difference.max.ms")
#: Kafka's "no limit" (Long.MAX_VALUE).
NO_LIMIT = 2**63 - 1


def destination_configs(source_configs: Mapping[str, str], explicit: set[str],
                        broker: Mapping[str, str] | None = None) -> dict[str, str]:
    """Configs to create a destination with, from its source's effective configs.

    Copied: what was set on the source topic itself (`explicit`), and max.message.bytes always
    (the destination must accept every record the source did). A LogAppendTime source gets a
    CreateTime destination, set explicitly (not left to the broker default): the destination
    must keep the source's timestamps, which the producer sends as CreateTime.
    compression.type is `producer`: the broker then stores each batch as transcoder compressed it.

    The source's timestamp limits (TIMESTAMP_LIMITS) are inherited: with `broker`, the destination broker's configs,
    each one it knows (`log.<name>`) whose default there differs from the source's value, and CreateTime is set
    explicitly where its default message.timestamp.type is LogAppendTime; without (its configs unreadable), the
    after/before limits set on the source topic itself.
    """
    out = {k: source_configs[k] for k in COPIED_CONFIGS
           if k in source_configs and (k in explicit or k == "max.message.bytes")}
    for k in TIMESTAMP_LIMITS:
        if k not in source_configs:
            continue
        if broker is None:
            inherit = k in explicit and k != "message.timestamp.difference.max.ms"
        else:
            inherit = f"log.{k}" in broker and broker[f"log.{k}"] != source_configs[k]
        if inherit:
            out[k] = source_configs[k]
    if (source_configs.get("message.timestamp.type") == "LogAppendTime"
            or (broker is not None and broker.get("log.message.timestamp.type") == "LogAppendTime")):
        out["message.timestamp.type"] = "CreateTime"
    out["compression.type"] = "producer"
    return out


def loosest_limits(source_configs: Mapping[str, TopicConfigs]) -> TopicConfigs:
    """The widest timestamp limits of several sources (a dead-letter topic takes records of each), as one topic's."""
    effective = {}
    for k in TIMESTAMP_LIMITS:
        values = [int(c.effective[k]) for c in source_configs.values() if k in c.effective]
        if values:
            effective[k] = str(max(values))
    return TopicConfigs(effective, {k for c in source_configs.values() for k in c.explicit if k in effective})


def timestamp_limit(configs: Mapping[str, str], side: str) -> int:
    """How many ms a record's timestamp may be `side` ("after": ahead of, "before": behind) the broker's clock on a
    topic of these effective configs, as the broker reads them: message.timestamp.<side>.max.ms unless it is left
    at no limit, then message.timestamp.difference.max.ms."""
    limit = int(configs.get(f"message.timestamp.{side}.max.ms", NO_LIMIT))
    return limit if limit != NO_LIMIT else int(configs.get("message.timestamp.difference.max.ms", NO_LIMIT))


def timestamp_type_problem(what: str, configs: Mapping[str, str]) -> str | None:
    """Why an existing topic (`what`: "destination t") would not keep the copied timestamps: LogAppendTime."""
    if configs.get("message.timestamp.type") != "LogAppendTime":
        return None
    topic = what.rsplit(" ", 1)[-1]
    return (f"{what} has message.timestamp.type=LogAppendTime: the broker would replace the timestamp of every "
            f"record copied there with its append time; set it with `kafka-configs --alter --entity-type topics "
            f"--entity-name {topic} --add-config message.timestamp.type=CreateTime`")


def tighter_limits(topic: str, configs: Mapping[str, str], source: str,
                   source_configs: Mapping[str, str]) -> list[dict[str, object]]:
    """The timestamp limits of existing topic `topic` tighter than its source's: records the source took that it
    may refuse (each then named, and dead-lettered with errors.tolerance=all). One dict of log fields per limit."""
    out: list[dict[str, object]] = []
    for side in ("after", "before"):
        have, want = timestamp_limit(configs, side), timestamp_limit(source_configs, side)
        if have < want:
            name = f"message.timestamp.{side}.max.ms"
            out.append({"topic": topic, "config": name, "value": have, "source": source, "source_value": want,
                        "refused": f"records stamped more than {have} ms {'ahead of' if side == 'after' else 'behind'}"
                                   " the broker's clock when copied",
                        "fix": f"kafka-configs --alter --entity-type topics --entity-name {topic} "
                               f"--add-config {name}={want}"})
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


@dataclass(frozen=True)
class BrokerFormat:
    """The record format settings of destination brokers that may store the old format: ZooKeeper-mode brokers
    below inter.broker.protocol.version 3.0 (from 3.0 on, and in KRaft, every topic is v2: KIP-724)."""

    inter_broker_protocol: str
    message_format: str  # log.message.format.version: the format of topics that do not set their own


def _version(text: str) -> tuple[int, ...]:
    """'0.10.2-IV1' -> (0, 10, 2); anything unparsable as new (the check then stays out of the way)."""
    try:
        return tuple(int(n) for n in text.split("-")[0].split("."))
    except ValueError:
        return (99,)


def broker_configs(admin: AdminClient) -> dict[str, str] | None:
    """One broker's configs (name -> value, those with a value); None when they cannot be read."""
    try:
        broker = min(admin.list_topics(timeout=10).brokers)
        res = ConfigResource(ConfigResource.Type.BROKER, str(broker))
        entries = admin.describe_configs([res], request_timeout=30)[res].result()
    except (KafkaException, ValueError):
        return None
    return {k: v for k, e in entries.items() if (v := getattr(e, "value", None)) is not None}


def format_of(configs: Mapping[str, str] | None) -> BrokerFormat | None:
    """A broker's format settings from its configs; None when its topics are v2 whatever they say (no IBP config,
    as in Kafka 4, or IBP >= 3.0) or its configs are unknown (then a produce error says it)."""
    if configs is None:
        return None
    ibp = configs.get("inter.broker.protocol.version")
    fmt = configs.get("log.message.format.version")
    if not ibp or _version(ibp) >= (3, 0):
        return None
    return BrokerFormat(ibp, fmt or ibp)


def broker_format(admin: AdminClient) -> BrokerFormat | None:
    """One destination broker's format settings (format_of its broker_configs)."""
    return format_of(broker_configs(admin))


def format_problem(topic: str, codec: str, message_format: str, inter_broker_protocol: str) -> str | None:
    """Why `topic`, stored in `message_format` by brokers at `inter_broker_protocol`, cannot take transcoder's
    batches: its producers are idempotent, which needs the v2 record format (message format 0.11.0 or newer;
    older formats refuse them with UNSUPPORTED_FOR_MESSAGE_FORMAT), and zstd needs v2 and IBP 2.1."""
    fmt = _version(message_format)
    if fmt < (0, 11):
        magic = 0 if fmt < (0, 10) else 1
        why = ("zstd needs the v2 record format (message format 0.11.0 or newer, Kafka 2.1 brokers), and so do "
               "transcoder's idempotent producers" if codec == "zstd" else
               "transcoder's idempotent producers need the v2 record format (message format 0.11.0 or newer)")
        return (f"destination {topic} would be stored in message format {message_format} (v{magic}): {why}; "
                f"set message.format.version=2.1 on {topic} (create it with that config) or raise the brokers' "
                "log.message.format.version, or copy to a newer cluster")
    if codec == "zstd" and _version(inter_broker_protocol) < (2, 1):
        return (f"destination {topic}: zstd needs inter.broker.protocol.version 2.1 or newer and the destination "
                f"brokers run {inter_broker_protocol}, so they would refuse it with UNSUPPORTED_COMPRESSION_TYPE: "
                "raise it or choose another codec")
    return None


def dlq_size_problem(dlq_topic: str, dlq_configs: Mapping[str, str],
                     source_configs: Mapping[str, TopicConfigs]) -> str | None:
    """Why an existing dead-letter topic could refuse a record its source accepted: a smaller max.message.bytes."""
    sizes = {name: int(c.effective.get("max.message.bytes", "0")) for name, c in source_configs.items()}
    if not sizes:
        return None
    source = max(sorted(sizes), key=lambda n: sizes[n])
    have = int(dlq_configs.get("max.message.bytes", "0"))
    if have >= sizes[source]:
        return None
    return (f"dead-letter topic {dlq_topic} has max.message.bytes={have}, smaller than source {source}'s "
            f"{sizes[source]}: a record the source accepted could not be dead-lettered; raise it with `kafka-configs "
            f"--alter --entity-type topics --entity-name {dlq_topic} --add-config max.message.bytes={sizes[source]}`")


def preflight(src: AdminClient, dst: AdminClient, plan: Plan, *, dlq_topic: str | None,
              max_produce_version: int | None, broker: BrokerFormat | None = None,
              broker_defaults: Mapping[str, str] | None = None) -> Provision:
    """Check everything before a record is copied; TopicError naming every problem found.

    Checks: sources exist; the destination broker speaks zstd (Produce v7, Kafka 2.1) when a
    target needs it; destinations are stored in the v2 record format (`broker`: the destination brokers'
    format settings, None when they store v2 only); existing destinations have the source's partition count, a
    compression.type that keeps batches as produced (or allow_broker_recompression), a
    max.message.bytes no smaller than the source's and message.timestamp.type CreateTime (LogAppendTime would
    replace every copied timestamp); an existing dead-letter topic, one no smaller than any source's, and
    CreateTime. Timestamp limits (message.timestamp.after/before.max.ms) of an existing destination or dead-letter
    topic tighter than its sources' are a warning (destination_timestamp_limit_tighter), not a refusal: they refuse
    only records stamped that far from the broker's clock, which most sources never hold, and each record refused is
    named (and dead-lettered with errors.tolerance=all). Created topics inherit the sources' limits
    (`broker_defaults`: the destination broker's configs, None when unreadable: destination_configs).
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
    warnings: list[dict[str, object]] = []
    destinations = [_destination(name, source, target, sources[source], src_cfg[source], existing[name],
                                 None if existing[name] is None else dst_cfg[name], broker, broker_defaults,
                                 problems, warnings)
                    for name, (source, target) in dest_topics.items()]
    dlq = _dlq(dst, dlq_topic, src_cfg, broker_defaults, problems, warnings) if dlq_topic else None
    if problems:
        raise TopicError("; ".join(problems))
    for fields in warnings:  # a refusal is one line: warnings only when nothing is refused
        log.warning("destination_timestamp_limit_tighter", **fields)
    return Provision(sources=sources, destinations=destinations, dlq=dlq)


def _destination(name: str, source: str, target: Target, source_shape: TopicShape, source_cfg: TopicConfigs,
                 shape: TopicShape | None, have: TopicConfigs | None, broker: BrokerFormat | None,
                 broker_defaults: Mapping[str, str] | None, problems: list[str],
                 warnings: list[dict[str, object]]) -> DestinationTopic:
    """Destination topic `name` (`shape` and `have`: its shape and configs, None where it does not exist) of
    `source`: what provisioning does for it; its problems added to `problems`, its tighter limits to `warnings`."""
    d = target.destination
    want_parts = source_shape.partitions
    create = destination_configs(source_cfg.effective, source_cfg.explicit, broker_defaults)
    if broker is not None:
        fmt = (broker.message_format if have is None else
               have.effective.get("message.format.version", broker.message_format))
        problem = format_problem(name, d.codec, fmt, broker.inter_broker_protocol)
        if problem:
            problems.append(problem)
    if shape is None or have is None:  # both None, or neither
        return DestinationTopic(name, source, target.name, d.label, want_parts, False, create,
                                create["compression.type"])
    ctype = have.effective.get("compression.type", "producer")
    if shape.partitions != want_parts:
        problems.append(f"destination {name} has {shape.partitions} partitions but its source {source} has "
                        f"{want_parts}: records of partition p must land in p; delete it or name another topic")
    if broker_recompresses(ctype, d.codec) and not d.allow_broker_recompression:
        problems.append(
            f"destination {name} has compression.type={ctype}, so the broker would recompress every "
            f"{d.codec} batch: set it with `kafka-configs --alter --entity-type topics --entity-name {name} "
            f"--add-config compression.type=producer`, or set allow_broker_recompression: true")
    src_max = int(source_cfg.effective.get("max.message.bytes", "0"))
    dst_max = int(have.effective.get("max.message.bytes", "0"))
    if dst_max < src_max:
        problems.append(f"destination {name} has max.message.bytes={dst_max}, smaller than its source's "
                        f"{src_max}: records the source accepted would be refused")
    problem = timestamp_type_problem(f"destination {name}", have.effective)
    if problem:
        problems.append(problem)
    warnings += tighter_limits(name, have.effective, source, source_cfg.effective)
    return DestinationTopic(name, source, target.name, d.label, shape.partitions, True, {}, ctype)


def _dlq(dst: AdminClient, dlq_topic: str, src_cfg: Mapping[str, TopicConfigs],
         broker_defaults: Mapping[str, str] | None, problems: list[str],
         warnings: list[dict[str, object]]) -> DestinationTopic:
    """The dead-letter topic: what provisioning does for it; its problems added to `problems`, its tighter limits
    to `warnings`."""
    shape = describe(dst, dlq_topic)
    biggest = max((int(c.effective.get("max.message.bytes", "1048588")) for c in src_cfg.values()), default=0)
    loosest = loosest_limits(src_cfg)
    if shape is not None:
        have = describe_configs(dst, [dlq_topic])[dlq_topic].effective
        for problem in (dlq_size_problem(dlq_topic, have, src_cfg),
                        timestamp_type_problem(f"dead-letter topic {dlq_topic}", have)):
            if problem:
                problems.append(problem)
        warnings += tighter_limits(dlq_topic, have, ", ".join(sorted(src_cfg)), loosest.effective)
    create = destination_configs(loosest.effective, loosest.explicit, broker_defaults)
    return DestinationTopic(dlq_topic, "", "dlq", "zstd", shape.partitions if shape else 1, shape is not None,
                            {**create, "max.message.bytes": str(max(biggest, 1048588))}, "producer")


def create_missing(dst: AdminClient, provision: Provision) -> list[str]:
    """Create the destinations (and DLQ) that do not exist; return their names."""
    created = []
    for d in provision.to_create:
        create_topic(dst, NewTopic(d.topic, num_partitions=d.partitions, replication_factor=-1,
                              config=d.create_configs), 30.0)
        wait_leaders(dst, d.topic)  # the lanes write to it next: every partition has its leader first
        created.append(d.topic)
    return created


def extend_partitions(dst: AdminClient, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Give a destination transcoder created `partitions` partitions (its source's, raised while it ran), and wait
    until each has a leader. TopicError naming the topic when Kafka refuses."""
    fut = dst.create_partitions([NewPartitions(topic, partitions)], operation_timeout=timeout,
                                request_timeout=timeout)[topic]
    try:
        fut.result()
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() != KafkaError.INVALID_PARTITIONS:  # INVALID_PARTITIONS: it has that many already
            raise TopicError(f"cannot add partitions to destination {topic} (to {partitions}): {err.str()}",
                             topic=topic, kafka_error=err.name()) from None
    shape = wait_leaders(dst, topic, timeout_s=timeout)
    if shape.partitions < partitions:
        raise TopicError(f"destination {topic} has {shape.partitions} partitions, not the {partitions} asked for",
                         topic=topic)
    log.warning("destination_partitions_added", topic=topic, partitions=partitions)


@dataclass(frozen=True)
class Prepared:
    """What pre-flight found and did, and the admin clients of both clusters (kept for the broker figures)."""

    plan: Plan
    provision: Provision
    created: list[str]
    src_admin: AdminClient
    dst_admin: AdminClient


def prepare(config: Config, *, create: bool) -> Prepared:
    """Every pre-flight check of a config, for every engine; with `create`, also create missing destinations."""
    # librdkafka's verdict on cluster.config first: before any connection, and before anything is created.
    check_properties(config.cluster.librdkafka(), "cluster.config (the source cluster" +
                     (")" if config.destination_cluster is not None else " and destination cluster)"))
    if config.destination_cluster is not None:
        check_properties(config.destination_cluster.librdkafka(),
                         "destination_cluster.config (the destination cluster)")
    src, src_md = connect_admin(config.cluster.librdkafka())
    if config.destination_cluster is not None:
        dst, _ = connect_admin(config.destination_cluster.librdkafka())
    else:
        dst = src
    info = RawClient(config.target_cluster.librdkafka())
    try:
        produce_version = info.max_produce_version()
    finally:
        info.close()
    plan = routes.plan(config, src_md.topics)
    defaults = broker_configs(dst)
    provision = preflight(src, dst, plan, dlq_topic=config.errors.dlq_topic, max_produce_version=produce_version,
                          broker=format_of(defaults), broker_defaults=defaults)
    created = create_missing(dst, provision) if create else []
    if create and config.migration is not None:  # the lanes record the offset map (`transcoder migrate`)
        from transcoder.kafka import offset_map_topic

        if offset_map_topic.ensure_topic(dst, config):
            created.append(config.offset_map_topic)
    for name in created:
        log.info("topic_created", topic=name)
    return Prepared(plan=plan, provision=provision, created=created, src_admin=src, dst_admin=dst)
