"""Loopback ports for the local services the dev tools start (the Kafka broker, a Spark cluster, proxies)."""

from __future__ import annotations

import socket

from transcoder.errors import PortInUseError

#: every port `free_port` handed out in this process: none is handed out twice
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port free on loopback now, and never one this process was handed before: once a socket bound to port 0
    is closed the kernel may give the next one the same port (a broker's listener and controller were both handed
    45823 in CI, and the broker refused to start)."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise PortInUseError("no loopback port left that this process was not handed before (1000 tries)")


def check_port_free(port: int) -> None:
    """Whether the broker could bind `port`: as the broker binds, with SO_REUSEADDR, so a port whose
    last connections sit in TIME_WAIT (a broker that just crashed) counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} on 127.0.0.1 is already in use ({exc.strerror}); "
                "stop what holds it or choose another port"
            ) from exc
