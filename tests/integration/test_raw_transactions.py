"""Kafka's transaction protocol v1 spoken with raw requests only (RawClient) and batches sealed natively, on the
real broker: a committed and an aborted transaction read back record by record at both isolation levels with the
group's offsets, a second InitProducerId fencing the first, and a batch without the transactional bit in a
transaction."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import transcoder_native as native
from confluent_kafka import Consumer, TopicPartition
from kafka.record import MemoryRecords

from tests.support.records import Rec, read_all, rec
from transcoder.codecs import encode_batch, seal_sections
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.protocol import RawClient

#: the records' first timestamp: an hour ago, well inside the session broker's retention (7 days). A fixed 2023
#: timestamp lost a partition's records to the retention check mid-test in a fresh-clone CI run (130 records gone).
T0 = (int(time.time()) - 3600) * 1000
#: Kafka's error codes the tests meet (kafka.errors names them).
NONE, UNKNOWN_MEMBER_ID, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 0, 25, 47, 48, 90
#: What a coordinator answers while it loads, moves or writes a transaction's markers: asked again.
RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS


def until_settled(ask: Callable[[], Any], code: Callable[[Any], int] = lambda r: r, timeout_s: float = 30) -> Any:
    """`ask()` again while its answer's error codes are all retriable (a coordinator starting or busy)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = ask()
        codes = set(code(answer).values()) if isinstance(code(answer), dict) else {code(answer)}
        if not codes & RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def coordinator(info: RawClient, key: str, key_type: int) -> int:
    deadline = time.monotonic() + 30
    while True:
        try:
            return info.find_coordinator(key, key_type)
        except KafkaUnavailableError:  # the internal topic (__transaction_state, __consumer_offsets) being made
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def records(n: int, tag: str) -> list[tuple]:
    """Keys (some null), values (some null, some empty), repeated and null headers, timestamps out of order."""
    return [(f"{tag}-k{i}".encode() if i % 4 else None,
             None if i % 9 == 5 else b"" if i % 9 == 7 else f"{tag}-v{i}-".encode() * (i % 6 + 1),
             [("h", b"1"), ("h", b"2"), ("null", None)] if i % 3 == 0 else [],
             T0 + i * 7 - (i % 5) * 20)
            for i in range(n)]


def sealed(recs: list[tuple], pid: int, epoch: int, base_sequence: int, *, transactional: bool) -> bytes:
    """One zstd batch of `recs` the way a batched lane makes it: stored, decoded, re-batched, sealed natively."""
    rb = native.Rebatcher(1 << 22, 100_000)
    rb.add(native.decode_stored(encode_batch(recs), 0), 0)
    (section,) = rb.take(flush=True)
    (batch,) = seal_sections([section], [(pid, epoch, base_sequence)], codec="zstd", level=3,
                             transactional=transactional)
    return bytes(batch)


def as_read(partition: int, offset: int, r: tuple) -> Rec:
    return (partition, offset, r[0], r[1], tuple(r[2]), r[3])


