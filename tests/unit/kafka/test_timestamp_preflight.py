"""Timestamps in provisioning, without a broker: what created destinations inherit of their source's timestamp limits,
and what pre-flight says of an existing destination whose timestamp type or limits differ. The real broker:
tests/integration/test_timestamps.py."""

from __future__ import annotations

import pytest

from transcoder.kafka.admin import TopicConfigs
from transcoder.kafka.provisioning import (
    NO_LIMIT,
    destination_configs,
    loosest_limits,
    tighter_limits,
    timestamp_limit,
    timestamp_type_problem,
)

HOUR, DAY = 3_600_000, 86_400_000
#: a Kafka 4 broker's defaults, as DescribeConfigs of a broker gives them
KAFKA_4 = {"log.message.timestamp.after.max.ms": str(HOUR), "log.message.timestamp.before.max.ms": str(NO_LIMIT),
           "log.message.timestamp.type": "CreateTime"}
#: a Kafka 3.6-3.9 broker's: the older difference limit too
KAFKA_3 = {**KAFKA_4, "log.message.timestamp.after.max.ms": str(NO_LIMIT),
           "log.message.timestamp.difference.max.ms": str(NO_LIMIT)}
SOURCE_3 = {"max.message.bytes": "1048588", "message.timestamp.type": "CreateTime",
            "message.timestamp.after.max.ms": str(NO_LIMIT), "message.timestamp.before.max.ms": str(NO_LIMIT),
            "message.timestamp.difference.max.ms": str(NO_LIMIT)}


def test_a_destination_inherits_the_source_limits_its_broker_would_not_give_it():
    # a Kafka 3 source (no limit) to a Kafka 4 broker (1 h ahead): the destination takes "no limit" explicitly;
    # the difference limit, which Kafka 4 no longer knows, is left out
    assert destination_configs(SOURCE_3, set(), KAFKA_4) == {
        "max.message.bytes": "1048588", "message.timestamp.after.max.ms": str(NO_LIMIT),
        "compression.type": "producer"}


def test_limits_equal_to_the_destination_brokers_defaults_are_not_repeated():
    source = {**SOURCE_3, "message.timestamp.after.max.ms": str(DAY)}
    assert destination_configs(source, {"message.timestamp.after.max.ms"}, KAFKA_3) == {
        "max.message.bytes": "1048588", "message.timestamp.after.max.ms": str(DAY), "compression.type": "producer"}
    assert "message.timestamp.after.max.ms" not in destination_configs({**SOURCE_3, **{
        "message.timestamp.after.max.ms": str(HOUR)}}, set(), KAFKA_4)


def test_broker_configs_unreadable_copies_the_limits_set_on_the_source_itself():
    source = {**SOURCE_3, "message.timestamp.after.max.ms": str(DAY)}
    explicit = {"message.timestamp.after.max.ms", "message.timestamp.difference.max.ms"}
    out = destination_configs(source, explicit)
    assert out["message.timestamp.after.max.ms"] == str(DAY) and "message.timestamp.difference.max.ms" not in out
    assert "message.timestamp.after.max.ms" not in destination_configs(source, set())


def test_a_destination_broker_defaulting_to_log_append_time_gets_create_time_explicitly():
    out = destination_configs(SOURCE_3, set(), {**KAFKA_4, "log.message.timestamp.type": "LogAppendTime"})
    assert out["message.timestamp.type"] == "CreateTime"


def test_a_dead_letter_topic_takes_the_widest_limits_of_its_sources():
    a = TopicConfigs({"message.timestamp.after.max.ms": str(HOUR), "message.timestamp.before.max.ms": str(DAY)},
                     {"message.timestamp.before.max.ms"})
    b = TopicConfigs({"message.timestamp.after.max.ms": str(DAY), "message.timestamp.before.max.ms": str(HOUR)},
                     {"message.timestamp.after.max.ms"})
    got = loosest_limits({"a": a, "b": b})
    assert got.effective == {"message.timestamp.after.max.ms": str(DAY), "message.timestamp.before.max.ms": str(DAY)}
    assert got.explicit == {"message.timestamp.after.max.ms", "message.timestamp.before.max.ms"}


@pytest.mark.parametrize(("configs", "after", "before"), [
    ({}, NO_LIMIT, NO_LIMIT),
    ({"message.timestamp.after.max.ms": str(HOUR)}, HOUR, NO_LIMIT),  # Kafka 4's default
    ({"message.timestamp.difference.max.ms": str(DAY)}, DAY, DAY),  # a broker before 3.6
    # 3.6-3.9: an after/before left at no limit falls back to the difference limit, as the broker reads it
    ({"message.timestamp.after.max.ms": str(HOUR), "message.timestamp.before.max.ms": str(NO_LIMIT),
      "message.timestamp.difference.max.ms": str(DAY)}, HOUR, DAY),
])
def test_the_limit_each_way_as_the_broker_reads_it(configs: dict, after: int, before: int):
    assert (timestamp_limit(configs, "after"), timestamp_limit(configs, "before")) == (after, before)


def test_log_append_time_is_one_line_naming_the_topic_the_config_and_the_fix():
    assert timestamp_type_problem("destination d", {"message.timestamp.type": "CreateTime"}) is None
    line = timestamp_type_problem("destination d", {"message.timestamp.type": "LogAppendTime"})
    assert line is not None and "\n" not in line
    assert line.startswith("destination d has message.timestamp.type=LogAppendTime")
    assert ("kafka-configs --alter --entity-type topics --entity-name d --add-config "
            "message.timestamp.type=CreateTime") in line


def test_limits_tighter_than_the_source_are_named_with_the_fix():
    (tighter,) = tighter_limits("d", {"message.timestamp.after.max.ms": str(HOUR)}, "s",
                                {"message.timestamp.after.max.ms": str(DAY)})
    assert tighter["config"] == "message.timestamp.after.max.ms" and tighter["value"] == HOUR
    assert tighter["source_value"] == DAY
    assert tighter["fix"] == ("kafka-configs --alter --entity-type topics --entity-name d --add-config "
                              f"message.timestamp.after.max.ms={DAY}")
    assert tighter_limits("d", {"message.timestamp.after.max.ms": str(DAY)}, "s",
                          {"message.timestamp.after.max.ms": str(HOUR)}) == []
