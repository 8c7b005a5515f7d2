"""A lane's readiness through an outage (issue 42, item 6): /readyz is not ready while no broker answers, however
quiet librdkafka's errors are, and `lane_copying_again after_s` is the outage from its first failure to the first
success. On 273aa5e an idle lane was ready again 15 s after the last error (a broker still down: librdkafka repeats
its errors seldom), and after_s ran to that moment."""

from __future__ import annotations

from confluent_kafka import KafkaError
from structlog.testing import capture_logs

from tests.unit.kafka.test_error_tracker import Clock, stats
from tests.unit.service.lane_fakes import lane
from transcoder.metrics.status import ready


def test_an_idle_lane_is_not_ready_until_a_broker_answers_and_says_how_long_it_was_down():
    the_lane, *_ = lane()
    tracker = the_lane.readiness.consumer_errors
    clock = Clock()
    t0 = clock.now = the_lane.readiness.progress[1] + 600  # the outage begins; the lane has been idle for 10 minutes
    tracker._clock = clock
    the_lane.status.state = "running"
    the_lane.status.assigned = [("src", 0)]
    tracker.statistics(stats(b1=("UP", 600, 1000)), t0 - 5)  # the broker answering
    the_lane.readiness.check(t0 - 1)
    assert ready([the_lane.status]) == (True, "ok")
    tracker(KafkaError(KafkaError._TRANSPORT))  # the broker goes away
    clock.now = t0 + 0.5
    tracker(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    with capture_logs() as logs:
        for dt in (1, 10, 20, 30, 40):  # no error since t0 + 0.5: librdkafka is quiet, the broker still down
            if dt > 1:
                tracker.statistics(stats(b1=("TRY_CONNECT", dt, 1000)), t0 + dt - 0.5)
            the_lane.readiness.check(t0 + dt)
            ok, why = ready([the_lane.status])
            assert not ok and "Kafka unreachable" in why, (dt, why)
        tracker.statistics(stats(b1=("UP", 3.0, 1002)), t0 + 45)  # reconnected at t0 + 42: the first success
        the_lane.readiness.check(t0 + 45.5)
    assert ready([the_lane.status]) == (True, "ok")
    events = [(e["event"], e.get("after_s")) for e in logs if e["event"].startswith("lane_c")]
    assert events == [("lane_cannot_copy", None), ("lane_copying_again", 42.0)], logs
