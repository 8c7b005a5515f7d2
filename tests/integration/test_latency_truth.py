"""The latency /status reports is the latency an independent observer of the copy sees (issue 29, item 8).

A live producer writes two sources at once: a slow one whose destination batches close by linger (1 s), and a fast
one whose batches close by size (750 records). A consumer of the destinations that is no part of transcoder
computes, per record, when it received the copy minus the source record's timestamp (the copy keeps it): what the
metric claims, acknowledgement minus source timestamp, give or take the consumer's own fetch. /status's p50 and p99
of each destination must be within 25% of the observed ones; a batch sampled by its newest record alone is not.

On record sets, the default (a batch sampled across its records, weighted). Record by record (every 16th
acknowledgement, timed when its report is served) agreed in 3 runs of 4 by hand; its p99 rests on 1 sample in 16
and is left out here.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.support.http import get
from tests.support.running import ServiceThread
from transcoder import config as cfg
from transcoder.service.runner import Service

SECONDS = 6.0
SLOW_RATE = 100  # records/s: batches close by linger (1 s: ~100 records each)
FAST_RATE = 1500  # records/s: batches close by size (750 records: 0.5 s to fill), 12 of them
FAST_BATCH = 750


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _produce(bootstrap: str, rates: dict[str, int], counts: dict[str, int]) -> None:
    """Each topic at its rate for SECONDS: a whole number of the fast topic's batches (none closed by linger)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    start = time.monotonic()
    while any(counts[t] < rate * SECONDS for t, rate in rates.items()):
        now = time.monotonic()
        for topic, rate in rates.items():
            due = min(int((now - start) * rate), int(rate * SECONDS))
            while counts[topic] < due:
                p.produce(topic, value=f"{topic}-{counts[topic]:08d}".encode() * 4)
                counts[topic] += 1
        p.poll(0)
        time.sleep(0.01)
    assert p.flush(30) == 0


def _observe(bootstrap: str, topics: list[str], seen: dict[str, list[float]], ready: threading.Event,
             stop: threading.Event) -> None:
    """Per record of `topics`: when this consumer got it minus its timestamp. Assigned (no group to join), and
    fetching for a second before `ready`: no record waits for the observer itself."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"observer-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
    started = time.monotonic()
    try:
        while not stop.is_set():
            if time.monotonic() - started > 1:
                ready.set()
            m = c.poll(0.05)  # one at a time: a batch call waits for all it asks or its timeout
            if m is not None and m.error() is None:
                seen[m.topic()].append(time.time() - m.timestamp()[1] / 1000)
    finally:
        c.close()


def test_reported_latency_is_what_a_consumer_of_the_copy_observes(kafka, topic_factory):
    slow, fast = topic_factory(), topic_factory()
    conf = cfg.parse({
        "cluster": {"bootstrap_servers": kafka.bootstrap}, "group_id": f"lat-{time.monotonic_ns()}",
        "routes": [{"source": slow, "destinations": [{"codec": "zstd", "batch": {"linger_ms": 1000}}]},
                   {"source": fast, "destinations": [{"codec": "zstd",
                                                      "batch": {"linger_ms": 3000, "max_records": FAST_BATCH}}]}],
        "commit_interval_ms": 500, "metrics": {"port": 0},
    }, environ={})
    service = Service(conf)
    port = service.serve(0)
    url = f"http://127.0.0.1:{port}"
    runner = ServiceThread(service).start()
    errors = runner.errors
    dests = {slow: f"{slow}.zstd", fast: f"{fast}.zstd"}
    seen: dict[str, list[float]] = {d: [] for d in dests.values()}
    counts = dict.fromkeys(dests, 0)
    stop, observing = threading.Event(), threading.Event()
    observer = threading.Thread(target=_observe, args=(kafka.bootstrap, list(dests.values()), seen, observing, stop),
                                daemon=True)
    try:
        deadline = time.monotonic() + 90
        while get(url + "/readyz")[0] != 200:
            assert not errors and time.monotonic() < deadline, errors or "not ready"
            time.sleep(0.2)
        observer.start()
        assert observing.wait(30)
        _produce(kafka.bootstrap, {slow: SLOW_RATE, fast: FAST_RATE}, counts)
        deadline = time.monotonic() + 60
        while True:  # every record observed, and acknowledged in /status (its tallies are flushed at commits)
            doc = service.status()
            out = {d["topic"]: d["records_out"] for ln in doc["lanes"] for d in ln["destinations"]}
            if all(len(seen[dests[s]]) >= n and out.get(dests[s]) == n for s, n in counts.items()):
                break
            assert not errors and time.monotonic() < deadline, errors or (out, {d: len(v) for d, v in seen.items()})
            time.sleep(0.2)
    finally:
        stop.set()
        service.stop()
        runner.join(60)
        observer.join(10)
    assert not errors, errors
    figures: dict[str, Any] = {d["topic"]: d for ln in doc["lanes"] for d in ln["destinations"]}
    report = {}
    for source, dest in dests.items():
        d = figures[dest]
        assert d["records_out"] == counts[source] == len(seen[dest]), (dest, d["records_out"], counts)
        assert d["backlog_latency_samples"] == 0, d  # every record was produced after the lane started
        observed = {q: _quantile(seen[dest], q) for q in (0.5, 0.99)}
        reported = {0.5: d["latency_p50_seconds"], 0.99: d["latency_p99_seconds"]}
        report[dest] = {"observed": observed, "reported": reported}
        for q in (0.5, 0.99):
            assert reported[q] == pytest.approx(observed[q], rel=0.25), json.dumps(report)
    print(json.dumps(report))  # the figures, for the commit message (pytest -s)
