"""A topic created a moment ago: its metadata answers (the topic not known yet, partitions without a leader,
NOT_LEADER_FOR_PARTITION) are waited out, bounded, and named after the bound; never an unreachable cluster.

The fake admin client answers `list_topics` as a broker does right after CreateTopics (pure logic: the waiting)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata, PartitionMetadata, TopicMetadata

from transcoder.errors import KafkaUnavailableError, TopicError
from transcoder.kafka.admin import ensure, leaderless, settling, wait_leaders, wait_settled


def _topic(name: str, leaders: list[int], error: int | None = None) -> ClusterMetadata:
    md, t = ClusterMetadata(), TopicMetadata()
    t.topic, t.error = name, None if error is None else KafkaError(error)
    for i, leader in enumerate(leaders):
        p = PartitionMetadata()
        p.id, p.leader = i, leader
        p.error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE) if leader < 0 else None
        t.partitions[i] = p
    md.topics[name] = t
    return md


class NewTopicAdmin:
    """Answers list_topics with `answers` in turn (the last one again once they run out); ListOffsets of partition
    p with NOT_LEADER_FOR_PARTITION its first `not_leader.get(p, 0)` times (a leader in the metadata that does not
    serve its partition yet), then offset 0."""

    def __init__(self, name: str, answers: list[ClusterMetadata | Exception],
                 not_leader: dict[int, int] | None = None, not_leader_error: KafkaError | None = None) -> None:
        self.name, self.answers, self.calls, self.created = name, list(answers), 0, []
        self.not_leader, self.offset_reads = dict(not_leader or {}), 0
        self.not_leader_error = not_leader_error or KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)

    def list_offsets(self, requests: dict, request_timeout: float) -> dict:
        self.offset_reads += 1
        out = {}
        for tp in requests:
            fut: Future = Future()
            if self.not_leader.get(tp.partition, 0) > 0:
                self.not_leader[tp.partition] -= 1
                fut.set_exception(KafkaException(self.not_leader_error))
            else:
                fut.set_result(None)
            out[tp] = fut
        return out

    def list_topics(self, topic: str, timeout: float) -> ClusterMetadata:
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def create_topics(self, topics, operation_timeout: float, request_timeout: float) -> dict[str, Future]:
        self.created += [t.topic for t in topics]
        done: Future = Future()
        done.set_result(None)
        return {t.topic: done for t in topics}


class Clock:
    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_ensure_returns_a_new_topic_only_once_every_partition_has_a_leader():
    admin = NewTopicAdmin("fresh", [
        _topic("fresh", [], KafkaError.UNKNOWN_TOPIC_OR_PART),  # describe(): not there -> create it
        _topic("fresh", [], KafkaError.UNKNOWN_TOPIC_OR_PART),  # created, not in this broker's metadata yet
        _topic("fresh", [-1, -1, -1], KafkaError.LEADER_NOT_AVAILABLE),
        _topic("fresh", [1, -1, -1]),  # in the metadata, partitions 1 and 2 without a leader
        _topic("fresh", [1, 1, -1]),
        _topic("fresh", [1, 1, 1]),
    ], not_leader={2: 2})  # then partition 2's leader does not serve it for two more requests
    shape, created = ensure(admin, "fresh", partitions=3, timeout=30)
    assert (shape.partitions, created, admin.created) == (3, True, ["fresh"])
    assert admin.calls == 8 and admin.offset_reads == 3  # every unsettled answer was waited out
    assert admin.not_leader == {2: 0}


def test_a_partition_still_without_a_leader_after_the_bound_is_named():
    admin, clock = NewTopicAdmin("t", [_topic("t", [1, -1, 1, -1])]), Clock()
    with pytest.raises(TopicError) as info:
        wait_leaders(admin, "t", timeout_s=30, clock=clock, sleep=clock.sleep)
    assert str(info.value) == ("topic t was created but partition(s) 1, 3 have no leader (LEADER_NOT_AVAILABLE) "
                               "after 30 s: check the brokers (their logs, and that enough of them are up for the "
                               "replication factor)")
    assert (info.value.topic, info.value.partition) == ("t", 1)
    assert clock.now == pytest.approx(30) and max(clock.slept) == 1.0  # bounded; doubling waits up to 1 s


def test_a_partition_whose_leader_does_not_serve_it_within_the_bound_is_named():
    admin, clock = NewTopicAdmin("t", [_topic("t", [1, 1])], not_leader={1: 10**6}), Clock()
    with pytest.raises(TopicError) as info:
        wait_leaders(admin, "t", timeout_s=30, clock=clock, sleep=clock.sleep)
    assert str(info.value).startswith("topic t was created but partition 1 does not answer: Broker: Not leader for "
                                      "partition after 30 s: check the brokers")
    assert (info.value.topic, info.value.partition, info.value.kafka_error) == ("t", 1, "NOT_LEADER_FOR_PARTITION")


def test_librdkafkas_own_cache_without_the_new_leader_yet_is_waited_out():
    """ListOffsets looks the leaders up in librdkafka's own metadata cache, which may not hold a new partition's
    leader yet: _NOENT "No leaders found" (the cluster session of a fresh-clone CI run, 2026-11-29)."""
    admin, clock = NewTopicAdmin("t", [_topic("t", [1, 2, 3])], not_leader={0: 2}, not_leader_error=KafkaError(
        KafkaError._NOENT, "Failed to query partition leaders: No leaders found")), Clock()
    assert wait_leaders(admin, "t", timeout_s=30, clock=clock, sleep=clock.sleep).partitions == 3
    assert admin.offset_reads == 3


def test_a_metadata_request_that_gets_no_answer_is_an_unreachable_cluster_not_a_settling_topic():
    admin = NewTopicAdmin("t", [KafkaException(KafkaError(KafkaError._TRANSPORT))])
    with pytest.raises(KafkaUnavailableError, match="cannot describe topic t"):
        wait_leaders(admin, "t", timeout_s=30, clock=Clock(), sleep=lambda _s: None)
    assert admin.calls == 1


@pytest.mark.parametrize("code", [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                  KafkaError.UNKNOWN_TOPIC_OR_PART])
def test_wait_settled_waits_out_the_settling_errors_of_a_read_and_raises_others_at_once(code):
    answers = [KafkaException(KafkaError(code)), TopicError("x", kafka_error=KafkaError(code).name()), 7]
    clock = Clock()

    def read() -> int:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    assert wait_settled(read, clock=clock, sleep=clock.sleep) == 7 and clock.slept == [0.05, 0.1]
    assert settling(KafkaException(KafkaError(code)))
    assert not settling(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    calls = []

    def refused() -> int:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        wait_settled(refused, clock=clock, sleep=clock.sleep)
    assert calls == [1]


def test_leaderless_names_partitions_without_a_leader():
    assert leaderless(_topic("t", [1, -1, 2, -1]).topics["t"]) == {1: "LEADER_NOT_AVAILABLE",
                                                                    3: "LEADER_NOT_AVAILABLE"}
    assert leaderless(_topic("t", [1, 2]).topics["t"]) == {}
