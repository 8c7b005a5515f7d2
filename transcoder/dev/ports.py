"""Loopback ports for the local services the dev tools start (the Kafka broker, a Spark cluster, proxies)."""

from __future__ import annotations

import socket

from transcoder.errors import PortInUseError


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
