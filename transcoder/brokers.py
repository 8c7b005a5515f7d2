"""What confluent-kafka cannot ask or send, done through kafka-python: on-disk sizes (DescribeLogDirs),
API versions, a raw Fetch of stored batches, and a raw Produce of batches transcoder built itself."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from transcoder.errors import KafkaUnavailableError

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


def kafka_python_config(librdkafka: Mapping[str, Any]) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": str(librdkafka["bootstrap.servers"]).split(",")}
    for k, v in librdkafka.items():
        if k in _KAFKA_PYTHON_NAMES:
            conf[_KAFKA_PYTHON_NAMES[k]] = str(v).upper() if k.startswith("sasl.mech") or k == "security.protocol" else v
    if str(librdkafka.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        conf["ssl_check_hostname"] = False
    return conf


class BrokerInfo:
    """One kafka-python admin connection, opened on first use and closed by `close`."""

    def __init__(self, librdkafka: Mapping[str, Any]) -> None:
        self._conf = kafka_python_config(librdkafka)
        self._admin: Any = None

    def _client(self) -> Any:
        if self._admin is None:
            from kafka.admin import KafkaAdminClient
            from kafka.errors import KafkaError as KPError

            try:
                self._admin = KafkaAdminClient(request_timeout_ms=30_000, **self._conf)
            except KPError as exc:
                raise KafkaUnavailableError(
                    f"cannot reach Kafka at {','.join(self._conf['bootstrap_servers'])}: {exc}") from exc
        return self._admin

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

    def stored_codecs(self, topic: str, partition: int, offset: int, *, leader: int,
                      max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
        """(base offset, codec id) of the batches the broker stores from `offset` on (one Fetch).

        The codec id is the low bits of the batch attributes, as stored, whatever the producer sent.
        """
        from kafka.protocol.consumer import FetchRequest
        from kafka.record import MemoryRecords

        topic_cls = FetchRequest.FetchTopic
        request = FetchRequest(
            max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=1, session_id=0, session_epoch=-1,
            topics=[topic_cls(topic=topic, partitions=[topic_cls.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
            forgotten_topics_data=[], rack_id="",
            min_version=4, max_version=12,  # 13+ names topics by id
        )
        manager = self._client()._manager  # kafka-python has no public raw Fetch

        async def fetch() -> Any:
            return await manager.send(request, node_id=leader)

        part = manager.run(fetch).responses[0].partitions[0]
        if part.error_code:
            raise KafkaUnavailableError(f"fetching {topic} [{partition}] offset {offset}: error {part.error_code}")
        records = MemoryRecords(part.records or b"")
        out = []
        while (batch := records.next_batch()) is not None:
            out.append((batch.base_offset, batch.compression_type))
        return out

    def produce_batch(self, topic: str, partition: int, batch: bytes, *, leader: int,
                      timeout_ms: int = 30_000) -> int:
        """Send one prebuilt v2 record batch (acks=all); return the base offset the broker gave it.

        For codec levels librdkafka refuses (zstd 13-22). Produce v7+ (zstd needs it), up to v12
        (13+ names topics by id).
        """
        from kafka.protocol.producer import ProduceRequest

        data = ProduceRequest.TopicProduceData
        request = ProduceRequest(
            transactional_id=None, acks=-1, timeout_ms=timeout_ms,
            topic_data=[data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=batch)])],
            min_version=7, max_version=12,
        )
        manager = self._client()._manager

        async def produce() -> Any:
            return await manager.send(request, node_id=leader)

        part = manager.run(produce).responses[0].partition_responses[0]
        if part.error_code:
            raise KafkaUnavailableError(f"producing a batch to {topic} [{partition}]: error {part.error_code}")
        return part.base_offset

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
