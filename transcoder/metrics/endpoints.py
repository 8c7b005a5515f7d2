"""The HTTP endpoints of a running instance: /metrics, /healthz, /readyz and /status (JSON), served from a thread.

The server knows no metric: what each path answers comes from the callables it is given (the /metrics body from the
registry's `exposition`, health, readiness and /status from the engine; see transcoder.engine.served).
"""

from __future__ import annotations

import errno
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from transcoder.errors import ConfigError


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
    """Serves the endpoints from a daemon thread; the callables are read on every request.

    `metrics` gives /metrics' (content type, body), as metrics.registry's `exposition` of a registry.
    """

    def __init__(self, metrics: Callable[[], tuple[str, bytes]], *, healthy: Callable[[], tuple[bool, str]],
                 ready: Callable[[], tuple[bool, str]], status: Callable[[], dict[str, Any]]) -> None:
        self.metrics, self.healthy, self.ready, self.status = metrics, healthy, ready, status
        self._server: ThreadingHTTPServer | None = None

    def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); return the port. ConfigError when it cannot (taken, no such
        address), before anything else has started."""
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's naming
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, *endpoints.metrics())
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
