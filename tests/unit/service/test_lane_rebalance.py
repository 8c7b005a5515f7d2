"""transcoder.service.lane.Lane on the records path, its clients fakes (lane_fakes): rebalances with records in
flight, a commit refused by a rebalance, partitions lost, backpressure, an aborted transaction read again."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError

from tests.unit.service.lane_fakes import (
    P0,
    P1,
    Record,
    ScriptedConsumer,
    commits,
    lane,
    records,
)
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.pipeline.partitions import Partition


def test_a_revoke_with_records_in_flight_delivers_them_then_commits_the_revoked_partition_only():
    the_lane, consumer, writer, events, stop = lane()

    def revoke_p0(c: ScriptedConsumer) -> None:
        writer.ack(P0, 4)  # six records of P0 still in flight
        writer.ack(P1)
        c.rebalance("revoke", [P0])

    consumer.script = [
        lambda c: c.rebalance("assign", [P0, P1]),
        lambda c: records(P0, range(10)) + records(P1, range(10)),
        revoke_p0,
        lambda c: records(P1, range(10, 15)),
        lambda c: writer.ack(P1, 2),
    ]
    the_lane.run(stop)
    at_revoke = events.index(("revoke", [P0]))
    assert events[at_revoke + 1:at_revoke + 3] == ["drain", ("commit", [("src", 0, 10)])]
    assert all(o[:2] != P0 for c in commits(events[at_revoke + 3:]) for o in c)  # never again after the revoke
    assert consumer.group == {P0: 10, P1: 15}
    assert the_lane.status.state == "stopped" and the_lane.status.records == 25


def test_a_commit_refused_by_a_rebalance_is_made_by_the_revoke():
    the_lane, consumer, writer, events, stop = lane(commit_interval_ms=50)
    consumer.commit_errors = [KafkaError(KafkaError.REBALANCE_IN_PROGRESS)]
    consumer.script = [
        lambda c: c.rebalance("assign", [P0]),
        lambda c: records(P0, range(5)),
        lambda c: writer.ack(P0),
    ]
    # the loop turns until its own commit (commit_interval_ms: 50) is refused
    consumer.script += [lambda c: threading.Event().wait(0.01)] * 500
    refused = threading.Event()
    original = consumer.commit

    def commit(**kw: Any) -> None:
        original(**kw)
        if events[-1] == "commit_refused":  # the answer the next poll serves says so
            refused.set()
            consumer.script[:] = [lambda c: c.rebalance("revoke", [P0])]

    consumer.commit = commit  # type: ignore[method-assign]
    the_lane.run(stop)
    assert refused.is_set()
    after = events[events.index("commit_refused") + 1:]
    assert after == [("revoke", [P0]), "drain", ("commit", [("src", 0, 5)]), "drain"]  # the last: the shutdown's
    assert consumer.group == {P0: 5}


def test_lost_partitions_are_never_committed():
    the_lane, consumer, _, _, stop = lane()
    consumer.script = [
        lambda c: c.rebalance("assign", [P0, P1]),
        lambda c: records(P0, range(3)) + records(P1, range(3)),
        lambda c: c.rebalance("lost", [P0]),
    ]
    the_lane.run(stop)
    assert consumer.group == {P1: 3}  # the shutdown delivered and committed P1; P0 belongs to another member
    assert P0 not in the_lane.checkpoint.committed


def test_backpressure_pauses_every_assigned_partition_and_resumes_at_half_the_limit():
    the_lane, consumer, writer, events, stop = lane(max_in_flight_bytes=100)

    def ack(tp: Partition, n: int) -> None:
        writer.ack(tp, n)
        events.append(("in_flight", writer.ledger.in_flight_bytes))

    consumer.script = [
        lambda c: c.rebalance("assign", [P0, P1]),
        lambda c: records(P0, range(6)) + records(P1, range(6)),  # 120 bytes in flight: over the limit
        lambda c: ack(P0, 3),
        lambda c: ack(P0, 3),
        lambda c: ack(P1, 2),
    ]
    the_lane.run(stop)
    flow = [e for e in events if e[0] == "in_flight" or e[0] in ("pause", "resume") and len(e[1]) == 2]
    assert flow == [("resume", [P0, P1]),  # on assignment: librdkafka's pause is not left over from before
                    ("pause", [P0, P1]), ("in_flight", 90), ("in_flight", 60), ("in_flight", 40),
                    ("resume", [P0, P1])]
    assert consumer.group == {P0: 6, P1: 6}


def test_exactly_once_an_aborted_transaction_reads_its_partitions_again_from_the_last_commit():
    the_lane, consumer, writer, events, stop = lane(guarantee="exactly-once", commit_interval_ms=50)
    consumer.group = {P1: 100}

    def read_then_fail_the_commit(c: ScriptedConsumer) -> list[Record]:
        writer.commit_error = KafkaError(KafkaError._TIMED_OUT, "not delivered", txn_requires_abort=True)
        return records(P0, range(4)) + records(P1, range(100, 104))

    consumer.script = [lambda c: c.rebalance("assign", [P0, P1]), read_then_fail_the_commit]
    aborted = writer.aborted
    writer.after_abort = lambda: setattr(writer, "commit_error", None)
    for _ in range(500):  # until the loop's commit (commit_interval_ms: 50) failed
        consumer.script.append(lambda c: None if aborted.is_set() else threading.Event().wait(0.01))
    the_lane.run(stop)
    after = events[events.index("commit_transaction_failed") + 1:]
    assert after[0] == "abort_transaction"
    assert set(after[1:3]) == {("seek", P0, 0), ("seek", P1, 100)}  # the first offset read; the group's commit
    assert commits(events) == [[("src", 0, 0)]]  # the shutdown's: where P0 is read again; P1 is where committed


def test_a_lane_fenced_while_losing_its_partitions_takes_no_new_assignment_and_stops_saying_so():
    # A paused instance woken after another took its transactional id over: one poll serves the loss (whose abort
    # finds the producer fenced) and the group's new assignment. Seen in a fresh-clone CI: the lane began
    # transactions again and logged partitions_assigned, and failed only at its next shutdown.
    the_lane, consumer, writer, events, stop = lane(guarantee="exactly-once", commit_interval_ms=50)

    def fenced(timeout: float, retrying: Any = None) -> None:
        events.append("abort_transaction")
        raise DeliveryError("lane l: could not abort a transaction: another instance took over transactional.id t")

    def lost_then_assigned(c: ScriptedConsumer) -> None:
        writer.abort_transaction = fenced  # type: ignore[method-assign]
        c.rebalance("lost", [P0, P1])
        c.rebalance("assign", [P0, P1])

    consumer.script = [lambda c: c.rebalance("assign", [P0, P1]), lost_then_assigned]
    with pytest.raises(DeliveryError, match="another instance took over"):
        the_lane.run(stop)
    assert events.count("begin_transactions") == 1  # the first assignment's only
    assert the_lane.status.assigned == []


def test_exactly_once_offsets_left_pending_are_released_with_the_commit_this_lane_made_not_rewound():
    # Seen in a fresh-clone CI (broker SIGKILLed, then fenced and re-elected while it wrote the markers): the
    # commit marker of a transaction the lane had committed never reached the group's partition; its offsets
    # stayed pending, the lane's read of them failed, and the release aborted them: the group went back to the
    # commit before, and that transaction's 2,000 records were copied twice. They are committed as they were.
    the_lane, consumer, writer, events, stop = lane(guarantee="exactly-once", commit_interval_ms=50)
    consumer.group = {P1: 100}
    unstable = KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT, "pending transactional offsets", retriable=True)

    def lost_then_assigned_with_offsets_pending(c: ScriptedConsumer) -> None:
        c.rebalance("lost", [P0, P1])
        c.committed_errors = [unstable]
        c.rebalance("assign", [P0, P1])

    consumer.script = [lambda c: c.rebalance("assign", [P0, P1]),
                       lambda c: records(P0, range(4)) + records(P1, range(100, 103))]
    for _ in range(500):  # until the loop's commit (commit_interval_ms: 50)
        consumer.script.append(lambda c: None if any(e[0] == "commit_transaction" for e in events
                                                     if isinstance(e, tuple)) else threading.Event().wait(0.01))
    consumer.script.append(lost_then_assigned_with_offsets_pending)
    the_lane.run(stop)
    assert [e for e in events if isinstance(e, tuple) and e[0] == "commit_transaction"][0] == (
        "commit_transaction", [("src", 0, 4), ("src", 1, 103)])
    assert [e for e in events if isinstance(e, tuple) and e[0] == "release_group_offsets"] == [
        ("release_group_offsets", [P0, P1], {P0: 4, P1: 103})]


def test_exactly_once_offsets_pending_of_partitions_this_lane_never_committed_are_released_by_an_abort():
    the_lane, consumer, writer, events, stop = lane(guarantee="exactly-once", commit_interval_ms=50)
    consumer.committed_errors = [KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT, "pending", retriable=True)]
    consumer.script = [lambda c: c.rebalance("assign", [P0, P1])]
    the_lane.run(stop)
    assert [e for e in events if isinstance(e, tuple) and e[0] == "release_group_offsets"] == [
        ("release_group_offsets", [P0, P1], None)]


def test_exactly_once_a_commit_stuck_in_librdkafka_replaces_the_producer_and_reads_again_from_the_last_commit():
    from transcoder.kafka.writer.transactions import TransactionStuck

    the_lane, consumer, writer, events, stop = lane(guarantee="exactly-once", commit_interval_ms=50)
    consumer.group = {P1: 100}

    def read_then_get_stuck(c: ScriptedConsumer) -> list[Record]:
        writer.commit_error = TransactionStuck("send_offsets_to_transaction did not return within 22 s",
                                               retriable=True)
        return records(P0, range(4)) + records(P1, range(100, 104))

    consumer.script = [lambda c: c.rebalance("assign", [P0, P1]), read_then_get_stuck]
    for _ in range(500):  # until the loop's commit (commit_interval_ms: 50) got stuck
        consumer.script.append(lambda c: None if "replace_producer" in events else threading.Event().wait(0.01))
    the_lane.run(stop)
    after = events[events.index("commit_transaction_failed") + 1:]
    assert after[0] == "replace_producer" and "abort_transaction" not in events
    assert set(after[1:3]) == {("seek", P0, 0), ("seek", P1, 100)}  # the first offset read; the group's commit
    assert commits(events) == [[("src", 0, 0)]]  # the shutdown's: where P0 is read again; P1 is where committed


@pytest.mark.parametrize("own", [True, False], ids=["created-by-transcoder", "created-by-the-user"])
@pytest.mark.parametrize("hot_path", ["records", "batches"])
def test_a_partition_added_to_the_source_is_counted_without_asking_the_consumer_inside_its_callback(own, hot_path):
    """The assignment of a partition the destination lacks asks the source's partition count of the topic-id
    client: the same call on the consumer, inside its rebalance callback, aborted the process in CI."""
    dest = "src.zstd-3"
    extended: list[tuple[str, int]] = []
    the_lane, consumer, _, _, stop = lane(
        hot_path=hot_path, topic_partitions={"src": 3},
        lane_args={"destination_partitions": {dest: 2}, "own_destinations": {dest} if own else set(),
                   "extend_destination": lambda topic, n: extended.append((topic, n))})
    consumer.script = [lambda c: c.rebalance("assign", [P0, P1]), lambda c: c.rebalance("assign", [("src", 2)])]
    if own:
        the_lane.run(stop)
        assert extended == [(dest, 3)] and the_lane.destinations.counts == {dest: 3}
        assert the_lane.assigned == set() and the_lane.status.state == "stopped"
    else:
        with pytest.raises(TranscoderError) as stopped:
            the_lane.run(stop)
        assert str(stopped.value).startswith(f"source src has 3 partitions now but its destination {dest} has 2: "
                                             "partition 2 was added"), stopped.value
        assert extended == []
