"""Runs the lanes of one config: pre-flight, provisioning, one thread per lane, stop and drain."""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass
from typing import Any

import structlog
from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka.errors import KafkaError as KafkaPythonError
from prometheus_client import CollectorRegistry

from transcoder import routes, topics
from transcoder.brokers import BrokerInfo
from transcoder.clients import connect_admin
from transcoder.codecs import CODEC_OF_ID, broker_recompresses, stored_recompressed
from transcoder.config import Config
from transcoder.endpoints import Endpoints
from transcoder.errors import KafkaUnavailableError, TranscoderError
from transcoder.lane import Lane
from transcoder.metrics import Metrics
from transcoder.report import histogram_quantile
from transcoder.threads import ThreadLedger

log = structlog.get_logger("transcoder.service")

#: CPython's cyclic collector, for a process that copies records. The hot path allocates a few
#: GC-tracked objects per record (consumed messages, delivery reports) and keeps none in cycles; at
#: the default gen-0 threshold (700 allocations) the collector ran every ~200 records and took 12%
#: of a lane thread's CPU (bench/results/2026-11-22-nginx.md). Cycles are still collected, 140x less often.
GC_THRESHOLDS = (100_000, 20, 100)


@dataclass(frozen=True)
class Prepared:
    plan: routes.Plan
    provision: topics.Provision
    created: list[str]


