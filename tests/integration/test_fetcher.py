"""The fetcher (raw Fetches decoded by the compiled part) on the real broker: every committed record of every
partition, record by record as a read_committed consumer reads them; positions reset as auto.offset.reset says
when the records are gone; paused partitions not fetched."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition

from tests.support.records import produce_transactions, read_all
from transcoder.kafka.fetcher import Fetcher, SourceLoss


def drain(f: Fetcher, rounds: int = 200) -> dict[tuple[str, int], list[tuple]]:
    """Fetch until a round brings nothing and every partition is at its end; (offset, ts, key, value, headers)."""
    out: dict[tuple[str, int], list[tuple]] = {tp: [] for tp in f.positions}
    for _ in range(rounds):
        got = f.fetch()
        for tp, fetched in got.items():
            out[tp] += [fetched.records.record(i) for i in range(len(fetched.records))]
        if got and all(f.positions[tp] >= fetched.end for tp, fetched in got.items()) and \
                all(len(x.records) == 0 for x in got.values()):
            return out
    raise AssertionError(f"not at the end after {rounds} rounds: {f.positions}")


def test_every_committed_record_of_every_partition(kafka, topic_factory):
    topic = topic_factory(partitions=3)
    produce_transactions(kafka.bootstrap, topic, transactions=8, per=900, partitions=3,
                         aborted=lambda t: t % 3 == 2, headers=True)
    want = read_all(kafka.bootstrap, topic)
    f = Fetcher({"bootstrap.servers": kafka.bootstrap, "max.partition.fetch.bytes": 8192}, "t-fetch", max_wait_ms=100)
    try:
        f.assign({(topic, p): None for p in range(3)})
        got = drain(f)
    finally:
        f.close()
    for p in range(3):
        assert [(o, ts, k, v, tuple(h)) for o, ts, k, v, h in got[(topic, p)]] == \
               [(o, ts, k, v, h) for q, o, k, v, h, ts in want if q == p]
    assert sum(map(len, got.values())) == 6 * 900


@pytest.mark.parametrize("past_loss", [True, False])
def test_records_gone_before_they_were_fetched_are_a_loss_for_the_caller(kafka, topic_factory, admin,
                                                                         producer_factory, past_loss):
    topic = topic_factory(partitions=1)
    p = producer_factory()
    for i in range(100):
        p.produce(topic, value=b"v%d" % i, partition=0)
    p.flush(30)
    admin.delete_records([TopicPartition(topic, 0, 60)])[TopicPartition(topic, 0, 60)].result(30)
    f = Fetcher({"bootstrap.servers": kafka.bootstrap}, "t-fetch", max_wait_ms=100, past_loss=past_loss)
    try:
        f.assign({(topic, 0): 10})
        got: dict = drain(f) if past_loss else {}
        for _ in range(0 if past_loss else 5):
            got.update(f.fetch())
        losses = f.take_losses()
        position = f.positions[(topic, 0)]
    finally:
        f.close()
    assert losses == [SourceLoss(topic, 0, 10, 60, 100)] and losses[0].records == 50
    if past_loss:  # on_source_loss: continue: read on from the first record after the gap
        assert [r[3] for r in got[(topic, 0)]] == [b"v%d" % i for i in range(60, 100)]
    else:  # stop: the position stays at the gap, the partition is not fetched again
        assert not got.get((topic, 0)) and position == 10


def test_latest_starts_at_the_end_and_paused_partitions_wait(kafka, topic_factory, producer_factory):
    topic = topic_factory(partitions=2)
    p = producer_factory()
    for i in range(10):
        p.produce(topic, value=b"old%d" % i, partition=i % 2)
    p.flush(30)
    f = Fetcher({"bootstrap.servers": kafka.bootstrap}, "t-fetch", max_wait_ms=100, reset="latest")
    try:
        f.assign({(topic, 0): None, (topic, 1): None})
        assert f.positions == {(topic, 0): 5, (topic, 1): 5}
        f.paused.add((topic, 1))
        for i in range(10):
            p.produce(topic, value=b"new%d" % i, partition=i % 2)
        p.flush(30)
        deadline = time.monotonic() + 30
        seen: list[bytes] = []
        while len(seen) < 5 and time.monotonic() < deadline:
            got = f.fetch()
            assert (topic, 1) not in got
            for fetched in got.values():
                seen += [fetched.records.record(i)[3] for i in range(len(fetched.records))]
        assert seen == [b"new%d" % i for i in range(0, 10, 2)]
        f.paused.clear()
        later = drain(f)
        assert [r[3] for r in later[(topic, 1)]] == [b"new%d" % i for i in range(1, 10, 2)]
    finally:
        f.close()
    # asked explicitly, whatever the reset policy ("start" at a time with no record since: the end)
    f = Fetcher({"bootstrap.servers": kafka.bootstrap}, "t-fetch", max_wait_ms=100, reset="earliest")
    try:
        f.assign({(topic, 0): "latest", (topic, 1): None})
        assert f.positions == {(topic, 0): 10, (topic, 1): 0}
    finally:
        f.close()


def test_a_small_budget_is_shared_by_every_partition_in_turn(kafka, topic_factory, producer_factory):
    """The broker fills a Fetch's max_bytes in the request's partition order (KIP-74): a budget smaller than one
    partition's backlog went to partition 0 every round, and partitions 1 and 2 waited until it was copied whole
    (a throttled exactly-once lane, whose room is free again only after each commit). Partitions that brought
    records go to the end of the next request's order, as the Java consumer moves them."""
    topic = topic_factory(partitions=3)
    p = producer_factory(**{"linger.ms": 0, "batch.num.messages": 1})
    for i in range(300):
        p.produce(topic, value=b"%04d" % i + b"x" * 1000, partition=i % 3)
    p.flush(30)
    f = Fetcher({"bootstrap.servers": kafka.bootstrap}, "t-fetch", max_wait_ms=100)
    try:
        f.assign({(topic, q): 0 for q in range(3)})
        rounds = []
        for _ in range(6):
            got = f.fetch(budget=1500)  # about one stored batch: the first partition's alone fits
            rounds.append(sorted(tp[1] for tp, x in got.items() if len(x.records)))
    finally:
        f.close()
    assert rounds == [[0], [1], [2], [0], [1], [2]], rounds
    assert f.positions == {(topic, q): 2 for q in range(3)}, f.positions


