"""transcoder.kafka.clients.ErrorTracker: a client's outage, from its first "unreachable" error to the first answer
of a broker after it, as `lane_copying_again after_s` reports it. On a 3-broker cluster a lane idle before a 15-37 s
cut reported 137-655 s (the time since it last moved); then 137-259 s, ended by a quiet spell instead of an answer,
and once while the broker was still down (issue 42)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from transcoder.kafka.clients import ErrorTracker, client_config


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stats(**brokers: tuple[str, float, int]) -> dict[str, Any]:
    """librdkafka statistics with brokers name=(state, seconds in that state, responses received)."""
    return {"brokers": {name: {"state": state, "stateage": int(age * 1e6), "rx": rx}
                        for name, (state, age, rx) in brokers.items()}}


def test_an_outage_begins_at_its_first_unreachable_error():
    clock = Clock()
    t = ErrorTracker(clock)
    assert t.streak_start is None and t.unreachable() is None
    clock.now = 1600.0  # the lane was idle 600 s: nothing to do with the outage
    t(KafkaError(KafkaError._TRANSPORT))
    for _ in range(3):  # librdkafka repeats them while it lasts
        clock.now += 5
        t(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert t.streak_start == 1600.0 and t.unreachable() is not None
    assert t.cause is not None and t.cause.code() == KafkaError._TRANSPORT


def test_an_outage_lasts_until_a_broker_answers_however_quiet_the_errors():
    clock = Clock()
    t = ErrorTracker(clock)
    t.statistics(stats(b1=("UP", 300, 500)))  # before: the broker answering for 5 minutes
    t(KafkaError(KafkaError._TRANSPORT))
    clock.now += 1
    t(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    for _ in range(8):  # librdkafka says nothing more for 40 s (identical errors suppressed, reconnects back off)
        clock.now += 5
        t.statistics(stats(b1=("TRY_CONNECT", clock.now - 1000, 500)))
        if clock.now == 1020:
            t(KafkaError(KafkaError._MSG_TIMED_OUT))  # not an answer either
        assert t.unreachable() is not None and t.streak_start == 1000.0
    clock.now = 1047.0
    t.statistics(stats(b1=("UP", 2.5, 503)))  # reconnected 2.5 s ago: its handshake answered at 1044.5
    assert t.streak_start is None and t.unreachable() is None
    assert t.recovered == (1000.0, 1044.5)  # first failure to first success: 44.5 s
    clock.now += 5
    t(KafkaError(KafkaError._TRANSPORT))  # a later outage is one of its own (the answer at 1044.5 is recent:
    assert t.streak_start is None          # one broker's failure is an outage once every broker is down)
    clock.now += 0.01
    t(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert t.streak_start == 1052.0


def test_one_broker_of_three_failing_is_no_outage_while_the_others_answer():
    clock = Clock()
    t = ErrorTracker(clock)
    rx = 100
    t.statistics(stats(b1=("UP", 60, rx), b2=("UP", 60, rx), b3=("UP", 60, rx)))
    for _ in range(12):  # b3 down for a minute: its reconnects fail every 10 s, b1 and b2 answer throughout
        clock.now += 5
        rx += 10
        if int(clock.now) % 10 == 0:
            t(KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9094/3: Connect failed: Connection refused"))
        t.statistics(stats(b1=("UP", 60, rx), b2=("UP", 60, rx), b3=("TRY_CONNECT", 1, 100)))
        assert t.streak_start is None and t.unreachable() is None


def test_a_failure_no_broker_answers_after_becomes_an_outage_from_that_failure():
    clock = Clock()
    t = ErrorTracker(clock, grace_s=10)
    t.statistics(stats(b1=("UP", 60, 100)))
    clock.now = 1005.0
    t.statistics(stats(b1=("UP", 65, 110)))  # answered since 1000
    clock.now = 1006.0
    t(KafkaError(KafkaError._TIMED_OUT))  # a stalled broker: its connection stays UP, nothing answers
    assert t.streak_start is None
    for now in (1010.0, 1015.0):
        clock.now = now
        t.statistics(stats(b1=("UP", now - 940, 110)))
        assert t.streak_start is None  # within the grace
    clock.now = 1020.0
    t.statistics(stats(b1=("UP", 80, 110)))
    assert t.streak_start == 1006.0 and t.unreachable() is not None


def test_a_connection_still_up_from_before_is_no_answer_but_responses_since_are():
    clock = Clock()
    t = ErrorTracker(clock)
    t.statistics(stats(b1=("UP", 100, 40)))
    clock.now = 1002.0
    t(KafkaError(KafkaError._TIMED_OUT))  # a stall: the connection stays UP, its requests time out
    clock.now = 1005.0
    t.statistics(stats(b1=("UP", 105, 41)))  # a response, but maybe from before the failure
    assert t.streak_start == 1002.0
    clock.now = 1010.0
    t.statistics(stats(b1=("UP", 110, 41)))  # UP since long before: nothing answered
    assert t.streak_start == 1002.0
    clock.now = 1015.0
    t.statistics(stats(b1=("UP", 115, 42)))  # a response since 1010, after the failure: the outage is over
    assert t.unreachable() is None and t.recovered == (1002.0, 1015.0)


def test_an_answer_from_before_the_failure_does_not_end_it():
    clock = Clock()
    t = ErrorTracker(clock)
    clock.now = 1010.0
    t(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    t.answered(1009.0)
    assert t.streak_start == 1010.0
    t.answered(1020.0, after=1005.0)  # acknowledgements counted between 1005 and 1020: maybe before it
    assert t.streak_start == 1010.0
    t.answered(1030.0, after=1020.0)
    assert t.recovered == (1010.0, 1030.0)


def test_client_config_passes_statistics_through_the_tracker():
    seen: list[str] = []
    conf = client_config({"bootstrap.servers": "k:9092"}, stats_cb=seen.append)
    tracker = conf["error_cb"]
    tracker(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    start = tracker.streak_start
    conf["stats_cb"]('{"brokers": {"b1": {"state": "UP", "stateage": 0, "rx": 3}}}')
    assert seen and tracker.streak_start is None and tracker.recovered[0] == start
