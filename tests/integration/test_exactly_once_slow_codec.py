"""exactly-once under a codec slower than the commit interval (issue 29, item 11): a transaction is sized by time as
well as bytes, so it commits smaller transactions instead of aborting and reading its records again."""

from __future__ import annotations

import random

import structlog
from confluent_kafka import Producer

from tests.support.configs import make_config
from tests.support.records import read_all
from tests.support.running import ServiceThread
from transcoder.service import lane as lane_module
from transcoder.service.runner import Service

RECORDS = 4_000  # 1 KiB each: 4 MB, many seconds of zstd-22 on this machine, in 2 s transactions at most


def test_zstd_22_commits_small_transactions_and_never_aborts(kafka, topic_factory, monkeypatch):
    source = topic_factory()
    words = [f"w{i:03d}x" for i in range(400)]
    rnd = random.Random(29)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for i in range(RECORDS):
        p.produce(source, key=str(i).encode(), value=" ".join(rnd.choices(words, k=170)).encode()[:1024],
                  headers=[("n", str(i).encode())])
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    # The broker aborts a transaction open for 4 s; the lane gives its batches 2 s to be acknowledged.
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd", "level": 22}]}],
                       guarantee="exactly-once", hot_path="batches", commit_interval_ms=300,
                       transaction_timeout_ms=4000)
    service = Service(conf)
    monkeypatch.setattr(lane_module, "log", structlog.get_logger("transcoder.lane"))
    with structlog.testing.capture_logs() as logs:
        t = ServiceThread(service, until_caught_up=True).start()
        t.join(120)
        if t.is_alive():  # aborting and reading the same records again, for good
            service.stop()
            t.join(60)
    aborted = [e for e in logs if e["event"] == "transaction_aborted"]
    lanes = {ln.spec.name: ln.status.records for ln in service.lanes}
    assert not t.errors, t.errors
    assert not aborted, (len(aborted), aborted[:2], lanes)
    assert lanes == {f"{source}.zstd-22": RECORDS}  # each record read once: nothing read again
    want = [(p, k, v, h, ts) for p, _, k, v, h, ts in read_all(kafka.bootstrap, source)]
    got = [(p, k, v, h, ts) for p, _, k, v, h, ts in read_all(kafka.bootstrap, f"{source}.zstd-22")]
    assert len(want) == RECORDS and got == want  # record by record: key, value, headers, timestamp, in order
    sized = [(e["drained_bytes"], e["drain_s"], e["bytes"]) for e in logs if e["event"] == "transaction_sized"]
    print("transactions resized (drained bytes, drain s, next bytes):", sized)  # pytest -s
