"""The Spark engine's executor side on the real broker, without Spark: a task's Arrow batches written through the
service's compiled path (record sets re-batched natively, sent by transcoder's batch producer), record by record."""

from __future__ import annotations

import json
from base64 import b64encode

import pyarrow as pa

from tests.support.configs import make_config
from transcoder.kafka.provisioning import prepare
from transcoder.kafka.writer.record_sets import RecordSetsSink
from transcoder.spark import sink


def _arrow(topic: str, partition: int, rows: list[tuple]) -> pa.RecordBatch:
    """An Arrow batch as the engine's SQL selects it (sink.COLUMNS): headers as JSON text, base64 values."""

    def headers(hs):
        if not hs:
            return None
        return json.dumps([{"key": k, "value": None if v is None else b64encode(v).decode()} for k, v in hs])

    return pa.RecordBatch.from_pydict({
        "topic": [topic] * len(rows), "partition": pa.array([partition] * len(rows), pa.int32()),
        "offset": pa.array([r[0] for r in rows], pa.int64()), "key": pa.array([r[1] for r in rows], pa.binary()),
        "value": pa.array([r[2] for r in rows], pa.binary()), "headers": [headers(r[3]) for r in rows],
        "ts": pa.array([r[4] for r in rows], pa.int64())})


def test_a_tasks_batches_take_the_compiled_path_record_by_record_with_source_offset_gaps(kafka, topic_factory,
                                                                                          read_topic):
    # records of 2020-2023: kept for good (the destinations copy the source's retention.ms), or time retention
    # deletes their segments under the test (DumpLogSegments found one gone, fresh-clone CI)
    source = topic_factory(partitions=2, config={"retention.ms": "-1"})
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd"}, {"codec": "gzip", "level": 9}]}])
    assert conf.batched
    lanes = prepare(conf, create=True).plan.lanes  # isolated: one per destination
    assert len(lanes) == 2
    # Offsets with gaps (a compacted or transactional source): 0-2, 5-6, 9; partition 1 from 100
    p0 = [(0, b"k0", b"v0", [("h", b"1"), ("h", b"1"), ("n", None)], 1_600_000_000_000),
          (1, None, b"no key", None, 1_600_000_000_001), (2, b"tomb", None, None, 1_500_000_000_000),
          (5, b"", b"", [], 1_600_000_000_005), (6, b"k6", b"x" * 100_000, None, 1_600_000_000_006),
          (9, b"k9", b"v9", [("only", b"")], 1_600_000_000_009)]
    p1 = [(100 + i, f"k{i}".encode(), f"value {i}".encode() * 20, None, 1_700_000_000_000 + i) for i in range(3000)]
    batches = [_arrow(source, 0, p0[:3]), _arrow(source, 0, p0[3:]), _arrow(source, 1, p1[:1000]),
               _arrow(source, 1, p1[1000:])]
    for lane in lanes:
        tally = sink.write_task(conf, "fingerprint", lane, 0.0, iter(batches))
        assert tally.fatal is None, tally.fatal
        assert tally.records == 3006
        assert tally.source_bytes == sum(len(r[1] or b"") + len(r[2] or b"") + sum(len(k) + len(v or b"")
                                                                                  for k, v in r[3] or [])
                                         for r in p0 + p1)  # key + value + header names and values
        assert tally.ranges == {(source, 0): (0, 9, 1_600_000_000_009), (source, 1): (100, 3099, 1_700_000_002_999)}
        writer = sink._WRITERS[("fingerprint", lane.name)][0]
        assert isinstance(writer, RecordSetsSink) and writer.batch_routes  # transcoder's batch producers, not
        # librdkafka's record path
        assert sum(writer.acked_total.values()) == 3006
    for d in conf.routes[0].destinations:
        dest = d.topic_for(source)
        got = {(m.partition(), i): (m.key(), m.value(), m.headers() or [], m.timestamp()[1])
               for i, m in enumerate(m for m in read_topic(dest) if m.partition() == 0)}
        got.update({(m.partition(), i): (m.key(), m.value(), m.headers() or [], m.timestamp()[1])
                    for i, m in enumerate(m for m in read_topic(dest) if m.partition() == 1)})
        want = {(0, i): (r[1], r[2], r[3] or [], r[4]) for i, r in enumerate(p0)}
        want.update({(1, i): (r[1], r[2], r[3] or [], r[4]) for i, r in enumerate(p1)})
        assert got == want, dest
        assert {b["compresscodec"] for p in (0, 1) for b in kafka.stored_batches(dest, p)} == {d.codec}
    for writer, _ in sink._WRITERS.values():
        writer.close(10)
    sink._WRITERS.clear()
