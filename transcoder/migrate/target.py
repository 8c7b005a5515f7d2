"""Which destination of the config a migration moves consumers to: one source topic, one destination topic."""

from __future__ import annotations

from dataclasses import dataclass

from transcoder.config import Config
from transcoder.errors import ConfigError
from transcoder.kafka.clients import connect_admin
from transcoder.pipeline import routes
from transcoder.pipeline.routes import Plan, Target


@dataclass(frozen=True)
class Resolved:
    target: Target
    source: str
    destination: str  # topic; also the migration's id
    lane_group: str  # the consumer group of the lane that copies it
    lane_groups: tuple[str, ...]  # every lane group of the config (never migrated, never counted as readers)


def pick(config: Config, plan: Plan, name: str | None) -> Resolved:
    """The target named `name` (a destination's name), or the config's only one. ConfigError otherwise."""
    targets = plan.targets
    names = [t.name for t in targets]
    if name is None:
        if len(targets) != 1:
            raise ConfigError(f"the config has {len(targets)} destinations: name one with --destination "
                              f"({', '.join(names)})")
        target = targets[0]
    else:
        found = [t for t in targets if t.name == name or name in t.topics.values()]
        if not found:
            raise ConfigError(f"destination {name!r} is not in the config; it has: {', '.join(names)}")
        target = found[0]
    if len(target.sources) != 1:
        raise ConfigError(f"destination {target.name} copies {len(target.sources)} topics (a source_pattern): a "
                          "migration moves consumers of one topic, so give its route a literal `source`")
    source = target.sources[0]
    lane = next(lane for lane in plan.lanes if target in lane.targets)
    return Resolved(target=target, source=source, destination=target.topic_for(source), lane_group=lane.group_id,
                    lane_groups=tuple(lane.group_id for lane in plan.lanes))


def resolve(config: Config, name: str | None) -> Resolved:
    """`pick` against the cluster's topics (a pattern route is resolved as the service resolves it)."""
    admin, md = connect_admin(config.cluster.librdkafka())
    return pick(config, routes.plan(config, md.topics), name)
