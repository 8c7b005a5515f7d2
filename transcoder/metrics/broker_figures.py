"""Broker figures, read every metrics.disk_interval_s (never per scrape: they ask the brokers): bytes on
disk per topic (DescribeLogDirs), records per destination, and the broker recompression detector
(compression.type drift, and a sampled stored batch's codec)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka.errors import KafkaError as KafkaPythonError

from transcoder.codecs import CODEC_OF_ID, broker_recompresses, stored_recompressed
from transcoder.config import Config
from transcoder.errors import TranscoderError
from transcoder.kafka.admin import TopicShape, describe_configs, end_offsets
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.provisioning import Provision
from transcoder.metrics.registry import Metrics
from transcoder.pipeline.routes import Plan

log = structlog.get_logger("transcoder.brokers")
#: a last reading the brokers did not answer (the one the run ends with) is asked again this many times, 1 s apart
FINAL_READ_RETRIES = 3


class BrokerFigures:
    """The latest broker figures of one plan; `run` polls until the engine's lanes are done."""

    def __init__(self, config: Config, plan: Plan, provision: Provision, dst_admin: AdminClient,
                 metrics: Metrics) -> None:
        self.config, self.plan, self.metrics = config, plan, metrics
        self._dst_admin = dst_admin
        self.dests = {d.topic: d for d in provision.destinations}
        self.lane_of = {dest: lane.name for lane in plan.lanes for t in lane.targets for dest in t.topics.values()}
        self.codec_of = {t.topic_for(s): t.destination.codec for t in plan.targets for s in t.sources}
        self.allowed = {t.topic_for(s): t.destination.allow_broker_recompression
                        for t in plan.targets for s in t.sources}
        #: topic -> bytes on disk; destination -> records it holds (end - start offsets)
        self.disk: dict[str, int] = {}
        self.topic_records: dict[str, int] = {}
        #: destination -> whether its log is compacted (cleanup.policy): it then holds fewer records than its
        #: offsets span, and bytes on disk over that span are no average record
        self.compacted: dict[str, bool] = {}
        #: destination -> why the broker recompresses it (None: it does not)
        self.recompression: dict[str, str | None] = {}
        self._polls = 0

    def run(self, stop: threading.Event, lanes_done: Callable[[], bool]) -> None:
        """Read the figures every interval until `lanes_done`; once `stop` is set, one last reading after
        every lane has drained. A reading the brokers do not answer is logged and tried next interval."""
        interval = self.config.metrics.disk_interval_s
        src_info = RawClient(self.config.cluster.librdkafka())
        dst_info = RawClient(self.config.target_cluster.librdkafka()) if self.config.destination_cluster else src_info
        try:
            while True:
                # asked before the reading: a lane that finishes while a reading is under way gets one more
                done = lanes_done()
                read = self._read_or_log(src_info, dst_info)
                if done:
                    # that was the reading after the last lane stopped: the figures the run ends with, so one the
                    # brokers did not answer is asked again before they are left as they were
                    for _ in range(FINAL_READ_RETRIES):
                        if read:
                            break
                        time.sleep(1.0)
                        read = self._read_or_log(src_info, dst_info)
                    if not read:
                        log.warning("broker_figures_stale", reason="the last reading failed "
                                    f"{FINAL_READ_RETRIES + 1} times: sizes and ratios are those of an earlier one")
                    return
                if stop.is_set():
                    while not lanes_done():
                        time.sleep(0.2)
                else:
                    stop.wait(interval)
        finally:
            src_info.close()
            if dst_info is not src_info:
                dst_info.close()

    def _read_or_log(self, src_info: RawClient, dst_info: RawClient) -> bool:
        try:
            self.read(src_info, dst_info)
            return True
        except (KafkaException, KafkaPythonError, TranscoderError, OSError) as exc:
            log.warning("broker_figures_failed", error=f"{type(exc).__name__}: {exc}")
            return False

    def read(self, src_info: RawClient, dst_info: RawClient) -> None:
        """One reading: sizes, records, and the recompression checks, into these fields and the metrics."""
        m = self.metrics
        dests = self.dests
        sizes = src_info.topic_sizes(self.plan.sources) | dst_info.topic_sizes(dests)
        self.disk.update(sizes)
        offsets = end_offsets(self._dst_admin, {d.topic: TopicShape(d.topic, d.partitions) for d in dests.values()})
        counts: dict[str, int] = {}
        for (t, _), (low, high) in offsets.items():
            counts[t] = counts.get(t, 0) + high - low
        self.topic_records.update(counts)
        for t in self.plan.sources:
            m.disk_bytes.labels(topic=t, role="source").set(sizes[t])
        for name, d in dests.items():
            m.disk_bytes.labels(topic=name, role="destination").set(sizes[name])
            if sizes[name]:
                m.disk_ratio.labels(lane=self.lane_of[name], destination=name, codec=d.codec).set(
                    sizes[d.source] / sizes[name])
        configs = describe_configs(self._dst_admin, list(dests))
        self._polls += 1
        for name, d in dests.items():
            ctype = configs[name].effective.get("compression.type", "producer")
            self.compacted[name] = "compact" in configs[name].effective.get("cleanup.policy", "delete")
            codec = self.codec_of[name]
            lane = self.lane_of[name]
            found = []
            if broker_recompresses(ctype, codec):
                found.append(("config", f"compression.type={ctype}"))
            m.recompression.labels(lane=lane, destination=name, reason="config").set(1 if found else 0)
            # A sampled stored batch: the newest of one partition, a different partition each poll.
            partition = self._polls % d.partitions
            low, high = offsets[(name, partition)]
            stored = self._stored_codec(dst_info, name, partition, high - 1) if high > low else None
            if stored is not None and stored_recompressed(stored, codec, ctype):
                found.append(("stored", f"stored as {CODEC_OF_ID.get(stored, stored)} in partition {partition}"))
            m.recompression.labels(lane=lane, destination=name, reason="stored").set(
                1 if any(r == "stored" for r, _ in found) else 0)
            was = self.recompression.get(name)
            self.recompression[name] = "; ".join(why for _, why in found) or None
            if found and not was:
                log.warning("broker_recompression", destination=name, codec=codec, found=self.recompression[name],
                            allowed=self.allowed.get(name, False),
                            fix=f"kafka-configs --alter --entity-type topics --entity-name {name} "
                                "--add-config compression.type=producer")

    def _stored_codec(self, info: RawClient, topic: str, partition: int, offset: int) -> int | None:
        """Codec id of the stored batch holding `offset` (None when the broker has no leader for it now)."""
        md = self._dst_admin.list_topics(topic, timeout=10).topics[topic].partitions.get(partition)
        if md is None or md.leader < 0:
            return None
        batches = info.stored_codecs(topic, partition, offset, leader=md.leader)
        return batches[0][1] if batches else None
