"""What an engine (the service, the Spark engine) serves on its endpoints: health, readiness and /status from its
lanes' snapshots, /metrics from its registry, and the broker figures poller that feeds both (the `serve`, `status`,
`healthy` and `ready` of the engine contract, transcoder.engine.contract)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import partial
from typing import Any

import structlog

from transcoder.config import Config
from transcoder.engine.contract import EngineLane
from transcoder.evaluate.live_scoring import Scorer
from transcoder.kafka.provisioning import Prepared
from transcoder.metrics import status as status_doc
from transcoder.metrics.broker_figures import BrokerFigures
from transcoder.metrics.endpoints import Endpoints
from transcoder.metrics.registry import Metrics, exposition

log = structlog.get_logger("transcoder.endpoints")


class Served:
    """What an engine (the service, the Spark engine) serves: health, readiness and /status from its lanes'
    snapshots (each lane has `.status`, a LaneStatus, and `.metrics`, its LaneMetrics), on the endpoints.

    The engine sets `config`, `metrics`, `lanes`, `brokers`, `endpoints` and, with live scoring, `scorer` (whose
    `snapshot()` is /status's candidate figures), and defines `cpu_by_lane`.
    """

    config: Config
    metrics: Metrics
    lanes: Sequence[EngineLane]
    brokers: BrokerFigures | None
    endpoints: Endpoints | None
    stop_event: threading.Event
    scorer: Scorer | None = None

    def lanes_done(self) -> bool:
        return bool(self.lanes) and all(ln.status.state in ("caught-up", "stopped", "failed") for ln in self.lanes)

    def start_broker_figures(self, prepared: Prepared) -> threading.Thread | None:
        """The broker poller (disk bytes, records, recompression) in a thread, unless metrics.disk_interval_s is 0;
        it takes a last reading once `stop_event` is set and every lane is done."""
        if not self.config.metrics.disk_interval_s:
            return None
        self.brokers = BrokerFigures(self.config, prepared.plan, prepared.provision, prepared.dst_admin, self.metrics)
        poller = threading.Thread(target=self.brokers.run, args=(self.stop_event, self.lanes_done),
                                  name="broker-figures", daemon=True)
        poller.start()
        return poller

    def cpu_by_lane(self) -> dict[tuple[str, str], float]:
        raise NotImplementedError

    def serve(self, port: int | None = None) -> int | None:
        """Serve /metrics, /healthz, /readyz and /status; return the port.

        Without `port`, the config's metrics.port (0 there: no endpoints); an explicit 0: any free port.
        """
        if port is None:
            port = self.config.metrics.port
            if not port:
                return None
        settings = self.config.metrics
        self.endpoints = Endpoints(partial(exposition, self.metrics.registry), healthy=self.healthy, ready=self.ready,
                                   status=self.status, web_config_file=settings.web_config_file,
                                   auth_probes=settings.auth_probes)
        bound = self.endpoints.start(settings.host, port)
        log.info("endpoints_serving", host=settings.host, port=bound, scheme=self.endpoints.scheme,
                 web_config_file=settings.web_config_file, paths=["/metrics", "/healthz", "/readyz", "/status"])
        return bound

    def healthy(self) -> tuple[bool, str]:
        return status_doc.healthy([ln.status for ln in self.lanes], status_doc.stuck_after(
            self.config.shutdown_timeout_s, self.config.commit_interval_ms))

    def ready(self) -> tuple[bool, str]:
        return status_doc.ready([ln.status for ln in self.lanes])

    def status(self) -> dict[str, Any]:
        """The /status document (see metrics.status.document); with live scoring, each destination's candidates."""
        return status_doc.document(group_id=self.config.group_id, lanes_mode=self.config.lanes,
                                   lanes=[(ln.status, ln.metrics) for ln in self.lanes], cpu=self.cpu_by_lane(),
                                   brokers=self.brokers, health=self.healthy, readiness=self.ready,
                                   candidates=self.scorer.snapshot() if self.scorer is not None else None)
