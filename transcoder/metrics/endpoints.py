"""The HTTP endpoints of a running instance: /metrics, /healthz, /readyz and /status (JSON)."""

from __future__ import annotations

import errno
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

from transcoder.errors import ConfigError
from transcoder.kafka.provisioning import Prepared
from transcoder.metrics import status as status_doc
from transcoder.metrics.broker_figures import BrokerFigures
from transcoder.metrics.registry import Metrics, exposition

log = structlog.get_logger("transcoder.endpoints")


def _cannot_listen(host: str, port: int, exc: OSError) -> str:
    """Why the endpoints cannot listen on host:port, and which setting chooses another."""
    where = f"metrics endpoint {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (f"{where} is already in use (by another transcoder? every instance defaults to port 9308): set "
                "metrics.port to a free port, or 0 for no endpoints")
    if isinstance(exc, socket.gaierror):
        return (f"{where}: metrics.host {host!r} does not resolve ({exc.strerror}): set metrics.host to an address "
                "of this machine (0.0.0.0: every interface)")
    return (f"cannot listen on {where}: {exc.strerror or exc}: set metrics.host to an address of this machine and "
            "metrics.port to a port it may bind (0: no endpoints)")


class Endpoints:
    """Serves the endpoints from a daemon thread; the callables are read on every request."""

    def __init__(self, registry: Any, *, healthy: Callable[[], tuple[bool, str]],
                 ready: Callable[[], tuple[bool, str]], status: Callable[[], dict[str, Any]]) -> None:
        self.registry, self.healthy, self.ready, self.status = registry, healthy, ready, status
        self._server: ThreadingHTTPServer | None = None

    def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); return the port. ConfigError when it cannot (taken, no such
        address), before anything else has started."""
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, *exposition(endpoints.registry))
                elif path in ("/healthz", "/readyz"):
                    ok, why = (endpoints.healthy if path == "/healthz" else endpoints.ready)()
                    self._send(200 if ok else 503, "text/plain; charset=utf-8", (why + "\n").encode())
                elif path == "/status":
                    body = json.dumps(endpoints.status(), indent=2, sort_keys=True).encode()
                    self._send(200, "application/json", body)
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics /healthz /readyz /status\n")

            def _send(self, code: int, ctype: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass  # one line per scrape would drown the service's own logs

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise ConfigError(_cannot_listen(host, port, exc)) from None
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="endpoints", daemon=True).start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class Served:
    """What an engine (the service, the Spark engine) serves: health, readiness and /status from its lanes'
    snapshots (each lane has `.status`, a LaneStatus, and `.metrics`, its LaneMetrics), on the endpoints.

    The engine sets `config`, `metrics`, `lanes`, `brokers` and `endpoints`, and defines `cpu_by_lane`.
    """

    config: Any
    metrics: Metrics
    lanes: list[Any]
    brokers: BrokerFigures | None
    endpoints: Endpoints | None
    stop_event: threading.Event

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
        self.endpoints = Endpoints(self.metrics.registry, healthy=self.healthy, ready=self.ready, status=self.status)
        bound = self.endpoints.start(self.config.metrics.host, port)
        log.info("endpoints_serving", port=bound, paths=["/metrics", "/healthz", "/readyz", "/status"])
        return bound

    def healthy(self) -> tuple[bool, str]:
        return status_doc.healthy([ln.status for ln in self.lanes], status_doc.stuck_after(
            self.config.shutdown_timeout_s, self.config.commit_interval_ms))

    def ready(self) -> tuple[bool, str]:
        return status_doc.ready([ln.status for ln in self.lanes])

    def status(self) -> dict[str, Any]:
        """The /status document (see metrics.status.document)."""
        return status_doc.document(group_id=self.config.group_id, lanes_mode=self.config.lanes,
                                   lanes=[(ln.status, ln.metrics) for ln in self.lanes], cpu=self.cpu_by_lane(),
                                   brokers=self.brokers, health=self.healthy, readiness=self.ready)
