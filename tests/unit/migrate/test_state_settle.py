"""Waiting out a new topic's first moments (no leader yet) in the state store, without Kafka: a fake clock and a
fake consumer answer as a broker does right after CreateTopics."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder import config as cfg
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.admin import SETTLING_ERRORS, wait_settled
from transcoder.migrate.state import StateStore


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def failing(*codes: int, then: Any = "ok") -> Any:
    left = list(codes)
    calls: list[int] = []

    def attempt() -> Any:
        calls.append(1)
        if left:
            raise KafkaException(KafkaError(left.pop(0)))
        return then

    attempt.calls = calls  # type: ignore[attr-defined]
    return attempt


@pytest.mark.parametrize("code", sorted(SETTLING_ERRORS))
def test_each_settling_error_is_waited_out_then_the_answer_returned(code: int) -> None:
    clock = Clock()
    attempt = failing(code, code, code)
    assert wait_settled(attempt, timeout_s=30, clock=clock, sleep=clock.sleep) == "ok"
    assert len(attempt.calls) == 4
    assert clock.slept == [0.05, 0.1, 0.2]  # doubling


def test_waits_are_bounded_and_the_last_error_is_raised_at_the_deadline() -> None:
    clock = Clock()
    attempt = failing(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException) as err:
        wait_settled(attempt, timeout_s=5, clock=clock, sleep=clock.sleep, max_wait_s=1.0)
    assert err.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert clock.now == pytest.approx(5.0)  # the last wait stops at the deadline, not beyond
    assert max(clock.slept) == 1.0


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError.TOPIC_AUTHORIZATION_FAILED])
def test_other_errors_are_raised_at_once(code: int) -> None:
    clock = Clock()
    attempt = failing(code)
    with pytest.raises(KafkaException):
        wait_settled(attempt, timeout_s=30, clock=clock, sleep=clock.sleep)
    assert len(attempt.calls) == 1 and clock.slept == []


# ---------------------------------------------------------------- the store reading a topic it just created
class FakeConsumer:
    """Metadata and watermarks as a broker answers them for a topic created a moment ago: first unknown, then no
    leader for partition 0, then NOT_LEADER_FOR_PARTITION from ListOffsets, then the answer."""

    def __init__(self, topic: str, watermark_errors: list[int], metadata: list[str]) -> None:
        self.topic = topic
        self.watermark_errors = watermark_errors
        self.metadata = metadata
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        state = self.metadata.pop(0) if self.metadata else "ok"
        if state == "missing":
            return SimpleNamespace(topics={})
        p_err = KafkaError(KafkaError.LEADER_NOT_AVAILABLE) if state == "no-leader" else None
        t = SimpleNamespace(error=None, partitions={0: SimpleNamespace(error=p_err)})
        return SimpleNamespace(topics={topic: t})

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.watermark_errors:
            raise KafkaException(KafkaError(self.watermark_errors.pop(0)))
        return (0, 0)

    def poll(self, timeout: float) -> None:
        return None

    def close(self) -> None:
        return None


def _store() -> StateStore:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"}, "group_id": "g",
                      "routes": [{"source": "a", "destinations": [{"codec": "zstd"}]}], "migration": {}},
                     environ={})
    return StateStore(conf, "a.zstd")


def test_the_store_reads_a_topic_it_just_created_through_its_first_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("transcoder.kafka.admin.time.sleep", clock.sleep)
    s = _store()
    s._ensured = True  # it created the topic a moment ago
    fake = FakeConsumer(s.topic, [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.NOT_LEADER_FOR_PARTITION],
                        ["missing", "no-leader"])
    s._consumer = fake  # type: ignore[assignment]
    assert s.read() == {}
    assert fake.asked == 3 and len(clock.slept) == 4


def test_a_leader_that_never_comes_is_named_not_reported_as_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("transcoder.kafka.admin.time.sleep", clock.sleep)
    monkeypatch.setattr("transcoder.kafka.admin.time.monotonic", clock)
    s = _store()
    s._ensured = True
    s._consumer = FakeConsumer(s.topic, [KafkaError.NOT_LEADER_FOR_PARTITION] * 10_000, [])  # type: ignore[assignment]
    with pytest.raises(KafkaUnavailableError) as err:
        s.read()
    line = str(err.value)
    assert "\n" not in line
    assert "NOT_LEADER_FOR_PARTITION" in line and f"partition 0 of state topic {s.topic}" in line
    assert "reachable" not in line
