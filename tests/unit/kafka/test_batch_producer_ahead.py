"""The batch producer seals a partition's next batch while its last one is in flight, without a broker: the events
in order, and what happens to a batch sealed ahead when the one before it is not delivered (sent again, refused,
split, or refused for an unknown producer id). The real broker: tests/integration/test_raw_batches.py."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka.record import MemoryRecords

from tests.unit.kafka.test_batch_producer_outage import _Unreachable
from transcoder.kafka.producer import BatchProducer

NOT_LEADER_OR_FOLLOWER, INVALID_RECORD, MESSAGE_TOO_LARGE, UNKNOWN_PRODUCER_ID = 6, 87, 10, 59
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43


def _sections(n: int, per: int) -> list[Any]:
    import transcoder_native as native

    stored = b"".join(native.encode_batch([(b"k%d" % i, b"v%d" % i, [], 1000 + i) for i in range(j, j + per)],
                                          codec="none", base_offset=j) for j in range(0, n * per, per))
    rb = native.Rebatcher(1 << 20, per)
    rb.add(native.decode_stored(stored, 0), 0)
    sections = rb.take(flush=True)
    assert [len(s) for s in sections] == [per] * n
    return sections


class _Broker(_Unreachable):
    """Answers each Produce from `answers` (error codes in turn, then 0), writing what it accepts; the answer to a
    request is held until the test lets it go (`hold`), and every step is noted in `events`."""

    def __init__(self, answers: list[int], *, hold: bool = False) -> None:
        super().__init__()
        self.reachable.set()
        self.answers = list(answers)
        self.events: list[tuple[str, Any]] = []
        self.written: list[tuple[int, int, list[bytes]]] = []  # producer id, base sequence, keys
        self.pids = 0
        self.hold = hold
        self.go = threading.Semaphore(0)

    def init_producer_id(self) -> tuple[int, int, int]:
        self.pids += 1
        return 0, 100 + self.pids, 0

    def produce_start(self, batches: Any, **kwargs: Any) -> Any:
        (tp, payload), = batches.items()
        batch = MemoryRecords(bytes(payload)).next_batch()
        assert batch.validate_crc()
        self.events.append(("start", batch.base_sequence))
        return tp, batch

    def produce_answers(self, call: Any) -> dict[tuple[str, int], tuple[int, int]]:
        if self.hold:
            assert self.go.acquire(timeout=10)
        tp, batch = call
        code = self.answers.pop(0) if self.answers else 0
        self.events.append(("answer", code))
        if code:
            return {tp: (code, -1)}
        keys = [r.key for r in batch]
        self.written.append((batch.producer_id, batch.base_sequence, keys))
        offset = self.offsets.get(tp, 0)
        self.offsets[tp] = offset + len(keys)
        return {tp: (0, offset)}


def _producer(fake: _Broker, reports: list[tuple], transactions: Any = None) -> BatchProducer:
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="lz4", level=None, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=1000, on_delivery=lambda e, m: None,
                      on_batch=lambda err, t, part, base, s: reports.append((err, base, list(s.offsets))),
                      transactions=transactions, client=fake, coordinator=fake)
    sealed = p.encoder.seal

    def encode(taken: Any, sections: Any = None) -> Any:
        out = sealed(taken, sections)
        fake.events.extend(("sealed", b.base_sequence) for b in out.values())
        return out

    p.encoder.seal = encode  # type: ignore[method-assign]
    return p


def test_the_next_batch_is_sealed_while_the_last_is_in_flight():
    reports: list[tuple] = []
    fake = _Broker([], hold=True)
    p = _producer(fake, reports)
    p.start()
    p.produce_sections("t", 0, _sections(4, 50))
    for _ in range(4):
        fake.go.release()
    assert p.flush(10) == 0
    p.close(5)
    assert [r[0] for r in reports] == [None] * 4
    assert [o for r in reports for o in r[2]] == list(range(200))
    assert [w[1] for w in fake.written] == [0, 50, 100, 150]
    # each batch after the first was sealed before the answer to the one before it
    steps = [e for e in fake.events if e[0] != "sealed" or e[1] > 0]
    assert steps == [("start", 0), ("sealed", 50), ("answer", 0), ("start", 50), ("sealed", 100), ("answer", 0),
                     ("start", 100), ("sealed", 150), ("answer", 0), ("start", 150), ("answer", 0)], fake.events


@pytest.mark.parametrize("first, expected_sequences, errors", [
    # sent again, the same bytes: the batch sealed ahead keeps its sequence and goes after it
    ([NOT_LEADER_OR_FOLLOWER], [0, 50, 100], 0),
    # refused for good (not written): the batch sealed ahead takes its sequences
    ([UNSUPPORTED_FOR_MESSAGE_FORMAT], [0, 50], 1),
    # refused for some of its records, none named: its halves take its sequences (each half refused is cut again)
    ([INVALID_RECORD], [0, 25, 50, 100], 0),
    # too large: its halves take its sequences, the batch sealed ahead goes after them
    ([MESSAGE_TOO_LARGE], [0, 25, 50, 100], 0),
    # the broker forgot the producer id: everything goes again under a new one, from sequence 0
    ([UNKNOWN_PRODUCER_ID], [0, 50, 100], 0),
])
def test_a_batch_sealed_ahead_is_sealed_again_when_the_one_before_is_not_delivered(
        first: list[int], expected_sequences: list[int], errors: int):
    reports: list[tuple] = []
    fake = _Broker(first, hold=True)
    p = _producer(fake, reports)
    p.start()
    p.produce_sections("t", 0, _sections(3, 50))
    for _ in range(6):
        fake.go.release()
    assert p.flush(10) == 0
    p.close(5)
    # the first batch was refused with the next one sealed ahead of its answer
    assert fake.events[:4] == [("sealed", 0), ("start", 0), ("sealed", 50), ("answer", first[0])], fake.events
    assert [w[1] for w in fake.written] == expected_sequences, fake.written
    assert len({w[0] for w in fake.written}) == 1
    assert sum(r[0] is not None for r in reports) == errors
    delivered = [o for r in reports if r[0] is None for o in r[2]]
    assert delivered == list(range(50 * errors, 150))  # in order; the refused batch's records are reported failed
    assert [k for w in fake.written for k in w[2]] == [b"k%d" % i for i in range(50 * errors, 150)]


class _TxnBroker(_Broker):
    """_Broker with a transaction coordinator that says yes to everything."""

    def init_producer_id(self, **kwargs: Any) -> tuple[int, int, int]:  # type: ignore[override]
        return super().init_producer_id()

    def find_coordinator(self, key: str, key_type: int) -> int:
        return 1

    def add_partitions_to_txn(self, tid: str, pid: int, epoch: int, tps: Any, *, coordinator: int) -> dict:
        return {tp: 0 for tp in tps}

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, *, coordinator: int) -> int:
        self.events.append(("end", commit))
        return 0


def test_an_abort_drops_a_batch_sealed_ahead_that_went_back_while_it_waited():
    from transcoder.kafka.producer import Transactions

    reports: list[tuple] = []
    fake = _TxnBroker([NOT_LEADER_OR_FOLLOWER], hold=True)
    p = _producer(fake, reports, Transactions("tid-1", "g1"))
    p.init_transactions(5)
    p.begin_transaction()
    p.produce_sections("t", 0, _sections(3, 50))
    deadline = time.monotonic() + 10
    while ("sealed", 50) not in fake.events and time.monotonic() < deadline:
        time.sleep(0.01)
    aborted = threading.Thread(target=p.abort_transaction, args=(10,))
    aborted.start()
    while p.accumulator.purges == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    fake.go.release()  # the first batch: NOT_LEADER, so the one sealed ahead goes back, while the abort waits
    aborted.join(10)
    assert not aborted.is_alive()
    assert ("end", False) in fake.events
    # the next transaction holds its own records only: nothing of the aborted one comes back
    p.begin_transaction()
    p.produce_sections("t", 0, [s for s in _sections(4, 50)][3:])
    for _ in range(5):
        fake.go.release()
    p.commit_transaction(10)
    p.close(5)
    assert [k for w in fake.written for k in w[2]] == [b"k%d" % i for i in range(150, 200)], fake.written
    assert [o for r in reports for o in r[2]] == list(range(150, 200))
