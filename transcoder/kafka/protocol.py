"""What confluent-kafka cannot ask or send, done through kafka-python: on-disk sizes (DescribeLogDirs),
API versions, a raw Fetch of stored batches, a raw Produce of batches transcoder built itself, and the requests
of a transactional producer (FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn).

Transactions are Kafka's protocol v1 (KIP-98): the producer adds each partition before writing to it and ends the
transaction with EndTxn; the epoch changes only at InitProducerId. The requests are capped at the versions before
KIP-890's transactions v2 (Produce 12, AddPartitionsToTxn 4, AddOffsetsToTxn 4, TxnOffsetCommit 5, EndTxn 5),
with which a broker adds partitions implicitly and bumps the epoch at every EndTxn: a client of v2 must follow
that, and transcoder's producer follows v1, which Kafka 4 keeps for such clients. So: Produce 7-11 in a
transaction (12 lets the broker add the partition itself), AddPartitionsToTxn 0-3 (4+ is the brokers' batched
verification form), AddOffsetsToTxn 0-3, TxnOffsetCommit 0-4 (5 adds the group itself), EndTxn 0-4 (5 makes the
coordinator bump the epoch at every EndTxn and answer with the new one), InitProducerId 0-4 (5 and 6 add
TRANSACTION_ABORTABLE and two-phase commit), FindCoordinator 1-3 (4+ batches keys, another shape).

Only kafka-python's public, versioned API (3.0): the requests are its protocol classes (`kafka.protocol.*`, each
with the versions above). All but Fetch are sent through its connection manager (`kafka.net.KafkaConnectionManager`,
exported by `kafka.net`, with `send` and `call_soon`) on its I/O thread (`kafka.net.NetworkSelector`); transcoder
builds the two itself and hands them to the admin client through its documented `kafka_client` argument, so
DescribeLogDirs and API versions (the admin client's public methods) and these requests share one set of
connections. Fetch, whose answers are the large ones, goes over transcoder's own connection per leader
(fetch_connection.FetchConnection), read in large pieces on the caller's thread: see that module for why."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.fetch_connection import FetchConnection
from transcoder.kafka.retries import Backoff

#: librdkafka property -> kafka-python KafkaAdminClient argument (security and TLS only).
_KAFKA_PYTHON_NAMES = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "client.id": "client_id",
}

PRODUCE_API_KEY = 0

#: kafka-python waits up to 30 s (doubling from 50 ms) before reconnecting to a broker it could not reach: after
#: an outage of a minute the batch producer stayed cut off for up to 30 s more. librdkafka's clients reconnect
#: within reconnect.backoff.max.ms (10 s); this one within a second.
RECONNECT_BACKOFF_MAX_MS = 1000
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms

#: How old kafka-python's broker list (its ClusterMetadata) may grow before it asks again, unless the cluster config
#: sets metadata.max.age.ms: kafka-python's default is 300 s. The list also follows every Metadata answer of the
#: raw client's own (RawClient.leaders), and is asked again at once on a broker id it does not hold.
METADATA_MAX_AGE_MS = 30_000

#: A request gets this long beyond its own timeout for kafka-python to answer it (with the broker's response or
#: its own timeout error) before the caller gives up waiting on it: see RawClient._start.
ANSWER_MARGIN_S = 5.0


#: librdkafka properties that hold PEM text itself -> the kafka-python argument that takes a file of it.
_PEM_PROPERTIES = {"ssl.ca.pem": "ssl_cafile", "ssl.certificate.pem": "ssl_certfile", "ssl.key.pem": "ssl_keyfile"}


def _pem_file(text: str) -> str:
    """A private (0600) file holding `text`, removed when the process exits: kafka-python reads PEM from files."""
    import atexit
    import os
    import tempfile

    fd, path = tempfile.mkstemp(prefix="transcoder-", suffix=".pem")  # mode 0600
    with os.fdopen(fd, "w") as f:
        f.write(text)
    atexit.register(lambda: os.path.exists(path) and os.unlink(path))
    return path


def kafka_python_config(librdkafka: Mapping[str, Any]) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": str(librdkafka["bootstrap.servers"]).split(",")}
    for k, v in librdkafka.items():
        if k in _KAFKA_PYTHON_NAMES:
            conf[_KAFKA_PYTHON_NAMES[k]] = (str(v).upper() if k.startswith("sasl.mech") or k == "security.protocol"
                                            else v)
        elif k in _PEM_PROPERTIES:
            conf[_PEM_PROPERTIES[k]] = _pem_file(str(v))
    if str(librdkafka.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        conf["ssl_check_hostname"] = False
    if conf.get("sasl_mechanism") == "OAUTHBEARER":  # librdkafka's unsecured JWT, as kafka-python's token provider
        from transcoder.kafka import oauthbearer

        conf["sasl_oauth_token_provider"] = oauthbearer.token_provider(oauthbearer.check_oauthbearer(librdkafka))
    return conf


@dataclass
class Call:
    """A coroutine started on kafka-python's I/O thread: its answer, waited for until `deadline` (monotonic)."""

    future: Any
    answered: threading.Event
    deadline: float
    limit_s: float

    def result(self) -> Any:
        """The coroutine's result or its error; KafkaTimeoutError when it has not answered by the deadline."""
        from kafka.errors import KafkaTimeoutError

        if not self.answered.wait(max(0.0, self.deadline - time.monotonic())):
            raise KafkaTimeoutError(f"no answer from Kafka within {self.limit_s:.0f} s")
        if self.future.exception is not None:
            raise self.future.exception
        return self.future.value


