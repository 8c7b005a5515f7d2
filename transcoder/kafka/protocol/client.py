"""RawClient: transcoder's raw Kafka client, one kafka-python admin client and its connection manager (and
transcoder's own Fetch connections), through which the requests of this package's modules are sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.protocol import admin_requests, metadata, produce, transactions
from transcoder.kafka.protocol.calls import Call
from transcoder.kafka.protocol.client_config import (
    ANSWER_MARGIN_S,
    METADATA_MAX_AGE_MS,
    RECONNECT_BACKOFF_MAX_MS,
    kafka_python_config,
)
from transcoder.kafka.protocol.fetch import (
    FetchConnections,
    PendingFetch,
    batch_codecs,
    checked_partition,
    fetch_requests,
)
from transcoder.kafka.protocol.produce import PRODUCE_API_KEY


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
        self._fetches = FetchConnections(timeout_s=self._timeout_ms / 1000)

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
        return max(int(v[1]) for k, v in versions.items() if int(k) == PRODUCE_API_KEY)

    def partition_sizes(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """Bytes on disk per (topic, partition), summed over brokers and log dirs (so: over replicas)."""
        topics = list(topics)
        if not topics:
            return {}
        return admin_requests.partition_sizes(self._client().describe_log_dirs(topics))

    def topic_sizes(self, topics: Iterable[str]) -> dict[str, int]:
        topics = list(topics)
        return admin_requests.topic_sizes(self.partition_sizes(topics), topics)

    def fetch_partition(self, topic: str, partition: int, offset: int, *, leader: int, max_bytes: int) -> Any:
        """One raw Fetch (read_committed, no wait) of one partition from `offset`, to its leader: kafka-python's
        partition response (records as stored, aborted transactions). KafkaUnavailableError for a broker
        error or no answer, naming topic, partition and offset."""
        try:
            part = self.fetch_many({leader: {(topic, partition): offset}}, max_bytes=max_bytes,
                                   partition_max_bytes=max_bytes, max_wait_ms=0, min_bytes=1)[(topic, partition)]
        except KafkaUnavailableError as exc:
            raise KafkaUnavailableError(f"fetching {topic} [{partition}] offset {offset}: {exc}", topic=topic,
                                        partition=partition, offset=offset, retriable=True) from exc
        return checked_partition(part, topic, partition, offset)

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
        requests = fetch_requests(by_leader, max_bytes=max_bytes, partition_max_bytes=partition_max_bytes,
                                  max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        # the broker holds a Fetch up to max_wait_ms by design
        deadline = time.monotonic() + (self._timeout_ms + max_wait_ms) / 1000
        return self._fetches.send(requests, self._connection_manager, deadline)

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
        return self._fetches.results(pending)

    def list_offsets(self, partitions: Iterable[tuple[str, int]], *, latest: bool) -> dict[tuple[str, int], int]:
        """The earliest (log start) or latest (read_committed end) offset of each partition, asked of its leader.
        KafkaUnavailableError naming the partition for an error or no answer."""
        return self._list_offsets(list(partitions), metadata.LATEST if latest else metadata.EARLIEST)

    def offsets_at(self, partitions: Iterable[tuple[str, int]], ms: int) -> dict[tuple[str, int], int]:
        """Each partition's first offset whose timestamp is at or after `ms` (epoch milliseconds), as a consumer's
        offsetsForTimes; a partition with no record since starts at its latest offset (the service's start)."""
        parts = list(partitions)
        at = self._list_offsets(parts, ms)
        missing = [tp for tp in parts if at.get(tp, -1) < 0]
        if missing:
            at.update(self._list_offsets(missing, metadata.LATEST))
        return at

    def _list_offsets(self, parts: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        import kafka.errors

        try:
            leaders = self.leaders({t for t, _ in parts})
        except kafka.errors.KafkaError as exc:
            raise KafkaUnavailableError(f"listing offsets: {type(exc).__name__}: {exc}", retriable=True) from exc
        out = {}
        for leader, request in metadata.list_offsets_requests(parts, leaders, timestamp=timestamp,
                                                              timeout_ms=self._timeout_ms).items():
            try:
                answer = self._send(request, leader)
            except kafka.errors.KafkaError as exc:
                raise KafkaUnavailableError(f"listing offsets at broker {leader}: {type(exc).__name__}: {exc}",
                                            retriable=True) from exc
            out.update(metadata.offsets_of(answer))
        return out

    def stored_codecs(self, topic: str, partition: int, offset: int, *, leader: int,
                      max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
        """(base offset, codec id) of the batches the broker stores from `offset` on (one Fetch).

        The codec id is the low bits of the batch attributes, as stored, whatever the producer sent.
        """
        return batch_codecs(self.fetch_partition(topic, partition, offset, leader=leader, max_bytes=max_bytes))

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
        to v12 (13+ names topics by id), v11 in a transaction (12 is transactions v2: see the package).
        Connection failures raise kafka-python's errors.
        """
        return self.produce_answers(self.produce_start(batches, leader=leader, timeout_ms=timeout_ms,
                                                       transactional_id=transactional_id))

    def produce_start(self, batches: Mapping[tuple[str, int], bytes], *, leader: int, timeout_ms: int = 30_000,
                      transactional_id: str | None = None) -> Call:
        """produce's request, sent now; its answer is read with produce_answers."""
        request = produce.produce_request(batches, timeout_ms=timeout_ms, transactional_id=transactional_id)
        # the broker holds it up to timeout_ms (acks=all) by design
        return self._send_start(request, leader, request_timeout_ms=timeout_ms + 5_000)

    @staticmethod
    def produce_answers(call: Call) -> dict[tuple[str, int], tuple[int, int]]:
        """(error code, base offset) per partition of a Produce request sent by produce_start (waiting for it);
        kafka-python's errors when it was not answered."""
        return produce.produce_answers(call.result())

    @staticmethod
    def produce_record_errors(call: Call) -> dict[tuple[str, int], tuple[int, ...]]:
        """The records a broker refused a partition's batch for, by index in the batch, as the answer to a Produce
        request sent by produce_start names them (record_errors, Produce v8+: KIP-467, for INVALID_RECORD and
        INVALID_TIMESTAMP); partitions whose answer names none are left out."""
        return produce.record_errors(call.result())

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
        request = metadata.metadata_request(topics)
        manager = self._connection_manager()

        async def ask() -> Any:
            response = await manager.send(request, node_id=None)
            manager.cluster.update_metadata(response)
            return response

        return metadata.leaders_of(self._start(ask).result())

    def init_producer_id(self, transactional_id: str | None = None, *, transaction_timeout_ms: int = 60_000,
                         producer_id: int = -1, producer_epoch: int = -1,
                         coordinator: int | None = None) -> tuple[int, int, int]:
        """(error code, producer id, epoch): for an idempotent producer (no transactional id), or for
        `transactional_id` at its coordinator, fencing any earlier holder. With this producer's own id and epoch
        (KIP-588, v3+) the epoch is bumped only if they are still the id's (PRODUCER_FENCED otherwise)."""
        r = self._send(transactions.init_producer_id_request(
            transactional_id, transaction_timeout_ms=transaction_timeout_ms, producer_id=producer_id,
            producer_epoch=producer_epoch), coordinator)
        return r.error_code, r.producer_id, r.producer_epoch

    def find_coordinator(self, key: str, key_type: int) -> int:
        """The broker id of `key`'s coordinator: key_type 0 a consumer group, 1 a transactional id.
        KafkaUnavailableError naming Kafka's error when the broker answers with one."""
        return metadata.coordinator_of(self._send(metadata.find_coordinator_request(key, key_type), None),
                                       key, key_type)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[tuple[str, int]], *,
                              coordinator: int) -> dict[tuple[str, int], int]:
        """Add partitions to the open transaction; Kafka's error code per partition."""
        request = transactions.add_partitions_request(transactional_id, producer_id, producer_epoch, partitions)
        return transactions.add_partitions_answers(self._send(request, coordinator))

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, *,
                           coordinator: int) -> int:
        """Add the group's offsets to the open transaction (the transaction coordinator's side); error code."""
        request = transactions.add_offsets_request(transactional_id, producer_id, producer_epoch, group_id)
        return int(self._send(request, coordinator).error_code)

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: Mapping[tuple[str, int], int], *, coordinator: int, generation_id: int = -1,
                          member_id: str = "", group_instance_id: str | None = None) -> dict[tuple[str, int], int]:
        """Commit the group's `offsets` in the open transaction, at the GROUP coordinator; error code per partition.
        With the member's generation, member id and group instance id (v3+, KIP-447: what the batch producer sends
        for a lane, from its consumer's group metadata) the group coordinator refuses a member of an older generation
        (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); without them (generation -1: a client outside
        the group, as a Spark task's) it checks none."""
        request = transactions.txn_offset_commit_request(
            transactional_id, group_id, producer_id, producer_epoch, offsets, generation_id=generation_id,
            member_id=member_id, group_instance_id=group_instance_id)
        return transactions.txn_offset_commit_answers(self._send(request, coordinator))

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                coordinator: int) -> int:
        """Commit or abort the open transaction; error code."""
        request = transactions.end_txn_request(transactional_id, producer_id, producer_epoch, commit)
        return int(self._send(request, coordinator).error_code)

    def alter_client_quota(self, client_id: str, key: str, value: float | None) -> None:
        """Set (or, with None, remove) one quota of a client.id, e.g. producer_byte_rate (AlterClientQuotas,
        KIP-546: what kafka-configs.sh --entity-type clients --alter does); KafkaUnavailableError naming Kafka's
        error when the broker refuses it."""
        admin_requests.check_quota_answer(self._send(admin_requests.quota_request(client_id, key, value), None),
                                          client_id, key)

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
        self._fetches.close()
        if self._admin is not None:
            self._admin.close()  # closes the connection manager and stops its I/O thread
            self._admin = self._connections = None
