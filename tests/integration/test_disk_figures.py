"""The on-disk figures of a compacted destination (issue 42, item 6): its log holds fewer records than were copied
(compaction keeps each key's latest), and how many it holds Kafka does not say without reading it whole. /status says
the destination is compacted, and `report` gives bytes on disk per record copied, said as such, never as the average
record (it showed "1.0 B" for a compacted copy: bytes left after compaction over records ever copied)."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from tests.support.running import ServiceThread
from transcoder import config as cfg
from transcoder.report.tables import from_status, status_markdown
from transcoder.service.runner import Service

RECORDS = 500


def test_a_compacted_destination_is_labelled_as_such(kafka, topic_factory):
    source = topic_factory()
    compacted = topic_factory(name=f"{source}.zstd", config={"cleanup.policy": "compact"})
    plain = f"{source}.lz4"  # created by transcoder: cleanup.policy=delete, as its source
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        p.produce(source, key=f"k{i % 10}".encode(), value=b"v" * 100)
    assert p.flush(30) == 0
    conf = cfg.parse({
        "cluster": {"bootstrap_servers": kafka.bootstrap}, "group_id": f"disk-{time.monotonic_ns()}",
        "routes": [{"source": source, "destinations": [{"codec": "zstd"}, {"codec": "lz4"}]}],
        "commit_interval_ms": 200, "metrics": {"port": 0},
    }, environ={})
    service = Service(conf)
    runner = ServiceThread(service, until_caught_up=True).start()
    runner.join(120)
    assert not runner.is_alive() and not runner.errors, runner.errors
    doc = service.status()
    dests = {d["topic"]: d for ln in doc["lanes"] for d in ln["destinations"]}
    assert dests[compacted]["compacted"] is True and dests[plain]["compacted"] is False, dests
    assert dests[compacted]["topic_records"] == dests[plain]["topic_records"] == RECORDS
    rows = {r.destination: r for r in from_status(doc)}
    assert rows[compacted].avg_record_disk_bytes is None and rows[compacted].disk_bytes_per_record_copied
    assert rows[plain].avg_record_disk_bytes and rows[plain].disk_bytes_per_record_copied is None
    md = status_markdown(list(rows.values()))
    assert " B per record copied (compacted: the log holds fewer) |" in md, md
