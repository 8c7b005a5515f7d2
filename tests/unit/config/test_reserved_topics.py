"""Reserved topics (issue 42): Kafka's internal topics and this config's own (offset map, migration state,
dead letters) are neither sources nor destinations, refused when the config is read (naming the line) and when
patterns are resolved (naming the route); patterns pass over them, saying so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from transcoder.config import Config, load, parse, reserved
from transcoder.errors import ConfigError
from transcoder.pipeline.routes import Skipped, plan


def raw(*routes: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"cluster": {"bootstrap_servers": "k:9092"}, "group_id": "tc",
            "routes": list(routes) or [{"source": "orders", "destinations": [{"codec": "zstd"}]}], **top}


def refused(config: dict[str, Any], environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(config, source="c.yaml", environ=environ or {})
    return str(info.value)


def loaded_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load(path, environ={})
    return str(info.value).removeprefix(f"{path}: ")


OWN = " no route may read or write it"


# ------------------------------------------------------------------------------------ literal topics (parse)

def test_the_offset_map_topic_as_a_destination_is_refused():
    msg = refused(raw({"source": "orders", "destinations": [{"codec": "lz4", "topic": "tc.offset-map"}]},
                      migration={}))
    assert msg == ("c.yaml: routes.0.destinations.0.topic: destination tc.offset-map is this config's offset-map "
                   "topic (migration.offset_map_topic, default <group_id>.offset-map):" + OWN)


def test_the_state_topic_as_a_source_is_refused():
    msg = refused(raw({"source": "tc.migrations", "destinations": [{"codec": "lz4"}]}, migration={}))
    assert msg == ("c.yaml: routes.0.source: source tc.migrations is this config's migration state topic "
                   "(migration.state_topic, default <group_id>.migrations):" + OWN)


def test_named_migration_topics_are_reserved_under_their_names():
    msg = refused(raw({"source": "orders", "destinations": [{"codec": "zstd", "topic": "map"}]},
                      migration={"offset_map_topic": "map", "state_topic": "state"}))
    assert "destination map is this config's offset-map topic" in msg
    # the default names are free once the migration's topics are named otherwise
    parse(raw({"source": "tc.offset-map", "destinations": [{"codec": "zstd"}]},
              migration={"offset_map_topic": "map"}), environ={})


def test_without_a_migration_section_its_default_names_are_ordinary_topics():
    c = parse(raw({"source": "orders", "destinations": [{"codec": "lz4", "topic": "tc.offset-map"}]}), environ={})
    assert plan(c, ["orders"]).destination_topics() == {"tc.offset-map": ("orders", plan(c, []).targets[0])}


def test_the_dead_letter_topic_as_a_destination_is_refused():
    msg = refused(raw({"source": "orders", "destinations": [{"codec": "zstd"}]},
                      errors={"tolerance": "all", "dlq_topic": "orders.zstd"}))
    assert msg == ("c.yaml: routes.0.destinations.0: destination orders.zstd is this config's dead-letter topic "
                   "(errors.dlq_topic):" + OWN)


@pytest.mark.parametrize(("topic", "what"), [
    ("__consumer_offsets", "Kafka's internal topic of the consumer groups' committed offsets"),
    ("__transaction_state", "Kafka's internal topic of the transaction coordinators' log"),
    ("__cluster_metadata", "Kafka's internal topic of the KRaft controllers' metadata log"),
    ("__share_group_state", "Kafka's internal topic of the share groups' state"),
    ("__amazon_msk_canary", "named as Kafka's internal topics are (`__` first)"),
])
def test_kafka_internal_topics_are_refused_as_sources(topic, what):
    msg = refused(raw({"source": topic, "destinations": [{"codec": "zstd", "topic": "copy"}]}))
    assert msg == f"c.yaml: routes.0.source: source {topic} is {what}:" + OWN


def test_kafka_internal_topics_are_refused_as_destinations():
    msg = refused(raw({"source": "orders", "destinations": [{"codec": "zstd", "topic": "__consumer_offsets"}]}))
    assert msg == ("c.yaml: routes.0.destinations.0.topic: destination __consumer_offsets is Kafka's internal topic "
                   "of the consumer groups' committed offsets:" + OWN)


def test_a_pattern_routes_fixed_destination_is_checked_up_front():
    msg = refused(raw({"source_pattern": "o.*", "destinations": [{"codec": "zstd", "topic": "dead"}]},
                      errors={"tolerance": "all", "dlq_topic": "dead"}))
    assert msg.startswith("c.yaml: routes.0.destinations.0.topic: destination dead is this config's dead-letter")


def test_other_platforms_internal_topics_may_be_copied_when_named():
    for topic in ("_schemas", "connect-offsets", "mm2-offset-syncs.b.internal", ".hidden"):
        parse(raw({"source": topic, "destinations": [{"codec": "zstd"}]}), environ={})


def test_transcoders_own_topics_need_names_of_their_own():
    assert refused(raw(migration={"offset_map_topic": "x", "state_topic": "x"})) == (
        "c.yaml: migration.offset_map_topic: the offset-map topic x is also the migration state topic: each of "
        "transcoder's own topics needs a topic of its own")
    assert refused(raw(migration={}, errors={"dlq_topic": "tc.offset-map"})) == (
        "c.yaml: errors.dlq_topic: the dead-letter topic tc.offset-map is also the offset-map topic: each of "
        "transcoder's own topics needs a topic of its own")
    assert refused(raw(errors={"dlq_topic": "__consumer_offsets"})) == (
        "c.yaml: errors.dlq_topic: the dead-letter topic __consumer_offsets is Kafka's internal topic of the "
        "consumer groups' committed offsets: give transcoder a topic of its own")


def test_every_reserved_topic_is_named_on_a_line_of_its_own():
    msg = refused(raw({"source": "__consumer_offsets", "destinations": [{"codec": "zstd", "topic": "tc.migrations"}]},
                      migration={}))
    first, *lines = msg.split("\n")
    assert first == "c.yaml: 2 problems:"
    assert [line.split(": ")[0] for line in lines] == ["  routes.0.source", "  routes.0.destinations.0.topic"]


def test_an_environment_override_is_named_instead_of_a_line():
    msg = refused(raw(migration={}), environ={"TRANSCODER__ROUTES__0__DESTINATIONS__0__TOPIC": "tc.offset-map"})
    assert msg.startswith("c.yaml: TRANSCODER__ROUTES__0__DESTINATIONS__0__TOPIC: routes.0.destinations.0.topic: "
                          "destination tc.offset-map is this config's offset-map topic")


def test_the_line_of_the_key_is_named(tmp_path):
    text = ("cluster: {bootstrap_servers: k:9092}\n"
            "group_id: tc\n"
            "routes:\n"
            "  - source: orders\n"
            "    destinations:\n"
            "      - codec: zstd\n"
            "      - codec: lz4\n"
            "        topic: tc.offset-map\n"
            "migration: {}\n")
    assert loaded_error(tmp_path, text) == (
        "line 8: routes.0.destinations.1.topic: destination tc.offset-map is this config's offset-map topic "
        "(migration.offset_map_topic, default <group_id>.offset-map):" + OWN)


# ------------------------------------------------------------------------------- patterns (the plan)

def config(*routes: dict[str, Any], **top: Any) -> Config:
    return parse(raw(*routes, **top), environ={})


def test_a_pattern_passes_over_reserved_topics_and_says_why():
    c = config({"source_pattern": ".*", "destinations": [{"codec": "zstd"}]}, migration={},
               errors={"tolerance": "all", "dlq_topic": "dead"})
    p = plan(c, ["orders", "__consumer_offsets", "tc.offset-map", "tc.migrations", "dead",
                 "mm2-offsets.a.internal", "connect-status-internal", ".hidden", "_confluent-metrics"])
    assert p.sources == ("orders",)
    assert {s.topic: s.why for s in p.skipped} == {
        "__consumer_offsets": "Kafka's internal topic of the consumer groups' committed offsets",
        "tc.offset-map": "this config's offset-map topic (migration.offset_map_topic, default <group_id>.offset-map)",
        "tc.migrations": "this config's migration state topic (migration.state_topic, default <group_id>.migrations)",
        "dead": "this config's dead-letter topic (errors.dlq_topic)",
        **{t: "internal by convention (`__`, `.`, `_confluent` or `_schemas` first, `.internal` or `-internal` last)"
           for t in ("mm2-offsets.a.internal", "connect-status-internal", ".hidden", "_confluent-metrics")},
    }
    assert all(isinstance(s, Skipped) and s.route == 0 for s in p.skipped)


def test_a_pattern_matching_only_reserved_topics_says_what_it_passed_over():
    c = config({"source_pattern": "tc\\..*", "destinations": [{"codec": "zstd"}]}, migration={})
    with pytest.raises(ConfigError) as info:
        plan(c, ["tc.offset-map", "tc.migrations", "orders"])
    assert str(info.value) == ("routes.0.source_pattern 'tc\\\\..*' matches no topic it may copy (2 passed over: "
                               "tc.migrations, tc.offset-map)")


def test_a_pattern_destination_resolving_to_a_reserved_topic_is_refused():
    c = config({"source_pattern": "o.*", "destinations": [{"codec": "zstd", "topic": "{source}-copy"}]},
               errors={"tolerance": "all", "dlq_topic": "orders-copy"})
    with pytest.raises(ConfigError) as info:
        plan(c, ["orders"])
    assert str(info.value) == ("routes.0.destinations.0.topic: destination orders-copy is this config's dead-letter "
                               "topic (errors.dlq_topic): no route may read or write it (copying orders)")


def test_the_plan_refuses_reserved_literal_topics_of_a_config_built_without_parse():
    c = Config.model_validate(raw({"source": "orders", "destinations": [{"codec": "zstd", "topic": "tc.offset-map"}]},
                                  migration={}))
    with pytest.raises(ConfigError) as info:
        plan(c, ["orders"])
    assert str(info.value).startswith("routes.0.destinations.0.topic: destination tc.offset-map is this config's "
                                      "offset-map topic")


def test_role_names_each_kind():
    c = config(migration={"offset_map_topic": "m"}, errors={"dlq_topic": "d"})
    assert reserved.role(c, "m").startswith("this config's offset-map topic")
    assert reserved.role(c, "tc.migrations").startswith("this config's migration state topic")
    assert reserved.role(c, "d") == "this config's dead-letter topic (errors.dlq_topic)"
    assert reserved.role(c, "__x") == "named as Kafka's internal topics are (`__` first)"
    assert reserved.role(c, "orders") is None
    assert reserved.role(c, "tc.offset-map") is None
