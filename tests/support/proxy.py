"""A TCP proxy between clients and the broker's PROXIED listener, for outage tests.

The broker advertises the proxy's address on that listener, so a client that bootstraps through the
proxy reaches the broker only through it. The proxy can then cut the broker off in two ways:
`cut()` closes every connection and refuses new ones (a broker that is down or unreachable), `stall()`
keeps connections open and accepts new ones but forwards nothing (a network partition: requests time
out). `restore()` ends either.
"""

from __future__ import annotations

import socket
import threading
from typing import Literal

Mode = Literal["open", "cut", "stall"]


class Proxy:
    def __init__(self, listen_port: int, target_port: int, host: str = "127.0.0.1") -> None:
        self.host, self.listen_port, self.target_port = host, listen_port, target_port
        self.mode: Mode = "open"
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._server: socket.socket | None = None
        self._closed = False
        self.connections = 0  # accepted since start

    # ------------------------------------------------------------------ control
    def start(self) -> Proxy:
        self._listen()
        return self

    def cut(self) -> None:
        """Close every connection and stop listening: clients get 'connection refused'."""
        with self._lock:
            self.mode = "cut"
            self._flowing.set()  # pumps wake, find their sockets closed and exit
            server, self._server = self._server, None
            conns, self._conns = self._conns, set()
        if server is not None:
            server.close()
        for c in conns:
            _close(c)

    def stall(self) -> None:
        """Keep connections open and accept new ones, but forward no byte: requests time out."""
        with self._lock:
            self.mode = "stall"
            self._flowing.clear()

    def restore(self) -> None:
        """Forward again; after a cut, listen again (stalled connections are closed: their requests timed out)."""
        with self._lock:
            was, self.mode = self.mode, "open"
            conns = set()
            if was == "stall":
                conns, self._conns = self._conns, set()
            self._flowing.set()
        for c in conns:
            _close(c)
        if was == "cut":
            self._listen()

    def close(self) -> None:
        self._closed = True
        self.cut()

    # ------------------------------------------------------------------ plumbing
    def _listen(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((self.host, self.listen_port))
        server.listen(64)
        with self._lock:
            self._server = server
        threading.Thread(target=self._accept, args=(server,), name="proxy-accept", daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while not self._closed:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed by cut()
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._server is not server:  # cut while connecting
                    _close(client)
                    _close(upstream)
                    return
                self._conns.update((client, upstream))
                self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), name="proxy-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                if src not in self._conns:
                    break  # closed by cut() or restore() while waiting
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