@dataclass
class PendingFetch:
    """Fetch requests sent (RawClient.fetch_start), one per leader in this order, their answers to come until
    `deadline` (monotonic): per leader, the connection and the request's correlation id, or why it was not sent."""

    leaders: list[int]
    sent: list[tuple[FetchConnection, int] | Exception]
    deadline: float


class RawClient:
    """transcoder's raw Kafka client: the requests librdkafka does not expose (Fetch of stored record sets, Produce of
    sealed batches, ListOffsets, the transaction protocol, DescribeLogDirs), over one kafka-python admin client and
    the connection manager under it (and transcoder's own Fetch connections), opened on first use and closed by
    `close`."""

    def __init__(self, librdkafka: Mapping[str, Any], *, timeout_s: float = 30.0) -> None:
        self._conf = kafka_python_config(librdkafka)
        self._metadata_max_age_ms = int(librdkafka.get("metadata.max.age.ms", METADATA_MAX_AGE_MS))
        self._timeout_ms = int(timeout_s * 1000)
        self._admin: Any = None
        self._connections: Any = None  # kafka.net.KafkaConnectionManager, made by _net_client
        self._fetch_lock = threading.Lock()  # the Fetch connections: one caller at a time
        self._fetch_connections: dict[int, FetchConnection] = {}
        #: Fetch connections that could not be opened, per broker: reconnect.backoff.ms (50 ms) doubling to
        #: RECONNECT_BACKOFF_MAX_MS, as kafka-python's own connections back off
        self._reconnects = Backoff(RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MAX_MS)

    def _net_client(self, **configs: Any) -> Any:
        """The admin client's network client (its `kafka_client` argument), made of a connection manager this
        RawClient keeps for its own requests."""
        from kafka.net import KafkaConnectionManager, KafkaNetClient, NetworkSelector

        net = NetworkSelector(**configs)
        self._connections = KafkaConnectionManager(net, **configs)
        return KafkaNetClient(net=net, manager=self._connections, **configs)

    def _client(self) -> Any:
        if self._admin is None:
            from kafka.admin import KafkaAdminClient
            from kafka.errors import KafkaError as KPError

            try:
                self._admin = KafkaAdminClient(request_timeout_ms=self._timeout_ms,
                                               bootstrap_timeout_ms=self._timeout_ms,
                                               reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
                                               metadata_max_age_ms=self._metadata_max_age_ms,
                                               kafka_client=self._net_client, **self._conf)
            except KPError as exc:
                raise KafkaUnavailableError(
                    f"cannot reach Kafka at {','.join(self._conf['bootstrap_servers'])}: {exc}") from exc
        return self._admin

    def _connection_manager(self) -> Any:
        """The connection manager the raw requests go through (opening the client first)."""
        self._client()
        return self._connections

    def max_produce_version(self) -> int:
        versions = self._client().api_versions()
        return max(v[1] for k, v in versions.items() if int(k) == PRODUCE_API_KEY)

    def partition_sizes(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """Bytes on disk per (topic, partition), summed over brokers and log dirs (so: over replicas)."""
        topics = list(topics)
        if not topics:
            return {}
        sizes: dict[tuple[str, int], int] = {}
        for broker in self._client().describe_log_dirs(topics):
            for log_dir in broker["log_dirs"]:
                if log_dir.get("error_code"):
                    continue
                for t in log_dir["topics"]:
                    for p in t["partitions"]:
                        if p.get("is_future_key"):
                            continue  # a replica being moved between dirs: counted where it lives now
                        key = (t["name"], p["partition_index"])
                        sizes[key] = sizes.get(key, 0) + p["partition_size"]
        return sizes

    def topic_sizes(self, topics: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        topics = list(topics)
        for (t, _), size in self.partition_sizes(topics).items():
            out[t] = out.get(t, 0) + size
        return {t: out.get(t, 0) for t in topics}

    def fetch_partition(self, topic: str, partition: int, offset: int, *, leader: int, max_bytes: int) -> Any:
        """One raw Fetch (read_committed, no wait) of one partition from `offset`, to its leader: kafka-python's
        partition response (records as stored, aborted transactions). KafkaUnavailableError for a broker
        error or no answer, naming topic, partition and offset."""
        import kafka.errors

        try:
            part = self.fetch_many({leader: {(topic, partition): offset}}, max_bytes=max_bytes,
                                   partition_max_bytes=max_bytes, max_wait_ms=0, min_bytes=1)[(topic, partition)]
        except KafkaUnavailableError as exc:
            raise KafkaUnavailableError(f"fetching {topic} [{partition}] offset {offset}: {exc}", topic=topic,
                                        partition=partition, offset=offset, retriable=True) from exc
        if part.error_code:
            err = kafka.errors.for_code(part.error_code)
            raise KafkaUnavailableError(f"fetching {topic} [{partition}] offset {offset}: {err.__name__}",
                                        topic=topic, partition=partition, offset=offset, kafka_error=err.__name__,
                                        retriable=bool(err.retriable))
        return part

    def fetch_many(self, by_leader: Mapping[int, Mapping[tuple[str, int], int]], *, max_bytes: int,
                   partition_max_bytes: int, max_wait_ms: int, min_bytes: int) -> dict[tuple[str, int], Any]:
        """One raw Fetch (read_committed) per leader, all sent at once: `by_leader` maps a leader's id to the
        (topic, partition) -> offset to fetch from it. kafka-python's partition responses (records as stored,
        aborted transactions, error code) per (topic, partition). KafkaUnavailableError when a leader does not
        answer."""
        return self.fetch_answers(self.fetch_start(by_leader, max_bytes=max_bytes,
                                                   partition_max_bytes=partition_max_bytes, max_wait_ms=max_wait_ms,
                                                   min_bytes=min_bytes))

    def fetch_start(self, by_leader: Mapping[int, Mapping[tuple[str, int], int]], *, max_bytes: int,
                    partition_max_bytes: int, max_wait_ms: int, min_bytes: int) -> PendingFetch:
        """fetch_many's requests, sent now: their answers are read with fetch_answers (or dropped with the
        PendingFetch when nobody reads them)."""
        import kafka.errors
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
        # the broker holds a Fetch up to max_wait_ms by design
        deadline = time.monotonic() + (self._timeout_ms + max_wait_ms) / 1000
        sent: list[tuple[FetchConnection, int] | Exception] = []
        with self._fetch_lock:
            for leader, request in requests.items():  # all in flight at once; their answers read in turn
                try:
                    connection = self._fetch_connection(leader)
                    sent.append((connection, connection.send(request)))
                except kafka.errors.KafkaError as exc:  # raised by fetch_answers, the leader named
                    sent.append(exc)
        return PendingFetch(list(requests), sent, deadline)

    def _fetch_connection(self, node_id: int) -> FetchConnection:
        """The open Fetch connection to broker `node_id`, opened now if there is none (or its SASL session is
        near its end); NodeNotReadyError while a failed broker is backed off (RECONNECT_BACKOFF_MAX_MS at most)."""
        import kafka.errors

        connection = self._fetch_connections.get(node_id)
        if connection is not None and not connection.closed and (
                connection.renew_at is None or time.monotonic() < connection.renew_at):
            return connection
        if connection is not None:
            connection.close()
            del self._fetch_connections[node_id]
        if not self._reconnects.ready(node_id, time.monotonic()):
            raise kafka.errors.NodeNotReadyError(node_id)
        manager = self._connection_manager()
        broker = manager.cluster.broker_metadata(node_id)
        if broker is None:
            manager.cluster.request_update()  # a broker the list does not hold yet: asked again now
            raise kafka.errors.UnknownBrokerIdError(node_id)
        try:
            connection = FetchConnection(node_id, broker.host, broker.port, manager.config,
                                         manager.broker_version_data, timeout_s=self._timeout_ms / 1000)
        except kafka.errors.KafkaError:
            self._reconnects.failed(node_id, time.monotonic())
            raise
        self._reconnects.succeeded(node_id)
        self._fetch_connections[node_id] = connection
        return connection

    def fetch_answers(self, pending: PendingFetch) -> dict[tuple[str, int], Any]:
        """The answers to fetch_start's requests (waiting for them), as fetch_many returns them."""
        out, failed = self.fetch_results(pending)
        if failed:
            leader, exc = next(iter(failed.items()))
            raise KafkaUnavailableError(f"fetching from broker {leader}: {type(exc).__name__}: {exc}",
                                        retriable=True) from exc
        return out

    def fetch_results(self, pending: PendingFetch) -> tuple[dict[tuple[str, int], Any], dict[int, BaseException]]:
        """The answers to fetch_start's requests (waiting for them): the partitions' answers of the leaders that
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
                    with self._fetch_lock:
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

    def list_offsets(self, partitions: Iterable[tuple[str, int]], *, latest: bool) -> dict[tuple[str, int], int]:
        """The earliest (log start) or latest (read_committed end) offset of each partition, asked of its leader.
        KafkaUnavailableError naming the partition for an error or no answer."""
        import kafka.errors
        from kafka.protocol.consumer.offsets import ListOffsetsRequest

        parts = list(partitions)
        try:
            leaders = self.leaders({t for t, _ in parts})
        except kafka.errors.KafkaError as exc:
            raise KafkaUnavailableError(f"listing offsets: {type(exc).__name__}: {exc}", retriable=True) from exc
        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        by_leader: dict[int, dict[str, list[Any]]] = {}
        for t, p in parts:
            leader = leaders.get((t, p), -1)
            if leader < 0:
                raise KafkaUnavailableError(f"{t} [{p}] has no leader right now", topic=t, partition=p)
            by_leader.setdefault(leader, {}).setdefault(t, []).append(topic_cls.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=-1, timestamp=-1 if latest else -2))
        out = {}
        for leader, topics in by_leader.items():
            request = ListOffsetsRequest(replica_id=-1, isolation_level=1, timeout_ms=self._timeout_ms,
                                         topics=[topic_cls(name=t, partitions=ps) for t, ps in topics.items()],
                                         min_version=2, max_version=9)
            try:
                answer = self._send(request, leader)
            except kafka.errors.KafkaError as exc:
                raise KafkaUnavailableError(f"listing offsets at broker {leader}: {type(exc).__name__}: {exc}",
                                            retriable=True) from exc
            for t in answer.topics:
                for part in t.partitions:
                    if part.error_code:
                        err = kafka.errors.for_code(part.error_code).__name__
                        raise KafkaUnavailableError(f"listing offsets of {t.name} [{part.partition_index}]: {err}",
                                                    topic=t.name, partition=part.partition_index, kafka_error=err,
                                                    retriable=True)
                    out[(t.name, part.partition_index)] = part.offset
        return out

    def stored_codecs(self, topic: str, partition: int, offset: int, *, leader: int,
                      max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
        """(base offset, codec id) of the batches the broker stores from `offset` on (one Fetch).

        The codec id is the low bits of the batch attributes, as stored, whatever the producer sent.
        """
        from kafka.record import MemoryRecords

        part = self.fetch_partition(topic, partition, offset, leader=leader, max_bytes=max_bytes)
        records = MemoryRecords(part.records or b"")
        out = []
        while (batch := records.next_batch()) is not None:
            out.append((batch.base_offset, batch.compression_type))
        return out

    def produce_batch(self, topic: str, partition: int, batch: bytes, *, leader: int,
                      timeout_ms: int = 30_000) -> int:
        """Send one prebuilt v2 record batch (acks=all); return the base offset the broker gave it."""
        code, base_offset = self.produce({(topic, partition): batch}, leader=leader, timeout_ms=timeout_ms)[
            (topic, partition)]
        if code:
            raise KafkaUnavailableError(f"producing a batch to {topic} [{partition}]: error {code}")
        return base_offset

    def produce(self, batches: Mapping[tuple[str, int], bytes], *, leader: int, timeout_ms: int = 30_000,
                transactional_id: str | None = None) -> dict[tuple[str, int], tuple[int, int]]:
        """One Produce request (acks=all) of prebuilt v2 batches, one per partition, to their leader; with
        `transactional_id`, batches of its open transaction.

        Returns (error code, base offset) per partition, as the broker answered. Produce v7+ (zstd needs it), up
        to v12 (13+ names topics by id), v11 in a transaction (12 is transactions v2: see the module).
        Connection failures raise kafka-python's errors.
        """
        return self.produce_answers(self.produce_start(batches, leader=leader, timeout_ms=timeout_ms,
                                                       transactional_id=transactional_id))

    def produce_start(self, batches: Mapping[tuple[str, int], bytes], *, leader: int, timeout_ms: int = 30_000,
                      transactional_id: str | None = None) -> Call:
        """produce's request, sent now; its answer is read with produce_answers."""
        from kafka.protocol.producer import ProduceRequest

        data = ProduceRequest.TopicProduceData
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), batch in batches.items():
            by_topic.setdefault(topic, []).append(data.PartitionProduceData(index=partition, records=batch))
        request = ProduceRequest(
            transactional_id=transactional_id, acks=-1, timeout_ms=timeout_ms,
            topic_data=[data(name=t, partition_data=parts) for t, parts in by_topic.items()],
            min_version=7, max_version=12 if transactional_id is None else 11,
        )
        # the broker holds it up to timeout_ms (acks=all) by design
        return self._send_start(request, leader, request_timeout_ms=timeout_ms + 5_000)

    @staticmethod
    def produce_answers(call: Call) -> dict[tuple[str, int], tuple[int, int]]:
        """(error code, base offset) per partition of a Produce request sent by produce_start (waiting for it);
        kafka-python's errors when it was not answered."""
        response = call.result()
        return {(t.name, p.index): (p.error_code, p.base_offset)
                for t in response.responses for p in t.partition_responses}

    @staticmethod
    def produce_record_errors(call: Call) -> dict[tuple[str, int], tuple[int, ...]]:
        """The records a broker refused a partition's batch for, by index in the batch, as the answer to a Produce
        request sent by produce_start names them (record_errors, Produce v8+: KIP-467, for INVALID_RECORD and
        INVALID_TIMESTAMP); partitions whose answer names none are left out."""
        response = call.result()
        return {(t.name, p.index): tuple(sorted({e.batch_index for e in p.record_errors}))
                for t in response.responses for p in t.partition_responses if p.record_errors}

    def leaders(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """Leader broker id per (topic, partition); -1 where there is none right now.

        A topic the broker does not know is left out. kafka-python's errors when the Metadata request is not
        answered (within the request timeout plus ANSWER_MARGIN_S).

        The answer's brokers become the broker list every connection of this client is opened from (kafka-python's
        ClusterMetadata.update_metadata, on its I/O thread, as its own refresh applies its answers): a leader named
        here is a broker the Produce and Fetch connections can reach. Before, that list was refreshed only on a
        connection error or every 300 s: a broker restarted after a controlled shutdown, leader again after a
        preferred leader election, stayed unknown (UnknownBrokerIdError on every Produce) for up to 300 s.
        """
        from kafka.protocol.metadata import MetadataRequest

        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        manager = self._connection_manager()

        async def ask() -> Any:
            response = await manager.send(request, node_id=None)
            manager.cluster.update_metadata(response)
            return response

        out = {}
        for t in self._start(ask).result().topics:
            if t.error_code:
                continue
            for p in t.partitions:
                out[(t.name, p.partition_index)] = p.leader_id if not p.error_code else -1
        return out

    def init_producer_id(self, transactional_id: str | None = None, *, transaction_timeout_ms: int = 60_000,
                         producer_id: int = -1, producer_epoch: int = -1,
                         coordinator: int | None = None) -> tuple[int, int, int]:
        """(error code, producer id, epoch): for an idempotent producer (no transactional id), or for
        `transactional_id` at its coordinator, fencing any earlier holder. With this producer's own id and epoch
        (KIP-588, v3+) the epoch is bumped only if they are still the id's (PRODUCER_FENCED otherwise)."""
        from kafka.protocol.producer.transaction import InitProducerIdRequest

        request = InitProducerIdRequest(transactional_id=transactional_id,
                                        transaction_timeout_ms=transaction_timeout_ms,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        min_version=3 if producer_id >= 0 else 0, max_version=4)
        r = self._send(request, coordinator)
        return r.error_code, r.producer_id, r.producer_epoch

    def find_coordinator(self, key: str, key_type: int) -> int:
        """The broker id of `key`'s coordinator: key_type 0 a consumer group, 1 a transactional id.
        KafkaUnavailableError naming Kafka's error when the broker answers with one."""
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

        r = self._send(FindCoordinatorRequest(key=key, key_type=key_type, min_version=1, max_version=3), None)
        if r.error_code:
            from kafka.errors import for_code

            raise KafkaUnavailableError(f"no coordinator for {'transactional id' if key_type else 'group'} {key}: "
                                        f"{for_code(r.error_code).__name__}", retriable=True)
        return int(r.node_id)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[tuple[str, int]], *,
                              coordinator: int) -> dict[tuple[str, int], int]:
        """Add partitions to the open transaction; Kafka's error code per partition."""
        from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=[topic(name=t, partitions=sorted(ps)) for t, ps in by_topic.items()],
            min_version=0, max_version=3)
        r = self._send(request, coordinator)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, *,
                           coordinator: int) -> int:
        """Add the group's offsets to the open transaction (the transaction coordinator's side); error code."""
        from kafka.protocol.producer.transaction import AddOffsetsToTxnRequest

        request = AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                         producer_epoch=producer_epoch, group_id=group_id, min_version=0,
                                         max_version=3)
        return int(self._send(request, coordinator).error_code)

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: Mapping[tuple[str, int], int], *, coordinator: int, generation_id: int = -1,
                          member_id: str = "", group_instance_id: str | None = None) -> dict[tuple[str, int], int]:
        """Commit the group's `offsets` in the open transaction, at the GROUP coordinator; error code per partition.
        With the member's generation, member id and group instance id (v3+, KIP-447: what the batch producer sends
        for a lane, from its consumer's group metadata) the group coordinator refuses a member of an older generation
        (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); without them (generation -1: a client outside
        the group, as a Spark task's) it checks none."""
        from kafka.protocol.producer.transaction import TxnOffsetCommitRequest

        by_topic: dict[str, list[Any]] = {}
        topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        part = topic.TxnOffsetCommitRequestPartition
        for (t, p), offset in offsets.items():
            by_topic.setdefault(t, []).append(part(partition_index=p, committed_offset=offset,
                                                   committed_leader_epoch=-1, committed_metadata=""))
        member = generation_id >= 0 or member_id or group_instance_id is not None
        request = TxnOffsetCommitRequest(transactional_id=transactional_id, group_id=group_id,
                                         producer_id=producer_id, producer_epoch=producer_epoch,
                                         generation_id=generation_id, member_id=member_id,
                                         group_instance_id=group_instance_id,
                                         topics=[topic(name=t, partitions=ps) for t, ps in by_topic.items()],
                                         min_version=3 if member else 0, max_version=4)
        r = self._send(request, coordinator)
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                coordinator: int) -> int:
        """Commit or abort the open transaction; error code."""
        from kafka.protocol.producer.transaction import EndTxnRequest

        request = EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                producer_epoch=producer_epoch, committed=commit, min_version=0, max_version=4)
        return int(self._send(request, coordinator).error_code)

    def alter_client_quota(self, client_id: str, key: str, value: float | None) -> None:
        """Set (or, with None, remove) one quota of a client.id, e.g. producer_byte_rate (AlterClientQuotas,
        KIP-546: what kafka-configs.sh --entity-type clients --alter does); KafkaUnavailableError naming Kafka's
        error when the broker refuses it."""
        from kafka.errors import for_code
        from kafka.protocol.admin import AlterClientQuotasRequest

        entry = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(
            entries=[entry(entity=[entry.EntityData(entity_type="client-id", entity_name=client_id)],
                           ops=[entry.OpData(key=key, value=float(value or 0), remove=value is None)])],
            validate_only=False, min_version=0, max_version=1)
        for entry in self._send(request, None).entries:
            if entry.error_code:
                raise KafkaUnavailableError(f"quota {key} of client.id {client_id} not changed: "
                                            f"{for_code(entry.error_code).__name__} {entry.error_message or ''}")

    def _send(self, request: Any, node_id: int | None, *, request_timeout_ms: int | None = None) -> Any:
        """One request to `node_id` (any broker: None) and its response; kafka-python's errors when unanswered
        (`request_timeout_ms`: this request's, if not the connection's)."""
        return self._send_start(request, node_id, request_timeout_ms=request_timeout_ms).result()

    def _send_start(self, request: Any, node_id: int | None, *, request_timeout_ms: int | None = None) -> Call:
        """_send's request, sent now: its response (or kafka-python's error) is the Call's result."""
        manager = self._connection_manager()

        async def send() -> Any:
            from kafka.errors import UnknownBrokerIdError

            try:
                return await manager.send(request, node_id=node_id, request_timeout_ms=request_timeout_ms)
            except UnknownBrokerIdError:
                manager.cluster.request_update()  # a broker the list does not hold yet: asked again now
                raise

        return self._start(send, limit_s=None if request_timeout_ms is None else
                           request_timeout_ms / 1000 + ANSWER_MARGIN_S)

    def _start(self, coro: Callable[..., Any], *args: Any, limit_s: float | None = None) -> Call:
        """`coro(*args)` started on kafka-python's I/O thread: the Call's result is its result or its error, or
        KafkaTimeoutError after `limit_s` (default: the request timeout plus ANSWER_MARGIN_S). kafka-python's own
        run() waits for ever: a request its I/O thread never completes (a connection stuck in set-up, the thread
        gone) would hold the caller, a lane's loop, for good."""
        manager = self._connection_manager()
        limit = self._timeout_ms / 1000 + ANSWER_MARGIN_S if limit_s is None else limit_s
        answered = threading.Event()
        future = manager.call_soon(coro, *args)
        future.add_both(lambda _: answered.set())
        return Call(future, answered, time.monotonic() + limit, limit)

    def connect(self) -> None:
        """Open the connection now (kafka-python's I/O thread starts with it); KafkaUnavailableError if it cannot."""
        self._client()

    def close(self) -> None:
        for connection in list(self._fetch_connections.values()):  # not under the lock: wakes a reader holding it
            connection.close()
        with self._fetch_lock:
            self._fetch_connections.clear()
        if self._admin is not None:
            self._admin.close()  # closes the connection manager and stops its I/O thread
            self._admin = self._connections = None
