"""Where things are in the cluster: the leader of each partition (Metadata), the coordinator of a group or a
transactional id (FindCoordinator 1-3), and a partition's earliest or latest offset (ListOffsets 2-9)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from transcoder.errors import KafkaUnavailableError


def metadata_request(topics: Iterable[str]) -> Any:
    from kafka.protocol.metadata import MetadataRequest

    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)


def leaders_of(response: Any) -> dict[tuple[str, int], int]:
    """Leader broker id per (topic, partition) of a Metadata response; -1 where there is none; a topic the broker
    does not know is left out."""
    out = {}
    for t in response.topics:
        if t.error_code:
            continue
        for p in t.partitions:
            out[(t.name, p.partition_index)] = p.leader_id if not p.error_code else -1
    return out


def find_coordinator_request(key: str, key_type: int) -> Any:
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

    return FindCoordinatorRequest(key=key, key_type=key_type, min_version=1, max_version=3)


def coordinator_of(response: Any, key: str, key_type: int) -> int:
    """The coordinator's broker id in a FindCoordinator response; KafkaUnavailableError naming Kafka's error."""
    if response.error_code:
        from kafka.errors import for_code

        raise KafkaUnavailableError(f"no coordinator for {'transactional id' if key_type else 'group'} {key}: "
                                    f"{for_code(response.error_code).__name__}", retriable=True)
    return int(response.node_id)


#: ListOffsets' timestamps that ask for the latest (read_committed end) and earliest (log start) offsets
LATEST, EARLIEST = -1, -2


def list_offsets_requests(partitions: Iterable[tuple[str, int]], leaders: Mapping[tuple[str, int], int], *,
                          timestamp: int, timeout_ms: int) -> dict[int, Any]:
    """One ListOffsets request (read_committed) per leader, for the offsets at `timestamp`: LATEST, EARLIEST or
    epoch milliseconds (the first offset whose timestamp is at or after it; -1 when there is none);
    KafkaUnavailableError for a partition without a leader right now."""
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    by_leader: dict[int, dict[str, list[Any]]] = {}
    for t, p in partitions:
        leader = leaders.get((t, p), -1)
        if leader < 0:
            raise KafkaUnavailableError(f"{t} [{p}] has no leader right now", topic=t, partition=p)
        by_leader.setdefault(leader, {}).setdefault(t, []).append(topic_cls.ListOffsetsPartition(
            partition_index=p, current_leader_epoch=-1, timestamp=timestamp))
    return {leader: ListOffsetsRequest(replica_id=-1, isolation_level=1, timeout_ms=timeout_ms,
                                       topics=[topic_cls(name=t, partitions=ps) for t, ps in topics.items()],
                                       min_version=2, max_version=9)
            for leader, topics in by_leader.items()}


def offsets_of(response: Any) -> dict[tuple[str, int], int]:
    """The offset per partition of a ListOffsets response; KafkaUnavailableError naming a partition's error."""
    import kafka.errors

    out = {}
    for t in response.topics:
        for part in t.partitions:
            if part.error_code:
                err = kafka.errors.for_code(part.error_code).__name__
                raise KafkaUnavailableError(f"listing offsets of {t.name} [{part.partition_index}]: {err}",
                                            topic=t.name, partition=part.partition_index, kafka_error=err,
                                            retriable=True)
            out[(t.name, part.partition_index)] = part.offset
    return out
