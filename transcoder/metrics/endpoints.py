"""The HTTP endpoints of a running instance: /metrics, /healthz, /readyz and /status (JSON), served from a thread.

The server knows no metric: what each path answers comes from the callables it is given (the /metrics body from the
registry's `exposition`, health, readiness and /status from the engine; see transcoder.engine.served). With a web
config file (metrics.web_config_file, exporter-toolkit's format: see metrics.web_config) it serves HTTPS and asks
for basic auth on every path but the probes' (/healthz, /readyz) unless `auth_probes`.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import structlog

from transcoder.errors import ConfigError
from transcoder.metrics.web_config import TIMEOUT_S, WebConfigFile

log = structlog.get_logger("transcoder.endpoints")

#: What Kubernetes' httpGet probes ask for: they send no Authorization header (without httpHeaders set).
PROBES = frozenset({"/healthz", "/readyz"})
#: The challenge of a 401 (RFC 7617).
CHALLENGE = 'Basic realm="transcoder", charset="UTF-8"'
#: The first byte of a TLS connection (a handshake record), and the answer to one that starts otherwise.
TLS_HANDSHAKE = b"\x16"
PLAIN_HTTP_REFUSED = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                      b"Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")


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


class _Server(ThreadingHTTPServer):
    """One thread per connection; with TLS, the handshake is made in the connection's thread (a slow client, or
    one speaking plain HTTP to it, holds only its own thread, never the accepting one), with the web config's
    context as of that connection."""

    daemon_threads = True
    web: WebConfigFile | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.web is None or not self.web.tls:
            super().finish_request(request, client_address)
            return
        try:
            context = self.web.current().tls
        except ConfigError as exc:  # the file became invalid: refuse, never serve without its TLS
            log.error("endpoints_web_config_invalid", error=str(exc))
            return
        assert context is not None  # WebConfigFile refuses a change of scheme
        request.settimeout(TIMEOUT_S)
        try:
            first = request.recv(1, socket.MSG_PEEK)
            if first and first != TLS_HANDSHAKE:  # plain HTTP to the HTTPS port: told so, as Go's servers do
                request.recv(65536)  # the request read: closing then sends the answer, not a reset
                request.sendall(PLAIN_HTTP_REFUSED)
                return
            secured = context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:  # an untrusted client certificate, a client gone, a timeout
            log.debug("endpoints_tls_handshake_failed", client=client_address[0],
                      reason=getattr(exc, "reason", None) or type(exc).__name__)
            return
        try:
            super().finish_request(secured, client_address)
        finally:
            secured.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that failed: a client that went away is one debug line; anything else is logged with its
        traceback as an error event (socketserver's own would print it raw on stderr)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.debug("endpoints_connection_failed", client=client_address[0], error=type(exc).__name__)
        else:
            log.error("endpoints_request_failed", client=client_address[0], exc_info=True)


class Endpoints:
    """Serves the endpoints from a daemon thread; the callables are read on every request.

    `metrics` gives /metrics' (content type, body), as metrics.registry's `exposition` of a registry.
    `web_config_file`: TLS and basic auth (see metrics.web_config); `auth_probes`: /healthz and /readyz need the
    basic auth too (by default they answer without it, as Kubernetes' probes send none).
    """

    def __init__(self, metrics: Callable[[], tuple[str, bytes]], *, healthy: Callable[[], tuple[bool, str]],
                 ready: Callable[[], tuple[bool, str]], status: Callable[[], dict[str, Any]],
                 web_config_file: Path | str | None = None, auth_probes: bool = False) -> None:
        self.metrics, self.healthy, self.ready, self.status = metrics, healthy, ready, status
        self.web_config_file = Path(web_config_file) if web_config_file else None
        self.auth_probes = auth_probes
        self.scheme = "http"
        self._server: ThreadingHTTPServer | None = None

    def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); return the port. ConfigError when it cannot (taken, no such
        address, an invalid web config file), before anything else has started."""
        endpoints = self
        web = WebConfigFile(self.web_config_file) if self.web_config_file else None
        self.scheme = "https" if web is not None and web.tls else "http"

        class Handler(BaseHTTPRequestHandler):
            timeout = TIMEOUT_S  # a client that sends no request does not hold its thread for ever

            def do_GET(self) -> None:  # http.server's naming
                path = self.path.split("?", 1)[0]
                if not self._authorized(path):
                    return
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

            def _authorized(self, path: str) -> bool:
                """Whether the request may have `path`; if not, the 401 (or 500: an invalid web config) is sent."""
                if web is None or (path in PROBES and not endpoints.auth_probes):
                    return True
                try:
                    users = web.current().users
                except ConfigError as exc:
                    log.error("endpoints_web_config_invalid", error=str(exc))
                    self._send(500, "text/plain; charset=utf-8", b"the web config file is invalid: see the log\n")
                    return False
                if users is None or users.allows(self.headers.get("Authorization")):
                    return True
                self._send(401, "text/plain; charset=utf-8", b"unauthorized\n",
                           {"WWW-Authenticate": CHALLENGE})
                return False

            def _send(self, code: int, ctype: str, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass  # one line per scrape would drown the service's own logs

        try:
            self._server = _Server((host, port), Handler)
        except OSError as exc:
            raise ConfigError(_cannot_listen(host, port, exc)) from None
        self._server.web = web
        threading.Thread(target=self._server.serve_forever, name="endpoints", daemon=True).start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
