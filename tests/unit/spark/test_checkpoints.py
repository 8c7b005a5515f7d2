"""Checkpoint marks: a lane's checkpoint is refused by a config whose lane reads or writes other topics."""

from __future__ import annotations

from tests.support.configs import make_config
from transcoder.pipeline import routes
from transcoder.spark import checkpoints

BROKER = type("K", (), {"bootstrap": "127.0.0.1:1"})()


def _lane(source: str, topic: str, codec: str = "zstd", **extra):
    conf = make_config(BROKER, [{"source": source, "destinations": [{"codec": codec, "name": "copy", "topic": topic}]}],
                       **extra)
    return conf, routes.plan(conf, [source]).lanes[0]


def test_a_lane_checkpoint_lives_under_the_configured_location():
    conf, lane = _lane("orders", "{source}.z", spark={"checkpoint_location": "s3a://bucket/tc/"})
    assert checkpoints.lane_location(conf, lane) == "s3a://bucket/tc/copy"
    conf, lane = _lane("orders", "{source}.z")
    assert checkpoints.lane_location(conf, lane).endswith(f"/transcoder/spark-checkpoints/{conf.group_id}/copy")


def test_another_source_or_destination_is_refused_but_another_codec_is_not():
    _, lane = _lane("orders", "{source}.z")
    found = checkpoints.mark(lane)
    assert found == {"lane": "copy", "group_id": lane.group_id, "sources": ["orders"], "destinations": ["orders.z"]}
    _, recoded = _lane("orders", "{source}.z", codec="lz4")
    assert checkpoints.mismatch("/c/copy", found, checkpoints.mark(recoded)) is None
    _, moved = _lane("payments", "{source}.z")
    problem = checkpoints.mismatch("/c/copy", found, checkpoints.mark(moved))
    assert problem is not None and "\n" not in problem
    assert problem.startswith("checkpoint /c/copy was written by another config (lane copy: sources orders;")
    assert "payments" in problem and "spark.checkpoint_location" in problem
    _, other_topic = _lane("orders", "{source}.other")
    assert "destinations orders.z" in (checkpoints.mismatch("/c/copy", found, checkpoints.mark(other_topic)) or "")
