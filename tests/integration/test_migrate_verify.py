"""Content verification against the broker: copies made here record by record (with the offset map written
as the writer writes it), then altered, replayed, left incomplete, and verified."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from transcoder import config as cfg
from transcoder.config import Config
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka import offset_map_topic as offset_map
from transcoder.migrate.compare import HEADERS, MISSING, TIMESTAMP, VALUE
from transcoder.migrate.verify import RangeReader, Verifier, verify, verify_partition
from transcoder.pipeline.offset_runs import PartitionMap, Run

#: recent: the broker's time retention (7 days) would delete records stamped long ago while a test runs
T0 = int(time.time() * 1000) - 3_600_000
RANGE = 7  # records per range: every test crosses range boundaries

#: (partition, source offset, key, value, headers, timestamp) -> the same, as produced to the destination
Alter = Callable[[int, int, Any, Any, Any, int], tuple[Any, Any, Any, int]]


@dataclass
class Copy:
    """The copy made: where each source record's copies landed."""

    config: Config
    source: str
    dest: str
    #: (partition, source offset) -> destination offsets, in order
    copies: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    #: partition -> one past the highest source offset read
    source_end: dict[int, int] = field(default_factory=dict)

    def maps(self) -> dict[int, Any]:
        return offset_map.read(self.config, self.dest)[0]


def make_config(kafka: Any, source: str, dest: str, **migration: Any) -> Config:
    return cfg.parse({"cluster": {"bootstrap_servers": kafka.bootstrap}, "group_id": f"verify-{uuid.uuid4().hex[:10]}",
                      "routes": [{"source": source, "destinations": [{"codec": "zstd", "topic": dest}]}],
                      "migration": {"verify_range_records": RANGE, **migration}}, environ={})


def produce_source(producer_factory: Callable[..., Producer], topic: str, partitions: int, n: int) -> None:
    p = producer_factory(**{"enable.idempotence": True})
    for part in range(partitions):
        for i in range(n):
            headers = [("trace", f"{part}-{i}".encode()), ("empty", b""), ("none", None)] if i % 3 else None
            key = None if i % 5 == 4 else f"key-{i}".encode()
            p.produce(topic, value=f"value-{part}-{i}".encode() * (1 + i % 4), key=key, partition=part,
                      headers=headers, timestamp=T0 + i)
    assert p.flush(30) == 0


def copy(kafka: Any, admin: Any, consumer_factory: Callable[..., Any], source: str, dest: str, *,
         alter: Alter | None = None, skip: set[tuple[int, int]] = frozenset(),  # type: ignore[assignment]
         unmapped: set[tuple[int, int]] = frozenset(),  # type: ignore[assignment]
         replay: dict[int, tuple[int, int]] | None = None, config: Config | None = None,
         start: dict[int, int] | None = None, made: Copy | None = None) -> Copy:
    """Copy `source` (read_committed) to `dest` record by record, as the writer does, and map every delivered
    copy. `skip`: records not copied (dead-lettered); `unmapped`: records copied a first time without a map
    entry (a crash lost them), then again with one; `replay`: per partition, source offsets [a, b) copied once
    more after the copy (an at-least-once replay); `start`: source offset to read from, per partition."""
    config = config or make_config(kafka, source, dest)
    offset_map.ensure_topic(admin, config)
    made = made or Copy(config, source, dest)
    recorder = offset_map.OffsetMapRecorder(config, "test-copier")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    md = admin.list_topics(source, timeout=10).topics[source]
    consumer = consumer_factory(**{"isolation.level": "read_committed", "enable.partition.eof": True,
                                   "fetch.wait.max.ms": 50})
    start = start or {}
    consumer.assign([TopicPartition(source, p, start.get(p, 0)) for p in md.partitions])
    records: list[Message] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 30
    while len(eof) < len(md.partitions):
        assert time.monotonic() < deadline, "timed out reading the source"
        for m in consumer.consume(1000, timeout=0.5):
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                made.source_end[m.partition()] = m.offset()
                continue
            records.append(m)

    def send(m: Message, mapped: bool = True) -> None:
        p, o = m.partition(), m.offset()
        key, value, headers, ts = m.key(), m.value(), m.headers(), m.timestamp()[1]
        if alter is not None:
            key, value, headers, ts = alter(p, o, key, value, headers, ts)

        def delivered(err: KafkaError | None, msg: Message) -> None:
            assert err is None, err
            if mapped:
                recorder.add(source, dest, p, o, msg.offset())
                made.copies.setdefault((p, o), []).append(msg.offset())

        while True:
            try:
                producer.produce(dest, value=value, key=key, partition=p, headers=headers, timestamp=ts,
                                 on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.1)

    crashed: set[int] = set()
    for m in records:
        if (m.partition(), m.offset()) in unmapped and m.partition() not in crashed:
            # copies whose map entries a crash lost, then copied again from the last commit (with entries)
            crashed.add(m.partition())
            for u in records:
                if (u.partition(), u.offset()) in unmapped and u.partition() == m.partition():
                    send(u, mapped=False)
        if (m.partition(), m.offset()) not in skip:
            send(m)
    assert producer.flush(30) == 0
    for p, (a, b) in (replay or {}).items():
        for m in records:
            if m.partition() == p and a <= m.offset() < b:
                send(m)
    assert producer.flush(30) == 0
    assert recorder.flush(30)
    recorder.close(5)
    return made


