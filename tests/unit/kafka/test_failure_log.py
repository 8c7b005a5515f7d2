"""transcoder.kafka.failure_log.FailureLog: at most a line per key per 30 s, flapping included, and the recovery said
at once after an outage. Time is passed in; the lines are captured with structlog's capture_logs."""

from __future__ import annotations

import structlog

from transcoder.kafka.failure_log import FailureLog


def _flap(flog: FailureLog, seconds: float, period: float, start: float = 1000.0, **key: object) -> None:
    """A request failing and succeeding by turns: a failure, then a success `period` later, for `seconds`."""
    t = start
    while t < start + seconds:
        flog.failed("produce_request_failed", t, error="NOT_ENOUGH_REPLICAS", **key)  # type: ignore[arg-type]
        flog.succeeded("produce_request_failed", t + period / 2, **key)  # type: ignore[arg-type]
        t += period


def test_flapping_for_100_s_is_a_handful_of_lines_not_one_per_turn():
    # Seen on a 3-broker cluster: failure and success by turns logged 405 lines in 100 s (each failure after a
    # success was "the first" again).
    flog = FailureLog("c1")
    with structlog.testing.capture_logs() as logs:
        _flap(flog, 100, 0.5)  # 200 failures, 200 successes
    assert len(logs) <= 5, [(e["event"], e.get("failures")) for e in logs]
    # the first failure and its recovery at once, then one line per 30 s that counts what happened since
    assert [e["event"] for e in logs[:2]] == ["produce_request_failed", "kafka_requests_succeed_again"]
    assert all(e.get("recoveries", 0) > 1 for e in logs[2:]), logs
    said = sum(e["failures"] for e in logs)
    assert 200 - said <= 60  # every failure counted in some line, but the last 30 s (said at the next line)


def test_an_outage_is_a_line_at_once_one_per_30_s_and_its_end_at_once():
    flog = FailureLog("c1")
    with structlog.testing.capture_logs() as logs:
        for i in range(700):  # 70 s of failures every 100 ms
            flog.failed("fetch_request_failed", 1000 + i / 10, key=(3,), broker=3, error="KafkaConnectionError")
        flog.succeeded("fetch_request_failed", 1070.05, key=(3,))
    assert [(e["event"], e["failures"]) for e in logs] == [
        ("fetch_request_failed", 1), ("fetch_request_failed", 300), ("fetch_request_failed", 300),
        ("kafka_requests_succeed_again", 99)]
    assert logs[-1]["total"] == 700 and logs[-1]["broker"] == 3 and logs[-1]["last_error"] == "KafkaConnectionError"
    assert all(e["broker"] == 3 and e["error"] == "KafkaConnectionError" for e in logs[:-1])


def test_keys_are_limited_apart_and_a_partition_s_success_ends_its_every_error():
    flog = FailureLog("c1")
    with structlog.testing.capture_logs() as logs:
        for p in (0, 1):
            for name in ("NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER"):
                for t in (0.0, 0.1, 0.2):
                    flog.failed("produce_partition_failed", 1000 + t, key=("t", p, name), topic="t", partition=p,
                                error=name)
        flog.succeeded("produce_partition_failed", 1001, key=("t", 0))  # partition 0: both its errors end
    failed = [(e["partition"], e["error"]) for e in logs if e["event"] == "produce_partition_failed"]
    assert failed == [(0, "NOT_ENOUGH_REPLICAS"), (0, "NOT_LEADER_OR_FOLLOWER"), (1, "NOT_ENOUGH_REPLICAS"),
                      (1, "NOT_LEADER_OR_FOLLOWER")]
    again = [(e["partition"], e["last_error"]) for e in logs if e["event"] == "kafka_requests_succeed_again"]
    assert again == [(0, "NOT_ENOUGH_REPLICAS"), (0, "NOT_LEADER_OR_FOLLOWER")]


def test_flapping_that_ends_is_said_at_the_next_line_s_turn_and_a_later_failure_starts_anew():
    flog = FailureLog("c1")
    with structlog.testing.capture_logs() as logs:
        _flap(flog, 40, 0.5)  # until 1040: lines at 1000 (failed), 1000.25 (recovered), 1030 (flapping)
        for t in range(1041, 1075):  # then only successes: the recovery is said once, at the turn of 1060
            flog.succeeded("produce_request_failed", float(t))
        flog.failed("produce_request_failed", 1200.0, error="NOT_ENOUGH_REPLICAS")  # a new outage, much later
    events = [(e["event"], e["failures"]) for e in logs]
    assert [e for e, _ in events] == ["produce_request_failed", "kafka_requests_succeed_again",
                                      "produce_request_failed", "kafka_requests_succeed_again",
                                      "produce_request_failed"]
    assert logs[3]["after_s"] >= 60
    assert events[-1] == ("produce_request_failed", 1) and "total" not in logs[-1]


def test_nothing_failing_is_nothing_to_say():
    flog = FailureLog("c1")
    with structlog.testing.capture_logs() as logs:
        for t in range(100):
            flog.succeeded("metadata_request_failed", float(t))
    assert logs == []