def test_the_next_round_is_read_ahead_and_a_seek_drops_what_was_read_ahead(kafka, topic_factory, producer_factory):
    """Each round sends the next round's Fetch as soon as its own answer is decoded; the next round takes that
    answer when it asks for the same partitions from the same offsets, else sends its own."""
    topic = topic_factory(partitions=1)
    p = producer_factory(**{"linger.ms": 0, "batch.num.messages": 1})
    values = [b"%04d" % i + b"x" * 1000 for i in range(200)]
    for v in values:
        p.produce(topic, value=v, partition=0)
    p.flush(30)
    tp = (topic, 0)
    f = Fetcher({"bootstrap.servers": kafka.bootstrap, "max.partition.fetch.bytes": 8192}, "t-fetch", max_wait_ms=100)
    sent: list[dict] = []
    start = f._info.fetch_start

    def counted(by_leader, **kw):
        sent.append({t: o for offsets in by_leader.values() for t, o in offsets.items()})
        return start(by_leader, **kw)

    f._info.fetch_start = counted  # type: ignore[method-assign]
    try:
        f.assign({tp: 0})
        got: list[tuple] = []
        starts = []
        for _ in range(5):
            fetched = f.fetch()[tp]
            assert len(fetched.records)
            starts.append(len(got))
            got += [fetched.records.record(i) for i in range(len(fetched.records))]
        # one Fetch per round, plus the one read ahead for the sixth: each asked from where the last ended
        assert [s[tp] for s in sent] == starts + [len(got)], (sent, starts)
        assert [r[0] for r in got] == list(range(len(got)))
        assert [r[3] for r in got] == values[:len(got)]
        assert sent[-1] == {tp: len(got)}
        f.assign({tp: 3})  # a seek back: the Fetch read ahead (from len(got)) is dropped unread
        again = f.fetch()[tp]
        assert sent[-2] == {tp: 3}
        assert [again.records.record(i)[3] for i in range(len(again.records))] == \
               values[3:3 + len(again.records)]
        rest = drain(f)[tp]
        assert [r[3] for r in rest] == values[3 + len(again.records):]
    finally:
        f.close()
    f = Fetcher({"bootstrap.servers": kafka.bootstrap, "max.partition.fetch.bytes": 8192}, "t-fetch", max_wait_ms=100,
                read_ahead=False)
    try:
        f.assign({tp: 0})
        assert [r[3] for r in drain(f)[tp]] == values
        assert f._ahead is None
    finally:
        f.close()
