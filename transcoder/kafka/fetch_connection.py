"""transcoder's own blocking connection to one broker, for the raw Fetch (RawClient.fetch_start / fetch_answers).

Why its own: kafka-python's connections (kafka.net) read their socket 4 KiB per `recv` on its I/O thread, and it
has no setting for that; a 1 MiB Fetch answer is 256 turns of its event loop, then copied three times more by its
frame parser. Fetch answers are the only large ones, so only they come here; every other request (Produce,
Metadata, ListOffsets, the transactions') stays on kafka-python's connection manager. Here an answer is read by
the caller's own thread straight into one buffer of its size, as many bytes per `recv_into` as the kernel has,
and decoded from that buffer: a Fetch sent ahead is answered into the kernel's socket buffer meanwhile.

Only kafka-python's public API: the requests and responses are its protocol classes (`with_header`,
`encode(header=True, framed=True)`, the request header's `get_response_class`, the response class's
`parse_header` and `decode`), versions picked by the connection manager's `broker_version_data`, SASL by its
mechanisms (`kafka.net.sasl.get_sasl_mechanism`: PLAIN, SCRAM, OAUTHBEARER, GSSAPI) over SaslHandshake v1 and
SaslAuthenticate, and the settings are the connection manager's (`config`: TLS, SASL, client id, socket options).
Failures are kafka-python's errors (KafkaConnectionError, KafkaTimeoutError, SASL's), as its connections raise
them; the connection is closed on any of them.

One caller at a time: RawClient holds a lock around its use.
"""

from __future__ import annotations

import collections
import functools
import io
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import structlog

log = structlog.get_logger("transcoder.kafka")
_T = TypeVar("_T")

#: A response header is read from at most this many bytes (a correlation id, and tagged fields in the flexible
#: versions, which no response header uses today).
HEADER_PEEK = 1024

#: A SASL session is authenticated again (by a new connection) after this share of the lifetime the broker gave it
#: (KIP-368, connections.max.reauth.ms): the broker closes a connection whose session has expired.
REAUTH_AT = 0.85


def tls_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context kafka-python's connections would build from the same settings (`ssl_*`)."""
    given: ssl.SSLContext | None = config.get("ssl_context")
    if given is not None:
        return given
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = bool(config.get("ssl_check_hostname", True))
    if config.get("ssl_cafile"):
        ctx.load_verify_locations(config["ssl_cafile"])
    else:
        ctx.load_default_certs()
    if config.get("ssl_certfile"):
        ctx.load_cert_chain(certfile=config["ssl_certfile"], keyfile=config.get("ssl_keyfile"),
                            password=config.get("ssl_password"))
    if config.get("ssl_crlfile"):
        ctx.load_verify_locations(config["ssl_crlfile"])  # a PEM file: OpenSSL takes its CRLs as kafka-python does
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return ctx


