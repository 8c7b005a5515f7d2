"""exactly-once on the records path (librdkafka's transactional producer), on the real broker: after an abort the
next transaction is in a new epoch of the transactional id, so a Produce of the aborted transaction that reaches the
broker late - it timed out here, a broker restarting, and was still on its way - is refused instead of being taken
into the next transaction and committed with it (KIP-890's case: librdkafka has no epoch bump per transaction,
confluentinc/librdkafka#5423)."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from kafka.record import MemoryRecords

from tests.integration.test_raw_transactions import INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, T0, sealed
from tests.support.records import read_all, read_messages
from transcoder import config as cfg
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.writer import build_sink
from transcoder.pipeline.routes import plan

#: Kafka's other refusals of a batch outside the producer's current transaction (KIP-890's verification)
INVALID_TXN_STATE = 48


class _Metrics:
    def __getattr__(self, name):
        return lambda *a, **k: None


def _batches(info: RawClient, topic: str) -> list[tuple[int, int, int, int, bool]]:
    """(producer id, epoch, base sequence, records, control) of every batch of `topic` [0] below its stable end."""
    part = info.fetch_partition(topic, 0, 0, leader=1, max_bytes=1 << 20)
    records, out = MemoryRecords(part.records or b""), []
    while (b := records.next_batch()) is not None:
        out.append((b.producer_id, b.producer_epoch, b.base_sequence, b.last_offset_delta + 1, b.is_control_batch))
    return out


def _raise(err):
    raise AssertionError(f"consume error: {err}")


def test_a_late_produce_of_an_aborted_transaction_is_refused_not_committed_with_the_next(kafka, topic_factory):
    source = topic_factory(partitions=1)
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(10):
        p.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp=T0 + i)
    assert p.flush(30) == 0
    msgs = read_messages(kafka.bootstrap, source)
    conf = cfg.parse({"cluster": {"bootstrap_servers": kafka.bootstrap}, "guarantee": "exactly-once",
                      "routes": [{"source": source, "destinations": [{"codec": "zstd"}]}]}, environ={})
    (target,) = [t for lane in plan(conf, [source]).lanes for t in lane.targets]
    dest = topic_factory(partitions=1, name=target.topic_for(source))
    sink = build_sink(conf, "l", (target,), _Metrics(), batched=False)
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    tid = f"transcoder-test-{uuid.uuid4().hex[:8]}"
    try:
        sink.begin_transactions(tid, 30, "g")
        sink.write(msgs[:5], on_error=_raise)
        sink.drain(30)
        sink.abort_transaction(30)  # its 5 records delivered, then aborted: read again from the last commit
        sink.write(msgs[5:], on_error=_raise)
        sink.drain(30)  # the next transaction holds dest [0] now
        aborted = [b for b in _batches(info, dest) if not b[4]]  # the aborted transaction's batches
        pid, epoch, base, count = aborted[-1][:4]
        assert sum(b[3] for b in aborted) == 5 and {b[:2] for b in aborted} == {(pid, epoch)}, aborted
        # A Produce of the aborted transaction arriving now, numbered after everything this producer id and epoch
        # wrote: after the aborted batch and the next transaction's 5 records, had that one kept the epoch.
        late = [(b"late", b"written by the aborted transaction", [], T0)]
        answer = info.produce({(dest, 0): sealed(late, pid, epoch, base + count + 5, transactional=True)},
                              leader=1, transactional_id=tid)
        sink.commit_transaction([], None, 30)
        got = read_all(kafka.bootstrap, dest)
        batches = _batches(info, dest)
    finally:
        sink.close(10)
        info.close()
    assert [(r[2], r[3]) for r in got] == [(m.key(), m.value()) for m in msgs[5:]]  # the late record: not there
    assert answer[(dest, 0)][0] in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, INVALID_TXN_STATE), answer
    data = [b for b in batches if not b[4]]
    assert {b[0] for b in data} == {pid} and data[0][1] == epoch and all(b[1] == epoch + 1 for b in data[1:]), data
