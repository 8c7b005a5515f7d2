"""The HTTP endpoints of a running instance: /metrics, /healthz, /readyz and /status (JSON)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from transcoder.metrics.registry import exposition


class Endpoints:
    """Serves the endpoints from a daemon thread; the callables are read on every request."""

    def __init__(self, registry: Any, *, healthy: Callable[[], tuple[bool, str]],
                 ready: Callable[[], tuple[bool, str]], status: Callable[[], dict[str, Any]]) -> None:
        self.registry, self.healthy, self.ready, self.status = registry, healthy, ready, status
        self._server: ThreadingHTTPServer | None = None

    def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); return the port."""
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

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="endpoints", daemon=True).start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
