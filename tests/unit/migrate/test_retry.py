"""migrate.retry without Kafka: which errors are tried again, for how long, what is logged, and the one line left
when the cluster stays away; and the resumed cutover's decision whether its commit had landed."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.unit.migrate.test_state_settle import Clock
from transcoder.errors import KafkaUnavailableError, MigrationError, TopicError
from transcoder.migrate.cutover import resumed_commit_landed
from transcoder.migrate.retry import FAILOVER_ERRORS, RetryLog, kind, retriable, until_deadline


def failing(*errors: BaseException, then: object = "ok", took_s: float = 0.0, clock: Clock | None = None):
    left = list(errors)
    calls: list[int] = []

    def call() -> object:
        calls.append(1)
        if clock is not None:
            clock.now += took_s  # a try that waits for its own request timeout
        if left:
            raise left.pop(0)
        return then

    call.calls = calls  # type: ignore[attr-defined]
    return call


def unavailable(name: str) -> KafkaUnavailableError:
    return KafkaUnavailableError(f"cannot describe group g: {name}", kafka_error=name)


# ---------------------------------------------------------------- which errors are tried again
@pytest.mark.parametrize("name", ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
                                  "NOT_LEADER_OR_FOLLOWER", "_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT"])
def test_failover_errors_are_retriable_even_where_the_flag_is_unset(name: str) -> None:
    """librdkafka builds some per-partition errors without the retriable flag: the name decides."""
    assert retriable(MigrationError(f"x: {name}", kafka_error=name, retriable=False))


@pytest.mark.parametrize("code", [KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                  KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_LEADER_FOR_PARTITION,
                                  KafkaError._TIMED_OUT, KafkaError._TRANSPORT])
def test_a_bare_kafka_exception_of_a_failover_is_retriable(code: int) -> None:
    exc = KafkaException(KafkaError(code))
    assert retriable(exc) and kind(exc) == KafkaError(code).name()


@pytest.mark.parametrize("exc", [
    MigrationError("group g has 1 active member(s)"),  # a refusal: waiting would not change it
    MigrationError("not authorized", kafka_error="GROUP_AUTHORIZATION_FAILED"),
    TopicError("topic t does not exist", kafka_error="UNKNOWN_TOPIC_OR_PART"),
    KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)),
    ValueError("a bug"),
])
def test_refusals_and_bugs_are_final(exc: BaseException) -> None:
    assert not retriable(exc)


def test_the_failover_errors_named_in_the_brief_are_all_there() -> None:
    assert {"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
            "NOT_LEADER_OR_FOLLOWER", "_TIMED_OUT"} <= FAILOVER_ERRORS


# ---------------------------------------------------------------- trying again until the deadline
def test_a_coordinator_moving_is_waited_out_and_the_answer_returned() -> None:
    clock = Clock()
    call = failing(unavailable("NOT_COORDINATOR"), unavailable("COORDINATOR_LOAD_IN_PROGRESS"),
                   unavailable("NOT_COORDINATOR"))
    assert until_deadline(call, what="describe group g", timeout_s=60, sleep=clock.sleep, clock=clock) == "ok"
    assert len(call.calls) == 4
    assert clock.slept == [0.2, 0.4, 0.8]  # doubling from 0.2 s


def test_waits_double_up_to_two_seconds() -> None:
    clock = Clock()
    call = failing(*[unavailable("_TRANSPORT")] * 8)
    until_deadline(call, what="x", timeout_s=60, sleep=clock.sleep, clock=clock)
    assert max(clock.slept) == 2.0 and clock.slept[-3:] == [2.0, 2.0, 2.0]


def test_a_final_error_is_raised_at_once_as_it_is() -> None:
    clock = Clock()
    refusal = MigrationError("group g is unknown to the cluster")
    call = failing(refusal)
    with pytest.raises(MigrationError) as err:
        until_deadline(call, what="describe group g", timeout_s=60, sleep=clock.sleep, clock=clock)
    assert err.value is refusal and len(call.calls) == 1 and clock.slept == []


def test_a_cluster_that_stays_away_is_one_line_at_the_deadline() -> None:
    clock = Clock()
    call = failing(*[unavailable("COORDINATOR_NOT_AVAILABLE")] * 10_000, took_s=1.0, clock=clock)
    with pytest.raises(KafkaUnavailableError) as err:
        until_deadline(call, what="describe group billing", timeout_s=60, sleep=clock.sleep, clock=clock,
                       fields={"group": "billing"})
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("cannot describe group billing within 60s (COORDINATOR_NOT_AVAILABLE: ")
    assert "run the command again" in line
    assert err.value.kafka_error == "COORDINATOR_NOT_AVAILABLE" and err.value.retriable
    assert 60 <= clock.now <= 61  # the last wait ends at the deadline, and one more try after it at most


def test_a_first_try_that_takes_all_the_time_keeps_its_own_error() -> None:
    clock = Clock()
    own = unavailable("_TIMED_OUT")
    call = failing(own, took_s=10.0, clock=clock)
    with pytest.raises(KafkaUnavailableError) as err:
        until_deadline(call, what="read state topic s", timeout_s=10, sleep=clock.sleep, clock=clock)
    assert err.value is own and clock.slept == []


def test_retry_on_narrows_what_is_tried_again() -> None:
    clock = Clock()
    call = failing(unavailable("NOT_LEADER_FOR_PARTITION"))
    with pytest.raises(KafkaUnavailableError):
        until_deadline(call, what="x", timeout_s=60, sleep=clock.sleep, clock=clock,
                       retry_on=lambda e: kind(e) != "NOT_LEADER_FOR_PARTITION")
    assert len(call.calls) == 1


# ---------------------------------------------------------------- logged once per error kind
def test_each_error_kind_is_logged_once_with_where_it_happened() -> None:
    lines: list[dict] = []
    seen = RetryLog("describe group billing", {"group": "billing"}, emit=lambda event, **kw: lines.append(
        {"event": event, **kw}))
    firsts = [seen(unavailable(n), float(i)) for i, n in enumerate(
        ["NOT_COORDINATOR", "NOT_COORDINATOR", "_TRANSPORT", "NOT_COORDINATOR", "_TRANSPORT", "_TIMED_OUT"])]
    assert firsts == [True, False, True, False, False, True]
    assert [(x["event"], x["kafka_error"], x["group"], x["what"]) for x in lines] == [
        ("migrate_retrying", "NOT_COORDINATOR", "billing", "describe group billing"),
        ("migrate_retrying", "_TRANSPORT", "billing", "describe group billing"),
        ("migrate_retrying", "_TIMED_OUT", "billing", "describe group billing")]
    assert seen.seen == {"NOT_COORDINATOR": 3, "_TRANSPORT": 2, "_TIMED_OUT": 1}


def test_until_deadline_logs_each_kind_once(monkeypatch: pytest.MonkeyPatch) -> None:
    logged: list[tuple[str, dict]] = []
    monkeypatch.setattr("transcoder.migrate.retry.log.warning", lambda event, **kw: logged.append((event, kw)))
    clock = Clock()
    call = failing(*[unavailable("NOT_COORDINATOR")] * 5, *[unavailable("_TRANSPORT")] * 5)
    until_deadline(call, what="read the committed offsets of group g on t", timeout_s=60, sleep=clock.sleep,
                   clock=clock, fields={"group": "g", "topic": "t"})
    assert [(e, kw["kafka_error"], kw["group"], kw["topic"]) for e, kw in logged] == [
        ("migrate_retrying", "NOT_COORDINATOR", "g", "t"), ("migrate_retrying", "_TRANSPORT", "g", "t")]


# ---------------------------------------------------------------- a resumed cutover: had its commit landed?
@pytest.mark.parametrize(("committed", "translated", "landed"), [
    ({0: 10, 1: 20}, {0: 10, 1: 20}, True),  # exactly the offsets it computed
    ({0: 15, 1: 20}, {0: 10, 1: 20}, True),  # and the group read on since
    ({}, {0: 10, 1: 20}, False),  # never committed
    ({0: 10}, {0: 10, 1: 20}, False),  # a partition without: not that commit
    ({0: 9, 1: 20}, {0: 10, 1: 20}, False),  # behind: commit it (or refuse as a rewind)
    ({0: 10}, {}, False),  # nothing to commit is nothing landed
])
def test_a_resumed_cutover_knows_whether_its_commit_landed(committed, translated, landed) -> None:
    assert resumed_commit_landed(committed, translated) is landed
