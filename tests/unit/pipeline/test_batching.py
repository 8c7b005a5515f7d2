"""transcoder.pipeline.batching: re-batching by size, count and linger; what a partition's answer means."""

from __future__ import annotations

import kafka.errors
import pytest
from hypothesis import given
from hypothesis import strategies as st

from transcoder.pipeline.batching import (
    RECORD_OVERHEAD,
    Accumulator,
    Outcome,
    TxnStep,
    next_sequence,
    outcome,
    txn_step,
)

A, B = ("t", 0), ("t", 1)


def acc(max_bytes: int = 1000, max_records: int = 100, linger_s: float = 0.5) -> Accumulator[int]:
    return Accumulator(max_bytes=max_bytes, max_records=max_records, linger_s=linger_s)


def test_nothing_is_taken_before_linger_and_everything_after():
    a = acc()
    a.add(A, 1, 10, now=0.0)
    a.add(A, 2, 10, now=0.2)
    a.add(B, 3, 10, now=0.3)
    assert a.take(0.4) == {}
    assert a.next_due(0.4) == pytest.approx(0.1)  # A's batch opened at 0.0
    assert a.take(0.5) == {A: [1, 2]}
    assert a.take(0.79) == {}
    assert a.take(0.8) == {B: [3]}
    assert a.next_due(1.0) is None


def test_flush_takes_open_batches_at_once():
    a = acc()
    a.add(A, 1, 10, now=0.0)
    assert a.take(0.0, flush=True) == {A: [1]}


def test_batch_closes_at_max_bytes_and_the_next_record_opens_another():
    a = acc(max_bytes=3 * (100 + RECORD_OVERHEAD))
    for i in range(4):
        a.add(A, i, 100, now=0.0)
    assert a.next_due(0.0) == 0.0  # a closed batch is due at once
    assert a.take(0.0) == {A: [0, 1, 2]}
    assert a.take(0.0) == {}  # the fourth is open, lingering
    assert a.take(0.5) == {A: [3]}


def test_batch_closes_at_max_records():
    a = acc(max_records=2)
    for i in range(5):
        a.add(A, i, 1, now=0.0)
    assert [a.take(0.0), a.take(0.0), a.take(0.0)] == [{A: [0, 1]}, {A: [2, 3]}, {}]
    assert a.take(0.0, flush=True) == {A: [4]}


def test_a_record_larger_than_max_bytes_is_a_batch_of_its_own():
    a = acc(max_bytes=100)
    a.add(A, 1, 10, now=0.0)
    a.add(A, 2, 500, now=0.0)
    a.add(A, 3, 10, now=0.0)
    assert a.take(0.0) == {A: [1]}
    assert a.take(0.0) == {A: [2]}
    assert a.take(0.0, flush=True) == {A: [3]}


def test_one_batch_per_partition_per_take_in_order():
    a = acc(max_records=1)
    for i in range(3):
        a.add(A, i, 1, now=0.0)
        a.add(B, 10 + i, 1, now=0.0)
    assert a.take(0.0) == {A: [0], B: [10]}
    assert a.take(0.0, skip={A}) == {B: [11]}
    assert a.take(0.0) == {A: [1], B: [12]}
    assert a.take(0.0) == {A: [2]}


def test_put_back_goes_first_in_order():
    a = acc(max_records=2)
    for i in range(4):
        a.add(A, i, 1, now=0.0)
    first = a.take(0.0)[A]
    a.put_back(A, [first[:1], first[1:]])
    assert [a.take(0.0)[A] for _ in range(3)] == [[0], [1], [2, 3]]


def test_clear_forgets_open_and_closed_batches_and_their_counts():
    a = acc(max_bytes=100)
    for i in range(5):
        a.add(A, i, 40, now=0.0)  # two closed batches and an open one
    a.add(B, 9, 10, now=0.0)
    a.clear()
    assert (len(a), a.bytes, a.next_due(0.0)) == (0, 0, None)
    assert a.take(10.0, flush=True) == {}
    a.add(A, 7, 10, now=1.0)  # it takes records again as new
    assert a.take(1.0, flush=True) == {A: [7]}


