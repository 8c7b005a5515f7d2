"""Loopback ports for the local services the dev tools start (the Kafka broker, a Spark cluster, proxies)."""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from pathlib import Path

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


#: Where the kernel says its ephemeral ports are (bind to port 0, outgoing connections).
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: The lowest port `fixed_ports` hands out: above the registered ports most machines' services listen on.
FIXED_PORTS_LOW = 10_000
#: Linux's default ephemeral range, where the file cannot be read.
DEFAULT_EPHEMERAL = (32768, 60999)


def parse_port_range(text: str) -> tuple[int, int]:
    """`ip_local_port_range`'s two numbers (low, high); ValueError unless they are two ports, low <= high."""
    parts = text.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a port range: {text.strip()!r}")
    low, high = int(parts[0]), int(parts[1])
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"not a port range: {text.strip()!r}")
    return low, high


def ephemeral_range() -> tuple[int, int]:
    try:
        return parse_port_range(EPHEMERAL_RANGE_FILE.read_text())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL


def fixed_port_candidates(ephemeral: tuple[int, int], low: int = FIXED_PORTS_LOW) -> range:
    """Ports outside the ephemeral range, which the kernel never hands to a bind(0) or an outgoing connection: below
    it from `low`, else (a range starting that low) above it."""
    below = range(low, ephemeral[0])
    above = range(max(low, ephemeral[1] + 1), 65536)
    return below if len(below) >= len(above) else above


def fixed_ports(count: int, *, rng: random.Random | None = None,
                is_free: Callable[[int], bool] | None = None) -> list[int]:
    """`count` distinct loopback ports outside the ephemeral range, free now, none handed out before by this
    process. Unlike `free_port`'s, no other process's outgoing connection or bind(0) can take one of them between
    now and the bind (on a busy machine the kernel hands out ephemeral ports by the thousand), so they suit a
    cluster whose nodes start later, or start again on the same ports. Picked at random, so that two processes
    picking at once rarely meet; each is checked free as the broker binds (`check_port_free`)."""
    candidates = fixed_port_candidates(ephemeral_range())
    pick = rng or random.SystemRandom()
    free = is_free or _bindable
    chosen: list[int] = []
    for _ in range(max(100, 20 * count)):
        if len(chosen) == count:
            break
        port = candidates[pick.randrange(len(candidates))]
        if port in _handed_out or port in chosen or not free(port):
            continue
        chosen.append(port)
    if len(chosen) < count:
        raise PortInUseError(f"found only {len(chosen)} of {count} free loopback ports in "
                             f"{candidates.start}-{candidates.stop - 1} (outside the ephemeral range)")
    _handed_out.update(chosen)
    return chosen


def _bindable(port: int) -> bool:
    try:
        check_port_free(port)
    except PortInUseError:
        return False
    return True
