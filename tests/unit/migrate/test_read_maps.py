"""The controller reading the offset map right after `start` created its topic, without Kafka: a fake read answers
as a broker does while the new partition has no leader yet."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder import config as cfg
from transcoder.errors import KafkaUnavailableError
from transcoder.migrate.controller import read_maps

CONF = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"}, "group_id": "g",
                  "routes": [{"source": "a", "destinations": [{"codec": "zstd"}]}], "migration": {}}, environ={})


def reader(*codes: int) -> Any:
    left = list(codes)
    calls: list[str] = []

    def read(config: cfg.Config, destination: str) -> Any:
        calls.append(destination)
        if left:
            raise KafkaException(KafkaError(left.pop(0)))
        return {}, None

    read.calls = calls  # type: ignore[attr-defined]
    return read


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    out: list[float] = []
    now = [0.0]

    def sleep(s: float) -> None:  # a fake clock: waiting takes no time
        out.append(s)
        now[0] += s

    monkeypatch.setattr("transcoder.kafka.admin.time.sleep", sleep)
    monkeypatch.setattr("transcoder.kafka.admin.time.monotonic", lambda: now[0])
    return out


def test_a_new_map_topic_without_a_leader_is_waited_for(slept: list[float]) -> None:
    read = reader(KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION)
    assert read_maps(CONF, "a.zstd", read=read) == ({}, None)
    assert read.calls == ["a.zstd"] * 3 and len(slept) == 2


def test_a_leader_that_never_comes_is_one_line_naming_the_topic(slept: list[float]) -> None:
    read = reader(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaUnavailableError) as err:
        read_maps(CONF, "a.zstd", read=read, settle_s=0.3)
    line = str(err.value)
    assert "\n" not in line and CONF.offset_map_topic in line and "NOT_LEADER_FOR_PARTITION" in line
    assert "after 0.3s" in line and sum(slept) == pytest.approx(0.3)


def test_a_final_kafka_error_is_one_line_at_once(slept: list[float]) -> None:
    read = reader(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaUnavailableError,
                       match=f"cannot read offset-map topic {CONF.offset_map_topic}: TOPIC_AUTHORIZATION_FAILED"):
        read_maps(CONF, "a.zstd", read=read)
    assert len(read.calls) == 1 and slept == []


def test_a_broker_failing_over_is_waited_out(slept: list[float]) -> None:
    """A leader's broker gone for a moment (no answer: _TRANSPORT, _TIMED_OUT) is tried again, not an error."""
    read = reader(KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
    assert read_maps(CONF, "a.zstd", read=read) == ({}, None)
    assert len(read.calls) == 3 and len(slept) == 2


def test_a_broker_that_stays_away_is_one_line_after_the_api_timeout(slept: list[float]) -> None:
    read = reader(*[KafkaError._TRANSPORT] * 10_000)
    with pytest.raises(KafkaUnavailableError) as err:
        read_maps(CONF, "a.zstd", read=read, timeout_s=20)
    line = str(err.value)
    assert "\n" not in line and f"offset-map topic {CONF.offset_map_topic} within 20s (_TRANSPORT" in line
    assert sum(slept) == pytest.approx(20) and err.value.kafka_error == "_TRANSPORT"
