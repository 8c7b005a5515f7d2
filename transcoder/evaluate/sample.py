"""What `transcoder evaluate` measures on: a sample of records per partition, in offset order, and — when it
comes from a topic — the topic's facts the cost model needs (partitions, replication, retention, its limit
on batch size, the codec its producers use now and the rate it receives).

Records from files and generators are built by the command (transcoder.dev reads them); this module
reads a topic: the last N records of each partition, or those between two times.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka.partitioner.default import murmur2

from transcoder.codecs import CODEC_OF_ID
from transcoder.errors import ConfigError, InputError, KafkaUnavailableError, TopicError
from transcoder.evaluate.batches import Record, record_size
from transcoder.kafka.admin import describe, describe_configs
from transcoder.kafka.clients import client_config, connect_admin
from transcoder.kafka.protocol import RawClient
from transcoder.pipeline.batching import RECORD_OVERHEAD


@dataclass(frozen=True)
class TopicFacts:
    """What the topic says of itself: the cost model's inputs that evaluate did not have to be told."""

    name: str
    partitions: int
    replication_factor: int
    retention_ms: int | None  # None: kept forever (retention.ms -1)
    compression_type: str  # the topic's compression.type (producer, zstd, ...)
    max_message_bytes: int
    current_codec: str | None  # the codec of the batches stored now (read from one batch per partition)
    current_batch_bytes: int | None  # the average uncompressed size of the stored batches read
    rate: float | None  # records/s the topic received over the sampled span (all partitions)


@dataclass
class Sample:
    """Records per partition, each partition in offset order."""

    description: str
    partitions: dict[int, list[Record]]
    topic: TopicFacts | None = None
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> (first, last) offset read

    @property
    def records(self) -> int:
        return sum(len(rs) for rs in self.partitions.values())

    @property
    def record_bytes(self) -> int:
        return sum(record_size(r) for rs in self.partitions.values() for r in rs)

    def check_not_empty(self) -> None:
        if not self.records:
            raise InputError(f"the sample is empty: {self.description} gave no records")


def from_records(description: str, records: Sequence[Record], partitions: int = 1) -> Sample:
    """A sample of records from a file or a generator, spread over `partitions` as Kafka's Java producer
    spreads them: keyed records by murmur2 of the key, unkeyed ones round-robin; each partition in order."""
    if partitions < 1:
        raise ConfigError(f"--partition-count must be at least 1, not {partitions}")
    out: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    for i, r in enumerate(records):
        p = 0 if partitions == 1 else (murmur2(r[0]) & 0x7FFFFFFF) % partitions if r[0] is not None else i % partitions
        out[p].append(r)
    return Sample(description, {p: rs for p, rs in out.items() if rs})


@dataclass(frozen=True)
class TopicPlan:
    """Which offsets of which partitions the sample holds, and what the topic's metadata says."""

    cluster: Mapping[str, Any]
    topic: str
    partitions: int
    ranges: dict[int, tuple[int, int]]  # partition -> [start, end) offsets to read
    leaders: dict[int, int]
    replication_factor: int
    configs: dict[str, str]


def plan_topic(cluster: Mapping[str, Any], topic: str, *, partitions: Sequence[int] | None = None,
               records: int | None = None, since: int | None = None, until: int | None = None) -> TopicPlan:
    """The offsets to read: the last `records` records of each partition, or those with timestamps (epoch ms) in
    [since, until). InputError when the topic does not exist or a partition named is not in it."""
    if records is not None and (since is not None or until is not None):
        raise ConfigError("give --records or --since/--until, not both")
    if records is not None and records <= 0:
        raise ConfigError(f"--records must be positive, not {records}")
    admin, _ = connect_admin(cluster)
    shape = describe(admin, topic)
    if shape is None:
        raise InputError(f"topic {topic} does not exist on {cluster.get('bootstrap.servers')}", topic=topic)
    chosen = sorted(set(partitions)) if partitions else list(range(shape.partitions))
    missing = [p for p in chosen if not 0 <= p < shape.partitions]
    if missing:
        raise InputError(f"topic {topic} has partitions 0..{shape.partitions - 1}; there is no partition "
                         f"{missing[0]}", topic=topic, partition=missing[0])
    configs = describe_configs(admin, [topic])[topic].effective
    md = admin.list_topics(topic=topic, timeout=10).topics[topic]
    rf = len(next(iter(md.partitions.values())).replicas) if md.partitions else 1
    with _consumer(cluster) as consumer:
        ranges = _ranges(consumer, topic, chosen, records, since, until)
    return TopicPlan(cluster=cluster, topic=topic, partitions=shape.partitions, ranges=ranges,
                     leaders={p: part.leader for p, part in md.partitions.items()}, replication_factor=rf,
                     configs=configs)


