"""transcoder.spark.exactly_once.TaskTransactions without a broker: a task's read of the group's committed offset
is asked again while the group's coordinator moves or loads (seen: NOT_COORDINATOR from a broker just started
failed the task), and a refusal that is not retriable fails it at once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from transcoder.spark.exactly_once import TaskTransactions


class Group:
    def __init__(self, errors: list[int]) -> None:
        self.errors = errors
        self.asked = 0

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.asked += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return [TopicPartition(p.topic, p.partition, 42) for p in partitions]


class Writer:
    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None:
        self.tid = transactional_id


def _task(group: Group) -> TaskTransactions:
    config: Any = SimpleNamespace(shutdown_timeout_s=5.0, commit_interval_ms=1000)
    lane: Any = SimpleNamespace(group_id="g", name="lane")
    return TaskTransactions(config, lane, Writer(), group)  # type: ignore[arg-type]


def test_the_committed_offset_is_asked_again_while_the_coordinator_moves():
    group = Group([KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
    task = _task(group)
    task.begin(("src", 0))
    assert task.committed == 42 and group.asked == 3


def test_a_refusal_that_is_not_retriable_fails_the_task_at_once():
    group = Group([KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        _task(group).begin(("src", 0))
    assert group.asked == 1
