"""transcoder.kafka.clients.ErrorTracker: when an outage began, as `lane_copying_again after_s` reports it. On a
3-broker cluster a lane idle before a 15-37 s cut reported 137-655 s: the time since it last moved."""

from __future__ import annotations

from confluent_kafka import KafkaError

from transcoder.kafka.clients import ErrorTracker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_begins_at_its_first_unreachable_error():
    clock = Clock()
    t = ErrorTracker(clock)
    assert t.streak_start is None
    clock.now = 1600.0  # the lane was idle 600 s: nothing to do with the outage
    t(KafkaError(KafkaError._TRANSPORT))
    for _ in range(3):  # librdkafka repeats them while it lasts
        clock.now += 5
        t(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert t.streak_start == 1600.0 and t.unreachable_since(1600.0 - 1) is not None
    assert t.cause is not None and t.cause.code() == KafkaError._TRANSPORT


def test_a_later_outage_is_a_streak_of_its_own():
    clock = Clock()
    t = ErrorTracker(clock)
    t(KafkaError(KafkaError._TRANSPORT))
    clock.now += 2
    t(KafkaError(KafkaError._MSG_TIMED_OUT))  # not an "unreachable" error: the streak ends with it
    clock.now += 3
    t(KafkaError(KafkaError._TRANSPORT))
    assert t.streak_start == 1005.0
    clock.now += ErrorTracker.STREAK_GAP_S + 1  # quiet for longer than librdkafka's repeats: a new outage
    t(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert t.streak_start == clock.now