class _CountAssign:
    """A consumer whose assign() calls are recorded."""

    def __init__(self, consumer: Any, calls: list) -> None:
        self._consumer = consumer
        self._calls = calls

    def assign(self, tps: list) -> None:
        self._calls.append(tps)
        self._consumer.assign(tps)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


@pytest.fixture
def pair(topic_factory: Callable[..., str]) -> Callable[..., tuple[str, str]]:
    def make(partitions: int = 2, dest_config: dict[str, str] | None = None) -> tuple[str, str]:
        return topic_factory(partitions=partitions), topic_factory(partitions=partitions, config=dest_config)
    return make


def test_an_exact_copy_verifies_through_the_source_end_and_resumes(
        kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(2)
    produce_source(producer_factory, src, 2, 40)
    made = copy(kafka, admin, consumer_factory, src, dst)
    with Verifier(made.config, src, dst) as v:
        assigned = {"source": [], "destination": []}
        for reader in (v.source, v.dest):
            reader.consumer = _CountAssign(reader.consumer, assigned[reader.side])
        results = v.verify(made.maps())
        # a range that starts where the last one ended reads on: one seek per partition and side
        assert [tp[0].partition for tp in assigned["source"]] == [0, 1]
        assert [tp[0].partition for tp in assigned["destination"]] == [0, 1]
        assert sorted(results) == [0, 1]
        for p, r in results.items():
            assert r.mismatch is None and r.complete, r.line
            assert (r.start, r.verified_through, r.end) == (0, 40, 40)
            assert (r.ranges, r.compared, r.duplicates) == (6, 40, 0)
            assert r.line == f"partition {p}: verified through 40 of 40, 40 records equal"
        # --follow: more records copied, verified from where the last call stopped, by the same consumers
        produce_source(producer_factory, src, 2, 10)
        copy(kafka, admin, consumer_factory, src, dst, config=made.config, start=made.source_end, made=made)
        again = v.verify(made.maps(), {p: r.verified_through for p, r in results.items()})
        for r in again.values():
            assert (r.start, r.verified_through, r.compared, r.mismatch) == (40, 50, 10, None)
        assert all(r.ranges == 0 for r in v.verify(made.maps(), {0: 50, 1: 50}).values())
    # verify_partition on its own, from a later start
    r = verify_partition(made.config, src, dst, 1, made.maps()[1], 23)
    assert (r.start, r.verified_through, r.compared, r.mismatch) == (23, 50, 27, None)


def _alter_value(p: int, o: int, k: Any, v: Any, h: Any, ts: int) -> tuple[Any, Any, Any, int]:
    return k, (v[:-1] if (p, o) == (1, 17) else v), h, ts


def _alter_headers(p: int, o: int, k: Any, v: Any, h: Any, ts: int) -> tuple[Any, Any, Any, int]:
    return k, v, (h[::-1] if (p, o) == (1, 17) else h), ts


def _alter_timestamp(p: int, o: int, k: Any, v: Any, h: Any, ts: int) -> tuple[Any, Any, Any, int]:
    return k, v, h, (ts + 1 if (p, o) == (1, 17) else ts)


@pytest.mark.parametrize(("alter", "field", "detail"), [
    (_alter_value, VALUE, "value differs (20 vs 19 bytes)"),
    (_alter_headers, HEADERS, "headers differ in order (the same 3 headers in another order)"),
    (_alter_timestamp, TIMESTAMP, f"timestamp differs ({T0 + 17} vs {T0 + 18})"),
], ids=["value", "headers-order", "timestamp"])
def test_an_altered_record_is_the_mismatch_named_exactly(
        kafka, admin, pair, producer_factory, consumer_factory, alter: Alter, field: str, detail: str) -> None:
    src, dst = pair(2)
    produce_source(producer_factory, src, 2, 30)
    made = copy(kafka, admin, consumer_factory, src, dst, alter=alter, replay={1: (0, 5)})
    results = verify(made.config, src, dst, made.maps())
    assert results[0].complete and results[0].verified_through == 30
    r = results[1]
    assert r.mismatch is not None
    d = made.copies[(1, 17)][0]
    assert (r.mismatch.partition, r.mismatch.source_offset, r.mismatch.dest_offset) == (1, 17, d)
    assert (r.mismatch.field, r.mismatch.detail) == (field, detail)
    assert r.verified_through == 17 and r.compared == 17 and r.ranges == 3
    assert r.mismatch.line == f"partition 1: source offset 17 / destination offset {d}: {detail}"
    assert "value-" not in r.line and "key-" not in r.line


def test_a_replayed_stretch_is_equal_and_its_duplicates_counted(
        kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(2)
    produce_source(producer_factory, src, 2, 40)
    made = copy(kafka, admin, consumer_factory, src, dst, replay={0: (10, 26)},
                unmapped={(1, o) for o in range(30, 35)})
    results = verify(made.config, src, dst, made.maps())
    r0, r1 = results[0], results[1]
    assert r0.complete and (r0.verified_through, r0.compared, r0.duplicates) == (40, 40, 16), r0.line
    assert r1.complete and (r1.verified_through, r1.compared, r1.duplicates) == (40, 40, 0), r1.line
    assert r1.unmapped_in_destination == 5
    assert "5 destination records not in the offset map, not compared" in r1.line


def test_aborted_transactions_in_the_source_are_not_expected_in_the_copy(
        kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(1)
    p = producer_factory(**{"transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    n = 0
    for batch, commit in ((6, True), (4, False), (9, True), (3, False), (5, True), (2, False)):
        p.begin_transaction()
        for _ in range(batch):
            p.produce(src, value=f"v{n}".encode(), key=f"k{n}".encode(), partition=0, timestamp=T0 + n)
            n += 1
        if commit:
            p.commit_transaction(30)
        else:  # delivered first: an abort racing the partition's AddPartitionsToTxn fails with INVALID_TXN_STATE
            p.flush(30)  # (librdkafka issue 4849; as tests.support.records.produce_transactions does)
            p.abort_transaction(30)
    made = copy(kafka, admin, consumer_factory, src, dst)
    pmap = made.maps()[0]
    assert len(pmap.runs) == 3  # the source jumps over aborted records and markers
    r = verify(made.config, src, dst, made.maps())[0]
    assert r.mismatch is None and r.compared == 20 and r.verified_through == pmap.source_end, r.line
    # up to the source's end (past the last commit marker and the aborted records after it)
    r = verify_partition(made.config, src, dst, 0, pmap, end=10_000)
    assert r.complete and r.end == pmap.source_end


def test_a_record_left_out_is_missing_in_destination(kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(2)
    produce_source(producer_factory, src, 2, 30)
    made = copy(kafka, admin, consumer_factory, src, dst, skip={(0, 22)})
    results = verify(made.config, src, dst, made.maps())
    r = results[0]
    assert r.mismatch is not None
    assert (r.mismatch.partition, r.mismatch.source_offset, r.mismatch.dest_offset, r.mismatch.field) == \
        (0, 22, None, MISSING)
    assert r.verified_through == 22 and r.compared == 22
    assert r.mismatch.line.startswith("partition 0: source offset 22: missing in destination")
    assert results[1].complete


def test_copies_deleted_from_the_destination_are_counted_not_missing(
        kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(1)
    produce_source(producer_factory, src, 1, 30)
    made = copy(kafka, admin, consumer_factory, src, dst)
    # retention on the destination: its first 12 records are gone
    for fut in admin.delete_records([TopicPartition(dst, 0, 12)]).values():
        fut.result()
    r = verify(made.config, src, dst, made.maps())[0]
    assert r.complete and (r.compared, r.cleaned_in_destination) == (18, 12), r.line


def test_a_partition_without_a_map_is_not_copied(kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(2)
    produce_source(producer_factory, src, 1, 10)  # partition 0 only
    made = copy(kafka, admin, consumer_factory, src, dst)
    results = verify(made.config, src, dst, {0: made.maps()[0]})
    assert results[0].complete
    assert results[1].note is not None and results[1].verified_through == 0 and results[1].ranges == 0
    assert results[1].line == "partition 1: not copied: the offset map has nothing for this partition"


def test_a_large_partition_is_verified_in_ranges(kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(1)
    n = 100_000
    p = producer_factory(**{"linger.ms": 20, "enable.idempotence": True})
    for i in range(n):
        while True:
            try:
                p.produce(src, value=b"%d" % i, key=b"%d" % (i % 1000), partition=0, timestamp=T0 + i)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    made = copy(kafka, admin, consumer_factory, src, dst)
    config = made.config.model_copy(update={"migration": made.config.migration.model_copy(
        update={"verify_range_records": 10_000})})
    t = time.monotonic()
    r = verify(config, src, dst, made.maps())[0]
    took = time.monotonic() - t
    assert r.complete and (r.ranges, r.compared) == (10, n), r.line
    assert took < 30, f"{n} records took {took:.1f} s"


def test_a_mapped_copy_past_the_destinations_end_is_missing(
        kafka, admin, pair, producer_factory, consumer_factory) -> None:
    src, dst = pair(1)
    produce_source(producer_factory, src, 1, 30)
    made = copy(kafka, admin, consumer_factory, src, dst)
    # a map claiming copies the destination does not hold (offsets past its end)
    pmap = PartitionMap([Run(0, 0, 20), Run(20, 1000, 10)])
    r = verify_partition(made.config, src, dst, 0, pmap)
    assert r.mismatch is not None
    assert (r.mismatch.source_offset, r.mismatch.dest_offset, r.mismatch.field) == (20, 1000, MISSING)
    assert r.verified_through == 20 and r.compared == 20


class _Silent:
    """A consumer that never delivers anything."""

    def assign(self, _tps: list) -> None:
        pass

    def poll(self, _timeout: float) -> None:
        time.sleep(0.01)

    def consume(self, *_a: Any, **_k: Any) -> list:
        return []


def test_a_read_that_stalls_raises_naming_topic_partition_and_offset() -> None:
    reader = RangeReader(_Silent(), "some-topic", "destination", timeout=0.3)
    with pytest.raises(KafkaUnavailableError) as err:
        list(reader.read(4, 120, 130))
    assert (err.value.topic, err.value.partition, err.value.offset) == ("some-topic", 4, 120)
    assert str(err.value).startswith("reading destination topic some-topic [4] stalled at offset 120")
