"""kafka-python's connections read their sockets in large chunks.

kafka-python 3.0 reads a readable socket 4 KiB per `recv` call and joins the pieces: a 1 MiB Fetch answer is 256
calls of Python on its I/O thread. Measured on the lane's raw Fetches (1M nginx records, one partition, 1 MiB per
Fetch, local broker): 4.4 ms and 0.76 CPU s per 1M records read in 4 KiB reads, 2.5 ms and 0.43 CPU s in 256 KiB
reads. `install()` makes every kafka-python connection opened after it (the fetcher's, the batch producer's, the
admin requests') read up to READ_CHUNK per call, with kafka-python's own rules otherwise: read until the socket
would block, an empty read is a disconnected socket, any other error closes the connection.

kafka-python has no setting for it: the transports its connection manager builds are replaced by subclasses
(kafka-python is pinned in constraints.txt; `install` checks the names it replaces and does nothing, with a log
line, when they are not there).
"""

from __future__ import annotations

import ssl
from typing import Any

import structlog

log = structlog.get_logger("transcoder.kafka")

#: Bytes asked of the socket per `recv` call (the kernel gives what it has, up to this).
READ_CHUNK = 256 * 1024

_installed = False


def read_available(sock: Any, would_block: tuple[type[BaseException], ...]) -> tuple[bytes, Exception | None]:
    """Everything `sock` (non-blocking) has now, read READ_CHUNK at a time, and kafka-python's error for the
    connection if it broke: (data, None) or (data so far, KafkaConnectionError)."""
    import kafka.errors

    chunks = []
    err: Exception | None = None
    while True:
        try:
            data = sock.recv(READ_CHUNK)
        except would_block:
            break
        except Exception as exc:  # noqa: BLE001 - returned: kafka-python closes the connection and says why
            log.warning("kafka_socket_read_failed", error=repr(exc))
            err = kafka.errors.KafkaConnectionError(exc)
            break
        if not data:
            err = kafka.errors.KafkaConnectionError("socket disconnected")
            break
        chunks.append(data)
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), err


def install() -> bool:
    """Make kafka-python's connections opened from now on read in READ_CHUNK pieces; True if they do."""
    global _installed
    if _installed:
        return True
    try:
        from kafka.net import manager, transport
    except ImportError:
        log.info("kafka_python_reads_unchanged", reason="kafka-python without kafka.net (before 3.0)")
        return False
    tcp, tls = getattr(manager, "KafkaTCPTransport", None), getattr(manager, "KafkaSSLTransport", None)
    if not (isinstance(tcp, type) and isinstance(tls, type) and hasattr(tcp, "_sock_recv")
            and hasattr(tls, "_sock_recv") and tcp is transport.KafkaTCPTransport):
        log.info("kafka_python_reads_unchanged", reason="kafka-python's transports are not the ones expected")
        return False

    class LargeReadsTCP(tcp):  # type: ignore[misc,valid-type]
        def _sock_recv(self) -> tuple[bytes, Exception | None]:
            return read_available(self._sock, (BlockingIOError, InterruptedError))

    class LargeReadsSSL(tls):  # type: ignore[misc,valid-type]
        def _sock_recv(self) -> tuple[bytes, Exception | None]:
            return read_available(self._sock, (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                                               ssl.SSLWantWriteError))

    manager.KafkaTCPTransport, manager.KafkaSSLTransport = LargeReadsTCP, LargeReadsSSL
    _installed = True
    return True
