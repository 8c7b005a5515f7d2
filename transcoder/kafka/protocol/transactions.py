"""The requests of a transactional producer, Kafka's transactions v1 (KIP-98; see the package's note on the
versions): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, and their answers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def init_producer_id_request(transactional_id: str | None, *, transaction_timeout_ms: int, producer_id: int,
                             producer_epoch: int) -> Any:
    """InitProducerId 0-4; with this producer's own id and epoch (KIP-588), v3+."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    return InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                 producer_id=producer_id, producer_epoch=producer_epoch,
                                 min_version=3 if producer_id >= 0 else 0, max_version=4)


def add_partitions_request(transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: Iterable[tuple[str, int]]) -> Any:
    """AddPartitionsToTxn 0-3 (4+ is the brokers' batched verification form)."""
    from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=[topic_cls(name=t, partitions=sorted(ps)) for t, ps in by_topic.items()],
        min_version=0, max_version=3)


def add_partitions_answers(response: Any) -> dict[tuple[str, int], int]:
    """Kafka's error code per partition of an AddPartitionsToTxn response."""
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets_request(transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> Any:
    """AddOffsetsToTxn 0-3."""
    from kafka.protocol.producer.transaction import AddOffsetsToTxnRequest

    return AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                  producer_epoch=producer_epoch, group_id=group_id, min_version=0, max_version=3)


def txn_offset_commit_request(transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                              offsets: Mapping[tuple[str, int], int], *, generation_id: int, member_id: str,
                              group_instance_id: str | None) -> Any:
    """TxnOffsetCommit 0-4 (5 adds the group itself); with the member's generation, id or instance id, v3+."""
    from kafka.protocol.producer.transaction import TxnOffsetCommitRequest

    by_topic: dict[str, list[Any]] = {}
    topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    part = topic_cls.TxnOffsetCommitRequestPartition
    for (t, p), offset in offsets.items():
        by_topic.setdefault(t, []).append(part(partition_index=p, committed_offset=offset,
                                               committed_leader_epoch=-1, committed_metadata=""))
    member = generation_id >= 0 or member_id or group_instance_id is not None
    return TxnOffsetCommitRequest(transactional_id=transactional_id, group_id=group_id, producer_id=producer_id,
                                  producer_epoch=producer_epoch, generation_id=generation_id, member_id=member_id,
                                  group_instance_id=group_instance_id,
                                  topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
                                  min_version=3 if member else 0, max_version=4)


def txn_offset_commit_answers(response: Any) -> dict[tuple[str, int], int]:
    """Kafka's error code per partition of a TxnOffsetCommit response."""
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def end_txn_request(transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Any:
    """EndTxn 0-4 (5 makes the coordinator bump the epoch at every EndTxn)."""
    from kafka.protocol.producer.transaction import EndTxnRequest

    return EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                         committed=commit, min_version=0, max_version=4)
