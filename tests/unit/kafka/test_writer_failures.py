"""A writer's failed records without a broker (kafka.writer.failures): refused records sent again alone, and copies
to the dead-letter topic, through producers that note what they are given. The real broker:
tests/integration/test_writer.py."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from transcoder.kafka.producer import Delivered
from transcoder.kafka.writer.failures import DLQ_HEADERS, DeadLetters, Failure, RefusedRecords


class Producer:
    """Notes each produce (topic, value, key, partition, timestamp, headers, on_delivery); `full` raises BufferError
    from that produce on, `refuse` a KafkaException for that one."""

    def __init__(self, *, full: int | None = None, refuse: int | None = None) -> None:
        self.produced: list[dict[str, Any]] = []
        self.full, self.refuse, self.calls = full, refuse, 0

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1, **kw: Any) -> None:
        self.calls += 1
        if self.full is not None and self.calls >= self.full:
            raise BufferError("Local: Queue full")
        if self.refuse == self.calls:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large alone"))
        self.produced.append({"topic": topic, "value": value, "key": key, "partition": partition, **kw})


class Ledger:
    def __init__(self) -> None:
        self.released: list[tuple[Any, int]] = []

    def release(self, source: Any, offset: int) -> None:
        self.released.append((source, offset))


class Target:
    name = "t"


def failure(offset: int, *, code: str = "MSG_SIZE_TOO_LARGE") -> Failure:
    msg = Delivered("s.zstd", 2, -1, (b"k", b"v%d" % offset, [("h", b"1")], 1_700_000_000_000 + offset, 0))
    return Failure(("s", 2), offset, "s.zstd", code, "refused", msg)


def test_refused_records_go_again_alone_in_order_and_their_reports_are_told():
    made: list[Any] = []
    p = Producer()
    acked: list[tuple[int, int]] = []
    failed: list[Failure] = []
    r = RefusedRecords("l", {"s.zstd": Target()}, lambda t: made.append(t) or p,  # type: ignore[arg-type]
                       lambda f, offset: acked.append((f.offset, offset)), failed.append)
    r.waiting += [failure(5), failure(6)]
    r.resend()
    assert len(made) == 1 and r.waiting == []  # one producer per target, made at first use
    assert [(x["topic"], x["value"], x["partition"], x["timestamp"]) for x in p.produced] == [
        ("s.zstd", b"v5", 2, 1_700_000_000_005), ("s.zstd", b"v6", 2, 1_700_000_000_006)]
    p.produced[0]["on_delivery"](None, Delivered("s.zstd", 2, 40, (None, None, [], 0, 0)))
    p.produced[1]["on_delivery"](KafkaError(KafkaError.INVALID_RECORD, "null key"), None)
    assert acked == [(5, 40)]
    assert [(f.offset, f.code, f.reason) for f in failed] == [(6, "INVALID_RECORD", "null key")]


def test_a_full_queue_leaves_the_rest_for_the_next_call_and_a_record_refused_at_once_fails():
    p = Producer(full=3, refuse=1)
    failed: list[Failure] = []
    r = RefusedRecords("l", {"s.zstd": Target()}, lambda t: p, lambda f, o: None, failed.append)  # type: ignore
    r.waiting += [failure(1), failure(2), failure(3), failure(4)]
    r.resend()
    assert [f.offset for f in failed] == [1] and failed[0].reason == "too large alone"
    assert [x["value"] for x in p.produced] == [b"v2"]
    assert [f.offset for f in r.waiting] == [3, 4]  # in order, for the next poll


def test_a_dead_letter_carries_its_headers_then_where_it_came_from_and_is_released_once_acknowledged():
    p, ledger, counted = Producer(), Ledger(), []
    d = DeadLetters(p, "dlq", "l", ledger, lambda: counted.append(1))  # type: ignore[arg-type]
    d.send(failure(7))
    (x,) = p.produced
    assert (x["topic"], x["key"], x["value"], x["timestamp"]) == ("dlq", b"k", b"v7", 1_700_000_000_007)
    assert x["headers"] == [("h", b"1"), *zip(DLQ_HEADERS, [b"s", b"2", b"7", b"s.zstd", b"refused"], strict=True)]
    assert ledger.released == [] and d.count == 0
    x["on_delivery"](None, None)
    assert ledger.released == [(("s", 2), 7)] and d.count == 1 and counted == [1] and d.fatal is None


def test_a_dead_letter_the_dlq_refuses_is_fatal_and_never_released():
    p, ledger = Producer(), Ledger()
    d = DeadLetters(p, "dlq", "l", ledger, lambda: None)  # type: ignore[arg-type]
    d.send(failure(7))
    p.produced[0]["on_delivery"](KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"), None)
    assert ledger.released == [] and d.count == 0
    assert d.fatal is not None and "could not be written to the DLQ dlq: denied" in str(d.fatal)
