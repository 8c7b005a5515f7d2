"""transcoder.kafka.admin pure parts: TopicShape, admin_retry and the retriable flag it reads."""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import KafkaUnavailableError, TopicError, TranscoderError
from transcoder.kafka.admin import TopicShape, _failure, admin_retry
from transcoder.kafka.clients import retriable


def test_topic_shape_is_a_frozen_value():
    assert TopicShape("a", 3) == TopicShape(name="a", partitions=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TopicShape("a", 3).partitions = 4  # type: ignore[misc]


@pytest.mark.parametrize("code", [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                  KafkaError.REQUEST_TIMED_OUT])
def test_admin_retry_retries_per_partition_leader_errors(code, monkeypatch):
    # per-partition errors in admin results are built from the bare code: librdkafka's retriable() is False,
    # Kafka's own table says retriable, and the error the admin call raises carries that flag
    assert not KafkaError(code).retriable()
    assert retriable(KafkaError(code))
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)
    calls = []

    @admin_retry
    def list_offsets():
        calls.append(1)
        if len(calls) < 3:
            exc = KafkaException(KafkaError(code))
            raise _failure(exc, "cannot list offsets of t [0]", KafkaUnavailableError, topic="t", partition=0) from exc
        return 42

    assert list_offsets() == 42
    assert len(calls) == 3


def test_admin_retry_does_not_retry_permanent_errors(monkeypatch):
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)
    calls = []

    @admin_retry
    def describe():
        calls.append(1)
        exc = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
        raise _failure(exc, "cannot describe topic t", topic="t") from exc

    with pytest.raises(TopicError) as info:
        describe()
    assert len(calls) == 1
    err = info.value
    assert (err.topic, err.kafka_error, err.retriable) == ("t", "TOPIC_AUTHORIZATION_FAILED", False)
    assert str(err) == "cannot describe topic t: not authorized (topic ACL): grant DESCRIBE, DESCRIBE_CONFIGS and " \
                       "READ on sources, CREATE and WRITE on destinations"
    assert isinstance(err.__cause__, KafkaException)  # the cause is chained, not lost


def test_admin_retry_never_retries_plain_kafka_exceptions(monkeypatch):
    # the policy reads `retriable` of transcoder errors; a KafkaException is converted where it is raised
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)
    calls = []

    @admin_retry
    def call():
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))

    with pytest.raises(KafkaException):
        call()
    assert len(calls) == 1


@pytest.mark.parametrize("code,expected", [
    (KafkaError.NOT_ENOUGH_REPLICAS, True), (KafkaError.OFFSET_NOT_AVAILABLE, True),
    (KafkaError._TIMED_OUT, True), (KafkaError._TRANSPORT, True),
    (KafkaError.MSG_SIZE_TOO_LARGE, False), (KafkaError.INVALID_RECORD, False),
    (KafkaError.UNKNOWN_TOPIC_OR_PART, True), (KafkaError._INVALID_ARG, False),
])
def test_retriable_reads_kafkas_own_flag(code, expected):
    assert retriable(KafkaError(code)) is expected


def test_transcoder_errors_carry_their_coordinates():
    err = TranscoderError("x", topic="t", partition=2, offset=7, kafka_error="MSG_SIZE_TOO_LARGE")
    assert err.fields() == {"topic": "t", "partition": 2, "offset": 7, "kafka_error": "MSG_SIZE_TOO_LARGE"}
    assert not err.retriable and KafkaUnavailableError("y").retriable
    assert TopicError("z", retriable=True).retriable
