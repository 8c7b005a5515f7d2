"""migrate.verify's offset queries without Kafka: a query that times out (a stalled broker holds it behind the
reader's own fetch: official CI, 15 s) is asked again within the reader's timeout; one that keeps failing becomes
one line naming the topic and partition."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import KafkaUnavailableError
from transcoder.migrate.verify import RangeReader


class _Offsets:
    """A consumer whose offset queries fail with `errors` first, then answer (3, 9)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.asked = 0

    def get_watermark_offsets(self, _tp: Any, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 3, 9


def test_an_offset_query_that_timed_out_is_asked_again() -> None:
    consumer = _Offsets(KafkaError._TIMED_OUT)
    assert RangeReader(consumer, "t", "source", timeout=5).watermarks(2) == (3, 9)
    assert consumer.asked == 2


def test_an_offset_query_that_keeps_timing_out_fails_in_one_line_naming_topic_and_partition() -> None:
    consumer = _Offsets(*[KafkaError._TIMED_OUT] * 100)
    with pytest.raises(KafkaUnavailableError) as err:
        RangeReader(consumer, "t", "source", timeout=0.5).watermarks(2)
    assert (err.value.topic, err.value.partition) == ("t", 2)
    assert "source topic t [2]" in str(err.value) and "\n" not in str(err.value)
    assert consumer.asked >= 2


def test_an_error_no_retry_can_mend_is_raised_at_once() -> None:
    consumer = _Offsets(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaUnavailableError) as err:
        RangeReader(consumer, "t", "destination", timeout=5).watermarks(0)
    assert err.value.kafka_error == "TOPIC_AUTHORIZATION_FAILED" and consumer.asked == 1
