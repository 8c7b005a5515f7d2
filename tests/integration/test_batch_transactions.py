"""transcoder's transactional batch producer on the real broker (exactly-once on record sets): batches sealed
with the transactional bit, partitions added before their first batch, offsets committed in the transaction,
commits and aborts read back record by record, a takeover of the transactional id fencing the old producer."""

from __future__ import annotations

import time
import uuid

import pytest
import transcoder_native as native
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.records import read_all
from transcoder.kafka.producer import BatchProducer, Transactions
from transcoder.kafka.protocol import RawClient


def _sections(bootstrap: str, topic: str, partition: int, start: int, stop: int) -> list:
    """Records `start..stop` of a partition, fetched raw and re-batched into small sections (several batches)."""
    info = RawClient({"bootstrap.servers": bootstrap})
    try:
        part = info.fetch_partition(topic, partition, start, leader=1, max_bytes=1 << 24)
    finally:
        info.close()
    stored = native.decode_stored(part.records, start, [])
    rb = native.Rebatcher(4096, 100)
    rb.add(stored, 0, 0, stop - start)
    return rb.take(flush=True)


def _one_partition_copy(kafka, topic_factory, records: int) -> tuple[str, str]:
    """A one-partition source holding `records` records (values v-0, v-1, ...) and an empty destination."""
    source = topic_factory(partitions=1)
    dest = topic_factory(partitions=1, config={"compression.type": "producer"})
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(records):
        p.produce(source, value=f"v-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    return source, dest


def _producer(bootstrap: str, tid: str, group: str, reports: list) -> BatchProducer:
    return BatchProducer({"bootstrap.servers": bootstrap}, codec="zstd", level=19, client_id=f"c-{tid}",
                         linger_ms=5, max_bytes=1 << 20, max_records=10_000, on_delivery=lambda e, m: None,
                         on_batch=lambda err, t, p, base, s: reports.append((err, t, p, base, len(s))),
                         transactions=Transactions(tid, group, 30_000))


def _read(bootstrap: str, topic: str, isolation: str) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}", "auto.offset.reset":
                  "earliest", "isolation.level": isolation, "enable.partition.eof": True})
    out, eof = [], set()
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(eof) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
                continue
            out.append((m.partition(), m.key(), m.value()))
    finally:
        c.close()
    return sorted(out, key=lambda r: (r[0], int(r[2].split(b"-")[1])))


def test_commits_and_aborts_read_back_with_offsets_in_the_transaction(kafka, topic_factory):
    source = topic_factory(partitions=2)
    dest = topic_factory(partitions=2, config={"compression.type": "producer"})
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for i in range(3000):
        p.produce(source, value=f"v-{i}".encode(), key=f"k{i % 13}".encode(), partition=i % 2,
                  headers=[("n", str(i).encode())] if i % 4 == 0 else None)
    assert p.flush(30) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    reports: list = []
    bp = _producer(kafka.bootstrap, f"t-{uuid.uuid4().hex[:6]}", group, reports)
    bp.init_transactions(30)
    try:
        # transaction 1 (committed): offsets 0-499 of both partitions, with the group's offsets at 500
        bp.begin_transaction()
        for part in (0, 1):
            bp.produce_sections(dest, part, _sections(kafka.bootstrap, source, part, 0, 500))
        bp.send_offsets_to_transaction([TopicPartition(source, 0, 500), TopicPartition(source, 1, 500)], None, 30)
        bp.commit_transaction(30)
        assert bp.poll(0) == 0 and all(r[0] is None for r in reports) and sum(r[4] for r in reports) == 1000
        # transaction 2 (aborted): 500-999; its offsets too
        bp.begin_transaction()
        for part in (0, 1):
            bp.produce_sections(dest, part, _sections(kafka.bootstrap, source, part, 500, 1000))
        assert bp.flush(30) == 0
        bp.send_offsets_to_transaction([TopicPartition(source, 0, 1000), TopicPartition(source, 1, 1000)], None, 30)
        bp.abort_transaction(30)
        # transaction 3 (committed): 500-1499, as a lane reads them again after an abort
        bp.begin_transaction()
        for part in (0, 1):
            bp.produce_sections(dest, part, _sections(kafka.bootstrap, source, part, 500, 1500))
        bp.send_offsets_to_transaction([TopicPartition(source, 0, 1500), TopicPartition(source, 1, 1400)], None, 30)
        bp.commit_transaction(30)
    finally:
        bp.close(10)

    src = {(p_, o): (k, v, h) for p_, o, k, v, h, _ in read_all(kafka.bootstrap, source)}
    want = [(p_, *src[(p_, o)]) for p_ in (0, 1) for o in range(1500)]
    got = [(p_, k, v, h) for p_, _, k, v, h, _ in read_all(kafka.bootstrap, dest)]  # read_committed
    assert got == want  # every record of the committed transactions once, in order; nothing of the aborted one
    uncommitted = _read(kafka.bootstrap, dest, "read_uncommitted")
    assert len(uncommitted) == 2 * (500 + 500 + 1000)  # the aborted records are stored, marked aborted
    batches = [b for part in (0, 1) for b in kafka.stored_batches(dest, part)]
    data = [b for b in batches if b.get("isControl") != "true"]
    assert data and all(b["isTransactional"] == "true" and b["compresscodec"] == "zstd" for b in data)
    assert sum(b.get("isControl") == "true" for b in batches) == 2 * 3  # a marker per transaction and partition
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        committed = c.committed([TopicPartition(source, 0), TopicPartition(source, 1)], timeout=30)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [1500, 1400]


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(kafka, topic_factory):
    source, dest = _one_partition_copy(kafka, topic_factory, 400)
    tid, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    old_reports: list = []
    old, new = _producer(kafka.bootstrap, tid, group, old_reports), _producer(kafka.bootstrap, tid, group, [])
    old.init_transactions(30)
    try:
        old.begin_transaction()
        old.produce_sections(dest, 0, _sections(kafka.bootstrap, source, 0, 0, 200))
        assert old.flush(30) == 0
        new.init_transactions(30)  # fences the old one: its open transaction is aborted by the coordinator
        new.begin_transaction()
        new.produce_sections(dest, 0, _sections(kafka.bootstrap, source, 0, 0, 400))
        new.send_offsets_to_transaction([TopicPartition(source, 0, 400)], None, 30)
        new.commit_transaction(30)
        with pytest.raises(KafkaException) as info:  # the old one cannot commit...
            old.send_offsets_to_transaction([TopicPartition(source, 0, 200)], None, 30)
            old.commit_transaction(30)
        assert info.value.args[0].txn_requires_abort() or info.value.args[0].fatal()
        with pytest.raises(KafkaException) as info:  # ...and its abort finds it fenced for good
            old.abort_transaction(30)
        assert info.value.args[0].fatal() and info.value.args[0].name() in ("PRODUCER_FENCED",
                                                                            "INVALID_PRODUCER_EPOCH")
    finally:
        old.close(5)
        new.close(5)
    assert [v for _, _, _, v, _, _ in read_all(kafka.bootstrap, dest)] == [f"v-{i}".encode() for i in range(400)]


