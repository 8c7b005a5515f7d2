"""The record sets' Fetches and the batch producer's Produce retried as Kafka's clients retry (KIP-580), without a
broker (their RawClient a fake): a broker that does not answer is tried again after a back-off doubling from
retry.backoff.ms to retry.backoff.max.ms while the other brokers' partitions go on; a partition the broker refuses
(NOT_ENOUGH_REPLICAS) waits its own back-off while the other partitions deliver; every error is counted by Kafka's
name, topic and broker, and logged with topic, partition, broker and error, not once per attempt."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
import structlog
from kafka.errors import KafkaConnectionError

from tests.unit.kafka.test_batch_producer_outage import _Unreachable
from transcoder.kafka import fetcher as fetcher_module
from transcoder.kafka.fetcher import Fetcher
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.retries import KafkaErrors


@pytest.fixture(autouse=True)
def _fresh_logger(fresh_structlog: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetcher_module, "log", structlog.get_logger("transcoder.fetcher"))


class _Brokers:
    """Two leaders: broker 1 (partition 0) answers every Fetch with nothing new; broker 2 (partition 1) is down."""

    def __init__(self) -> None:
        self.sent: list[int] = []  # the leader of each Fetch sent
        self.metadata = 0

    def leaders(self, topics: Any) -> dict[tuple[str, int], int]:
        self.metadata += 1
        return {("t", 0): 1, ("t", 1): 2}

    def fetch_start(self, by_leader: Any, **kwargs: Any) -> Any:
        self.sent.extend(by_leader)
        return dict(by_leader)

    def fetch_results(self, pending: Any) -> tuple[dict[tuple[str, int], Any], dict[int, BaseException]]:
        answers = {tp: SimpleNamespace(records=b"", error_code=0, aborted_transactions=(), last_stable_offset=5,
                                       high_watermark=5) for leader, offsets in pending.items() if leader == 1
                   for tp in offsets}
        return answers, {2: KafkaConnectionError("111 ECONNREFUSED")} if 2 in pending else {}


def test_a_broker_down_is_fetched_from_after_a_doubling_back_off_and_does_not_hold_the_others():
    errors = KafkaErrors()
    f = Fetcher({"bootstrap.servers": "127.0.0.1:1"}, "t-fetch", max_wait_ms=100, read_ahead=False, errors=errors)
    brokers = _Brokers()
    f._info = brokers  # type: ignore[assignment]
    f.assign({("t", 0): 5, ("t", 1): 5})
    rounds = 0
    with structlog.testing.capture_logs() as logs:
        start = time.monotonic()
        while time.monotonic() - start < 3.0:
            f.fetch()
            rounds += 1
    to_2 = brokers.sent.count(2)
    # Retried at once, every round (18,063 failed Fetches in 72 s on a 2-core machine); now after 0.1, 0.2, 0.4,
    # 0.8, 1, 1 s (+-20%): 5-7 tries in 3 s.
    assert 4 <= to_2 <= 8, to_2
    assert brokers.sent.count(1) == rounds  # broker 1's partition is fetched every round meanwhile
    assert errors.counts() == {("KafkaConnectionError", "t", "2"): to_2}
    failed = [e for e in logs if e["event"] == "fetch_request_failed"]
    assert len(failed) == 1 and failed[0]["broker"] == 2 and failed[0]["error"] == "KafkaConnectionError"
    assert failed[0]["partitions"] == "t [1]"
    assert brokers.metadata <= to_2 + 1  # the leader is looked up again once per failure, not per round


def test_with_every_partition_backed_off_a_round_waits_instead_of_spinning():
    f = Fetcher({"bootstrap.servers": "127.0.0.1:1"}, "t-fetch", max_wait_ms=100, read_ahead=False,
                errors=KafkaErrors())
    brokers = _Brokers()
    f._info = brokers  # type: ignore[assignment]
    f.assign({("t", 1): 5})  # broker 2's only
    rounds = 0
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        f.fetch()
        rounds += 1
    # each round waits for the back-off's end (never longer than max_wait_ms): ~20 rounds in 2 s, not thousands
    assert rounds <= 40, rounds
    until = time.monotonic() + 0.02
    f.fetch(until=until)
    assert time.monotonic() - until < 0.05  # never past the caller's deadline


class _NotEnoughReplicas(_Unreachable):
    """Produce: partition 1 is refused with NOT_ENOUGH_REPLICAS until `healed` is set; partition 0 takes
    everything. Notes when each Produce of partition 1 came."""

    def __init__(self) -> None:
        super().__init__()
        self.reachable.set()
        self.healed = threading.Event()
        self.tries_1: list[float] = []

    def produce(self, batches: Any, *, leader: int, timeout_ms: int,
                **txn: Any) -> dict[tuple[str, int], tuple[int, int]]:
        out = {}
        for tp in batches:
            if tp[1] == 1:
                self.tries_1.append(time.monotonic())
                if not self.healed.is_set():
                    out[tp] = (19, -1)
                    continue
            out[tp] = (0, self.offsets.get(tp, 0))
            self.offsets[tp] = self.offsets.get(tp, 0) + 1000
        return out


def test_a_partition_refused_waits_its_own_doubling_back_off_while_the_others_deliver():
    delivered: list[tuple[int, bytes]] = []
    errors: list[Any] = []
    tally = KafkaErrors()

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else delivered.append((msg.partition(), msg.key())))

    fake = _NotEnoughReplicas()
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="zstd", level=3, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=100, on_delivery=on_delivery, errors=tally, client=fake)
    partition_0_done = False
    with structlog.testing.capture_logs() as logs:
        p.start()
        for i in range(10):
            p.produce("t", value=b"v", key=str(i).encode(), partition=i % 2)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            p.poll(0.05)
            if len(delivered) == 5:
                partition_0_done = True
        assert partition_0_done and {q for q, _ in delivered} == {0}  # partition 0's went while 1 waited
        for i in range(10, 20):  # partition 0 keeps delivering meanwhile
            p.produce("t", value=b"v", key=str(i).encode(), partition=0)
        deadline = time.monotonic() + 2
        while len(delivered) < 15 and time.monotonic() < deadline:
            p.poll(0.05)
        assert len(delivered) == 15
        fake.healed.set()
        deadline = time.monotonic() + 5
        while len(delivered) < 20 and time.monotonic() < deadline:
            p.poll(0.05)
        p.close(5)
    assert not errors and len(delivered) == 20
    gaps = [b - a for a, b in zip(fake.tries_1, fake.tries_1[1:], strict=False)]
    # 0.1, 0.2, 0.4, 0.8, 1, 1 ... s (+-20%), was 0.1 s every time: 40+ tries in 4 s, now under 10
    assert len(fake.tries_1) <= 10, gaps
    assert all(g >= 0.075 for g in gaps) and max(gaps) >= 0.75, gaps
    refused = len(fake.tries_1) - 1  # the last try delivered
    assert tally.counts() == {("NOT_ENOUGH_REPLICAS", "t", "1"): refused}
    lines = [e for e in logs if e["event"] == "produce_partition_failed"]
    assert len(lines) == 1, lines
    assert {k: lines[0][k] for k in ("topic", "partition", "broker", "error")} == {
        "topic": "t", "partition": 1, "broker": 1, "error": "NOT_ENOUGH_REPLICAS"}
    again = [e for e in logs if e["event"] == "kafka_requests_succeed_again"]
    assert len(again) == 1 and again[0]["partition"] == 1 and again[0]["total"] == refused
