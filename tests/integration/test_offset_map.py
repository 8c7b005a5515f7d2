"""The offset map a copy records (a `migration:` section): every delivered record maps to its source record."""

from __future__ import annotations

import time

from tests.support.configs import make_config
from tests.support.records import produce_transactions, read_all
from transcoder.kafka import offset_map_topic as offset_map


def test_every_destination_record_maps_to_its_source_record(engine, kafka, topic_factory):
    source = topic_factory(partitions=3)
    # committed and aborted transactions: the source's offsets have gaps (markers, aborted records)
    produce_transactions(kafka.bootstrap, source, transactions=8, per=100, partitions=3, aborted=lambda t: t % 4 == 2,
                         headers=True)
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}], migration={})
    engine(conf).run(until_caught_up=True)
    dest = f"{source}.lz4"
    maps, health = offset_map.read(conf, dest)
    src = {(r[0], r[1]): r for r in read_all(kafka.bootstrap, source)}
    copies = read_all(kafka.bootstrap, dest)
    assert len(copies) == len(src) == 600
    seen = set()
    for part, offset, *fields in copies:
        s = maps[part].source_of(offset)
        assert s is not None, f"destination {part}/{offset} is not mapped"
        assert fields == list(src[(part, s)][2:])
        seen.add((part, s))
    assert seen == set(src)  # every source record has its copy mapped
    for part, pm in maps.items():  # runs break only at the source's gaps (one transaction's records per run at most)
        assert len(pm.runs) <= 8, (part, pm.runs)
    assert health is not None and health.errors_total == 0


def test_a_running_service_verifies_its_copy_continuously(kafka, topic_factory):
    import threading

    from confluent_kafka import Producer as P

    from transcoder.kafka.offset_map_topic import OffsetMapRecorder
    from transcoder.service.runner import Service

    source = topic_factory(partitions=2)
    p = P({"bootstrap.servers": kafka.bootstrap})
    for i in range(400):
        p.produce(source, f"v{i}".encode(), f"k{i}".encode(), partition=i % 2)
    p.flush(10)
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd"}]}],
                       migration={"verify_interval_s": 0.3, "verify_range_records": 50})
    dest = f"{source}.zstd"
    service = Service(conf)
    t = threading.Thread(target=service.run, daemon=True)
    t.start()

    def sample(name: str, **labels: str) -> float | None:
        return service.metrics.registry.get_sample_value(name, labels)

    def wait(pred, what: str) -> None:
        deadline = time.monotonic() + 60
        while not pred():
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    try:
        wait(lambda: all(sample("transcoder_migration_verified_offset", destination=dest, partition=str(q)) == 200
                         for q in (0, 1)), "the copy was not verified to its end")
        assert sample("transcoder_migration_mismatches_total", destination=dest) == 0
        # a faulty copier writes a wrong copy of the next record of partition 1 (offset 200) and maps it; then the
        # record comes, and the lane copies it too: of its two copies, one differs
        landed: list[int] = []
        p.produce(dest, b"WRONG", b"k-next", partition=1, on_delivery=lambda e, m: landed.append(m.offset()))
        p.flush(10)
        recorder = OffsetMapRecorder(conf, "test-faulty-copier")
        recorder.add(source, dest, 1, 200, landed[0])
        assert recorder.flush(10)
        p.produce(source, b"right", b"k-next", partition=1)
        p.flush(10)
        wait(lambda: sample("transcoder_migration_mismatches_total", destination=dest) == 1, "no mismatch counted")
        time.sleep(1.0)  # later passes find the same mismatch again: it is counted once
        assert sample("transcoder_migration_mismatches_total", destination=dest) == 1
    finally:
        service.stop()
        t.join(60)
