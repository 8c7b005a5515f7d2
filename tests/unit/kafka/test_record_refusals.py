"""A batch refused for some of its records (INVALID_TIMESTAMP, INVALID_RECORD), without a broker: the cut that leaves
each refused record alone (batches.isolate), the batch producer that sends the pieces in order and reports
only the records refused alone, and the dead-letter copies of their innocent neighbours. The real broker:
tests/integration/test_timestamps.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, KafkaError
from kafka.record import MemoryRecords

from tests.unit.kafka.test_batch_producer_ahead import _sections
from tests.unit.kafka.test_batch_producer_outage import _Unreachable
from tests.unit.kafka.test_batch_producer_parts import TP, _Host, _round
from tests.unit.kafka.test_writer import Msg, records_writer
from tests.unit.kafka.test_writer_failures import Ledger, Producer, failure
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.producer.batches import isolate, record_halves
from transcoder.kafka.writer.failures import BATCH_REFUSALS, DeadLetters

INVALID_TIMESTAMP, INVALID_RECORD = 32, 87


def _spans(pieces: list[list[int]]) -> list[list[int]]:
    return [list(p) for p in pieces]


# ------------------------------------------------------------------ the cut (pure)
@pytest.mark.parametrize(("count", "refused", "pieces"), [
    (8, [5], [[0, 1, 2, 3], [4], [5], [6, 7]]),  # the refused record alone; the rest in as few pieces as halves allow
    (4, [1, 3], [[0], [1], [2], [3]]),
    (7, [0], [[0], [1, 2], [3, 4, 5, 6]]),  # halves as Section.split cuts: the first half count // 2
    (8, [], [[0, 1, 2, 3], [4, 5, 6, 7]]),  # none named: the two halves (each cut again if refused again)
    (8, [8, -1], [[0, 1, 2, 3], [4, 5, 6, 7]]),  # indexes outside the batch name nothing
    (1, [0], [[0]]),  # alone already: at fault
])
def test_a_refused_batch_is_cut_until_each_refused_record_is_alone(count: int, refused: list[int],
                                                                 pieces: list[list[int]]):
    got = isolate(list(range(count)), count, refused, record_halves)
    assert _spans(got) == pieces
    assert [i for p in got for i in p] == list(range(count))  # every record once, in order


def test_sections_are_cut_as_lists_are():
    (section,) = _sections(1, 8)
    got = isolate(section, 8, [5], lambda s: s.split())
    assert [list(s.offsets) for s in got] == [[0, 1, 2, 3], [4], [5], [6, 7]]


# ------------------------------------------------------------------ the sender's answer
def test_an_answer_naming_refused_records_sends_the_batch_again_cut_around_them():
    host = _Host({TP: (INVALID_TIMESTAMP, -1)})
    host.record_errors = {TP: (2,)}
    sender, round_ = _round(host)
    assert sender.finish(round_, {}) == {}
    assert host.reports == [] and host.split == [TP]  # nothing failed yet: the pieces go again
    assert [len(p) for p in host.pieces] == [2, 1, 1]
    assert host.seq.peek(TP) == 0  # not written: the pieces take its sequences


def test_a_record_refused_alone_is_reported_with_what_the_broker_checks():
    host = _Host({TP: (INVALID_TIMESTAMP, -1)})
    sender, round_ = _round(host, records=1)
    sender.finish(round_, {})
    assert host.split == [] and host.reports == [(INVALID_TIMESTAMP, TP, -1)]


# ------------------------------------------------------------------ the batch producer, end to end
class _Strict(_Unreachable):
    """A broker that refuses a batch holding a record whose key starts with b"bad" (INVALID_TIMESTAMP), naming those
    records by index when `names` (record_errors) or none (a broker before Produce v8); it writes the others."""

    def __init__(self, names: bool) -> None:
        super().__init__()
        self.reachable.set()
        self.names = names
        self.written: list[bytes] = []
        self.refusals = 0

    def produce(self, batches: Any, *, leader: int, timeout_ms: int, **txn: Any) -> Any:
        out = {}
        for tp, payload in batches.items():
            keys = [r.key for r in MemoryRecords(bytes(payload)).next_batch()]
            bad = tuple(i for i, k in enumerate(keys) if k.startswith(b"bad"))
            if bad:
                self.refusals += 1
                out[tp] = (INVALID_TIMESTAMP, -1, bad if self.names else ())
            else:
                out[tp] = (0, len(self.written), ())
                self.written.extend(keys)
        return out

    def produce_answers(self, answers: Any) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: a[:2] for tp, a in answers.items()}

    def produce_record_errors(self, answers: Any) -> dict[tuple[str, int], tuple[int, ...]]:
        return {tp: a[2] for tp, a in answers.items() if a[2]}


def _keys(n: int, bad: set[int]) -> list[bytes]:
    return [(b"bad%d" if i in bad else b"k%d") % i for i in range(n)]


@pytest.mark.parametrize("names", [True, False], ids=["named", "not-named"])
def test_records_produced_one_by_one_valid_ones_written_in_order_and_only_the_refused_ones_fail(names: bool):
    bad = {3, 17, 18, 40}
    keys = _keys(50, bad)
    delivered: list[bytes] = []
    failed: list[tuple[bytes, str, str]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (failed.append((msg.key(), err.name(), err.str())) if err is not None else delivered.append(msg.key()))

    fake = _Strict(names)
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="lz4", level=None, client_id="c1", linger_ms=50,
                      max_bytes=1 << 20, max_records=1000, on_delivery=on_delivery, client=fake)
    p.start()
    for k in keys:
        p.produce("t", value=b"v", key=k, partition=0, timestamp=int(time.time() * 1000))
    assert p.flush(10) == 0
    p.close(5)
    valid = [k for i, k in enumerate(keys) if i not in bad]
    assert fake.written == valid and delivered == valid  # every valid record, in order
    assert [k for k, _, _ in failed] == [keys[i] for i in sorted(bad)]  # exactly the records at fault
    assert {name for _, name, _ in failed} == {"INVALID_TIMESTAMP"}
    assert all("message.timestamp.after.max.ms" in why and "sent alone" in why for _, _, why in failed)
    if names:  # the first batch is cut at once; only the records at fault are refused alone after it
        assert fake.refusals == 1 + len(bad)


def test_sections_valid_records_written_in_order_and_only_the_refused_ones_reported_failed():
    import transcoder_native as native

    bad = {5, 6, 90}
    keys = _keys(100, bad)
    stored = native.encode_batch([(k, b"v", [], 1000 + i) for i, k in enumerate(keys)], codec="none", base_offset=0)
    rb = native.Rebatcher(1 << 20, 1000)
    rb.add(native.decode_stored(stored, 0), 0)
    reports: list[tuple[Any, list[int]]] = []
    fake = _Strict(True)
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="lz4", level=None, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=1000, on_delivery=lambda e, m: None,
                      on_batch=lambda err, t, part, base, s: reports.append((err, list(s.offsets))), client=fake)
    p.start()
    p.produce_sections("t", 0, rb.take(flush=True))
    assert p.flush(10) == 0
    p.close(5)
    assert fake.written == [k for i, k in enumerate(keys) if i not in bad]
    assert [o for err, offsets in reports for o in offsets] == list(range(100))  # reported in order, each once
    assert sorted(o for err, offsets in reports if err is not None for o in offsets) == sorted(bad)
    assert all(len(offsets) == 1 for err, offsets in reports if err is not None)


# ------------------------------------------------------------------ the records path and the dead-letter topic
def test_the_records_path_sends_alone_every_record_of_a_batch_refused_for_a_timestamp():
    assert {KafkaError.INVALID_TIMESTAMP, KafkaError._INVALID_DIFFERENT_RECORD} <= BATCH_REFUSALS


class _FailedReport(Msg):
    """A failed delivery report as librdkafka gives it: no timestamp (rd_kafka_message_timestamp on an error)."""

    def timestamp(self):  # type: ignore[no-untyped-def]
        return (TIMESTAMP_NOT_AVAILABLE, -1)


def test_a_record_of_a_refused_batch_is_sent_again_and_dead_lettered_with_its_own_timestamp():
    w = records_writer("lz4")
    w.write([Msg("s", 0, 5), Msg("s", 0, 6)], on_error=lambda e: None)
    delivered = w.parts.deliveries.record_reports("s.lz4", w.failed_or_refused)
    delivered(KafkaError(KafkaError._INVALID_DIFFERENT_RECORD), _FailedReport("s.lz4", 0, -1))
    delivered(KafkaError(KafkaError.INVALID_TIMESTAMP), _FailedReport("s.lz4", 0, -1))
    assert [(f.offset, f.message.timestamp(), f.message.key(), f.message.value(), f.message.headers())
            for f in w.refused.waiting] == [
        (5, (TIMESTAMP_CREATE_TIME, 1_700_000_000_005), b"k", b"v", [("h", b"12")]),
        (6, (TIMESTAMP_CREATE_TIME, 1_700_000_000_006), b"k", b"v", [("h", b"12")])]


def test_a_dead_letter_refused_for_another_record_of_its_batch_is_sent_again_and_fatal_names_the_one_at_fault():
    p, ledger = Producer(), Ledger()
    d = DeadLetters(p, "dlq", "l", ledger, lambda: None)  # type: ignore[arg-type]
    d.send(failure(7))
    d.send(failure(8))
    innocent, at_fault = p.produced
    innocent["on_delivery"](KafkaError(KafkaError._INVALID_DIFFERENT_RECORD, "another record"), None)
    at_fault["on_delivery"](KafkaError(KafkaError.INVALID_TIMESTAMP, "Broker: Invalid timestamp"), None)
    assert d.fatal is not None and d.fatal.offset == 8 and "offset 8" in str(d.fatal)
    assert [x["value"] for x in p.produced] == [b"v7", b"v8", b"v7"]  # the innocent one, again
    p.produced[2]["on_delivery"](None, None)
    assert ledger.released == [(("s", 2), 7)]
