"""The batches of one destination partition on the batched path (kafka.writer.destination_batcher), with the real native
Rebatcher and a producer that only notes the sections it is handed; and the writer's batchers through
`write_stored` and `tick`. Sealing and sending the sections: test_batch_producer_*."""

from __future__ import annotations

from typing import Any

import pytest
import transcoder_native as native

from transcoder import config as cfg
from transcoder.config import Batch
from transcoder.kafka.writer import build_sink
from transcoder.kafka.writer.destination_batcher import DestinationBatcher
from transcoder.kafka.writer.factory import sink_parts
from transcoder.kafka.writer.record_sets import RecordSetsSink, TransactionalRecordSetsSink
from transcoder.kafka.writer.transactions import WriterTransactions
from transcoder.pipeline.routes import plan

RECORD = b"v" * 90  # a record of about 100 bytes in a section (its framing included)


class Sink:
    """A producer that notes each `produce_sections` call: (topic, partition, [offsets of each section])."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, list[list[int]]]] = []

    def produce_sections(self, topic: str, partition: int, sections: Any) -> None:
        self.sent.append((topic, partition, [list(s.offsets) for s in sections]))

    def sections(self) -> list[list[int]]:
        return [offsets for _, _, call in self.sent for offsets in call]


def stored(first: int, n: int) -> Any:
    """A fetched record set (transcoder_native StoredRecords) of records `first..first+n-1`."""
    data = native.encode_batch([(None, RECORD, [], 1_700_000_000_000 + i) for i in range(first, first + n)],
                               codec="none", base_offset=first)
    return native.decode_stored(data, first)


def batcher(max_bytes: int = 1 << 20, max_records: int = 10, linger_ms: int = 500) -> tuple[DestinationBatcher, Sink]:
    sink = Sink()
    batch = Batch(max_bytes=max_bytes, max_records=max_records, linger_ms=linger_ms)
    return DestinationBatcher(sink, "t.zstd", 3, batch), sink


def add(b: DestinationBatcher, first: int, n: int, now: float) -> None:
    b.add(stored(first, n), 0, 0, n, now)


def test_sections_full_by_count_go_at_once_and_the_rest_waits():
    b, sink = batcher(max_records=10)
    add(b, 0, 25, now=100.0)
    assert sink.sent == [("t.zstd", 3, [list(range(10)), list(range(10, 20))])]  # one call, in order
    assert b.rebatcher.records == 5 and b.opened == 100.0


def test_sections_full_by_size_go_at_once():
    b, sink = batcher(max_bytes=1000, max_records=1000)
    add(b, 0, 30, now=0.0)
    sizes = [len(s) for s in sink.sections()]
    assert sizes and all(1 < n < 10 for n in sizes)  # about 100 bytes each, and the batch's own framing
    assert sum(sizes) + b.rebatcher.records == 30
    assert [o for s in sink.sections() for o in s] == list(range(sum(sizes)))


def test_an_open_section_goes_when_its_linger_is_over():
    b, sink = batcher(linger_ms=500)
    assert not b.due(1e9) and b.opened is None  # nothing held: never due
    add(b, 0, 3, now=100.0)
    add(b, 3, 3, now=100.4)  # into the same open section: its clock runs from its first record
    assert sink.sent == [] and b.opened == 100.0
    assert not b.due(100.499)
    assert b.due(100.5)
    b.send()
    assert sink.sent == [("t.zstd", 3, [[0, 1, 2, 3, 4, 5]])]
    assert b.opened is None and b.rebatcher.records == 0 and not b.due(1e9)


def test_send_flushes_everything_and_an_empty_batcher_sends_nothing():
    b, sink = batcher(max_records=10)
    add(b, 0, 25, now=0.0)
    b.send()
    assert sink.sections() == [list(range(10)), list(range(10, 20)), list(range(20, 25))]
    b.send()
    assert len(sink.sent) == 2  # no call with no section


def test_what_is_left_after_sections_went_restarts_the_linger_clock():
    b, sink = batcher(max_records=10, linger_ms=500)
    add(b, 0, 5, now=0.0)
    add(b, 5, 10, now=0.3)  # closes 0..9; 10..14 arrived at 0.3
    assert sink.sections() == [list(range(10))]
    assert b.opened == 0.3
    assert not b.due(0.5)  # it would be from the first section's clock
    assert b.due(0.8)


def test_nothing_left_after_sections_went_leaves_nothing_open():
    b, sink = batcher(max_records=10)
    add(b, 0, 5, now=0.0)
    add(b, 5, 5, now=0.2)
    assert sink.sections() == [list(range(10))]
    assert b.opened is None and not b.due(1e9)


def _config(linger_ms: int, max_records: int) -> tuple[cfg.Config, tuple[Any, ...]]:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"},
                      "routes": [{"source": "s", "destinations": [
                          {"codec": c, "batch": {"linger_ms": linger_ms, "max_records": max_records}}
                          for c in ("lz4", "zstd")]}]}, environ={})
    return conf, tuple(t for lane in plan(conf, ["s"]).lanes for t in lane.targets)


def writer(linger_ms: int, max_records: int) -> RecordSetsSink:
    conf, targets = _config(linger_ms, max_records)
    w = build_sink(conf, "l", targets, _Metrics(), create=lambda part, make, start: make(), batched=True)
    assert isinstance(w, RecordSetsSink)
    return w


class _Metrics:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


@pytest.fixture
def batched() -> tuple[RecordSetsSink, Sink]:
    w = writer(linger_ms=500, max_records=10)
    sink = Sink()
    w.batching.routes = {s: [(sink, dest, t) for _, dest, t in routes]  # type: ignore[misc]
                         for s, routes in w.batch_routes.items()}
    return w, sink


def test_the_writer_sends_full_sections_at_once_and_open_ones_in_the_order_they_opened(batched):
    w, sink = batched
    assert w.write_stored(("s", 1), stored(0, 4), now=10.0) == (4, stored(0, 4).span(0, 4)[2])
    w.write_stored(("s", 0), stored(0, 12), now=10.2)  # 0..9 go at once to each destination, 10..11 open
    assert sink.sent == [("s.lz4", 0, [list(range(10))]), ("s.zstd", 0, [list(range(10))])]
    sink.sent.clear()
    w.tick(10.499)
    assert sink.sent == []
    w.tick(10.5)  # partition 1's linger is over (opened first), partition 0's is not
    assert sink.sent == [("s.lz4", 1, [[0, 1, 2, 3]]), ("s.zstd", 1, [[0, 1, 2, 3]])]
    sink.sent.clear()
    w.write_stored(("s", 1), stored(4, 2), now=10.6)  # partition 1 opens again: after partition 0
    w.tick(10.6, flush=True)
    assert sink.sent == [("s.lz4", 0, [[10, 11]]), ("s.zstd", 0, [[10, 11]]),
                         ("s.lz4", 1, [[4, 5]]), ("s.zstd", 1, [[4, 5]])]
    sink.sent.clear()
    w.tick(1e9, flush=True)
    assert sink.sent == []  # nothing held


def test_the_writer_says_when_the_first_open_batch_s_linger_is_over(batched):
    w, sink = batched
    assert w.linger_due() is None  # nothing open
    w.write_stored(("s", 1), stored(0, 4), now=10.0)
    w.write_stored(("s", 0), stored(0, 2), now=10.2)
    assert w.linger_due() == pytest.approx(10.5)  # partition 1's, opened at 10.0
    w.tick(10.5)  # partition 1's went; partition 0's is due at 10.7
    assert w.linger_due() == pytest.approx(10.7)
    w.tick(10.7)
    assert w.linger_due() is None


class _TxnProducer:
    """The calls an abort makes of the transactional producer."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def flush(self, timeout: float = 0) -> int:
        return 0

    def poll(self, timeout: float = 0) -> int:
        return 0


def test_an_aborted_transaction_forgets_the_open_sections():
    conf, targets = _config(linger_ms=500, max_records=10)
    parts = sink_parts(conf, "l", targets, _Metrics(), create=lambda part, make, start: make(), map_external=True)
    w = TransactionalRecordSetsSink(parts, targets[0], WriterTransactions("l", 60_000))
    sink = Sink()
    w.batching.routes = {"s": [(sink, t.topic_for("s"), t) for t in targets]}  # type: ignore[misc]
    w.write_stored(("s", 0), stored(0, 3), now=0.0)
    p = _TxnProducer()
    w.producer = p  # type: ignore[assignment]
    w.abort_transaction(1.0)  # the records are read again from the last commit
    assert p.calls == ["abort", "begin"]
    w.tick(1e9, flush=True)
    assert sink.sent == []
    w.write_stored(("s", 0), stored(0, 3), now=5.0)  # read again: a section of its own, its linger from now
    w.tick(5.499)
    assert sink.sent == []
    w.tick(5.5)
    assert sink.sent == [("s.lz4", 0, [[0, 1, 2]]), ("s.zstd", 0, [[0, 1, 2]])]
