"""Reserved topics: Kafka's internal topics and transcoder's own (offset map, migration state, dead letters), which a
route can neither read nor write, and the topics a source pattern passes over.

Pure: names in, words out. The loader checks a config's literal topics (naming the line); the plan checks what
patterns and templates resolve to (naming the route).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transcoder.config.model import Config

#: A key's place in a config file, as pydantic names it: ("routes", 0, "destinations", 1, "topic").
Loc = tuple[str | int, ...]

#: Kafka's internal topics, by what they hold. Kafka names every internal topic with `__` first.
KAFKA_INTERNAL = {
    "__consumer_offsets": "the consumer groups' committed offsets",
    "__transaction_state": "the transaction coordinators' log",
    "__share_group_state": "the share groups' state",
    "__remote_log_metadata": "tiered storage's metadata",
    "__cluster_metadata": "the KRaft controllers' metadata log",
}


def kafka_internal(topic: str) -> str | None:
    """What `topic` is, in words, if it is one of Kafka's internal topics (any name starting with `__`); else
    None."""
    if topic in KAFKA_INTERNAL:
        return f"Kafka's internal topic of {KAFKA_INTERNAL[topic]}"
    if topic.startswith("__"):
        return "named as Kafka's internal topics are (`__` first)"
    return None


def hidden_from_patterns(topic: str) -> bool:
    """Whether a `source_pattern` passes over `topic` even when it matches: Kafka's internal topics and what
    MirrorMaker 2 takes for internal (DefaultReplicationPolicy.isInternalTopic: `__` or `.` first, `.internal` or
    `-internal` last: its own and Connect's topics), and Confluent Platform's (`_confluent*`, `_schemas*`). Named as a
    literal `source`, any of them but Kafka's may be copied."""
    return (topic.startswith(("__", ".", "_confluent", "_schemas"))
            or topic.endswith((".internal", "-internal")))


def own_topics(config: Config) -> dict[str, tuple[Loc, str]]:
    """transcoder's own topics of this config: topic -> (the key that names it, its role in words). The offset map
    holds the lanes' health records too; both migration topics are the config's only with a `migration` section."""
    own: dict[str, tuple[Loc, str]] = {}
    if config.errors.dlq_topic:
        own[config.errors.dlq_topic] = (("errors", "dlq_topic"), "this config's dead-letter topic (errors.dlq_topic)")
    m = config.migration
    if m is not None:
        own.setdefault(config.state_topic, (
            ("migration", "state_topic") if m.state_topic else ("migration",),
            "this config's migration state topic (migration.state_topic, default <group_id>.migrations)"))
        own.setdefault(config.offset_map_topic, (
            ("migration", "offset_map_topic") if m.offset_map_topic else ("migration",),
            "this config's offset-map topic (migration.offset_map_topic, default <group_id>.offset-map)"))
    return own


def role(config: Config, topic: str) -> str | None:
    """Why `topic` can be neither a source nor a destination of `config`'s routes, or None if it can be."""
    own = own_topics(config).get(topic)
    return own[1] if own is not None else kafka_internal(topic)


def refusal(what: str, topic: str, why: str) -> str:
    """The words of a refused source or destination."""
    return f"{what} {topic} is {why}: no route may read or write it"


def problems(config: Config) -> Iterator[tuple[Loc, str]]:
    """The config's literal topics that are reserved, each with the key that names it: sources, destinations whose
    topic does not depend on a pattern's matches, and transcoder's own topics among themselves (one topic cannot
    be both the offset map and the state topic, or a dead-letter topic) or named as Kafka's."""
    yield from _own_topic_problems(config)
    yield from _route_problems(config)


def _own_topic_problems(config: Config) -> Iterator[tuple[Loc, str]]:
    """transcoder's own topics named as Kafka's, or as another of transcoder's own."""
    seen: dict[str, str] = {}  # topic -> which of transcoder's own it is
    m = config.migration
    named: list[tuple[str, Loc, str]] = []  # transcoder's own topics, state topic first (the later wins a clash)
    if m is not None:
        named.append((config.state_topic, ("migration", "state_topic") if m.state_topic else ("migration",),
                      "the migration state topic"))
        named.append((config.offset_map_topic,
                      ("migration", "offset_map_topic") if m.offset_map_topic else ("migration",),
                      "the offset-map topic"))
    if config.errors.dlq_topic:
        named.append((config.errors.dlq_topic, ("errors", "dlq_topic"), "the dead-letter topic"))
    for topic, loc, name in named:
        internal = kafka_internal(topic)
        if internal is not None:
            yield loc, f"{name} {topic} is {internal}: give transcoder a topic of its own"
        elif topic in seen:
            yield loc, f"{name} {topic} is also {seen[topic]}: each of transcoder's own topics needs a topic of its own"
        seen.setdefault(topic, name)


def _route_problems(config: Config) -> Iterator[tuple[Loc, str]]:
    """Literal sources and destinations that are reserved topics."""
    for i, route in enumerate(config.routes):
        if route.source is not None:
            why = role(config, route.source)
            if why is not None:
                yield ("routes", i, "source"), refusal("source", route.source, why)
        for j, dest in enumerate(route.destinations):
            if route.source is not None:
                topic = dest.topic_for(route.source)
            elif dest.topic is not None and "{source}" not in dest.topic:
                topic = dest.topic_for("")  # the same topic whatever the pattern matches
            else:
                continue  # named after each match: the plan checks what it resolves to
            why = role(config, topic)
            if why is not None:
                loc: Loc = ("routes", i, "destinations", j) + (("topic",) if dest.topic is not None else ())
                yield loc, refusal("destination", topic, why)
