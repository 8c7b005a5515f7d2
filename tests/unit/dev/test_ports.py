"""transcoder.dev.ports: a port handed out is never handed out again in the same process."""

from __future__ import annotations

import socket

import pytest

from transcoder.dev import ports


class SamePortSocket(socket.socket):
    """A socket the kernel always binds to the same port (it may, once the last one was closed)."""

    answers = [45823, 45823, 45823, 45824]

    def getsockname(self):  # type: ignore[override]
        return ("127.0.0.1", self.answers.pop(0))


def test_the_kernel_handing_out_one_port_twice_still_gives_two_ports(monkeypatch):
    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.setattr(ports.socket, "socket", SamePortSocket)
    assert [ports.free_port(), ports.free_port()] == [45823, 45824]


def test_no_port_left_is_one_line(monkeypatch):
    monkeypatch.setattr(ports, "_handed_out", {45823})
    monkeypatch.setattr(SamePortSocket, "answers", [45823] * 1000)
    monkeypatch.setattr(ports.socket, "socket", SamePortSocket)
    with pytest.raises(ports.PortInUseError, match="no loopback port left"):
        ports.free_port()
