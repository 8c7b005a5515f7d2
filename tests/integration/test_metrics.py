"""Metrics, health and the report against the real broker, checked on ground truth (never on wall-clock speed)."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.cli import run_cli
from tests.support.http import get
from transcoder import config as cfg
from transcoder.kafka.protocol import RawClient
from transcoder.service.runner import Service

ROOT = Path(__file__).resolve().parents[2]


def make_config(kafka, source, destinations, **metrics) -> cfg.Config:
    return cfg.parse({
        "cluster": {"bootstrap_servers": kafka.bootstrap}, "group_id": f"m-{time.monotonic_ns()}",
        "routes": [{"source": source, "destinations": destinations}], "commit_interval_ms": 200,
        "metrics": {"port": 0, "stats_interval_ms": 500, "disk_interval_s": 1, **metrics},
    }, environ={})


def seed(kafka, topic: str, count: int, partitions: int | None = 2) -> None:
    args = ["seed", "--kind", "nginx", "--count", str(count), "--topic", topic, "-b", kafka.bootstrap]
    if partitions:
        args += ["--partitions", str(partitions)]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr


def sample(service: Any, name: str, **labels: str) -> float | None:
    return service.metrics.registry.get_sample_value(name, labels)



def wait_for(predicate, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


def test_reported_ratios_match_the_broker(engine, kafka, topic_factory):
    source = topic_factory(partitions=2)
    seed(kafka, source, 150_000, partitions=None)
    service = engine(make_config(kafka, source, [{"codec": "zstd"}, {"codec": "lz4"}, {"codec": "gzip"}]))
    service.run(until_caught_up=True)

    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        sizes = info.topic_sizes([source, f"{source}.zstd", f"{source}.lz4", f"{source}.gzip"])
    finally:
        info.close()
    for codec in ("zstd", "lz4", "gzip"):
        dest = f"{source}.{codec}"
        labels = {"lane": dest, "destination": dest, "codec": codec}
        direct = sizes[source] / sizes[dest]
        disk_ratio = sample(service, "transcoder_disk_ratio", **labels)
        wire_ratio = sample(service, "transcoder_wire_ratio", **labels)
        assert disk_ratio == pytest.approx(direct, rel=0.02), codec
        # A delete topic: the broker stores the batches as produced, so wire and disk agree up to
        # the source's own v2 record framing (a few percent on ~250 B records).
        assert wire_ratio == pytest.approx(direct, rel=0.05), codec
        # librdkafka's batch sizes add up to what the destination holds on disk.
        assert sample(service, "transcoder_compressed_bytes_total", **labels) == pytest.approx(sizes[dest], rel=0.02)
        assert sample(service, "transcoder_records_out_total", **labels) == 150_000
        assert sample(service, "transcoder_batch_records_sum", **labels) == 150_000
        assert sample(service, "transcoder_topic_disk_bytes", topic=dest, role="destination") == sizes[dest]
        assert sample(service, "transcoder_broker_recompression", lane=dest, destination=dest, reason="config") == 0
    assert sample(service, "transcoder_records_in_total", lane=f"{source}.zstd") == 150_000


LIVE = 2_000  # records produced after the lanes started


def test_lag_readiness_and_every_dashboard_and_alert_metric_on_a_running_instance(engine, kafka, topic_factory):
    source = topic_factory(partitions=2)
    seed(kafka, source, 40_000, partitions=None)
    service = engine(make_config(kafka, source, [{"codec": "zstd"}, {"codec": "snappy"}]))
    port = service.serve(0)  # any free port
    url = f"http://127.0.0.1:{port}"
    assert get(url + "/readyz")[0] == 503  # pre-flight and provisioning not done: not ready
    slow = f"{source}.snappy"
    kafka.throttle_producer(f"transcoder-{slow}", 200_000)
    errors: list[BaseException] = []
    t = threading.Thread(target=lambda: _run(service, errors), daemon=True)
    t.start()
    try:
        wait_for(lambda: get(url + "/readyz")[0] == 200)
        assert get(url + "/healthz") == (200, "ok\n")

        def lag(lane: str) -> int:
            doc = json.loads(get(url + "/status")[1])
            return sum(next(x for x in doc["lanes"] if x["name"] == lane)["lag_records"].values())

        wait_for(lambda: lag(slow) > 0)  # the throttled lane is behind, and says so
        kafka.throttle_producer(f"transcoder-{slow}", None)
        wait_for(lambda: lag(slow) == 0 and lag(f"{source}.zstd") == 0)
        # The seeded records were backlog when the lanes started: their age is not latency. Live ones are.
        live = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
        for i in range(LIVE):
            live.produce(source, value=f"live-{i}".encode(), partition=i % 2)
            live.poll(0)
            time.sleep(0.001)
        assert live.flush(30) == 0
        wait_for(lambda: lag(slow) == 0 and lag(f"{source}.zstd") == 0
                 and all(d["records_out"] == 40_000 + LIVE for ln in json.loads(get(url + "/status")[1])["lanes"]
                         for d in ln["destinations"]))
        for ln in json.loads(get(url + "/status")[1])["lanes"]:
            d = ln["destinations"][0]
            assert d["backlog_latency_samples"] > 0 and d["latency_samples"] > 0, d
            assert d["latency_samples"] + d["backlog_latency_samples"] <= (40_000 + LIVE) // 16 + 16, d
            assert 0 <= d["latency_p99_seconds"] < 30, d  # records produced now, copied now
        status, text = get(url + "/metrics")
        assert status == 200
        exported = set(re.findall(r"^(?:# (?:HELP|TYPE) )?(transcoder_[a-z0-9_]+)", text, re.MULTILINE))
        # the migration's metrics come from `migrate verify --follow`, `migrate watch --follow`, or a service
        # verifying continuously (migration.verify_interval_s): the same vocabulary, declared once
        from prometheus_client import generate_latest

        from transcoder.metrics.registry import MigrationMetrics

        exported |= set(re.findall(r"^# (?:HELP|TYPE) (transcoder_[a-z0-9_]+)",
                                   generate_latest(MigrationMetrics().registry).decode(), re.MULTILINE))
        for path in ("deploy/monitoring/grafana-dashboard.json", "deploy/monitoring/prometheus-alerts.yaml"):
            named = set(re.findall(r"transcoder_[a-z0-9_]+", (ROOT / path).read_text()))
            assert named, path
            assert named <= exported, f"{path} names metrics nobody exports: {sorted(named - exported)}"
        report = run_cli("report", "--url", url, "--format", "json")
        assert report.returncode == 0, report.stderr
        rows = {r["destination"]: r for r in json.loads(report.stdout)}
        assert set(rows) == {f"{source}.zstd", slow}
        assert all(r["records"] == 40_000 + LIVE and r["lag_records"] == 0 for r in rows.values())
        assert all(r["backlog_latency_samples"] > 0 and r["latency_p99_seconds"] is not None for r in rows.values())
        assert rows[f"{source}.zstd"]["ratio_to_uncompressed"] > rows[slow]["ratio_to_uncompressed"] > 1
    finally:
        kafka.throttle_producer(f"transcoder-{slow}", None)
        service.stop()
        t.join(120)
    assert not errors
    assert get(url + "/readyz")[0] == 503  # the lanes stopped
    service.endpoints.stop()


def _run(service: Any, errors: list[BaseException]) -> None:
    try:
        service.run()
    except BaseException as exc:  # noqa: BLE001 - the test asserts on it
        errors.append(exc)


def test_cpu_grows_with_work_and_zstd_costs_more_than_lz4(kafka, topic_factory):
    source = topic_factory(partitions=2)
    seed(kafka, source, 20_000, partitions=None)
    # zstd level 19 (batches transcoder builds: librdkafka refuses 13-22) against lz4, on the same records.
    service = Service(make_config(kafka, source, [{"codec": "zstd", "level": 19}, {"codec": "lz4"}]))
    errors: list[BaseException] = []
    t = threading.Thread(target=lambda: _run(service, errors), daemon=True)
    t.start()
    try:
        def copied(n: int) -> bool:
            return all(lane.status.acked and min(lane.status.acked.values()) >= n for lane in service.lanes)

        wait_for(lambda: len(service.lanes) == 2 and copied(20_000))
        first = service.cpu_by_lane()
        seed(kafka, source, 60_000, partitions=None)  # 15 MB more: tens of CPU ms more in every part, at least
        wait_for(lambda: copied(80_000))
        second = service.cpu_by_lane()
    finally:
        service.stop()
        t.join(120)
    assert not errors
    zstd, lz4 = f"{source}.zstd-19", f"{source}.lz4"
    for lane in (zstd, lz4):
        for part in ("consume", "produce", "loop"):
            assert second[(lane, part)] > first.get((lane, part), 0.0), (lane, part)
    assert second[(zstd, "produce")] > second[(lz4, "produce")]


def test_broker_recompression_is_detected_from_config_and_stored_batches(kafka, topic_factory):
    source = topic_factory(partitions=1)
    seed(kafka, source, 20_000, partitions=None)
    recompressed = topic_factory(partitions=1, config={"compression.type": "gzip"}, name=f"{source}.zstd")
    service = Service(make_config(kafka, source, [{"codec": "zstd", "allow_broker_recompression": True},
                                                  {"codec": "lz4"}]))
    service.run(until_caught_up=True)
    bad = {"lane": recompressed, "destination": recompressed}
    good = {"lane": f"{source}.lz4", "destination": f"{source}.lz4"}
    assert sample(service, "transcoder_broker_recompression", **bad, reason="config") == 1
    assert sample(service, "transcoder_broker_recompression", **bad, reason="stored") == 1
    assert service.brokers.recompression[recompressed] == "compression.type=gzip; stored as gzip in partition 0"
    assert sample(service, "transcoder_broker_recompression", **good, reason="config") == 0
    assert sample(service, "transcoder_broker_recompression", **good, reason="stored") == 0
    assert service.brokers.recompression[f"{source}.lz4"] is None
