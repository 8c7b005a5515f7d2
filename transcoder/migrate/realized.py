"""The I/O around migrate.payoff: evaluate's prediction taken on the source's own records, and a reading of what the
clusters and the copier say now (the controller stores both in the migration's state topic)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from transcoder.config import Config
from transcoder.errors import TranscoderError
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import measure_sample
from transcoder.evaluate.sample import plan_topic, read_ranges
from transcoder.kafka.admin import TopicShape, end_offsets
from transcoder.kafka.offset_map_topic import LaneHealth
from transcoder.kafka.protocol import RawClient
from transcoder.migrate.payoff import Copier, Prediction, Reading, TopicSize, reading_key
from transcoder.migrate.plan import TopicFacts, topic_facts
from transcoder.migrate.state import now_ms
from transcoder.pipeline.routes import Target

log = structlog.get_logger("transcoder.migrate")


def predict(config: Config, target: Target, source: str, *, source_facts: TopicFacts, records_per_partition: int,
            now_ms: int) -> Prediction | None:
    """evaluate's measurement of the destination's codec, level and batch size on the last `records_per_partition`
    records of each of the source's partitions; None when the source holds no records."""
    plan = plan_topic(config.cluster.librdkafka(), source, records=records_per_partition)
    sample = read_ranges(plan)
    if not sample.records:
        return None
    d = target.destination
    [cell] = measure_sample(sample.partitions, [Cell(Setting(d.codec, d.level), d.batch.max_bytes)],
                            max_records=d.batch.max_records)
    where = ", ".join(f"{p}:{a}-{b}" for p, (a, b) in sorted(sample.offsets.items()))
    return Prediction(codec=d.codec, level=d.level, batch_max_bytes=d.batch.max_bytes, records=cell.records,
                      record_bytes=cell.record_bytes, stored_bytes=cell.compressed_bytes,
                      compress_cpu_s_per_1m=round(cell.compress_cpu_s_per_1m, 4),
                      source_bytes_per_record=source_facts.bytes_per_record,
                      sample=f"{sample.records:,} records of {source} (partition:offsets {where})", at_ms=now_ms)


def size(t: TopicFacts) -> TopicSize:
    return TopicSize(disk_bytes=t.disk_bytes, records=t.records or 0, replicas=t.replication_factor or 0,
                     end_offsets=t.end_offsets or 0)


def facts(config: Config, src_admin: AdminClient, dst_admin: AdminClient, source: str, destination: str
          ) -> tuple[TopicFacts, TopicFacts]:
    """Both topics as the clusters have them now (DescribeLogDirs, offsets)."""
    info = RawClient(config.cluster.librdkafka())
    dinfo = info if config.destination_cluster is None else RawClient(config.target_cluster.librdkafka())
    try:
        return (topic_facts(src_admin, info, source, with_config=False),
                topic_facts(dst_admin, dinfo, destination, with_config=False))
    finally:
        info.close()
        if dinfo is not info:
            dinfo.close()


def reading(step: str, source: TopicFacts, copy: TopicFacts, health: LaneHealth | None, *, at_ms: int,
            lane_committed: Mapping[int, int] | None, source_ends: Mapping[int, int], groups_moved: int) -> Reading:
    """A reading from facts gathered (pure)."""
    c = health.copier if health is not None else None
    copier = None if c is None or health is None else Copier(
        records=c.records, record_bytes=c.record_bytes, wire_bytes=c.wire_bytes, cpu_s=c.cpu_s, at_ms=health.at_ms)
    lag = None if lane_committed is None else sum(max(0, end - lane_committed.get(p, 0))
                                                  for p, end in source_ends.items())
    return Reading(at_ms=at_ms, step=step, source=size(source), copy=size(copy), copier=copier, lag_records=lag,
                   groups_moved=groups_moved)


class Payoffs:
    """A migration's prediction and readings, gathered through the controller's collaborators and stored with
    `put` (the controller's: a controller that lost its lease writes nothing)."""

    def __init__(self, config: Config, target: Target, source: str, destination: str, *, src_admin: AdminClient,
                 dst_admin: AdminClient, put: Callable[[str, dict[str, Any]], None],
                 lane_committed: Callable[[], Mapping[int, int] | None],
                 health: Callable[[], LaneHealth | None], sample_records: int) -> None:
        self.config, self.target, self.source, self.destination = config, target, source, destination
        self._src_admin, self._dst_admin = src_admin, dst_admin
        self._put = put
        self._lane_committed = lane_committed
        self._health = health
        self.sample_records = sample_records

    def read(self, step: str, *, groups_moved: int = 0) -> Reading:
        """What the clusters and the copier say now (stored nowhere)."""
        src, dst = facts(self.config, self._src_admin, self._dst_admin, self.source, self.destination)
        ends = end_offsets(self._src_admin, {self.source: TopicShape(self.source, src.partitions or 0)})
        return reading(step, src, dst, self._health(), at_ms=now_ms(), lane_committed=self._lane_committed(),
                       source_ends={p: high for (_, p), (_, high) in ends.items()}, groups_moved=groups_moved)

    def start(self, state: Mapping[str, Any]) -> None:
        """At `migrate start`: the prediction (once per migration) and the first reading."""
        try:
            src, _ = facts(self.config, self._src_admin, self._dst_admin, self.source, self.destination)
            if "prediction" not in state:
                p = predict(self.config, self.target, self.source, source_facts=src,
                            records_per_partition=self.sample_records, now_ms=now_ms())
                if p is None:
                    log.warning("payoff_not_predicted", migration=self.destination,
                                reason=f"source {self.source} holds no records to sample")
                else:
                    self._put("prediction", p.as_dict())
                    log.info("payoff_predicted", migration=self.destination, ratio=round(p.ratio, 3),
                             bytes_per_record=round(p.bytes_per_record, 1), sample=p.sample)
        except (TranscoderError, KafkaException) as exc:
            self._failed("start", exc)
            return
        self.record("start", groups_moved=0)

    def record(self, step: str, *, groups_moved: int) -> Reading | None:
        """A reading stored under its own key; a reading the clusters do not answer is logged, never fails the
        step that took it (a cutover done stays done)."""
        try:
            r = self.read(step, groups_moved=groups_moved)
        except (TranscoderError, KafkaException) as exc:
            self._failed(step, exc)
            return None
        self._put(reading_key(r), r.as_dict())
        return r

    def _failed(self, step: str, exc: BaseException) -> None:
        log.warning("payoff_reading_failed", migration=self.destination, step=step,
                    error=f"{type(exc).__name__}: {exc}",
                    note="`migrate report` shows the readings taken; the next step takes another")