class FetchConnection:
    """A connection to broker `node_id` at host:port, opened (TLS, SASL) by the constructor within `timeout_s`.
    Raises kafka-python's errors when it cannot be opened."""

    def __init__(self, node_id: int, host: str, port: int, config: Mapping[str, Any], versions: Any, *,
                 timeout_s: float) -> None:
        self.node_id = node_id
        self.closed = False
        self.renew_at: float | None = None  # monotonic: when the SASL session asks for a new connection
        self._versions = versions
        self._client_id = config["client_id"]
        self._max_frame = int(config["receive_message_max_bytes"])
        self._send_timeout_s = timeout_s
        self._correlation_id = 0
        self._in_flight: collections.deque[tuple[int, Any]] = collections.deque()  # (correlation id, request)
        self._socket: socket.socket | None = None
        deadline = time.monotonic() + timeout_s
        self._socket = self._guarded(lambda: self._open(host, port, config, timeout_s))
        try:
            if config.get("security_protocol") in ("SASL_PLAINTEXT", "SASL_SSL"):
                self._authenticate(host, config, deadline)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _open(host: str, port: int, config: Mapping[str, Any], timeout_s: float) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout_s)
        try:
            for option in config.get("socket_options") or ():
                sock.setsockopt(*option)
            if config.get("security_protocol") in ("SSL", "SASL_SSL"):
                sock = tls_context(config).wrap_socket(sock, server_hostname=host.rstrip("."))
        except BaseException:
            sock.close()
            raise
        return sock

    def _authenticate(self, host: str, config: Mapping[str, Any], deadline: float) -> None:
        import kafka.errors
        from kafka.net.sasl import get_sasl_mechanism
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        name = config["sasl_mechanism"]
        handshake = SaslHandshakeRequest(mechanism=name, min_version=1, max_version=1)
        answer = self.receive(self.send(handshake), deadline)
        if answer.error_code:
            raise kafka.errors.for_code(answer.error_code)(f"SaslHandshake for {name}")
        if name not in answer.mechanisms:
            raise kafka.errors.UnsupportedSaslMechanismError(
                f"the broker does not offer SASL {name}; it offers {answer.mechanisms}")
        mechanism = get_sasl_mechanism(name)(host=host, **config)
        while not mechanism.is_done():
            answer = self.receive(self.send(SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes())), deadline)
            if answer.error_code:
                raise kafka.errors.SaslAuthenticationFailedError(
                    f"{kafka.errors.for_code(answer.error_code).__name__}: {answer.error_message}")
            mechanism.receive(answer.auth_bytes)
        if not mechanism.is_authenticated():
            raise kafka.errors.SaslAuthenticationFailedError(f"SASL {name} did not authenticate")
        lifetime_ms = getattr(answer, "session_lifetime_ms", 0) or 0
        if lifetime_ms > 0:
            self.renew_at = time.monotonic() + REAUTH_AT * lifetime_ms / 1000

    def send(self, request: Any) -> int:
        """Send `request` (its version picked within its own range from the broker's); its correlation id."""
        if request.API_VERSION is None:
            request.API_VERSION = self._versions.api_version(request)
        self._correlation_id = correlation_id = (self._correlation_id + 1) % 2**31
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        data = request.encode(header=True, framed=True)
        self._guarded(lambda: self._send(data))
        self._in_flight.append((correlation_id, request))
        return correlation_id

    def receive(self, correlation_id: int, deadline: float) -> Any:
        """The answer to request `correlation_id`, waited for until `deadline` (monotonic); the answers to requests
        sent before it, not asked for, are read and dropped on the way."""
        import kafka.errors

        if all(sent != correlation_id for sent, _ in self._in_flight):
            raise kafka.errors.KafkaConnectionError(f"no request {correlation_id} in flight to broker {self.node_id}")
        while True:
            size = bytearray(4)
            self._read_into(memoryview(size), deadline)
            n = int.from_bytes(size, "big", signed=True)
            if not 0 <= n <= self._max_frame:
                self.close()
                raise kafka.errors.KafkaConnectionError(f"broker {self.node_id}: a response of {n} bytes")
            frame = memoryview(bytearray(n))  # its own: the decoded records may be views of it
            self._read_into(frame, deadline)
            sent, request = self._in_flight.popleft()
            response_class = request.header.get_response_class()
            head = io.BytesIO(bytes(frame[:HEADER_PEEK]))
            try:
                got = response_class.parse_header(head, version=request.API_VERSION).correlation_id
                if got != sent:
                    raise kafka.errors.CorrelationIdError(f"sent {sent}, answered {got}")
                if sent == correlation_id:
                    return response_class.decode(frame[head.tell():], version=request.API_VERSION)
            except (ValueError, kafka.errors.KafkaError) as exc:
                self.close()
                raise kafka.errors.KafkaConnectionError(f"broker {self.node_id}: a response not understood: "
                                                        f"{type(exc).__name__}: {exc}") from exc

    def _read_into(self, view: memoryview, deadline: float) -> None:
        """Fill `view` from the socket by `deadline`."""
        import kafka.errors

        got = 0
        while got < len(view):
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise kafka.errors.KafkaTimeoutError(f"no answer from broker {self.node_id} in time")
            n = self._guarded(functools.partial(self._recv_into, view[got:], left))
            if n == 0:
                self.close()
                raise kafka.errors.KafkaConnectionError(f"broker {self.node_id} closed the connection")
            got += n

    def _send(self, data: bytes) -> None:
        assert self._socket is not None  # opened by the constructor, before any request
        self._socket.settimeout(self._send_timeout_s)  # not what the last read had left
        self._socket.sendall(data)

    def _recv_into(self, view: memoryview, timeout_s: float) -> int:
        assert self._socket is not None  # opened by the constructor, before any request
        self._socket.settimeout(timeout_s)
        return self._socket.recv_into(view)

    def _guarded(self, step: Callable[[], _T]) -> _T:
        """`step()`, its socket errors as kafka-python's (the connection closed)."""
        import kafka.errors

        try:
            return step()
        except TimeoutError as exc:
            self.close()
            raise kafka.errors.KafkaTimeoutError(f"broker {self.node_id}: {exc}") from exc
        except OSError as exc:  # ssl.SSLError is one
            self.close()
            raise kafka.errors.KafkaConnectionError(f"broker {self.node_id}: {exc}") from exc

    def close(self) -> None:
        """Close the socket; a thread waiting on it (receive) wakes up with KafkaConnectionError."""
        if self.closed:
            return
        self.closed = True
        sock = self._socket
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a reader blocked in recv_into; close alone would not
        except OSError as exc:  # not connected any more: nothing to wake
            log.debug("fetch_connection_shutdown_failed", broker=self.node_id, error=repr(exc))
        sock.close()