class Txn:
    """One transactional id's producer, as raw requests: its id and epoch, its coordinators, its sequences."""

    def __init__(self, info: RawClient, tid: str, group: str) -> None:
        self.info, self.tid, self.group = info, tid, group
        self.coordinator = coordinator(info, tid, 1)
        self.group_coordinator = coordinator(info, group, 0)
        code, self.pid, self.epoch = until_settled(
            lambda: info.init_producer_id(tid, transaction_timeout_ms=30_000, coordinator=self.coordinator),
            lambda r: r[0])
        assert code == NONE and self.pid >= 0 and self.epoch >= 0
        self.sequence: dict[tuple[str, int], int] = {}

    def add_partitions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return until_settled(lambda: self.info.add_partitions_to_txn(self.tid, self.pid, self.epoch, partitions,
                                                                     coordinator=self.coordinator), lambda r: r)

    def produce(self, batches: dict[tuple[str, int], list[tuple]], *, transactional: bool = True,
                leader: int = 1) -> dict[tuple[str, int], tuple[int, int]]:
        payloads = {tp: sealed(recs, self.pid, self.epoch, self.sequence.get(tp, 0), transactional=transactional)
                    for tp, recs in batches.items()}
        answer = self.info.produce(payloads, leader=leader, transactional_id=self.tid)
        for tp, recs in batches.items():
            if answer[tp][0] == NONE:
                self.sequence[tp] = self.sequence.get(tp, 0) + len(recs)
        return answer

    def commit_offsets(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        code = until_settled(lambda: self.info.add_offsets_to_txn(self.tid, self.pid, self.epoch, self.group,
                                                                  coordinator=self.coordinator))
        assert code == NONE
        return until_settled(lambda: self.info.txn_offset_commit(self.tid, self.group, self.pid, self.epoch, offsets,
                                                                 coordinator=self.group_coordinator), lambda r: r)

    def end(self, commit: bool) -> int:
        return until_settled(lambda: self.info.end_txn(self.tid, self.pid, self.epoch, commit,
                                                       coordinator=self.coordinator))


@pytest.fixture
def info(kafka) -> Iterator[RawClient]:
    i = RawClient({"bootstrap.servers": kafka.bootstrap})
    yield i
    i.close()


def read_uncommitted(bootstrap: str, topic: str, partitions: int) -> list[Rec]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted", "enable.partition.eof": True})
    out: list[Rec] = []
    try:
        for p in range(partitions):
            c.assign([TopicPartition(topic, p, 0)])
            deadline = time.monotonic() + 30
            while (m := c.poll(1.0)) is None or not m.error():
                assert time.monotonic() < deadline, f"timed out reading {topic} [{p}]"
                if m is not None:
                    out.append(rec(m))
    finally:
        c.close()
    return out


def stored_batches(info: RawClient, topic: str, partition: int) -> list[tuple[int, bool, bool]]:
    """(base offset, transactional, control) of every batch stored in the partition (raw Fetches: one answers
    from one segment at most, and a transaction's marker may start a new one)."""
    out: list[tuple[int, bool, bool]] = []
    offset, end = 0, info.list_offsets([(topic, partition)], latest=True)[(topic, partition)]
    while offset < end:
        mr = MemoryRecords(info.fetch_partition(topic, partition, offset, leader=1, max_bytes=1 << 24).records or b"")
        while (b := mr.next_batch()) is not None:
            out.append((b.base_offset, b.is_transactional, b.is_control_batch))
            offset = b.next_offset
    return out


def test_a_committed_and_an_aborted_transaction_with_the_groups_offsets(kafka, topic_factory, info):
    dest = topic_factory(partitions=2, config={"compression.type": "producer"})
    source = topic_factory(partitions=2)  # whose offsets the group commits in the transaction
    tid, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    assert info.leaders([dest]) == {(dest, 0): 1, (dest, 1): 1}
    txn = Txn(info, tid, group)
    d0, d1, s0, s1 = (dest, 0), (dest, 1), (source, 0), (source, 1)
    first = {d0: records(120, "a0"), d1: records(75, "a1")}
    second = {d0: records(40, "b0"), d1: records(55, "b1")}

    # transaction 1, committed
    assert txn.add_partitions([d0, d1]) == {d0: NONE, d1: NONE}
    assert txn.produce(first) == {d0: (NONE, 0), d1: (NONE, 0)}
    assert txn.commit_offsets({s0: 120, s1: 75}) == {s0: NONE, s1: NONE}
    assert txn.end(commit=True) == NONE

    # transaction 2, aborted: the same id and epoch, sequences going on (transactions v1: EndTxn bumped no epoch,
    # or this Produce would be refused with INVALID_PRODUCER_EPOCH)
    assert txn.add_partitions([d0, d1]) == {d0: NONE, d1: NONE}
    assert txn.produce(second) == {d0: (NONE, 121), d1: (NONE, 76)}  # after transaction 1's commit markers
    assert txn.commit_offsets({s0: 160, s1: 130}) == {s0: NONE, s1: NONE}
    # with a member's generation and id (v3+, KIP-447) the group coordinator checks them: this group has no members
    assert info.txn_offset_commit(tid, group, txn.pid, txn.epoch, {s0: 150}, coordinator=txn.group_coordinator,
                                  generation_id=3, member_id="m-1") == {s0: UNKNOWN_MEMBER_ID}
    assert txn.end(commit=False) == NONE

    # read_committed: exactly transaction 1's records, as they were written
    want = [as_read(p, o, r) for p in (0, 1) for o, r in enumerate(first[(dest, p)])]
    assert read_all(kafka.bootstrap, dest) == want
    # read_uncommitted: both transactions' records (the markers are not records)
    want_all = [as_read(p, o, r) for p in (0, 1) for o, r in enumerate(first[(dest, p)])]
    want_all[120:120] = [as_read(0, 121 + o, r) for o, r in enumerate(second[d0])]
    want_all += [as_read(1, 76 + o, r) for o, r in enumerate(second[d1])]
    assert read_uncommitted(kafka.bootstrap, dest, 2) == want_all
    # as stored: transactional batches, a marker after each transaction
    assert stored_batches(info, dest, 0) == [(0, True, False), (120, True, True), (121, True, False),
                                             (161, True, True)]
    assert stored_batches(info, dest, 1) == [(0, True, False), (75, True, True), (76, True, False), (131, True, True)]
    # the group's offsets: transaction 1's, not the aborted one's
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        committed = c.committed([TopicPartition(source, 0), TopicPartition(source, 1)], timeout=30)
    finally:
        c.close()
    assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(0, 120, None), (1, 75, None)]


