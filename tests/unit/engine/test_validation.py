"""What `validate` checks and shows (transcoder.engine.validation): the plan as data, from the config, the plan and
what the clusters told (a Provision built by hand here: no broker), and the plan without the clusters."""

from __future__ import annotations

import json

from transcoder.config import parse
from transcoder.engine.validation import PLAN_FORMAT, Check, offline_checks, plan_data
from transcoder.kafka.admin import TopicShape
from transcoder.kafka.provisioning import DestinationTopic, Provision
from transcoder.pipeline import routes

RAW = {"cluster": {"bootstrap_servers": "k:9092"}, "group_id": "g",
       "routes": [{"source": "orders", "destinations": [{"codec": "zstd", "level": 19}, {"codec": "snappy"}]},
                  {"source_pattern": "web-.*", "destinations": [{"codec": "lz4", "topic": "{source}.small"}]}],
       "errors": {"tolerance": "all", "dlq_topic": "g.dlq"}}


def test_the_plan_with_what_the_clusters_told_topic_by_topic():
    config = parse(RAW, environ={})
    plan = routes.plan(config, ["orders", "web-a", "web-b", "web-a.small"])  # web-a.small: written by it
    created = {"compression.type": "producer", "retention.ms": "600000"}
    provision = Provision(
        sources={t: TopicShape(t, 3) for t in ("orders", "web-a", "web-b")},
        destinations=[DestinationTopic("orders.zstd-19", "orders", "orders.zstd-19", "zstd-19", 3, False, created,
                                       "producer"),
                      DestinationTopic("orders.snappy", "orders", "orders.snappy", "snappy", 3, True, {}, "snappy"),
                      DestinationTopic("web-a.small", "web-a", "route1.source.small", "lz4", 3, False, created,
                                       "producer"),
                      DestinationTopic("web-b.small", "web-b", "route1.source.small", "lz4", 3, True, {},
                                       "producer")],
        dlq=DestinationTopic("g.dlq", "", "dlq", "zstd", 1, False, created, "producer"))
    data = plan_data(config, plan, provision, [Check("clusters", "passed", "connected")], engine="service",
                     offline=False)
    assert json.loads(json.dumps(data)) == data  # plain JSON
    assert (data["format"], data["ok"], data["offline"]) == (PLAN_FORMAT, True, False)
    orders, web = data["routes"]
    assert [(d["codec"], d["level"], d["label"]) for d in orders["destinations"]] == [("zstd", 19, "zstd-19"),
                                                                                      ("snappy", None, "snappy")]
    assert orders["destinations"][0]["topics"] == [{"source": "orders", "topic": "orders.zstd-19", "partitions": 3,
                                                    "action": "create", "configs": created}]
    assert orders["destinations"][1]["topics"] == [{"source": "orders", "topic": "orders.snappy", "partitions": 3,
                                                    "action": "exists",
                                                    "configs": {"compression.type": "snappy"}}]
    assert web["sources"] == ["web-a", "web-b"]  # resolved against the cluster's topics
    [lz4] = web["destinations"]
    assert (lz4["topic_template"], lz4["name"]) == ("{source}.small", "route1.source.small")
    assert [(t["topic"], t["action"]) for t in lz4["topics"]] == [("web-a.small", "create"), ("web-b.small", "exists")]
    assert data["skipped"] == [{"route": 1, "topic": "web-a.small", "why": "written by this config"}]
    assert data["dead_letter"] == {"topic": "g.dlq", "partitions": 1, "action": "create"}


def test_offline_the_literal_routes_are_planned_and_the_patterns_left_unresolved():
    config = parse(RAW, environ={})
    plan, checks = offline_checks(config)
    assert plan is not None
    assert [t.sources for t in plan.targets] == [("orders",), ("orders",), ()]
    assert [lane.group_id for lane in plan.lanes] == ["g.orders.zstd-19", "g.orders.snappy", "g.route1.source.small"]
    assert [(c.check, c.outcome) for c in checks] == [("config", "passed"), ("secret references", "passed"),
                                                      ("cluster.config", "passed"), ("routes", "passed")]
    data = plan_data(config, plan, None, checks, engine="service", offline=True)
    assert data["routes"][1]["sources"] is None and data["routes"][1]["destinations"][0]["topics"] == []
    assert data["routes"][0]["destinations"][0]["topics"][0]["partitions"] is None


def test_a_failed_check_makes_the_plan_not_ok():
    config = parse(RAW, environ={})
    data = plan_data(config, None, None, [Check("routes", "failed", "destination x is written twice")],
                     engine="service", offline=True)
    assert data["ok"] is False and data["lanes"] == []
    assert [d["topics"][0]["topic"] for d in data["routes"][0]["destinations"]] == ["orders.zstd-19",
                                                                                    "orders.snappy"]
