"""A staged migration whose copy runs on Spark: the tasks commit the lane's group, so the `copied` and `lag` gates
judge a Spark copy as they judge the service's; a group moves to the copy at the exact next record and back."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.migration import assert_exact, consume_group, migrate, produce, read_all, setup
from transcoder.spark.engine import SparkEngine


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_group_moves_to_a_spark_copy_at_the_exact_next_record_and_back(guarantee, spark, kafka, topic_factory,
                                                                          tmp_path):
    source = topic_factory(partitions=2)
    produce(kafka, source, 1000, 2)
    path, conf, dest = setup(tmp_path, kafka, source, extra={
        "guarantee": guarantee, "spark": {"checkpoint_location": str(tmp_path / "checkpoints")}})
    SparkEngine(conf, spark=spark).run(until_caught_up=True)  # 1,000 records copied
    produce(kafka, source, 1000, 2)
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=1400)  # past what the copy holds
    migrate("start", "--config", path, "--group", group)
    refused = migrate("cutover", "--config", path, "--group", group, ok=False)
    assert refused.returncode != 0 and "copied: the lane has copied partition" in refused.stderr, refused.stderr

    SparkEngine(conf, spark=spark).run(until_caught_up=True)  # the rest
    migrate("verify", "--config", path)
    moved = json.loads(migrate("cutover", "--config", path, "--group", group, "--format", "json").stdout)
    assert moved[0]["outcome"] == "moved"
    middle = consume_group(kafka, group, dest, stop_after=300)
    assert len(middle) == 300
    back = json.loads(migrate("rollback", "--config", path, "--group", group, "--format", "json").stdout)
    assert back[0]["outcome"] == "moved"
    after = consume_group(kafka, group, source)
    assert_exact(read_all(kafka, source), before, middle + after)