@contextmanager
def _consumer(cluster: Mapping[str, Any]) -> Iterator[Consumer]:
    consumer = Consumer(client_config(cluster, **{
        "group.id": f"transcoder-evaluate-{uuid.uuid4()}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}))
    try:
        yield consumer
    finally:
        consumer.close()


def read_ranges(plan: TopicPlan, ranges: Mapping[int, tuple[int, int]] | None = None, *,
                timeout_s: float = 60.0) -> Sample:
    """The records of the plan's ranges (or of `ranges`), per partition in offset order, read here."""
    ranges = dict(plan.ranges if ranges is None else ranges)
    with _consumer(plan.cluster) as consumer:
        by_partition = _read(consumer, plan.topic, ranges, timeout_s)
    offsets = {p: (rs[0][1], rs[-1][1]) for p, rs in by_partition.items() if rs}
    return Sample(f"topic {plan.topic}", {p: [r for r, _ in rs] for p, rs in by_partition.items()}, offsets=offsets)


def facts(plan: TopicPlan, sample: Sample) -> TopicFacts:
    """The topic's facts; the rate and the stored batches judged from `sample` (records read from the plan)."""
    codec, batch_bytes = _stored(plan.cluster, plan.topic, sample, sample.offsets, plan.leaders)
    retention = int(plan.configs.get("retention.ms", "604800000"))
    return TopicFacts(
        name=plan.topic, partitions=plan.partitions, replication_factor=plan.replication_factor,
        retention_ms=None if retention < 0 else retention,
        compression_type=plan.configs.get("compression.type", "producer"),
        max_message_bytes=int(plan.configs.get("max.message.bytes", "1048588")),
        current_codec=codec, current_batch_bytes=batch_bytes, rate=_rate(sample, plan.partitions))


def read_topic(cluster: Mapping[str, Any], topic: str, *, partitions: Sequence[int] | None = None,
               records: int | None = None, since: int | None = None, until: int | None = None,
               timeout_s: float = 60.0) -> Sample:
    """The sample read here (plan_topic, then read_ranges), with the topic's facts."""
    plan = plan_topic(cluster, topic, partitions=partitions, records=records, since=since, until=until)
    sample = read_ranges(plan, timeout_s=timeout_s)
    sample.topic = facts(plan, sample)
    return sample


def _ranges(consumer: Consumer, topic: str, chosen: list[int], records: int | None, since_ms: int | None,
            until_ms: int | None) -> dict[int, tuple[int, int]]:
    """Per partition, the offsets [start, end) to read."""
    out = {}
    for p in chosen:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"cannot read the offsets of {topic} [{p}]: {exc.args[0].str()}",
                                        topic=topic, partition=p) from exc
        if low < 0 or high < 0:
            raise KafkaUnavailableError(f"cannot read the offsets of {topic} [{p}]: the broker gave {low}..{high}",
                                        topic=topic, partition=p)
        start, end = low, high
        if records is not None:
            start = max(low, high - records)
        for ms, which in ((since_ms, "start"), (until_ms, "end")):
            if ms is None:
                continue
            try:
                found = consumer.offsets_for_times([TopicPartition(topic, p, ms)], timeout=10)[0]
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT:
                    raise TopicError(f"cannot find the offsets of {topic} [{p}] by time: the topic is stored in "
                                     "message format v0 (before Kafka 0.10), whose records carry no timestamps; "
                                     "give --records instead of --since/--until", topic=topic, partition=p,
                                     kafka_error="UNSUPPORTED_FOR_MESSAGE_FORMAT") from exc
                raise KafkaUnavailableError(f"cannot find the offsets of {topic} [{p}] by time: {err.str()}",
                                            topic=topic, partition=p) from exc
            at = high if found.offset < 0 else found.offset  # no record at or after that time: the end
            start, end = (max(start, at), end) if which == "start" else (start, min(end, at))
        if start < end:
            out[p] = (start, end)
    return out


def _read(consumer: Consumer, topic: str, ranges: dict[int, tuple[int, int]], timeout_s: float
          ) -> dict[int, list[tuple[Record, int]]]:
    """Every record of each partition's range, in offset order, with its offset."""
    out: dict[int, list[tuple[Record, int]]] = {p: [] for p in ranges}
    if not ranges:
        return out
    consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in ranges.items()])
    open_ = set(ranges)
    deadline = time.monotonic() + timeout_s  # moved on by every record: a stall, not a slow read, fails
    while open_:
        if time.monotonic() > deadline:
            stalled = min(open_)
            raise KafkaUnavailableError(
                f"reading {topic} [{stalled}]: nothing for {timeout_s:g}s after {len(out[stalled])} of "
                f"{ranges[stalled][1] - ranges[stalled][0]} records (an open transaction holds read_committed "
                "readers back)", topic=topic, partition=stalled)
        msgs = consumer.consume(10_000, timeout=1.0)
        if msgs:
            deadline = time.monotonic() + timeout_s
        for msg in msgs:
            p, offset = msg.partition(), msg.offset()
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    assert p is not None and offset is not None  # a partition's end names both
                    if offset >= ranges.get(p, (0, 0))[1]:  # the end of the range: nothing more to come
                        open_.discard(p)
                    continue
                raise KafkaUnavailableError(f"reading {topic} [{p}]: {err.str()}", topic=topic, partition=p)
            assert p is not None and offset is not None  # a record names both
            if p not in open_:
                continue
            end = ranges[p][1]
            if offset < end:
                # a consumed record's headers are (name, bytes or None) pairs; confluent-kafka's type is a producer's
                headers = cast("list[tuple[str, bytes | None]] | None", msg.headers())
                out[p].append(((msg.key(), msg.value(), tuple(headers or ()), msg.timestamp()[1]), offset))
            if offset >= end - 1:
                open_.discard(p)
                consumer.incremental_unassign([TopicPartition(topic, p)])
    return out


