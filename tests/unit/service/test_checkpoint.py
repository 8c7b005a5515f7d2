"""transcoder.service.checkpoint: the commit order per guarantee, what is (never) committed, abort and rewind.

The writer and the consumer are fakes that write down what they are asked, in order; the ledger is the real one.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from structlog.testing import capture_logs

from tests.unit.service.lane_fakes import group_metadata
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partition_book import PartitionBook
from transcoder.pipeline.partitions import Partition
from transcoder.service.checkpoint import AtLeastOnce, ExactlyOnce

A0, A1 = ("src", 0), ("src", 1)


class FakeWriter:
    """The calls a checkpoint makes of transcoder.kafka.writer.Writer, written down in `calls`."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls
        self.ledger = Ledger({"src": ("dst",)})
        self.acked_ts: dict[Partition, int] = {}
        self.dead_lettered = 0
        self.producers: list[Any] = []
        self.config = SimpleNamespace(offset_map_topic="_transcoder_offsets")
        self.transactional_id: str | None = None
        self.map_durable = True
        self.commit_error: KafkaError | None = None
        self.doomed = False

    def send(self, partition: int, offsets: range) -> None:
        """Records of src [partition] read and produced to dst [partition], unacknowledged."""
        self.ledger.sent({("dst", partition): [(o, 10) for o in offsets]}, 10 * len(offsets))
        self.ledger.consumed({("src", partition): offsets[-1]})

    def ack(self, partition: int, n: int, ts: int = 1000) -> None:
        for _ in range(n):
            self.ledger.acked("dst", partition)
        self.acked_ts[("dst", partition)] = ts

    def flush_acked(self) -> None:
        self.calls.append("flush_acked")

    def flush_map(self, timeout: float) -> bool:
        self.calls.append("flush_map")
        return self.map_durable

    def drain(self, timeout: float) -> None:
        self.calls.append("drain")

    def tick(self, now: float, flush: bool = False) -> None:
        self.calls.append("tick")

    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None:
        self.calls.append(("begin_transactions", transactional_id))
        self.transactional_id = transactional_id
        self.producers = [object()]

    def commit_transaction(self, offsets: list[TopicPartition], group: Any, timeout: float,
                           retrying: Any = None) -> None:
        self.calls.append(("commit_transaction", sorted((p.topic, p.partition, p.offset) for p in offsets)))
        if self.commit_error is not None:
            raise KafkaException(self.commit_error)

    def transaction_doomed(self) -> bool:
        return self.doomed

    def abort_transaction(self, timeout: float, retrying: Any = None) -> None:
        self.calls.append("abort_transaction")
        self.ledger.reset()


class FakeConsumer:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls
        self.error: KafkaError | None = None

        #: answers to asynchronous commits not served yet (a real consumer serves them in its poll)
        self.answers: list[tuple[KafkaError | None, list[TopicPartition]]] = []
        self.generation, self.member_id = 1, "rdkafka-m1"

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self.calls.append(("commit", sorted((p.topic, p.partition, p.offset) for p in offsets)))
        if asynchronous:  # the error, if any, is the answer's
            self.answers.append((self.error, [TopicPartition(p.topic, p.partition, p.offset) for p in offsets]))
        elif self.error is not None:
            raise KafkaException(self.error)

    def serve(self, checkpoint: Any) -> None:
        """The poll that serves the answers to asynchronous commits (on_commit)."""
        answers, self.answers = self.answers, []
        for err, tps in answers:
            checkpoint.answered(err, tps)

    def consumer_group_metadata(self) -> bytes:
        return group_metadata(self.generation, self.member_id)


def _status() -> LaneStatus:
    return LaneStatus(name="lane", group_id="g", destinations={"dst": ("src", "zstd")})


class Book(PartitionBook):
    """The partition book, its read positions the test's `positions` (what a copy path would have pushed)."""

    def __init__(self, positions: dict[Partition, int | None], *, first_reads: bool = False) -> None:
        super().__init__(first_reads=first_reads)
        self.positions = positions

    def read_positions(self, tps: Any) -> dict[Partition, int | None]:
        return {tp: self.positions.get(tp) for tp in tps}


class Readiness:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def cannot_copy(self, why: str, since: float) -> None: ...

    def waiting_on_kafka(self, why: str) -> None:
        self.calls.append(("waiting", why))


