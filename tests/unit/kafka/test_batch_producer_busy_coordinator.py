"""The transactional batch producer while the coordinator is busy (the last transaction's markers being written),
without a broker: AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS is asked again after 20 ms, as the Java
producer asks it, not after the back-off for failures, which doubles (200 ms, 400 ms, 800 ms ...) at the start of
every transaction. The protocol on the real broker is tests/integration/test_batch_transactions.py."""

from __future__ import annotations

import time
import types
from typing import Any

import pytest
from confluent_kafka import KafkaException

from tests.unit.kafka.test_batch_producer_outage import _Unreachable
from transcoder.kafka.producer import TXN_RETRY_BACKOFF_S, BatchProducer, Transactions, sender
from transcoder.pipeline.batching import CONCURRENT_TRANSACTIONS


class _BusyCoordinator(_Unreachable):
    """A broker whose transaction coordinator answers AddPartitionsToTxn `busy` times with CONCURRENT_TRANSACTIONS,
    then adds; Produce takes everything."""

    def __init__(self, busy: int) -> None:
        super().__init__()
        self.reachable.set()
        self.busy = busy
        self.asked: list[set[tuple[str, int]]] = []

    def find_coordinator(self, key: str, key_type: int) -> int:
        return 1

    def init_producer_id(self, **kwargs: Any) -> tuple[int, int, int]:  # type: ignore[override]
        return 0, 7, 0

    def add_partitions_to_txn(self, tid: str, pid: int, epoch: int, tps: Any, *, coordinator: int) -> dict:
        self.asked.append(set(tps))
        code = CONCURRENT_TRANSACTIONS if len(self.asked) <= self.busy else 0
        return {tp: code for tp in tps}


def test_a_busy_coordinator_is_asked_again_after_20_ms(monkeypatch: pytest.MonkeyPatch):
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        time.sleep(s)

    monkeypatch.setattr(sender, "time", types.SimpleNamespace(
        monotonic=time.monotonic, time=time.time, sleep=sleep, strftime=time.strftime, gmtime=time.gmtime))
    delivered: list[tuple[int, bytes]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else delivered.append((msg.partition(), msg.key())))

    fake = _BusyCoordinator(busy=3)
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="zstd", level=3, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=100, on_delivery=on_delivery,
                      transactions=Transactions("tid-1", "g1"), client=fake, coordinator=fake)
    p.init_transactions(5)
    p.begin_transaction()
    for i in range(40):
        p.produce("t", value=b"v", key=str(i).encode(), partition=i % 2)
    assert p.flush(10) == 0
    p.close(5)
    assert not errors, errors
    for part in (0, 1):
        assert [k for q, k in delivered if q == part] == [str(i).encode() for i in range(part, 40, 2)]
    assert fake.asked[-1] == {("t", 0), ("t", 1)} and len(fake.asked) == 4, fake.asked
    # the sender's pauses between its rounds: three busy answers, three short pauses (not 0.1, 0.2, 0.4)
    assert slept[:3] == [TXN_RETRY_BACKOFF_S] * 3, slept


def test_a_commit_whose_records_are_not_delivered_in_time_names_the_transactions_partitions():
    # On a 3-broker cluster: "3 records not delivered in time", naming no topic.
    fake = _BusyCoordinator(busy=0)
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="zstd", level=3, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=100, on_delivery=lambda err, msg: None,
                      transactions=Transactions("tid-1", "g1"), client=fake, coordinator=fake)
    p.init_transactions(5)
    p.begin_transaction()
    fake.reachable.clear()  # the leaders cannot be asked: nothing is sent
    for i in range(3):
        p.produce("dst", value=b"v", key=str(i).encode(), partition=i % 2)
    try:
        with pytest.raises(KafkaException) as raised:
            p.commit_transaction(0.5)
    finally:
        fake.reachable.set()
        p.close(1)
    err = raised.value.args[0]
    assert err.txn_requires_abort()
    assert err.str() == "producer c1: 3 records of the transaction (dst [0], dst [1]) not delivered within 0.5 s"