def _member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A consumer that joined `group` on `topic` and holds an assignment (its generation is the group's now)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment(), f"{group}: no assignment within 60 s"
    return c


def test_a_zombie_of_an_older_generation_cannot_commit_its_transaction(kafka, topic_factory):
    """KIP-447: the paused-instance case without the pause. A member of generation 1 opens a transaction; the group
    moves on (its partitions go to another member, generation 2); the old member's transaction offers its offsets
    with generation 1 and must abort: nothing of it is ever read_committed, and the group keeps the new owner's
    offsets. With its offsets sent without the generation (generation -1, as before), the broker took them and the
    records were copied twice (2 of 27 tries on a 3-broker cluster with a SIGSTOPped instance)."""
    source, dest = _one_partition_copy(kafka, topic_factory, 300)
    group = f"g-{uuid.uuid4().hex[:6]}"
    old_member = _member(kafka.bootstrap, group, source)
    zombie_metadata = old_member.consumer_group_metadata()  # generation 1, as the zombie last knew it
    zombie = _producer(kafka.bootstrap, f"t-old-{uuid.uuid4().hex[:6]}", group, [])  # its own id: never fenced by it
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce_sections(dest, 0, _sections(kafka.bootstrap, source, 0, 0, 200))
    assert zombie.flush(30) == 0
    old_member.close()  # the group moves on: its partitions to the next member, a new generation
    new_member = _member(kafka.bootstrap, group, source)
    owner = _producer(kafka.bootstrap, f"t-new-{uuid.uuid4().hex[:6]}", group, [])
    try:
        owner.init_transactions(30)
        owner.begin_transaction()
        owner.produce_sections(dest, 0, _sections(kafka.bootstrap, source, 0, 0, 300))
        owner.send_offsets_to_transaction([TopicPartition(source, 0, 300)], new_member.consumer_group_metadata(), 30)
        owner.commit_transaction(30)
        with pytest.raises(KafkaException) as info:
            zombie.send_offsets_to_transaction([TopicPartition(source, 0, 200)], zombie_metadata, 30)
        err = info.value.args[0]
        assert err.txn_requires_abort() and err.name() in ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"), err
        assert f"group {group} generation" in err.str() and "another member owns these partitions" in err.str()
        zombie.abort_transaction(30)
    finally:
        zombie.close(10)
        owner.close(10)
        committed = new_member.committed([TopicPartition(source, 0)], timeout=30)
        new_member.close()
    got = [(p_, o, v) for p_, o, _, v, _, _ in read_all(kafka.bootstrap, dest)]  # read_committed
    assert [v for _, _, v in got] == [f"v-{i}".encode() for i in range(300)]  # each record once: the owner's
    assert [tp.offset for tp in committed] == [300]
