"""What a lane's guarantee asks of its consumer's group membership, chosen once (service.assembly): how the copy
paths assign partitions (eager: exactly-once, where every assignment is whole and names the transactional id;
cooperative: at-least-once) and where the records path reads lag from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from confluent_kafka import TopicPartition

from transcoder.kafka.statistics import consumer_lag, stable_offsets
from transcoder.pipeline.partitions import Partition


class Assigning(Protocol):
    """What a group's assignment style uses of the lane's consumer (confluent_kafka.Consumer)."""

    def assign(self, partitions: list[TopicPartition]) -> Any: ...
    def incremental_assign(self, partitions: list[TopicPartition]) -> Any: ...
    def incremental_unassign(self, partitions: list[TopicPartition]) -> Any: ...
    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...


class Group(Protocol):
    """One guarantee's way with the group (Cooperative or Eager)."""

    def assign(self, consumer: Assigning, partitions: list[TopicPartition]) -> None:
        """Assign `partitions` (with their offsets) from inside the assignment callback."""

    def reassign(self, consumer: Assigning, tp: TopicPartition, assigned: Iterable[Partition]) -> None:
        """Read one partition of the assignment (`assigned`) again from tp.offset."""

    def lags(self, stats: Mapping[str, Any], committed: Mapping[Partition, int]) -> dict[Partition, int]:
        """Records behind each partition's end, from a statistics emission of a consumer that reads records."""


class Cooperative:
    """at-least-once: cooperative-sticky rebalancing; the consumer commits, and its own lag figure counts."""

    def assign(self, consumer: Assigning, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)

    def reassign(self, consumer: Assigning, tp: TopicPartition, assigned: Iterable[Partition]) -> None:
        consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition)])
        consumer.incremental_assign([tp])

    def lags(self, stats: Mapping[str, Any], committed: Mapping[Partition, int]) -> dict[Partition, int]:
        return consumer_lag(stats)


class Eager:
    """exactly-once: eager rebalancing, each assignment whole; offsets are committed in transactions."""

    def assign(self, consumer: Assigning, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)

    def reassign(self, consumer: Assigning, tp: TopicPartition, assigned: Iterable[Partition]) -> None:
        """The whole assignment again, the others where they are."""
        others = consumer.position([TopicPartition(t, q) for t, q in sorted(assigned)
                                    if (t, q) != (tp.topic, tp.partition)])
        consumer.assign([*others, tp])

    def lags(self, stats: Mapping[str, Any], committed: Mapping[Partition, int]) -> dict[Partition, int]:
        """The offsets are committed in transactions, which the consumer's own figure does not see."""
        return {tp: max(0, end - committed[tp]) for tp, end in stable_offsets(stats).items() if tp in committed}
