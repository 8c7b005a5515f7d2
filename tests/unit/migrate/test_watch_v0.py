"""`migrate watch --since` on a topic stored in message format v0 (no timestamps): one TopicError naming the
topic, the partition and the format."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import KafkaUnavailableError, TopicError
from transcoder.migrate.watch import _offsets_for_time


class _Future:
    def __init__(self, code: int) -> None:
        self.code = code

    def result(self):
        raise KafkaException(KafkaError(self.code))


class _Admin:
    def __init__(self, code: int) -> None:
        self.code = code

    def list_offsets(self, specs, **_kw):
        return {tp: _Future(self.code) for tp in specs}


def test_v0_topic_since_a_time_is_refused_naming_the_format():
    with pytest.raises(TopicError) as err:
        _offsets_for_time(_Admin(KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT), "old", [1], 0)
    assert str(err.value).startswith("cannot find the offsets of old [1] at 1970-01-01T00:00:00Z: the topic is "
                                     "stored in message format v0 (before Kafka 0.10), whose records carry no "
                                     "timestamps")
    assert (err.value.topic, err.value.partition, err.value.kafka_error) == ("old", 1, "UNSUPPORTED_FOR_MESSAGE_FORMAT")


def test_other_failures_stay_unavailable_errors():
    with pytest.raises(KafkaUnavailableError):
        _offsets_for_time(_Admin(KafkaError._TIMED_OUT), "old", [0], 0)