def test_a_second_init_producer_id_fences_the_first(kafka, topic_factory, info):
    dest = topic_factory(partitions=2, config={"compression.type": "producer"})
    source = topic_factory(partitions=1)
    tid, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    d0, d1, s0 = (dest, 0), (dest, 1), (source, 0)
    old = Txn(info, tid, group)
    assert old.add_partitions([d0, d1]) == {d0: NONE, d1: NONE}
    assert old.produce({d0: records(10, "old")}) == {d0: (NONE, 0)}

    new = Txn(info, tid, group)  # the coordinator aborts the old one's open transaction and bumps the epoch
    assert new.pid == old.pid and new.epoch > old.epoch

    # the old producer can neither write nor end its transaction, nor commit offsets
    # (Kafka 4.3 answers a Produce and a TxnOffsetCommit of the old epoch with INVALID_PRODUCER_EPOCH, and the
    # transaction coordinator's requests with PRODUCER_FENCED)
    assert old.produce({d1: records(5, "old")}) == {d1: (INVALID_PRODUCER_EPOCH, -1)}
    assert old.info.add_partitions_to_txn(tid, old.pid, old.epoch, [d1], coordinator=old.coordinator) == {
        d1: PRODUCER_FENCED}
    assert old.info.add_offsets_to_txn(tid, old.pid, old.epoch, group, coordinator=old.coordinator) == PRODUCER_FENCED
    assert old.info.txn_offset_commit(tid, group, old.pid, old.epoch, {s0: 1}, coordinator=old.group_coordinator) == {
        s0: INVALID_PRODUCER_EPOCH}
    assert old.end(commit=True) == PRODUCER_FENCED and old.end(commit=False) == PRODUCER_FENCED
    # the new one commits its own
    assert new.add_partitions([d0, d1]) == {d0: NONE, d1: NONE}
    answer = new.produce({d0: records(8, "new"), d1: records(3, "new")})
    assert {tp: code for tp, (code, _) in answer.items()} == {d0: NONE, d1: NONE}
    assert new.commit_offsets({s0: 8}) == {s0: NONE}
    assert new.end(commit=True) == NONE
    got = read_all(kafka.bootstrap, dest)
    assert [(p, k, v) for p, _, k, v, _, _ in got] == [(p, r[0], r[1]) for p, n in ((0, 8), (1, 3))
                                                        for r in records(n, "new")]


def test_a_batch_without_the_transactional_bit_in_a_transaction(kafka, topic_factory, info):
    """The broker takes a transaction's batch as the producer marks it: the bit is what makes it part of the
    transaction. A partition's first batch without it is written as a plain idempotent batch and outlives the
    abort (the ABORT marker is written after it all the same); after a transactional batch in the same partition,
    one without the bit is refused (INVALID_TXN_STATE)."""
    dest = topic_factory(partitions=2, config={"compression.type": "producer"})
    tid, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    d0, d1 = (dest, 0), (dest, 1)
    txn = Txn(info, tid, group)
    assert txn.add_partitions([d0, d1]) == {d0: NONE, d1: NONE}
    # partition 0: its first batch without the bit is taken...
    assert txn.produce({d0: records(6, "plain")}, transactional=False) == {d0: (NONE, 0)}
    # partition 1: a transactional batch, then one without the bit, refused
    assert txn.produce({d1: records(4, "txn")}) == {d1: (NONE, 0)}
    assert txn.produce({d1: records(3, "plain")}, transactional=False)[d1][0] == INVALID_TXN_STATE
    assert txn.end(commit=False) == NONE
    # ...and survives the abort: read_committed sees it, and nothing of partition 1
    assert read_all(kafka.bootstrap, dest) == [as_read(0, o, r) for o, r in enumerate(records(6, "plain"))]
    # the partition was in the transaction, so it has its ABORT marker; the batch before it is not covered by it
    assert stored_batches(info, dest, 0) == [(0, False, False), (6, True, True)]
    assert stored_batches(info, dest, 1) == [(0, True, False), (4, True, True)]
