"""transcoder.topics pure parts: destination_configs, COPIED_CONFIGS, TopicShape, Provision.to_create, admin_retry."""

from __future__ import annotations

import dataclasses

import pytest

from confluent_kafka import KafkaError, KafkaException

from transcoder.topics import (
    COPIED_CONFIGS,
    DestinationTopic,
    Provision,
    TopicShape,
    admin_retry,
    destination_configs,
)

#: A source topic's effective configs as DescribeConfigs returns them (broker defaults included).
EFFECTIVE = {
    "cleanup.policy": "compact",
    "retention.ms": "86400000",
    "retention.bytes": "-1",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.1",
    "max.message.bytes": "2000000",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "message.timestamp.type": "CreateTime",
    "compression.type": "gzip",
    "unclean.leader.election.enable": "true",
    "min.insync.replicas": "2",
    "preallocate": "false",
}


def test_copied_configs():
    assert set(COPIED_CONFIGS) == {
        "cleanup.policy", "retention.ms", "retention.bytes", "delete.retention.ms", "min.compaction.lag.ms",
        "max.compaction.lag.ms", "min.cleanable.dirty.ratio", "max.message.bytes", "segment.bytes", "segment.ms",
        "segment.index.bytes", "segment.jitter.ms", "message.timestamp.type"}
    assert len(COPIED_CONFIGS) == len(set(COPIED_CONFIGS))
    assert "compression.type" not in COPIED_CONFIGS


def test_nothing_explicit_copies_only_max_message_bytes():
    assert destination_configs(EFFECTIVE, set()) == {"max.message.bytes": "2000000", "compression.type": "producer"}


def test_explicit_listed_keys_are_copied():
    explicit = {"cleanup.policy", "retention.ms", "segment.ms"}
    assert destination_configs(EFFECTIVE, explicit) == {
        "cleanup.policy": "compact", "retention.ms": "86400000", "segment.ms": "604800000",
        "max.message.bytes": "2000000", "compression.type": "producer"}


def test_every_listed_key_copied_when_explicit():
    out = destination_configs(EFFECTIVE, set(EFFECTIVE))
    assert out == {**{k: EFFECTIVE[k] for k in COPIED_CONFIGS}, "compression.type": "producer"}


@pytest.mark.parametrize("key", ["compression.type", "unclean.leader.election.enable", "min.insync.replicas",
                                 "preallocate"])
def test_unlisted_keys_are_never_copied(key):
    out = destination_configs(EFFECTIVE, {key})
    assert out == {"max.message.bytes": "2000000", "compression.type": "producer"}


def test_compression_type_is_always_producer():
    assert destination_configs({"compression.type": "zstd"}, {"compression.type"})["compression.type"] == "producer"
    assert destination_configs({}, set()) == {"compression.type": "producer"}


def test_explicit_key_missing_from_effective_is_skipped():
    assert destination_configs({"max.message.bytes": "10"}, {"retention.ms"}) == {
        "max.message.bytes": "10", "compression.type": "producer"}


@pytest.mark.parametrize("explicit", [{"message.timestamp.type"}, set()])
def test_log_append_time_source_gets_an_explicit_create_time_destination(explicit):
    src = {**EFFECTIVE, "message.timestamp.type": "LogAppendTime"}
    assert destination_configs(src, explicit)["message.timestamp.type"] == "CreateTime"


def test_create_time_kept_only_if_explicit():
    assert destination_configs(EFFECTIVE, {"message.timestamp.type"})["message.timestamp.type"] == "CreateTime"
    assert "message.timestamp.type" not in destination_configs(EFFECTIVE, set())


def test_source_configs_are_not_mutated():
    src = dict(EFFECTIVE)
    explicit = {"cleanup.policy"}
    destination_configs(src, explicit)
    assert src == EFFECTIVE
    assert explicit == {"cleanup.policy"}


def test_topic_shape_is_a_frozen_value():
    assert TopicShape("a", 3) == TopicShape(name="a", partitions=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TopicShape("a", 3).partitions = 4  # type: ignore[misc]


def _dest(topic: str, exists: bool) -> DestinationTopic:
    return DestinationTopic(topic=topic, source="s", target="s.zstd", codec="zstd", partitions=1, exists=exists,
                            create_configs={} if exists else {"compression.type": "producer"},
                            compression_type="producer")


@pytest.mark.parametrize("dlq,expected", [
    (None, ["b", "d"]),
    (_dest("dead", exists=True), ["b", "d"]),
    (_dest("dead", exists=False), ["b", "d", "dead"]),
])
def test_provision_to_create(dlq, expected):
    p = Provision(sources={"s": TopicShape("s", 1)},
                  destinations=[_dest("a", True), _dest("b", False), _dest("c", True), _dest("d", False)], dlq=dlq)
    assert [d.topic for d in p.to_create] == expected


@pytest.mark.parametrize("code", [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                  KafkaError.REQUEST_TIMED_OUT])
def test_admin_retry_retries_per_partition_leader_errors(code, monkeypatch):
    # per-partition errors in admin results are built from the bare code: retriable() is False
    assert not KafkaError(code).retriable()
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)
    calls = []

    @admin_retry
    def list_offsets():
        calls.append(1)
        if len(calls) < 3:
            raise KafkaException(KafkaError(code))
        return 42

    assert list_offsets() == 42
    assert len(calls) == 3


def test_admin_retry_does_not_retry_permanent_errors(monkeypatch):
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)
    calls = []

    @admin_retry
    def describe():
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        describe()
    assert len(calls) == 1