def _rate(sample: Sample, partitions: int) -> float | None:
    """Records/s over the sampled span of each partition, scaled to the topic's partitions."""
    rates = []
    for rs in sample.partitions.values():
        span_ms = rs[-1][3] - rs[0][3] if len(rs) > 1 else 0
        if span_ms > 0:
            rates.append((len(rs) - 1) / (span_ms / 1000))
    if not rates:
        return None
    return sum(rates) / len(rates) * partitions


def _stored(cluster: Mapping[str, Any], topic: str, sample: Sample, offsets: dict[int, tuple[int, int]],
            leaders: dict[int, int]) -> tuple[str | None, int | None]:
    """The codec and average uncompressed size of the batches the broker stores for the sample (one Fetch of
    the first partition sampled): what producers write today."""
    if not offsets:
        return None, None
    p = min(offsets)
    info = RawClient(cluster)
    try:
        batches = info.stored_codecs(topic, p, offsets[p][0], leader=leaders[p])
    finally:
        info.close()
    if not batches:
        return None, None
    codecs = [CODEC_OF_ID.get(c) for _, c in batches]
    codec = max(set(codecs), key=codecs.count)
    if len(batches) < 2:
        return codec, None
    first = offsets[p][0]
    per_batch = (batches[-1][0] - batches[0][0]) / (len(batches) - 1)
    rs = sample.partitions[p][: max(1, batches[-1][0] - first)]
    avg = sum(record_size(r) + RECORD_OVERHEAD for r in rs) / len(rs)
    return codec, math.ceil(per_batch * avg)
