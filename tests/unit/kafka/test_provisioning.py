"""transcoder.kafka.provisioning pure parts: destination_configs, COPIED_CONFIGS, Provision.to_create."""

from __future__ import annotations

import pytest

from transcoder.kafka.admin import TopicShape
from transcoder.kafka.provisioning import COPIED_CONFIGS, DestinationTopic, Provision, destination_configs

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