@topics.admin_retry
def _list_offsets(admin: AdminClient, tps: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets({tp: spec for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED,
                                 request_timeout=30)
    return {(tp.topic, tp.partition): fut.result().offset for tp, fut in futures.items()}


def end_offsets(admin: AdminClient, shapes: dict[str, topics.TopicShape]) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) offsets of every partition, as a read_committed consumer sees them now.

    Retriable errors (a just-created topic without a leader yet) are retried.
    """
    tps = [TopicPartition(t, p) for t, s in shapes.items() for p in range(s.partitions)]
    if not tps:
        return {}
    try:
        low = _list_offsets(admin, tps, OffsetSpec.earliest())
        high = _list_offsets(admin, tps, OffsetSpec.latest())
    except KafkaException as exc:
        raise KafkaUnavailableError(f"cannot list offsets of {', '.join(sorted(shapes))}: "
                                    f"{exc.args[0].str()}") from exc
    return {tp: (low[tp], high[tp]) for tp in low}


class Service:
    def __init__(self, config: Config, *, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.metrics = Metrics(registry or CollectorRegistry())
        self.lanes: list[Lane] = []
        self.stop_event = threading.Event()
        self.threads = ThreadLedger()
        self.endpoints: Endpoints | None = None
        #: topic -> bytes on disk, and destination -> why the broker recompresses it (None: it does not)
        self.disk: dict[str, int] = {}
        self.topic_records: dict[str, int] = {}  # destination -> records it holds (end - start offsets)
        self.recompression: dict[str, str | None] = {}
        self._polls = 0
        self.metrics.cpu_source(self.cpu_by_lane, lambda: {ln.spec.name: ln.status.records for ln in self.lanes})

    def cpu_by_lane(self) -> dict[tuple[str, str], float]:
        """CPU seconds per (lane, part): consume, produce, loop."""
        return {k: v for k, v in self.threads.cpu_by_owner().items() if isinstance(k, tuple)}

    def prepare(self, *, create: bool) -> Prepared:
        """Every pre-flight check; with `create`, also create missing destination topics."""
        src, src_md = connect_admin(self.config.cluster.librdkafka())
        if self.config.destination_cluster is not None:
            dst, _ = connect_admin(self.config.destination_cluster.librdkafka())
        else:
            dst = src
        info = BrokerInfo(self.config.target_cluster.librdkafka())
        try:
            produce_version = info.max_produce_version()
        finally:
            info.close()
        plan = routes.plan(self.config, src_md.topics)
        provision = topics.preflight(src, dst, plan, dlq_topic=self.config.errors.dlq_topic,
                                     max_produce_version=produce_version)
        created = topics.create_missing(dst, provision) if create else []
        for name in created:
            log.info("topic_created", topic=name)
        self._src_admin = src
        self._dst_admin = dst
        return Prepared(plan=plan, provision=provision, created=created)

    def stop(self) -> None:
        """Ask every lane to stop, drain and commit. Safe from a signal handler: it only sets a flag."""
        self.stop_event.set()

    def serve(self, port: int | None = None) -> int | None:
        """Serve /metrics, /healthz, /readyz and /status; return the port.

        Without `port`, the config's metrics.port (0 there: no endpoints); an explicit 0: any free port.
        """
        if port is None:
            port = self.config.metrics.port
            if not port:
                return None
        self.endpoints = Endpoints(self.metrics.registry, healthy=self.healthy, ready=self.ready, status=self.status)
        bound = self.endpoints.start(self.config.metrics.host, port)
        log.info("endpoints_serving", port=bound, paths=["/metrics", "/healthz", "/readyz", "/status"])
        return bound

    #: A running lane whose loop has not turned for this long is stuck (revoke drains take <= shutdown_timeout_s).
    def _stuck_after(self) -> float:
        return max(60.0, 2 * self.config.shutdown_timeout_s, 10 * self.config.commit_interval_ms / 1000)

    def healthy(self) -> tuple[bool, str]:
        """Liveness: the process answers and no lane loop is stuck."""
        now = time.monotonic()
        for lane in self.lanes:
            idle = now - lane.status.last_loop
            if lane.status.state == "running" and idle > self._stuck_after():
                return False, f"lane {lane.spec.name}: loop has not turned for {idle:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Readiness: every lane copies (partitions assigned, producing, no fatal error) or is caught up."""
        if not self.lanes:
            return False, "starting: pre-flight checks and topic provisioning"
        for lane in self.lanes:
            st = lane.status
            if st.state == "failed":
                return False, f"lane {lane.spec.name} failed: {st.error}"
            if st.state in ("starting", "stopped"):
                return False, f"lane {lane.spec.name} is {st.state}"
            if st.state == "running" and not st.assigned:
                return False, f"lane {lane.spec.name} has no partitions assigned"
        return True, "ok"

    def status(self) -> dict[str, Any]:
        """The Kafka Connect-style status document: lanes, assignments, offsets, lag, per-destination figures."""
        cpu = self.cpu_by_lane()
        reg = self.metrics.registry
        lanes = []
        for lane in self.lanes:
            st = lane.status
            name = lane.spec.name
            lane_cpu = {part: s for (ln, part), s in cpu.items() if ln == name}
            dests = []
            for dest, source in lane.source_of.items():
                labels = {"lane": name, "destination": dest, "codec": lane.codec_of[dest]}
                buckets = [(float(b), reg.get_sample_value("transcoder_end_to_end_latency_seconds_bucket",
                                                           {"lane": name, "destination": dest, "le": le}) or 0.0)
                           for b, le in self._latency_les()]
                dests.append({
                    "topic": dest, "source": source, "codec": lane.codec_of[dest],
                    "records_out": st.acked.get(dest, 0),
                    "record_bytes_out": reg.get_sample_value("transcoder_record_bytes_out_total", labels) or 0.0,
                    "compressed_bytes": reg.get_sample_value("transcoder_compressed_bytes_total", labels) or 0.0,
                    "wire_ratio": reg.get_sample_value("transcoder_wire_ratio", labels),
                    "disk_bytes": self.disk.get(dest), "source_disk_bytes": self.disk.get(source),
                    "topic_records": self.topic_records.get(dest),
                    "latency_p99_seconds": histogram_quantile(0.99, buckets),
                    "broker_recompression": self.recompression.get(dest),
                })
            lanes.append({
                "name": name, "group_id": lane.spec.group_id, "state": st.state, "error": st.error,
                "records": st.records, "source_bytes": st.source_bytes, "dead_lettered": st.dead_lettered,
                "assigned": [f"{t}[{p}]" for t, p in st.assigned],
                "committed": {f"{t}[{p}]": o for (t, p), o in sorted(st.committed.items())},
                "lag_records": {f"{t}[{p}]": r for (t, p), (r, _) in sorted(st.lag.items())},
                "lag_seconds": {f"{t}[{p}]": s for (t, p), (_, s) in sorted(st.lag.items())},
                "cpu_seconds": lane_cpu,
                "cpu_seconds_per_million_records": sum(lane_cpu.values()) / st.records * 1e6 if st.records else None,
                "destinations": dests,
            })
        healthy, _ = self.healthy()
        ready, why = self.ready()
        return {"group_id": self.config.group_id, "lanes_mode": self.config.lanes, "healthy": healthy,
                "ready": ready, "reason": why, "lanes": lanes}

    @staticmethod
    def _latency_les() -> list[tuple[float, str]]:
        from transcoder.metrics import LATENCY_BUCKETS

        return [(b, str(float(b))) for b in LATENCY_BUCKETS] + [(float("inf"), "+Inf")]

    def _poll_brokers(self, prepared: Prepared) -> None:
        """Every metrics.disk_interval_s: bytes on disk per topic (DescribeLogDirs) and destination
        compression.type drift (the broker would recompress). Never per scrape: these ask the brokers."""
        interval = self.config.metrics.disk_interval_s
        dests = {d.topic: d for d in prepared.provision.destinations}
        lane_of = {dest: lane for lane in prepared.plan.lanes for t in lane.targets for dest in t.topics.values()}
        allowed = {t.topic_for(s): t.destination.allow_broker_recompression
                   for t in prepared.plan.targets for s in t.sources}
        src_info = BrokerInfo(self.config.cluster.librdkafka())
        dst_info = BrokerInfo(self.config.target_cluster.librdkafka()) if self.config.destination_cluster else src_info
        try:
            while True:
                try:
                    self._read_broker_figures(prepared, dests, lane_of, allowed, src_info, dst_info)
                except (KafkaException, KafkaPythonError, TranscoderError, OSError) as exc:
                    # The brokers did not answer this time: reported, and asked again next interval.
                    log.warning("broker_figures_failed", error=f"{type(exc).__name__}: {exc}")
                if self._lanes_done():
                    return  # that was the reading after the last lane stopped
                if self.stop_event.is_set():  # stopping: one more reading once every lane has drained
                    while not self._lanes_done():
                        time.sleep(0.2)
                else:
                    self.stop_event.wait(interval)
        finally:
            src_info.close()
            if dst_info is not src_info:
                dst_info.close()

    def _lanes_done(self) -> bool:
        return bool(self.lanes) and all(lane.status.state in ("caught-up", "stopped", "failed") for lane in self.lanes)

    def _read_broker_figures(self, prepared: Prepared, dests: dict[str, topics.DestinationTopic],
                             lane_of: dict[str, routes.Lane], allowed: dict[str, bool],
                             src_info: BrokerInfo, dst_info: BrokerInfo) -> None:
        sizes = src_info.topic_sizes(prepared.plan.sources) | dst_info.topic_sizes(dests)
        self.disk.update(sizes)
        shapes = {d.topic: topics.TopicShape(d.topic, d.partitions) for d in dests.values()}
        offsets = end_offsets(self._dst_admin, shapes)
        counts: dict[str, int] = {}
        for (t, _), (low, high) in offsets.items():
            counts[t] = counts.get(t, 0) + high - low
        self.topic_records.update(counts)
        for t in prepared.plan.sources:
            self.metrics.disk_bytes.labels(topic=t, role="source").set(sizes[t])
        for name, d in dests.items():
            self.metrics.disk_bytes.labels(topic=name, role="destination").set(sizes[name])
            if sizes[name]:
                self.metrics.disk_ratio.labels(lane=lane_of[name].name, destination=name, codec=d.codec).set(
                    sizes[d.source] / sizes[name])
        configs = topics.describe_configs(self._dst_admin, list(dests))
        self._polls += 1
        for name, d in dests.items():
            ctype = configs[name].effective.get("compression.type", "producer")
            codec = next(t.destination.codec for t in lane_of[name].targets if name in t.topics.values())
            lane = lane_of[name].name
            found = []
            if broker_recompresses(ctype, codec):
                found.append(("config", f"compression.type={ctype}"))
            self.metrics.recompression.labels(lane=lane, destination=name, reason="config").set(1 if found else 0)
            # A sampled stored batch: the newest of one partition, a different partition each poll.
            partition = self._polls % d.partitions
            low, high = offsets[(name, partition)]
            stored = self._sample_stored_codec(dst_info, name, partition, high - 1) if high > low else None
            if stored is not None and stored_recompressed(stored, codec, ctype):
                found.append(("stored", f"stored as {CODEC_OF_ID.get(stored, stored)} in partition {partition}"))
            self.metrics.recompression.labels(lane=lane, destination=name, reason="stored").set(
                1 if any(r == "stored" for r, _ in found) else 0)
            was = self.recompression.get(name)
            self.recompression[name] = "; ".join(why for _, why in found) or None
            if found and not was:
                log.warning("broker_recompression", destination=name, codec=codec, found=self.recompression[name],
                            allowed=allowed.get(name, False),
                            fix=f"kafka-configs --alter --entity-type topics --entity-name {name} "
                                "--add-config compression.type=producer")

    def _sample_stored_codec(self, info: BrokerInfo, topic: str, partition: int, offset: int) -> int | None:
        """Codec id of the stored batch holding `offset` (None when the broker has no leader for it now)."""
        md = self._dst_admin.list_topics(topic, timeout=10).topics[topic].partitions.get(partition)
        if md is None or md.leader < 0:
            return None
        batches = info.stored_codecs(topic, partition, offset, leader=md.leader)
        return batches[0][1] if batches else None

    def run(self, *, until_caught_up: bool = False) -> Prepared:
        prepared = self.prepare(create=True)
        gc.freeze()  # what start-up built lives as long as the process: never scanned again
        gc.set_threshold(*GC_THRESHOLDS)
        ends = end_offsets(self._src_admin, prepared.provision.sources) if until_caught_up else None
        self.lanes = [
            Lane(spec, self.config, self.metrics.lane(spec.name),
                 end_offsets={tp: v for tp, v in ends.items() if tp[0] in spec.sources} if ends is not None else None,
                 threads=self.threads)
            for spec in prepared.plan.lanes
        ]
        errors: list[BaseException] = []

        def run_lane(lane: Lane) -> None:
            try:
                lane.run(self.stop_event, until_caught_up=until_caught_up)
            except BaseException as exc:  # reported by run(); the other lanes drain and stop
                errors.append(exc)
                log.error("lane_failed", lane=lane.spec.name, error=str(exc))
                self.stop_event.set()

        threads = [threading.Thread(target=run_lane, args=(lane,), name=f"lane-{lane.spec.name}", daemon=True)
                   for lane in self.lanes]
        poller = None
        if self.config.metrics.disk_interval_s:
            poller = threading.Thread(target=self._poll_brokers, args=(prepared,), name="broker-figures", daemon=True)
            poller.start()
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)  # short joins, so the main thread keeps handling signals
        self.stop_event.set()  # every lane is done (caught up, stopped or failed): the poller takes a last reading
        if poller is not None:
            poller.join(60)
        if errors:
            first = errors[0]
            raise first if isinstance(first, TranscoderError) else TranscoderError(str(first))
        return prepared
