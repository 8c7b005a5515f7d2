"""Provisioning: pre-flight checks of sources and destinations, and creating destinations like their sources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from confluent_kafka.admin import AdminClient, NewTopic

from transcoder.codecs import ZSTD_MIN_PRODUCE_VERSION, broker_recompresses
from transcoder.config import Config
from transcoder.errors import TopicError
from transcoder.kafka.admin import TopicShape, create_topic, describe, describe_configs
from transcoder.kafka.clients import connect_admin
from transcoder.kafka.protocol import BrokerInfo
from transcoder.pipeline import routes
from transcoder.pipeline.routes import Plan

log = structlog.get_logger("transcoder.provisioning")

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
        create_topic(dst, NewTopic(d.topic, num_partitions=d.partitions, replication_factor=-1,
                              config=d.create_configs), 30.0)
        created.append(d.topic)
    return created


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
    src, src_md = connect_admin(config.cluster.librdkafka())
    if config.destination_cluster is not None:
        dst, _ = connect_admin(config.destination_cluster.librdkafka())
    else:
        dst = src
    info = BrokerInfo(config.target_cluster.librdkafka())
    try:
        produce_version = info.max_produce_version()
    finally:
        info.close()
    plan = routes.plan(config, src_md.topics)
    provision = preflight(src, dst, plan, dlq_topic=config.errors.dlq_topic, max_produce_version=produce_version)
    created = create_missing(dst, provision) if create else []
    if create and config.migration is not None:  # the lanes record the offset map (`transcoder migrate`)
        from transcoder.kafka import offset_map

        if offset_map.ensure_topic(dst, config):
            created.append(config.offset_map_topic)
    for name in created:
        log.info("topic_created", topic=name)
    return Prepared(plan=plan, provision=provision, created=created, src_admin=src, dst_admin=dst)
