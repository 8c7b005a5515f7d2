"""Runs the lanes of one config: pre-flight, provisioning, one thread per lane, stop and drain."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import structlog
from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from prometheus_client import CollectorRegistry

from transcoder import routes, topics
from transcoder.brokers import BrokerInfo
from transcoder.clients import connect_admin
from transcoder.config import Config
from transcoder.errors import KafkaUnavailableError, TranscoderError
from transcoder.lane import Lane
from transcoder.metrics import Metrics
from transcoder.threads import ThreadLedger

log = structlog.get_logger("transcoder.service")


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
        return Prepared(plan=plan, provision=provision, created=created)

    def stop(self) -> None:
        """Ask every lane to stop, drain and commit. Safe from a signal handler: it only sets a flag."""
        self.stop_event.set()

    def serve_metrics(self) -> None:
        """Serve /metrics on the configured port (0: none)."""
        if self.config.metrics.port:
            from prometheus_client import start_http_server

            start_http_server(self.config.metrics.port, addr=self.config.metrics.host, registry=self.metrics.registry)
            log.info("metrics_serving", port=self.config.metrics.port)

    def run(self, *, until_caught_up: bool = False) -> Prepared:
        prepared = self.prepare(create=True)
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
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)  # short joins, so the main thread keeps handling signals
        if errors:
            first = errors[0]
            raise first if isinstance(first, TranscoderError) else TranscoderError(str(first))
        return prepared
