"""Pure routing: which source topics go to which destination topics, in which lanes, with which codec.

Topic and lane naming live here only. Nothing here talks to Kafka: the caller passes the
topic names the cluster has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from transcoder.config import Config, Destination, Route, reserved
from transcoder.errors import ConfigError


@dataclass(frozen=True)
class Target:
    """One destination config of one route: it copies every source the route matched."""

    name: str  # unique; names the lane in isolated mode, and labels metrics
    destination: Destination
    sources: tuple[str, ...]

    def topic_for(self, source: str) -> str:
        return self.destination.topic_for(source)

    @property
    def topics(self) -> dict[str, str]:
        """source topic -> destination topic"""
        return {s: self.topic_for(s) for s in self.sources}


@dataclass(frozen=True)
class LaneSpec:
    """One consumer (one consumer group) feeding one or more targets."""

    name: str
    group_id: str
    targets: tuple[Target, ...]
    sources: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        seen: dict[str, None] = {}
        for t in self.targets:
            seen.update(dict.fromkeys(t.sources))
        object.__setattr__(self, "sources", tuple(seen))

    def targets_for(self, source: str) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if source in t.sources)


@dataclass(frozen=True)
class Skipped:
    """A topic a route's `source_pattern` matches but does not copy, and why."""

    route: int
    topic: str
    why: str


@dataclass(frozen=True)
class Plan:
    lanes: tuple[LaneSpec, ...]
    skipped: tuple[Skipped, ...] = ()

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(t for lane in self.lanes for t in lane.targets)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for lane in self.lanes for s in lane.sources))

    def destination_topics(self) -> dict[str, tuple[str, Target]]:
        """destination topic -> (source topic, target)"""
        return {t.topic_for(s): (s, t) for t in self.targets for s in t.sources}


def _target_name(route_index: int, route: Route, dest: Destination) -> str:
    if dest.name is not None:
        return dest.name
    if route.source is not None:
        return dest.topic_for(route.source)
    if dest.topic is not None:  # e.g. "{source}.a" -> route0.source.a
        return f"route{route_index}." + dest.topic.format(source="source", codec=dest.codec, level=dest.level)
    return f"route{route_index}.{dest.label}"


def _passed_over(config: Config, topic: str, written: set[str]) -> str | None:
    """Why a pattern that matches `topic` does not copy it, or None if it does."""
    why = reserved.role(config, topic)
    if why is not None:
        return why
    if reserved.hidden_from_patterns(topic):
        return "internal by convention (`__`, `.`, `_confluent` or `_schemas` first, `.internal` or `-internal` last)"
    if topic in written:
        return "written by this config"
    return None


def plan(config: Config, existing_topics: Iterable[str] | None) -> Plan:
    """Resolve routes against the cluster's topics. ConfigError for loops, collisions, reserved topics, no sources.
    `existing_topics` None: not known (`validate --offline`), each pattern's sources are left unresolved (none).

    Literal sources are taken as given (a missing one is reported by provisioning, naming it).
    Patterns match whole topic names, never internal topics, transcoder's own, nor any topic this plan writes
    (`Plan.skipped` says which they matched). No route reads or writes a reserved topic (config.reserved).
    """
    existing = sorted(set(existing_topics)) if existing_topics is not None else None
    literal_dests = {d.topic_for(r.source) for r in config.routes if r.source for d in r.destinations}
    # Everything this config could write, for any existing topic: a pattern must not read it back.
    written = literal_dests | {d.topic_for(t) for r in config.routes for d in r.destinations for t in existing or ()}
    if config.errors.dlq_topic:
        written.add(config.errors.dlq_topic)

    targets: list[Target] = []
    skipped: list[Skipped] = []
    for i, route in enumerate(config.routes):
        sources = _sources(config, i, route, existing, written, skipped)
        for j, dest in enumerate(route.destinations):
            _refuse_reserved(config, i, j, route, dest, sources)
            targets.append(Target(name=_target_name(i, route, dest), destination=dest, sources=sources))
    _check_targets(targets)

    lanes: tuple[LaneSpec, ...]
    if config.lanes == "shared":
        lanes = (LaneSpec(name="shared", group_id=config.group_id, targets=tuple(targets)),)
    else:
        lanes = tuple(LaneSpec(name=t.name, group_id=f"{config.group_id}.{t.name}", targets=(t,)) for t in targets)
    return Plan(lanes=lanes, skipped=tuple(skipped))


def _sources(config: Config, i: int, route: Route, existing: list[str] | None, written: set[str],
             skipped: list[Skipped]) -> tuple[str, ...]:
    """Route `i`'s sources: its literal one, or the existing topics its pattern matches and may copy (those passed
    over are added to `skipped`; none when the topics are not known). ConfigError when a pattern leaves none."""
    if route.source is not None:
        return (route.source,)
    if existing is None:
        return ()
    rx = re.compile(route.source_pattern or "")
    matched = [t for t in existing if rx.fullmatch(t)]
    passed = {t: why for t in matched if (why := _passed_over(config, t, written)) is not None}
    skipped += [Skipped(i, t, why) for t, why in passed.items()]
    sources = tuple(t for t in matched if t not in passed)
    if not sources:
        raise ConfigError(f"routes.{i}.source_pattern {route.source_pattern!r} matches no topic"
                          + (f" it may copy ({len(passed)} passed over: {_listed(passed)})" if passed else ""))
    return sources


def _refuse_reserved(config: Config, i: int, j: int, route: Route, dest: Destination,
                     sources: tuple[str, ...]) -> None:
    """ConfigError when route `i` reads a reserved topic, or its destination `j` writes one."""
    for s in sources:
        why = reserved.role(config, s)
        if why is not None:
            raise ConfigError(f"routes.{i}.source: " + reserved.refusal("source", s, why))
        why = reserved.role(config, dest.topic_for(s))
        if why is not None:
            at = f"routes.{i}.destinations.{j}" + (".topic" if dest.topic is not None else "")
            copying = f" (copying {s})" if route.source is None else ""
            raise ConfigError(f"{at}: " + reserved.refusal("destination", dest.topic_for(s), why) + copying)


def _check_targets(targets: list[Target]) -> None:
    """ConfigError when a destination is its own source or written twice, two share a name, or a copy loops."""
    dest_of: dict[str, str] = {}
    for t in targets:
        for s in t.sources:
            d = t.topic_for(s)
            if d == s:
                raise ConfigError(f"destination {d} is its own source: set a different `topic` for it")
            if d in dest_of:
                raise ConfigError(f"destination {d} is written twice (copying {dest_of[d]} and {s})")
            dest_of[d] = s
    names = [t.name for t in targets]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"two destinations share the name {sorted(dup)[0]!r}: set `name` on one of them")
    all_sources = {s for t in targets for s in t.sources}
    loops = sorted(all_sources & set(dest_of))
    if loops:
        raise ConfigError(f"topic {loops[0]} is both a source and a destination: the copy would loop")


def _listed(passed: dict[str, str], most: int = 3) -> str:
    names = sorted(passed)
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
