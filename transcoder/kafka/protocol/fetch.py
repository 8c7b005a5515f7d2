"""Fetch of stored record sets, over transcoder's own connection per leader (fetch_connection.FetchConnection, read
in large pieces on the caller's thread): the requests (read_committed, Fetch 4-12), the connections and their
reconnect backoff, and the answers per partition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.fetch_connection import FetchConnection
from transcoder.kafka.protocol.client_config import RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_MS
from transcoder.kafka.retries import Backoff


@dataclass
class PendingFetch:
    """Fetch requests sent (RawClient.fetch_start), one per leader in this order, their answers to come until
    `deadline` (monotonic): per leader, the connection and the request's correlation id, or why it was not sent."""

    leaders: list[int]
    sent: list[tuple[FetchConnection, int] | Exception]
    deadline: float


def fetch_requests(by_leader: Mapping[int, Mapping[tuple[str, int], int]], *, max_bytes: int,
                   partition_max_bytes: int, max_wait_ms: int, min_bytes: int) -> dict[int, Any]:
    """One Fetch request (read_committed) per leader: `by_leader` maps a leader's id to the (topic, partition) ->
    offset to fetch from it."""
    from kafka.protocol.consumer import FetchRequest

    topic_cls = FetchRequest.FetchTopic
    requests = {}
    for leader, offsets in by_leader.items():
        topics: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(topic_cls.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
        requests[leader] = FetchRequest(
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=1, session_id=0,
            session_epoch=-1, topics=[topic_cls(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id="", min_version=4, max_version=12)  # 13+ names topics by id
    return requests


def checked_partition(part: Any, topic: str, partition: int, offset: int) -> Any:
    """A partition's Fetch answer; KafkaUnavailableError naming Kafka's error, topic, partition and offset."""
    import kafka.errors

    if part.error_code:
        err = kafka.errors.for_code(part.error_code)
        raise KafkaUnavailableError(f"fetching {topic} [{partition}] offset {offset}: {err.__name__}",
                                    topic=topic, partition=partition, offset=offset, kafka_error=err.__name__,
                                    retriable=bool(err.retriable))
    return part


def batch_codecs(part: Any) -> list[tuple[int, int]]:
    """(base offset, codec id) of the batches in a partition's Fetch answer: the low bits of the batch attributes,
    as stored, whatever the producer sent."""
    from kafka.record import MemoryRecords

    records = MemoryRecords(part.records or b"")
    out = []
    while (batch := records.next_batch()) is not None:
        out.append((batch.base_offset, batch.compression_type))
    return out


class FetchConnections:
    """The open Fetch connection per broker, opened on first use from kafka-python's broker list (the connection
    manager each call is given), backed off after a failure as kafka-python's own connections are; one caller at a
    time sends or reads."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._connections: dict[int, FetchConnection] = {}
        #: connections that could not be opened, per broker: reconnect.backoff.ms (50 ms) doubling to
        #: RECONNECT_BACKOFF_MAX_MS
        self._reconnects = Backoff(RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MAX_MS)

    def send(self, requests: Mapping[int, Any], manager: Callable[[], Any], deadline: float) -> PendingFetch:
        """Every request sent to its leader at once (`manager()`: kafka-python's connection manager, opened if need
        be, whose broker list names the brokers); a leader that could not be sent to keeps its error, raised when
        the answers are read."""
        import kafka.errors

        sent: list[tuple[FetchConnection, int] | Exception] = []
        with self._lock:
            for leader, request in requests.items():  # all in flight at once; their answers read in turn
                try:
                    connection = self._connection(leader, manager)
                    sent.append((connection, connection.send(request)))
                except kafka.errors.KafkaError as exc:  # raised by fetch_answers, the leader named
                    sent.append(exc)
        return PendingFetch(list(requests), sent, deadline)

    def _connection(self, node_id: int, manager: Callable[[], Any]) -> FetchConnection:
        """The open Fetch connection to broker `node_id`, opened now if there is none (or its SASL session is
        near its end); NodeNotReadyError while a failed broker is backed off (RECONNECT_BACKOFF_MAX_MS at most)."""
        import kafka.errors

        connection = self._connections.get(node_id)
        if connection is not None and not connection.closed and (
                connection.renew_at is None or time.monotonic() < connection.renew_at):
            return connection
        if connection is not None:
            connection.close()
            del self._connections[node_id]
        if not self._reconnects.ready(node_id, time.monotonic()):
            raise kafka.errors.NodeNotReadyError(node_id)
        connections = manager()
        broker = connections.cluster.broker_metadata(node_id)
        if broker is None:
            connections.cluster.request_update()  # a broker the list does not hold yet: asked again now
            raise kafka.errors.UnknownBrokerIdError(node_id)
        try:
            connection = FetchConnection(node_id, broker.host, broker.port, connections.config,
                                         connections.broker_version_data, timeout_s=self._timeout_s)
        except kafka.errors.KafkaError:
            self._reconnects.failed(node_id, time.monotonic())
            raise
        self._reconnects.succeeded(node_id)
        self._connections[node_id] = connection
        return connection

    def results(self, pending: PendingFetch) -> tuple[dict[tuple[str, int], Any], dict[int, BaseException]]:
        """The answers to the requests `send` sent (waiting for them): the partitions' answers of the leaders that
        answered, and kafka-python's error per leader that did not (a broker down does not hold the others')."""
        import kafka.errors

        out: dict[tuple[str, int], Any] = {}
        failed: dict[int, BaseException] = {}
        for leader, sent in zip(pending.leaders, pending.sent, strict=True):
            if isinstance(sent, Exception):
                answer: Any = sent
            else:
                connection, correlation_id = sent
                try:
                    with self._lock:
                        if connection.closed:
                            raise kafka.errors.KafkaConnectionError(f"connection to broker {leader} closed")
                        answer = connection.receive(correlation_id, pending.deadline)
                except kafka.errors.KafkaError as exc:
                    answer = exc
            if isinstance(answer, BaseException):
                failed[leader] = answer
                continue
            for t in answer.responses:
                for part in t.partitions:
                    out[(t.topic, part.partition_index)] = part
        return out, failed

    def close(self) -> None:
        for connection in list(self._connections.values()):  # not under the lock: wakes a reader holding it
            connection.close()
        with self._lock:
            self._connections.clear()
