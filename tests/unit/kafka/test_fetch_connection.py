"""transcoder.kafka.fetch_connection over a real local socket: a scripted broker answers with kafka-python's own
FetchResponse encoding; the connection matches answers to requests by correlation id, drops the ones not asked
for, reads an answer in whatever pieces it comes, and fails (closed) on silence or a closed socket."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import kafka.errors
import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse

from transcoder.kafka.fetch_connection import FetchConnection

CONFIG = {"client_id": "test", "receive_message_max_bytes": 1 << 20, "security_protocol": "PLAINTEXT",
          "socket_options": [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]}


def request() -> FetchRequest:
    return FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=1, session_id=0,
                        session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="", version=12)


def answer(correlation_id: int, records: bytes) -> bytes:
    topic = FetchResponse.FetchableTopicResponse
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic(topic="t", partitions=[
        topic.PartitionData(partition_index=0, error_code=0, high_watermark=9, last_stable_offset=9,
                            log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
                            records=records)])], version=12)
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def read_request(conn: socket.socket) -> int:
    """One framed request off the socket; its correlation id."""
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            data += conn.recv(n - len(data))
        return data
    frame = exactly(int.from_bytes(exactly(4), "big"))
    return int.from_bytes(frame[4:8], "big")  # after api key and version


class Broker:
    """A listening socket on 127.0.0.1 whose one connection is served by `script(conn)` on a thread."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
        self.thread.start()

    def _serve(self, script: Callable[[socket.socket], None]) -> None:
        conn, _ = self.server.accept()
        with conn:
            script(conn)

    def connect(self) -> FetchConnection:
        return FetchConnection(1, "127.0.0.1", self.port, CONFIG, None, timeout_s=5)

    def close(self) -> None:
        self.thread.join(5)
        self.server.close()


def records_of(response: FetchResponse) -> bytes:
    return response.responses[0].partitions[0].records


def test_the_answer_asked_for_is_returned_and_earlier_ones_not_asked_for_are_dropped() -> None:
    def script(conn: socket.socket) -> None:
        first, second = read_request(conn), read_request(conn)
        conn.sendall(answer(first, b"first") + answer(second, b"second"))
        third = read_request(conn)
        conn.sendall(answer(third, b"third"))

    broker = Broker(script)
    connection = broker.connect()
    connection.send(request())  # sent ahead, never read: dropped
    second = connection.send(request())
    assert records_of(connection.receive(second, time.monotonic() + 5)) == b"second"
    assert records_of(connection.receive(connection.send(request()), time.monotonic() + 5)) == b"third"
    connection.close()
    broker.close()


def test_an_answer_in_small_pieces_is_read_whole() -> None:
    payload = bytes(range(256)) * 1024  # 256 KiB of records

    def script(conn: socket.socket) -> None:
        data = answer(read_request(conn), payload)
        for i in range(0, len(data), 7001):
            conn.sendall(data[i:i + 7001])

    broker = Broker(script)
    connection = broker.connect()
    assert records_of(connection.receive(connection.send(request()), time.monotonic() + 5)) == payload
    connection.close()
    broker.close()


def test_no_answer_by_the_deadline_is_a_timeout_and_closes_the_connection() -> None:
    done = threading.Event()

    def script(conn: socket.socket) -> None:
        read_request(conn)
        done.wait(5)

    broker = Broker(script)
    connection = broker.connect()
    sent = connection.send(request())
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        connection.receive(sent, time.monotonic() + 0.2)
    assert connection.closed
    done.set()
    broker.close()


def test_a_connection_the_broker_closes_is_a_connection_error() -> None:
    broker = Broker(lambda conn: read_request(conn))  # reads the request, closes without answering
    connection = broker.connect()
    sent = connection.send(request())
    with pytest.raises(kafka.errors.KafkaConnectionError, match="closed the connection"):
        connection.receive(sent, time.monotonic() + 5)
    assert connection.closed
    broker.close()


def test_a_broker_not_listening_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(kafka.errors.KafkaConnectionError):
        FetchConnection(1, "127.0.0.1", port, CONFIG, None, timeout_s=2)


def test_closing_from_another_thread_wakes_a_reader_waiting_for_an_answer() -> None:
    done = threading.Event()

    def script(conn: socket.socket) -> None:
        read_request(conn)
        done.wait(10)

    broker = Broker(script)
    connection = broker.connect()
    sent = connection.send(request())
    threading.Timer(0.2, connection.close).start()
    t0 = time.monotonic()
    with pytest.raises(kafka.errors.KafkaConnectionError):
        connection.receive(sent, time.monotonic() + 10)
    assert time.monotonic() - t0 < 5  # woken by the close, not by the deadline
    done.set()
    broker.close()