class Drain:
    """The drain's answers, in order; limit_s as the lane's."""

    limit_s = 30.0
    draining = False

    def __init__(self, answers: list[bool | None] | None) -> None:
        self.answers = answers

    def step(self, now: float) -> bool | None:
        return True if self.answers is None else self.answers.pop(0)

    def forget(self) -> None: ...


def at_least_once(positions: dict[Partition, int | None] | None = None):
    calls: list[Any] = []
    writer, consumer = FakeWriter(calls), FakeConsumer(calls)
    book = Book(positions if positions is not None else {})
    book.assign(book.positions)
    cp = AtLeastOnce("lane", writer, consumer, _status(), 5.0,  # type: ignore[arg-type]
                     book, Readiness(calls))
    return cp, writer, consumer, calls


def exactly_once(positions: dict[Partition, int | None], drained: list[bool | None] | None = None):
    calls: list[Any] = []
    writer, consumer = FakeWriter(calls), FakeConsumer(calls)
    cp = ExactlyOnce("lane", writer, consumer, _status(), 5.0,  # type: ignore[arg-type]
                     Book(positions, first_reads=True), Readiness(calls), group_id="g",
                     transactional_id=lambda tps: f"tid-{len(tps)}",
                     rewind=lambda offsets: calls.append(("rewind", sorted(offsets))),
                     drain=Drain(list(drained) if drained is not None else None))
    return cp, writer, consumer, calls


# ------------------------------------------------------------------ at-least-once
def test_at_least_once_order_acknowledgements_then_map_then_consumer_commit():
    cp, writer, consumer, calls = at_least_once({A0: 10})
    writer.send(0, range(10))
    writer.ack(0, 6, ts=1234)
    cp.commit([A0])
    assert calls == ["flush_acked", "flush_map", ("commit", [("src", 0, 6)])]
    assert cp.committed == {}  # asked, not answered yet: the loop turns meanwhile
    writer.ack(0, 4, ts=1300)
    consumer.serve(cp)
    assert cp.committed == {A0: 6} and cp.status.committed == {A0: 6}
    assert cp.committed_ts == {A0: 1234}


def test_at_least_once_never_commits_past_an_unacknowledged_record_nor_again_what_it_committed():
    cp, writer, consumer, calls = at_least_once({A0: 10})
    writer.send(0, range(10))
    cp.commit([A0])
    assert calls[-1] == ("commit", [("src", 0, 0)])
    consumer.serve(cp)
    calls.clear()
    cp.commit([A0])  # nothing acknowledged since: nothing new to commit (the map's health still goes out)
    assert calls == ["flush_acked", "flush_map"]
    writer.ack(0, 10)
    cp.commit([A0])
    assert calls[-1] == ("commit", [("src", 0, 10)])


def test_at_least_once_asks_one_commit_at_a_time_and_takes_only_its_own_answer():
    cp, writer, consumer, calls = at_least_once({A0: 10, A1: 10})
    writer.send(0, range(10))
    writer.ack(0, 4)
    cp.commit([A0, A1])
    writer.ack(0, 6)
    calls.clear()
    cp.commit([A0, A1])  # the first one's answer is not served yet: nothing asked
    assert calls == ["flush_acked"]
    cp.answered(None, [TopicPartition("src", 0, 3)])  # another commit's answer (not the loop's)
    assert cp.committed == {}
    consumer.serve(cp)
    assert cp.committed == {A0: 4}
    cp.commit([A0, A1])
    assert calls[-1] == ("commit", [("src", 0, 10)])
    cp.forget([A0])  # revoked before the answer: not the book's any more
    consumer.serve(cp)
    assert cp.committed == {}


def test_at_least_once_defers_the_commit_while_the_offset_map_is_not_durable():
    cp, writer, _, calls = at_least_once({A0: 10})
    writer.send(0, range(10))
    writer.ack(0, 10)
    writer.map_durable = False
    cp.commit([A0])
    assert calls == ["flush_acked", "flush_map"] and cp.committed == {}


def test_at_least_once_a_failed_commit_is_left_to_the_next_and_a_fatal_one_raised():
    cp, writer, consumer, _ = at_least_once({A0: 10})
    writer.send(0, range(10))
    writer.ack(0, 10)
    consumer.error = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
    with capture_logs() as logs:
        cp.commit([A0])
        consumer.serve(cp)
    assert cp.committed == {}
    assert [(e["event"], e["error"], e["partitions"]) for e in logs] == [
        ("commit_failed", KafkaError(KafkaError.REBALANCE_IN_PROGRESS).str(), ["src[0]"])]
    consumer.error = KafkaError(KafkaError._FATAL, "fenced", fatal=True)
    cp.commit([A0])
    consumer.serve(cp)
    with pytest.raises(KafkaException):
        cp.commit([A0])
    cp, writer, consumer, _ = at_least_once({A0: 10})
    writer.send(0, range(10))
    writer.ack(0, 10)
    cp.close({A0}, failed=False)  # leaving: committed synchronously, in the book at once
    assert cp.committed == {A0: 10} and not consumer.answers


