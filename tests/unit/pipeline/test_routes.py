"""transcoder.pipeline.routes.plan: lanes, pattern matching, target naming, collisions and loops."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transcoder.config import Config, parse
from transcoder.errors import ConfigError
from transcoder.pipeline.routes import LaneSpec, Plan, Target, plan


def d(codec: str, level: int | None = None, topic: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"codec": codec}
    if level is not None:
        out["level"] = level
    if topic is not None:
        out["topic"] = topic
    return out


def lit(source: str, *dests: dict[str, Any]) -> dict[str, Any]:
    return {"source": source, "destinations": list(dests)}


def pat(pattern: str, *dests: dict[str, Any]) -> dict[str, Any]:
    return {"source_pattern": pattern, "destinations": list(dests)}


def make(*routes: dict[str, Any], lanes: str = "isolated", group_id: str = "tc", dlq: str | None = None) -> Config:
    raw: dict[str, Any] = {"cluster": {"bootstrap_servers": "k:9092"}, "group_id": group_id, "lanes": lanes,
                           "routes": list(routes)}
    if dlq is not None:
        raw["errors"] = {"tolerance": "all", "dlq_topic": dlq}
    return parse(raw, environ={})


def refused(config: Config, existing: list[str] = ()) -> str:
    with pytest.raises(ConfigError) as info:
        plan(config, existing)
    return str(info.value)


# ----------------------------------------------------------------------------------------------- lanes

def test_isolated_lanes_one_per_destination():
    p = plan(make(lit("nginx", d("zstd"), d("gzip", 6))), [])
    assert [lane.name for lane in p.lanes] == ["nginx.zstd", "nginx.gzip-6"]
    assert [lane.group_id for lane in p.lanes] == ["tc.nginx.zstd", "tc.nginx.gzip-6"]
    assert [len(lane.targets) for lane in p.lanes] == [1, 1]
    assert [lane.targets[0].name for lane in p.lanes] == ["nginx.zstd", "nginx.gzip-6"]
    assert all(lane.sources == ("nginx",) for lane in p.lanes)
    assert p.lanes[1].targets[0].destination.level == 6


def test_isolated_lane_name_is_the_destination_topic_for_templates():
    p = plan(make(lit("nginx", d("zstd", 3, "copies.{source}.{codec}{level}"))), [])
    assert [(lane.name, lane.group_id) for lane in p.lanes] == [("copies.nginx.zstd3", "tc.copies.nginx.zstd3")]


def test_shared_lane_holds_every_target():
    p = plan(make(lit("nginx", d("zstd"), d("lz4")), lit("dns", d("zstd")), lanes="shared", group_id="g"), [])
    assert len(p.lanes) == 1
    lane = p.lanes[0]
    assert (lane.name, lane.group_id) == ("shared", "g")
    assert [t.name for t in lane.targets] == ["nginx.zstd", "nginx.lz4", "dns.zstd"]
    assert lane.sources == ("nginx", "dns")
    assert p.targets == lane.targets


def test_literal_source_is_taken_as_given_even_if_missing():
    p = plan(make(lit("not-there", d("zstd"))), ["other"])
    assert p.sources == ("not-there",)


def test_target_topics_mapping():
    p = plan(make(pat("a|b", d("zstd"))), ["a", "b", "c"])
    (t,) = p.targets
    assert t.sources == ("a", "b")
    assert t.topics == {"a": "a.zstd", "b": "b.zstd"}
    assert t.topic_for("a") == "a.zstd"


# -------------------------------------------------------------------------------------------- patterns

def test_pattern_matches_whole_names_only():
    p = plan(make(pat("nginx", d("zstd"))), ["nginx", "nginx2", "xnginx", "my-nginx-logs"])
    assert p.sources == ("nginx",)


def test_pattern_sources_are_sorted_and_deduplicated():
    p = plan(make(pat("logs-.*", d("zstd"))), ["logs-c", "logs-a", "logs-b", "logs-a"])
    assert p.sources == ("logs-a", "logs-b", "logs-c")


def test_pattern_never_matches_internal_topics():
    existing = ["__consumer_offsets", "__transaction_state", "_schemas", "_confluent-metrics",
                "_confluent_balancer_api_state", "orders", "_private"]
    p = plan(make(pat(".*", d("zstd"))), existing)
    assert p.sources == ("_private", "orders")


def test_pattern_never_reads_what_it_writes():
    p = plan(make(pat("nginx.*", d("zstd"))), ["nginx", "nginx.zstd"])
    assert p.sources == ("nginx",)
    assert set(p.destination_topics()) == {"nginx.zstd"}


def test_pattern_never_reads_what_another_route_writes():
    config = make(lit("orders", d("lz4", 4)), pat(".*", d("zstd", 1)))
    p = plan(config, ["orders", "orders.lz4-4", "logs", "logs.zstd-1"])
    assert p.lanes[1].sources == ("logs", "orders")
    assert set(p.destination_topics()) == {"orders.lz4-4", "logs.zstd-1", "orders.zstd-1"}


def test_pattern_never_reads_templated_destinations():
    p = plan(make(pat(".*", d("gzip", 1, "copy-{source}"))), ["a", "copy-a", "copy-copy-a"])
    assert p.sources == ("a",)


def test_pattern_never_reads_the_dlq():
    p = plan(make(pat(".*", d("zstd")), dlq="dead"), ["a", "dead"])
    assert p.sources == ("a",)


def test_pattern_matching_nothing_is_refused():
    config = make(lit("a", d("zstd")), pat("zzz.*", d("zstd")))
    assert refused(config, ["a", "b"]) == "routes.1.source_pattern 'zzz.*' matches no topic"


def test_pattern_matching_only_internal_topics_is_refused():
    assert refused(make(pat("_.*", d("zstd"))), ["__consumer_offsets", "_schemas"]) == (
        "routes.0.source_pattern '_.*' matches no topic it may copy (2 passed over: __consumer_offsets, _schemas)")


def test_pattern_target_names():
    p = plan(make(lit("a", d("zstd")), pat("b.*", d("zstd"), d("lz4", 4))), ["a", "b1", "b2"])
    assert [t.name for t in p.targets] == ["a.zstd", "route1.zstd", "route1.lz4-4"]
    assert [lane.group_id for lane in p.lanes] == ["tc.a.zstd", "tc.route1.zstd", "tc.route1.lz4-4"]
    assert p.lanes[2].targets[0].topics == {"b1": "b1.lz4-4", "b2": "b2.lz4-4"}


def test_pattern_route_same_codec_different_topics_is_accepted():
    p = plan(make(pat("n.*", d("zstd", topic="{source}.a"), d("zstd", topic="{source}.b"))), ["nginx"])
    assert set(p.destination_topics()) == {"nginx.a", "nginx.b"}


# ------------------------------------------------------------------------------------------ collisions

def test_same_destination_twice_is_refused():
    assert refused(make(lit("a", d("zstd")), lit("a", d("zstd")))) == (
        "destination a.zstd is written twice (copying a and a)")


def test_two_literal_routes_writing_one_topic_are_refused():
    config = make(lit("a", d("zstd", topic="all.{codec}")), lit("b", d("zstd", topic="all.{codec}")))
    assert refused(config) == "destination all.zstd is written twice (copying a and b)"


def test_pattern_sources_writing_one_topic_are_refused():
    assert refused(make(pat("a|b", d("zstd", topic="merged"))), ["a", "b"]) == (
        "destination merged is written twice (copying a and b)")


def test_destination_equal_to_its_source_is_refused():
    assert refused(make(lit("a", d("zstd", topic="{source}")))) == (
        "destination a is its own source: set a different `topic` for it")


def test_source_that_is_also_a_destination_is_a_loop():
    msg = refused(make(lit("a", d("zstd")), lit("a.zstd", d("gzip"))))
    assert msg == "topic a.zstd is both a source and a destination: the copy would loop"
    assert "loop" in msg


def test_literal_source_written_by_a_pattern_route_is_a_loop():
    msg = refused(make(pat("x", d("zstd")), lit("x.zstd", d("gzip"))), ["x"])
    assert msg == "topic x.zstd is both a source and a destination: the copy would loop"


@pytest.mark.parametrize(("dlq", "at", "what"), [("dead", "routes.0.source", "source"),
                                                  ("dead.zstd", "routes.0.destinations.0", "destination")])
def test_dlq_equal_to_a_source_or_destination_is_refused(dlq, at, what):
    with pytest.raises(ConfigError) as info:
        make(lit("dead", d("zstd")), dlq=dlq)
    assert str(info.value) == (f"config: {at}: {what} {dlq} is this config's dead-letter topic (errors.dlq_topic): "
                               "no route may read or write it")


# ----------------------------------------------------------------------------------- lanes and plans

def test_lane_targets_for():
    p = plan(make(lit("a", d("zstd")), lit("b", d("zstd")), lit("a", d("lz4")), lanes="shared"), [])
    (lane,) = p.lanes
    assert [t.name for t in lane.targets_for("a")] == ["a.zstd", "a.lz4"]
    assert [t.name for t in lane.targets_for("b")] == ["b.zstd"]
    assert lane.targets_for("c") == ()


def test_plan_sources_in_order_of_first_appearance():
    p = plan(make(lit("b", d("zstd")), lit("a", d("zstd")), lit("b", d("gzip")), pat("c.*", d("lz4"))), ["c2", "c1"])
    assert p.sources == ("b", "a", "c1", "c2")


def test_plan_destination_topics():
    p = plan(make(lit("a", d("zstd"), d("gzip", 9)), pat("b.*", d("zstd"))), ["b1"])
    dt = p.destination_topics()
    assert {k: (s, t.name) for k, (s, t) in dt.items()} == {
        "a.zstd": ("a", "a.zstd"), "a.gzip-9": ("a", "a.gzip-9"), "b1.zstd": ("b1", "route1.zstd")}


def test_lane_sources_are_deduplicated_in_target_order():
    config = make(lit("a", d("zstd")), lit("b", d("zstd")), lit("a", d("lz4")), lanes="shared")
    (lane,) = plan(config, []).lanes
    assert lane.sources == ("a", "b")


def test_lane_and_plan_constructed_directly():
    dest = make(lit("x", d("zstd"))).routes[0].destinations[0]
    t1 = Target(name="t1", destination=dest, sources=("x", "y"))
    t2 = Target(name="t2", destination=dest, sources=("y", "z"))
    lane = LaneSpec(name="l", group_id="g.l", targets=(t1, t2))
    assert lane.sources == ("x", "y", "z")
    p = Plan(lanes=(lane, LaneSpec(name="m", group_id="g.m", targets=(t2,))))
    assert p.sources == ("x", "y", "z")
    assert p.targets == (t1, t2, t2)


# ------------------------------------------------------------------------------------------ property

NAMES = st.text(alphabet="ab._-", min_size=1, max_size=6)
PATTERNS = st.sampled_from([".*", "a.*", "[ab._-]+", r"a\..*", ".*b", "_.*", ".*zstd.*", "[^.]*"])
DESTS = st.lists(
    st.sampled_from([d("zstd"), d("zstd", 3), d("gzip", 1), d("lz4"), d("none"), d("snappy", topic="{source}.s"),
                     d("gzip", topic="{codec}.{source}")]),
    min_size=1, max_size=3, unique_by=lambda x: (x["codec"], x.get("level"), x.get("topic")),
)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(existing=st.sets(NAMES, max_size=12), pattern=PATTERNS, dests=DESTS,
       lanes=st.sampled_from(["isolated", "shared"]),
       dlq=st.one_of(st.none(), NAMES.filter(lambda n: n not in (".", "..") and not n.startswith("__"))))
def test_no_destination_is_ever_a_source(existing, pattern, dests, lanes, dlq):
    config = make(pat(pattern, *dests), lanes=lanes, dlq=dlq)
    try:
        p = plan(config, existing)
    except ConfigError as exc:
        # destination names all hold letters outside NAMES' alphabet, so they cannot collide with each
        # other, with the DLQ or with a source: the only legitimate refusal is an empty match
        assert str(exc).startswith(f"routes.0.source_pattern {pattern!r} matches no topic")
        return
    sources = set(p.sources)
    dest_topics = p.destination_topics()
    assert sources.isdisjoint(dest_topics)
    assert sources <= existing
    assert all(re.fullmatch(pattern, s) for s in sources)
    assert not any(s.startswith("__") for s in sources)
    assert dlq not in sources and dlq not in dest_topics
    assert len(dest_topics) == len(p.targets[0].sources) * len(dests)
