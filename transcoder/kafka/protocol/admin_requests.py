"""What the cluster is asked as an administrator: bytes on disk per partition (the admin client's
DescribeLogDirs answer, summed over replicas) and a client's quotas (AlterClientQuotas 0-1, KIP-546)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from transcoder.errors import KafkaUnavailableError


def partition_sizes(log_dirs: Iterable[Any]) -> dict[tuple[str, int], int]:
    """Bytes on disk per (topic, partition) in kafka-python's describe_log_dirs answer, summed over brokers and
    log dirs (so: over replicas)."""
    sizes: dict[tuple[str, int], int] = {}
    for broker in log_dirs:
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


def topic_sizes(partition_sizes: dict[tuple[str, int], int], topics: list[str]) -> dict[str, int]:
    """Bytes on disk per topic of `topics` (0 for one with none), from partition_sizes' answer."""
    out: dict[str, int] = {}
    for (t, _), size in partition_sizes.items():
        out[t] = out.get(t, 0) + size
    return {t: out.get(t, 0) for t in topics}


def quota_request(client_id: str, key: str, value: float | None) -> Any:
    """Set (or, with None, remove) one quota of a client.id, e.g. producer_byte_rate."""
    from kafka.protocol.admin import AlterClientQuotasRequest

    entry = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest(
        entries=[entry(entity=[entry.EntityData(entity_type="client-id", entity_name=client_id)],
                       ops=[entry.OpData(key=key, value=float(value or 0), remove=value is None)])],
        validate_only=False, min_version=0, max_version=1)


def check_quota_answer(response: Any, client_id: str, key: str) -> None:
    """KafkaUnavailableError naming Kafka's error when the broker refused the quota."""
    from kafka.errors import for_code

    for entry in response.entries:
        if entry.error_code:
            raise KafkaUnavailableError(f"quota {key} of client.id {client_id} not changed: "
                                        f"{for_code(entry.error_code).__name__} {entry.error_message or ''}")
