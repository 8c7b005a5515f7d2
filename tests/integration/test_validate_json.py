"""`transcoder validate --format json` against the session's broker: the plan as the cluster tells it (partitions,
which destination exists and which is created, with what configs), destination by destination; nothing created."""

from __future__ import annotations

import json

import yaml

from tests.support.cli import run_cli
from tests.support.configs import raw_config


def test_validate_json_is_the_plan_the_cluster_tells(kafka, admin, topic_factory, tmp_path):
    source = topic_factory(partitions=3, config={"retention.ms": "600000"})
    existing = topic_factory(partitions=3, name=f"{source}.lz4", config={"compression.type": "producer"})
    missing_source = f"{source}-absent"
    raw = raw_config(kafka, [{"source": source, "destinations": [
        {"codec": "zstd", "level": 7, "batch": {"max_bytes": 131072, "max_records": 1000, "linger_ms": 50}},
        {"codec": "lz4"}]}])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))

    proc = run_cli("validate", "--config", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["ok"], data["offline"], data["problems"]) == (True, False, [])
    assert {c["check"]: c["outcome"] for c in data["checks"]}["clusters"] == "passed"
    assert all(c["outcome"] == "passed" for c in data["checks"])
    [route] = data["routes"]
    assert route["sources"] == [source]
    zstd, lz4 = route["destinations"]
    assert (zstd["codec"], zstd["level"], zstd["batch"]) == (
        "zstd", 7, {"max_bytes": 131072, "max_records": 1000, "linger_ms": 50})
    [created] = zstd["topics"]
    assert (created["topic"], created["partitions"], created["action"]) == (f"{source}.zstd-7", 3, "create")
    assert created["configs"]["compression.type"] == "producer"
    assert created["configs"]["retention.ms"] == "600000"  # inherited from the source, as created
    assert (lz4["codec"], lz4["level"]) == ("lz4", None)
    assert lz4["topics"] == [{"source": source, "topic": existing, "partitions": 3, "action": "exists",
                              "configs": {"compression.type": "producer"}}]
    assert f"{source}.zstd-7" not in admin.list_topics(timeout=10).topics  # validate creates nothing

    raw["routes"][0]["source"] = missing_source
    path.write_text(yaml.safe_dump(raw))
    proc = run_cli("validate", "--config", str(path), "--format", "json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    failed = [c for c in data["checks"] if c["outcome"] == "failed"]
    assert data["ok"] is False and failed == [
        {"check": "clusters", "outcome": "failed", "detail": f"source topic {missing_source} does not exist"}]
    assert proc.stderr.strip().splitlines()[-1] == f"transcoder: error: source topic {missing_source} does not exist"
