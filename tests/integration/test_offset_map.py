"""The offset map a copy records (a `migration:` section): every delivered record maps to its source record."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer

from tests.support.configs import make_config
from tests.support.records import read_all
from transcoder.kafka import offset_map


def test_every_destination_record_maps_to_its_source_record(engine, kafka, topic_factory):
    source = topic_factory(partitions=3)
    # committed and aborted transactions: the source's offsets have gaps (markers, aborted records)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    ts = int(time.time() * 1000)
    for t in range(8):
        p.begin_transaction()
        for i in range(100):
            n = t * 100 + i
            p.produce(source, f"v{n}".encode(), f"k{n}".encode(), partition=n % 3, timestamp=ts + n,
                      headers=[("n", str(n).encode())])
        (p.abort_transaction if t % 4 == 2 else p.commit_transaction)(30)
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
