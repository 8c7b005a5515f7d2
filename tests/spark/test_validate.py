"""`transcoder validate --engine spark`: the service's pre-flight, Spark started, each lane's checkpoint checked."""

from __future__ import annotations

import yaml

from tests.support.cli import run_cli
from tests.support.configs import raw_config


def test_validate_on_spark_prints_the_plan_and_each_lane_checkpoint_and_creates_nothing(kafka, topic_factory,
                                                                                        admin, tmp_path):
    source = topic_factory(partitions=2)
    checkpoints = tmp_path / "checkpoints"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [{"source": source, "destinations": [
        {"codec": "zstd", "level": 19}, {"codec": "lz4"}]}], spark={
            "master": "local[1]", "checkpoint_location": str(checkpoints), "max_offsets_per_trigger": 1000})))
    proc = run_cli("validate", "--engine", "spark", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"checkpoint of lane {source}.zstd-19: {checkpoints}/{source}.zstd-19" in out
    assert f"checkpoint of lane {source}.lz4: {checkpoints}/{source}.lz4" in out
    assert "spark: master local[1], trigger continuous micro-batches, max_offsets_per_trigger 1000" in out
    assert out.rstrip().endswith("ok: every pre-flight check passed")
    topics = admin.list_topics(timeout=10).topics
    assert f"{source}.lz4" not in topics and not checkpoints.exists()  # nothing created, nothing claimed
