"""kafka-python's connections read sockets in large chunks (transcoder.kafka.transport)."""

from __future__ import annotations

import ssl

import kafka.errors
import pytest
from kafka.net import manager

from transcoder.kafka import transport


class FakeSocket:
    """A non-blocking socket holding `data`, then `then`: BlockingIOError (nothing more yet), b"" (closed by the
    peer) or an exception."""

    def __init__(self, data: bytes, then: object = BlockingIOError) -> None:
        self.data, self.then, self.calls = data, then, 0

    def recv(self, n: int) -> bytes:
        self.calls += 1
        if self.data:
            out, self.data = self.data[:n], self.data[n:]
            return out
        if isinstance(self.then, bytes):
            return self.then
        raise self.then  # type: ignore[misc]


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    assert transport.install()


def test_a_fetch_answer_is_read_in_a_few_large_reads_by_every_connection_kafka_python_opens() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB, as a Fetch answer of one partition at max.partition.fetch.bytes
    sock = FakeSocket(payload)
    t = manager.KafkaTCPTransport(None, sock)  # the class kafka-python's connection manager builds
    data, err = t._sock_recv()
    assert err is None
    assert data == payload
    assert sock.calls == len(payload) // transport.READ_CHUNK + 1  # kafka-python's own: 257 reads of 4 KiB


def test_a_socket_closed_by_the_broker_is_an_error_with_what_came_before_it() -> None:
    sock = FakeSocket(b"x" * 10, then=b"")
    data, err = manager.KafkaTCPTransport(None, sock)._sock_recv()
    assert data == b"x" * 10
    assert isinstance(err, kafka.errors.KafkaConnectionError)
    assert "disconnected" in str(err)


def test_a_failed_read_is_the_connection_error_kafka_python_closes_the_connection_on() -> None:
    data, err = manager.KafkaTCPTransport(None, FakeSocket(b"", then=ConnectionResetError(104, "reset")))._sock_recv()
    assert data == b""
    assert isinstance(err, kafka.errors.KafkaConnectionError)
    assert "reset" in str(err)


@pytest.mark.parametrize("would_block", [ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError])
def test_tls_reads_stop_where_the_tls_socket_would_block(would_block: type[Exception]) -> None:
    read = manager.KafkaSSLTransport._sock_recv  # the TLS transport's, called on a plain holder of the socket
    holder = type("Holder", (), {"_sock": FakeSocket(b"abc" * 100_000, then=would_block)})()
    data, err = read(holder)
    assert (data, err) == (b"abc" * 100_000, None)
