"""Produce of batches transcoder built itself: the request (acks=all, Produce 7-12, 11 in a transaction: see the
package's note on transactions v1) and what the broker answered per partition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRODUCE_API_KEY = 0


def produce_request(batches: Mapping[tuple[str, int], bytes], *, timeout_ms: int,
                    transactional_id: str | None) -> Any:
    """One Produce request (acks=all) of prebuilt v2 batches, one per partition; with `transactional_id`, batches
    of its open transaction."""
    from kafka.protocol.producer import ProduceRequest

    data = ProduceRequest.TopicProduceData
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), batch in batches.items():
        by_topic.setdefault(topic, []).append(data.PartitionProduceData(index=partition, records=batch))
    return ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout_ms=timeout_ms,
        topic_data=[data(name=t, partition_data=parts) for t, parts in by_topic.items()],
        min_version=7, max_version=12 if transactional_id is None else 11,
    )


def produce_answers(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(error code, base offset) per partition of a Produce response."""
    return {(t.name, p.index): (p.error_code, p.base_offset)
            for t in response.responses for p in t.partition_responses}


def record_errors(response: Any) -> dict[tuple[str, int], tuple[int, ...]]:
    """The records a broker refused a partition's batch for, by index in the batch (record_errors, Produce v8+:
    KIP-467, for INVALID_RECORD and INVALID_TIMESTAMP); partitions whose answer names none are left out."""
    return {(t.name, p.index): tuple(sorted({e.batch_index for e in p.record_errors}))
            for t in response.responses for p in t.partition_responses if p.record_errors}
