"""The latency /status reports is the latency an independent observer of the copy sees (issue 29, item 8).

A live producer writes two sources at once: a slow one whose destination batches close by linger (1 s), and a fast
one whose batches close by size (750 records). A consumer of the destinations that is no part of transcoder
computes, per record, when it received the copy minus the source record's timestamp (the copy keeps it): what the
metric claims, acknowledgement minus source timestamp, give or take the consumer's own fetch. /status's p50 and p99
of each destination must be within 25% of the observed ones; a batch sampled by its newest record alone is not.

The second scenario is issue 42's: a backlog seeded a minute before the copy starts, and records produced at
100/s while it starts and copies it. The backlog's tail and the first new records are re-batched together; "new
records" are those stamped at or after the lane's start, and an independent read_committed consumer of the copy
times exactly those (by the send time the test's producer wrote in a header). On 273aa5e the mixed batch was timed
whole (classified by its newest record): /status said a p99 of about 60 s, the consumer saw well under 1 s.

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


def _until_acknowledged(service: Service, errors: list[Any], done: Any, describe: Any) -> dict[str, Any]:
    """The service's /status document once `done(doc)`: every record observed, and acknowledged in /status (its
    tallies are flushed at commits); 60 s at most."""
    deadline = time.monotonic() + 60
    while True:
        doc = service.status()
        if done(doc):
            return doc
        assert not errors and time.monotonic() < deadline, errors or describe(doc)
        time.sleep(0.2)


def _stop(stop: threading.Event, service: Service, runner: ServiceThread, observer: threading.Thread) -> None:
    stop.set()
    service.stop()
    runner.join(60)
    observer.join(10)


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
        def out(doc: dict[str, Any]) -> dict[str, int]:
            return {d["topic"]: d["records_out"] for ln in doc["lanes"] for d in ln["destinations"]}

        doc = _until_acknowledged(
            service, errors,
            lambda doc: all(len(seen[dests[s]]) >= n and out(doc).get(dests[s]) == n for s, n in counts.items()),
            lambda doc: (out(doc), {d: len(v) for d, v in seen.items()}))
    finally:
        _stop(stop, service, runner, observer)
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


BACKLOG = 3_000
LIVE_RATE = 100  # records/s
LIVE_SECONDS = 10.0


def _produce_live(bootstrap: str, topic: str, sent: list[float], stop: threading.Event) -> None:
    """LIVE_RATE records/s for LIVE_SECONDS, each carrying when it was sent (header `sent`, epoch s)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    start = time.monotonic()
    while len(sent) < LIVE_RATE * LIVE_SECONDS and not stop.is_set():
        due = min(int((time.monotonic() - start) * LIVE_RATE), int(LIVE_RATE * LIVE_SECONDS))
        while len(sent) < due:
            now = time.time()
            p.produce(topic, value=f"live-{len(sent):06d}".encode() * 8, headers=[("sent", repr(now).encode())])
            sent.append(now)
        p.poll(0)
        time.sleep(0.005)
    assert p.flush(30) == 0


def _observe_sent(bootstrap: str, topic: str, seen: list[tuple[float, float]], stop: threading.Event) -> None:
    """Per record of `topic` carrying a `sent` header: (sent, when this read_committed consumer got it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"observer-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "fetch.wait.max.ms": 5,
                  "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        while not stop.is_set():
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                got = time.time()
                sent = dict(m.headers() or []).get("sent")
                if sent is not None:
                    seen.append((float(sent), got))
    finally:
        c.close()


def test_new_records_latency_after_a_backlog_is_what_a_consumer_of_the_copy_observes(kafka, topic_factory):
    source = topic_factory()
    dest = topic_factory(name=f"{source}.zstd")  # exists before the copy: the observer reads it from the start
    old = int(time.time() * 1000) - 60_000  # the backlog: seeded a minute before the copy
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for i in range(BACKLOG):
        p.produce(source, value=f"seeded-{i:06d}".encode() * 8, timestamp=old + i // 100)
    assert p.flush(30) == 0
    conf = cfg.parse({
        "cluster": {"bootstrap_servers": kafka.bootstrap}, "group_id": f"lat-backlog-{time.monotonic_ns()}",
        "routes": [{"source": source, "destinations": [{"codec": "zstd"}]}],  # linger 500 ms, as by default
        "commit_interval_ms": 500, "metrics": {"port": 0},
    }, environ={})
    sent: list[float] = []
    seen: list[tuple[float, float]] = []
    stop = threading.Event()
    observer = threading.Thread(target=_observe_sent, args=(kafka.bootstrap, dest, seen, stop), daemon=True)
    live = threading.Thread(target=_produce_live, args=(kafka.bootstrap, source, sent, stop), daemon=True)
    service = Service(conf)
    runner = ServiceThread(service)
    errors = runner.errors
    try:
        observer.start()
        live.start()
        time.sleep(0.5)  # live records before the copy starts (backlog too), and after: the first batch mixes them
        runner.start()
        deadline = time.monotonic() + 60
        while not service.lanes:
            assert not errors and time.monotonic() < deadline, errors or "no lane"
            time.sleep(0.01)
        start_s = service.lanes[0].writer.start_ms / 1000
        live.join(LIVE_SECONDS + 40)
        total = BACKLOG + len(sent)

        def dest(doc: dict[str, Any]) -> dict[str, Any]:
            return next(d for ln in doc["lanes"] for d in ln["destinations"])

        out = dest(_until_acknowledged(service, errors,
                                       lambda doc: len(seen) >= len(sent) and dest(doc)["records_out"] == total,
                                       lambda doc: (dest(doc)["records_out"], len(seen), total)))
    finally:
        _stop(stop, service, runner, observer)
    assert not errors, errors
    assert sorted(s for s, _ in seen) == sorted(sent)  # each live record once, as sent
    new = [got - s for s, got in seen if s >= start_s]
    before = sum(1 for s in sent if s < start_s)
    assert before > 0 and len(new) > 500, (before, len(new))  # live records on both sides of the lane's start
    observed = _quantile(new, 0.99)
    reported = out["latency_p99_seconds"]
    figures = {"observed_p99": observed, "reported_p99": reported, "new_records": len(new),
               "backlog_records": BACKLOG + before, "reported_p50": out["latency_p50_seconds"],
               "observed_p50": _quantile(new, 0.5), "latency_samples": out["latency_samples"],
               "backlog_latency_samples": out["backlog_latency_samples"]}
    print(json.dumps(figures))  # the figures, for the commit message (pytest -s)
    assert reported == pytest.approx(observed, rel=0.25), json.dumps(figures)
    # every record weighed once, 1 sample in 16: the backlog's (and the live records sent before the start)
    assert out["backlog_latency_samples"] == pytest.approx((BACKLOG + before) / 16, abs=2), out
    assert out["latency_samples"] == pytest.approx(len(new) / 16, abs=2), out