def test_at_least_once_revoke_delivers_first_then_commits_only_the_revoked():
    cp, writer, _, calls = at_least_once({A0: 5, A1: 5})
    writer.send(0, range(5))
    writer.send(1, range(5))
    writer.ack(0, 5)
    writer.ack(1, 5)
    cp.revoke([A0], {A0, A1})
    assert calls == ["drain", "flush_acked", "flush_map", ("commit", [("src", 0, 5)])]


def test_at_least_once_a_withheld_partition_is_never_committed():
    cp, writer, _, calls = at_least_once({A0: 5})
    writer.send(0, range(5))
    writer.ack(0, 5)
    cp.book.withhold(A0)
    cp.commit([A0])
    assert cp.committed == {} and not any(isinstance(c, tuple) for c in calls)


def test_at_least_once_close_after_a_failure_flushes_then_commits_what_was_acknowledged():
    cp, writer, _, calls = at_least_once({A0: 5})
    writer.send(0, range(5))
    writer.ack(0, 3)
    cp.close({A0}, failed=True)
    assert calls == ["tick", "flush_acked", "flush_map", ("commit", [("src", 0, 3)])]


# ------------------------------------------------------------------ exactly-once
def test_exactly_once_order_drained_then_positions_in_the_transaction_then_acknowledgements():
    cp, _, _, calls = exactly_once({A0: 10, A1: 4}, drained=[True])
    cp.begin({A0, A1})
    cp.commit([A0, A1])
    assert calls == [("begin_transactions", "tid-2"),
                     ("commit_transaction", [("src", 0, 10), ("src", 1, 4)]), "flush_acked"]
    assert cp.committed == {A0: 10, A1: 4}


def test_exactly_once_commits_nothing_while_the_batches_are_not_all_acknowledged():
    cp, _, _, calls = exactly_once({A0: 10}, drained=[None, True])
    cp.begin({A0})
    cp.commit([A0])
    assert cp.committed == {} and calls == [("begin_transactions", "tid-1")]
    cp.commit([A0])
    assert cp.committed == {A0: 10}


def test_exactly_once_batches_that_cannot_be_acknowledged_abort_and_rewind_to_the_last_commit():
    positions: dict[Partition, int | None] = {A0: 10, A1: 3}
    cp, _, _, calls = exactly_once(positions, drained=[True, False])
    cp.begin({A0, A1})
    cp.book.read_from(A1, 0)
    cp.commit([A0])
    positions[A0] = 25
    cp.commit([A0, A1])
    assert calls[-2:] == ["abort_transaction", ("rewind", [A0, A1])]
    assert (cp.book.rewind_offset(A0), cp.book.rewind_offset(A1)) == (10, 0)  # the last commit; the first offset read
    assert cp.committed == {A0: 10}


def test_exactly_once_kafka_aborting_the_commit_rewinds_and_commits_nothing():
    cp, writer, _, calls = exactly_once({A0: 10})
    cp.begin({A0})
    writer.commit_error = KafkaError(KafkaError._TIMED_OUT, "not delivered", txn_requires_abort=True)
    cp.commit([A0])
    assert calls[-2:] == ["abort_transaction", ("rewind", [A0])]
    assert cp.committed == {}


def test_exactly_once_an_abort_during_a_revoke_abandons_the_partitions_instead_of_rewinding():
    positions: dict[Partition, int | None] = {A0: 10}
    cp, writer, _, calls = exactly_once(positions)
    cp.begin({A0})
    writer.commit_error = KafkaError(KafkaError._TIMED_OUT, "not delivered", txn_requires_abort=True)
    cp.revoke([A0], {A0})
    assert calls[-1] == "abort_transaction" and ("rewind", [A0]) not in calls
    writer.commit_error = None
    calls.clear()
    cp.close({A0}, failed=False)  # the revoke of close(), after the abort: those positions are never committed
    assert calls == [] and cp.committed == {}
    cp.forget([A0])  # assigned again later: committed as usual
    cp.commit([A0])
    assert cp.committed == {A0: 10}


