"""--since/--until on a topic stored in message format v0 (no timestamps): one TopicError naming the topic,
the partition and the format, not the client's exception."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import KafkaUnavailableError, TopicError
from transcoder.evaluate.sample import _ranges


class _Consumer:
    def __init__(self, code: int) -> None:
        self.code = code

    def get_watermark_offsets(self, tp, timeout: float) -> tuple[int, int]:
        return 0, 10

    def offsets_for_times(self, tps, timeout: float):
        raise KafkaException(KafkaError(self.code, "Broker: Message format on broker does not support request"))


def test_v0_topic_by_time_is_refused_naming_the_format():
    with pytest.raises(TopicError) as err:
        _ranges(_Consumer(KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT), "old", [2], None, 1_000, None)
    assert str(err.value) == ("cannot find the offsets of old [2] by time: the topic is stored in message format v0 "
                              "(before Kafka 0.10), whose records carry no timestamps; give --records instead of "
                              "--since/--until")
    assert (err.value.topic, err.value.partition) == ("old", 2)


def test_other_lookup_failures_are_one_line_too():
    with pytest.raises(KafkaUnavailableError, match=r"^cannot find the offsets of old \[0\] by time: "):
        _ranges(_Consumer(KafkaError._TIMED_OUT), "old", [0], None, None, 1_000)