def test_add_says_when_the_due_time_changed():
    a = acc(max_records=2)
    assert a.add(A, 1, 1, now=0.0) is True  # opened
    assert a.add(A, 2, 1, now=0.0) is True  # closed
    assert a.add(A, 3, 1, now=0.0) is True  # opened again
    a2 = acc(max_records=3)
    a2.add(A, 1, 1, now=0.0)
    assert a2.add(A, 2, 1, now=0.0) is False


def test_counts_last_until_taken_for_good():
    a = acc()
    a.add(A, 1, 10, now=0.0)
    a.add(B, 2, 30, now=0.0)
    a.take(1.0)
    assert (len(a), a.bytes) == (2, 40)  # in flight still counts
    a.taken(1, 10)
    assert (len(a), a.bytes) == (1, 30)


@given(st.lists(st.tuples(st.sampled_from([A, B]), st.integers(0, 3000)), max_size=200),
       st.integers(50, 5000), st.integers(1, 20))
def test_every_record_comes_out_once_in_order_within_bounds(adds, max_bytes, max_records):
    a = acc(max_bytes=max_bytes, max_records=max_records)
    for i, (tp, size) in enumerate(adds):
        a.add(tp, (i, size), size, now=0.0)
    out: dict[tuple[str, int], list[tuple[int, int]]] = {A: [], B: []}
    while batches := a.take(0.0, flush=True):
        for tp, records in batches.items():
            assert 1 <= len(records) <= max_records
            if len(records) > 1:
                assert sum(s + RECORD_OVERHEAD for _, s in records) <= max_bytes
            out[tp] += records
    for tp in (A, B):
        assert out[tp] == [(i, s) for i, (t, s) in enumerate(adds) if t == tp]


@pytest.mark.parametrize("code,records,expected", [
    (0, 10, Outcome.DELIVERED),
    (46, 10, Outcome.DELIVERED),  # DUPLICATE_SEQUENCE_NUMBER: already written once
    (6, 10, Outcome.RETRY),  # NOT_LEADER_OR_FOLLOWER
    (7, 10, Outcome.RETRY),  # REQUEST_TIMED_OUT
    (19, 1, Outcome.RETRY),  # NOT_ENOUGH_REPLICAS
    (10, 10, Outcome.SPLIT),  # MESSAGE_TOO_LARGE
    (10, 1, Outcome.FAILED),  # a single record too large for the topic
    (59, 3, Outcome.RENEW),  # UNKNOWN_PRODUCER_ID
    (2, 3, Outcome.FAILED),  # CORRUPT_MESSAGE would fail again
    (29, 3, Outcome.FAILED),  # TOPIC_AUTHORIZATION_FAILED
    (45, 3, Outcome.FAILED),  # OUT_OF_ORDER_SEQUENCE_NUMBER
])
def test_outcome_of_a_partition_answer(code, records, expected):
    # `retriable` as the batch producer reads it: Kafka's own flag for the code.
    assert outcome(code, records, kafka.errors.for_code(code).retriable) is expected


def test_sequences_wrap_at_int32():
    assert next_sequence(0, 10) == 10
    assert next_sequence(2**31 - 5, 10) == 5


@pytest.mark.parametrize("code,expected", [
    (0, TxnStep.DONE),
    (51, TxnStep.RETRY),  # CONCURRENT_TRANSACTIONS: the last transaction's markers are still being written
    (14, TxnStep.RETRY),  # COORDINATOR_LOAD_IN_PROGRESS
    (7, TxnStep.RETRY),  # REQUEST_TIMED_OUT
    (15, TxnStep.REFIND),  # COORDINATOR_NOT_AVAILABLE
    (16, TxnStep.REFIND),  # NOT_COORDINATOR
    (90, TxnStep.FENCED),  # PRODUCER_FENCED
    (47, TxnStep.FENCED),  # INVALID_PRODUCER_EPOCH: fenced, or the coordinator timed the transaction out
    (53, TxnStep.FATAL),  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    (30, TxnStep.FATAL),  # GROUP_AUTHORIZATION_FAILED
    (35, TxnStep.FATAL),  # UNSUPPORTED_VERSION
    (48, TxnStep.ABORTABLE),  # INVALID_TXN_STATE
    (28, TxnStep.ABORTABLE),  # INVALID_COMMIT_OFFSET_SIZE
])
def test_txn_step_after_a_coordinators_answer(code, expected):
    assert txn_step(code, kafka.errors.for_code(code).retriable) is expected
