"""exactly-once on Spark, its executor side on the real broker without Spark: a task's Arrow batches written in
the task's transactions (spark.exactly_once), replayed as Spark replays a micro-batch whose checkpoint commit a
killed driver never wrote, and raced by a task it fences. Every check reads read_committed, record by record."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.spark.test_sink import _arrow
from tests.support.configs import make_config
from tests.support.records import read_all
from transcoder.errors import TranscoderError
from transcoder.kafka.provisioning import prepare
from transcoder.kafka.writer import build_sink
from transcoder.spark import exactly_once, sink

TS = 1_600_000_000_000


def _rows(first: int, last: int) -> list[tuple]:
    return [(o, f"k{o}".encode(), f"value {o} ".encode() * 8, [("n", str(o).encode())] if o % 3 else None, TS + o)
            for o in range(first, last)]


def _committed(kafka, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)]
    finally:
        c.close()


def _copied(kafka, dest: str) -> list[tuple]:
    return [(p, key, value, headers, ts) for p, _, key, value, headers, ts in read_all(kafka.bootstrap, dest)]


def _want(partition: int, rows: list[tuple]) -> list[tuple]:
    return [(partition, k, v, tuple(h or ()), ts) for _, k, v, h, ts in rows]


@pytest.fixture
def eos(kafka, topic_factory, request):
    """An exactly-once config (one lane, zstd) over a fresh 2-partition source; the workers' clients closed after."""
    source = topic_factory(partitions=2, config={"retention.ms": "-1"})  # records of 2020 (TS): kept, not retained
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd"}]}], guarantee="exactly-once",
                       **getattr(request, "param", {}))
    [lane] = prepare(conf, create=True).plan.lanes
    yield conf, lane, source, lane.targets[0].topic_for(source)
    for writer, _ in sink._WRITERS.values():
        writer.close(10)
    sink._WRITERS.clear()
    exactly_once.close_groups()


@pytest.mark.parametrize("eos", [{}, {"hot_path": "records"}], indirect=True, ids=["batches", "records"])
def test_a_replayed_micro_batch_writes_nothing_its_tasks_committed(kafka, eos):
    conf, lane, source, dest = eos
    p0, p1 = _rows(0, 1000), _rows(0, 500)
    tasks = [[_arrow(source, 0, p0[:400]), _arrow(source, 0, p0[400:])], [_arrow(source, 1, p1)]]
    for replay in (False, True):  # the second time: the micro-batch again, as after a driver killed before the
        for batches, n in zip(tasks, (1000, 500), strict=True):  # checkpoint's commit
            tally = sink.write_task(conf, "fp", lane, 0.0, iter(batches))
            assert tally.fatal is None, tally.fatal
            assert tally.records == (0 if replay else n)
    assert _copied(kafka, dest) == _want(0, p0) + _want(1, p1)
    assert _committed(kafka, lane.group_id, source, 2) == [1000, 500]  # the group's offsets: lag tools see them


@pytest.mark.parametrize("eos", [{"commit_interval_ms": 20_000}], indirect=True, ids=["batches"])
def test_a_task_goes_on_from_the_groups_offset_and_fences_the_attempt_before_it(kafka, eos):
    conf, lane, source, dest = eos
    rows = _rows(0, 1000)
    # A first attempt committed records 0-299, then its task failed.
    assert sink.write_task(conf, "fp", lane, 0.0, iter([_arrow(source, 0, rows[:300])])).fatal is None
    # A second attempt (a zombie: another worker's, still running) wrote 300-599 into its open transaction.
    zombie_writer = build_sink(conf, lane.name, lane.targets, sink.TallyMetrics(), batched=conf.batched)
    zombie = exactly_once.TaskTransactions(conf, lane, zombie_writer, exactly_once.group_client(conf, "fp", lane))
    zombie.begin((source, 0))
    assert zombie.committed == 300
    cols = sink.arrow_columns(_arrow(source, 0, rows))
    assert zombie_writer.write_columns(cols, 300)[0] == 700
    zombie.written(1000)  # not committed: its commit is not due (commit_interval_ms)
    zombie_writer.tick(0, flush=True)
    zombie_writer.drain(30)  # delivered to the broker, in a transaction not committed
    # The third attempt takes the partition over: the zombie's transaction is aborted, the copy goes on from 300.
    tally = sink.write_task(conf, "fp", lane, 0.0, iter([_arrow(source, 0, rows[:600]), _arrow(source, 0, rows[600:])]))
    assert tally.fatal is None, tally.fatal
    assert tally.records == 700
    with pytest.raises(TranscoderError):
        zombie.commit()  # fenced: it commits nothing
    zombie_writer.close(0)
    assert _copied(kafka, dest) == _want(0, rows)
    assert _committed(kafka, lane.group_id, source, 2)[0] == 1000