def test_exactly_once_revoke_commits_the_whole_assignment_without_waiting_for_a_drain():
    cp, _, _, calls = exactly_once({A0: 10, A1: 7}, drained=[])  # a drain asked for would fail: none left
    cp.begin({A0, A1})
    cp.revoke([A0], {A0, A1})
    assert calls[-2] == ("commit_transaction", [("src", 0, 10), ("src", 1, 7)])


def test_exactly_once_after_a_failure_the_transaction_is_aborted_and_nothing_more_committed():
    cp, _, _, calls = exactly_once({A0: 10})
    cp.begin({A0})
    cp.close({A0}, failed=True)
    assert calls[-1] == "abort_transaction"
    calls.clear()
    cp.revoke([A0], {A0})  # the revoke of close()
    assert calls == [] and cp.committed == {}


def test_exactly_once_lost_partitions_abort_the_transaction_and_forgetting_them_drops_their_commit():
    cp, _, _, calls = exactly_once({A0: 10})
    cp.lost()  # nothing assigned yet: no transaction to abort
    assert calls == []
    cp.begin({A0})
    cp.commit([A0])
    calls.clear()
    cp.lost()
    assert calls == [] and cp.abort_due  # inside the rebalance callback: no network wait, only noted
    cp.forget([A0])
    assert cp.committed == {} and cp.book.rewind_offset(A0) is None
    cp.settle()  # the loop, after the poll
    assert calls == ["abort_transaction"] and not cp.abort_due
    cp.settle()
    assert calls == ["abort_transaction"]


def test_exactly_once_a_lost_transaction_is_aborted_before_anything_more_is_committed():
    cp, writer, _, calls = exactly_once({A0: 10, A1: 10})
    cp.begin({A0})
    cp.lost()
    cp.forget([A0])
    cp.begin({A1})  # assigned again in the same poll: the lost transaction ends before the new id is taken
    assert calls[-2:] == ["abort_transaction", ("begin_transactions", writer.transactional_id)]
    cp.lost()
    calls.clear()
    cp.commit([A1])  # (a loss is the whole assignment under the eager protocol; were A1 still held:)
    assert calls == ["abort_transaction", ("rewind", [A1])]


@pytest.mark.parametrize("generation,member_id", [(-1, ""), (-1, "rdkafka-m1"), (3, "")])
def test_exactly_once_a_consumer_the_group_dropped_commits_nothing_before_its_poll_says_so(generation: int,
                                                                                          member_id: str):
    # librdkafka learnt in its own thread that the group dropped this member (a paused instance woken: its heartbeat
    # answered UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) and reset its generation or member id; the loop's next poll has
    # not served the loss yet. A TxnOffsetCommit without both is checked against nothing by the group coordinator:
    # committed, the new owner's copy and this one's are both read (a 3-broker CI run: 450 records twice).
    cp, _, consumer, calls = exactly_once({A0: 10})
    cp.begin({A0})
    consumer.generation, consumer.member_id = generation, member_id
    with capture_logs() as logs:
        cp.commit([A0])
    assert calls[-2:] == ["abort_transaction", ("rewind", [A0])]
    assert not any(c[0] == "commit_transaction" for c in calls if isinstance(c, tuple)) and cp.committed == {}
    aborted = [e for e in logs if e["event"] == "transaction_aborted"]
    assert len(aborted) == 1 and "no member of a generation of group g" in aborted[0]["error"]
    consumer.generation, consumer.member_id = 2, "rdkafka-m2"  # a member again (after its poll: a new assignment)
    cp.commit([A0])
    assert cp.committed == {A0: 10}


def test_exactly_once_notes_only_the_first_offset_read_of_a_partition_never_committed():
    cp, _, _, _ = exactly_once({A0: 10})
    cp.begin({A0, A1})
    assert cp.book.unstarted(A1)
    cp.book.read_from(A1, 4)
    assert not cp.book.unstarted(A1)
    cp.commit([A0])
    assert not cp.book.unstarted(A0)
    cp.restart(A1)  # a recreated topic: read from its start again
    assert cp.book.unstarted(A1) and cp.book.rewind_offset(A1) is None


def test_at_least_once_never_rewinds():
    cp, _, _, _ = at_least_once()
    cp.book.assign([A0])
    cp.book.read_from(A0, 4)  # no first offset read noted: nothing to read again from
    assert not hasattr(cp, "abort") and not cp.book.unstarted(A0) and cp.book.rewind_offset(A0) is None
