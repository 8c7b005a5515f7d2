"""What `transcoder validate` checks and shows, whichever engine: the checks that need no connection (`offline_checks`,
all of `validate --offline`), what only the clusters can tell (`NOT_CHECKED_OFFLINE`), and the plan as data
(`plan_data`): what `--format json` prints and the table is drawn from (docs/running.md, "The plan as JSON").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from transcoder import logs
from transcoder.config import SECRET_PROPERTIES, Cluster, Config, Destination
from transcoder.errors import ConfigError
from transcoder.kafka.clients import check_properties
from transcoder.kafka.provisioning import DestinationTopic, Provision
from transcoder.pipeline import routes
from transcoder.pipeline.routes import LaneSpec, Plan, Target

#: The version of plan_data's shape: raised when a key is renamed or removed (keys are only added within one).
PLAN_FORMAT = 1

Outcome = Literal["passed", "failed", "not checked"]


@dataclass(frozen=True)
class Check:
    """One pre-flight check: what it is, how it came out, and what was found (never a secret's value)."""

    check: str
    outcome: Outcome
    detail: str


def not_checked_offline(config: Config, engine_checks: str | None) -> list[Check]:
    """What `validate --offline` cannot check: everything the clusters (and Spark) must answer."""
    out = [
        Check("clusters", "not checked", "the clusters answer with these client properties (TLS, SASL)"),
        Check("sources", "not checked", "each source topic exists; the topics each source_pattern matches"),
        Check("destinations", "not checked",
              "existing destination topics: their partitions (the source's), compression.type, max.message.bytes "
              "and message.timestamp.type; the destination brokers' zstd (Kafka 2.1+) and record format (v2)"),
    ]
    if config.errors.dlq_topic:
        out.append(Check("dead-letter topic", "not checked",
                         f"{config.errors.dlq_topic}: max.message.bytes and message.timestamp.type, if it exists"))
    if engine_checks:
        out.append(Check("engine", "not checked", engine_checks))
    return out


def _clusters(config: Config) -> list[tuple[str, Cluster]]:
    if config.destination_cluster is None:
        return [("cluster", config.cluster)]
    return [("cluster", config.cluster), ("destination_cluster", config.destination_cluster)]


def _offline_properties(cluster: Cluster) -> dict[str, Any]:
    """The cluster's properties for librdkafka's verdict without a connection: an OIDC client fetches a token from
    its endpoint as it is built, so the method is left out (its properties are still checked)."""
    conf = cluster.librdkafka()
    if str(conf.get("sasl.oauthbearer.method", "")).lower() == "oidc":
        conf.pop("sasl.oauthbearer.method")
    return conf


def offline_checks(config: Config) -> tuple[Plan | None, list[Check]]:
    """Every check that needs no connection, on a config that loaded (the model, its codec levels, its reserved
    topics and its secret references are checked by loading it): librdkafka's verdict on each cluster's properties
    (a client with no brokers), and the routes (no destination its own source or written twice, no two with one
    name, no copy loop; patterns unresolved). The plan as far as it is known, None when the routes fail."""
    secret = sorted({f"{name}.config.{key}" for name, cluster in _clusters(config)
                     for key in cluster.config if key in SECRET_PROPERTIES})
    checks = [
        Check("config", "passed", "keys, types and ranges, codec levels, cross-field rules, reserved topics"),
        Check("secret references", "passed",
              "every ${env:...} and ${file:...} reference resolved"
              + (f"; secrets (values never shown): {', '.join(secret)}" if secret else "; no secret properties")),
    ]
    for name, cluster in _clusters(config):
        try:  # named as prepare names them: which clusters the properties are for
            check_properties(_offline_properties(cluster), f"{name}.config (the " + (
                "destination cluster)" if name == "destination_cluster" else
                "source cluster)" if config.destination_cluster is not None else
                "source cluster and destination cluster)"))
        except ConfigError as exc:
            checks.append(Check(f"{name}.config", "failed", logs.redact(str(exc))))
        else:
            checks.append(Check(f"{name}.config", "passed", "librdkafka accepts every client property"))
    try:
        plan = routes.plan(config, None)
    except ConfigError as exc:
        checks.append(Check("routes", "failed", logs.redact(str(exc))))
        return None, checks
    checks.append(Check("routes", "passed", "no destination is its own source or written twice, no two share a "
                                            "name, no copy loops" + (" (among the literal sources: source_pattern "
                                                                     "is resolved against the cluster)"
                                                                     if any(r.source_pattern for r in config.routes)
                                                                     else "")))
    return plan, checks


def failed(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.outcome == "failed"]


def _topics(dest: Destination, sources: Sequence[str],
            by_topic: Mapping[str, DestinationTopic]) -> list[dict[str, Any]]:
    """Per source, the destination topic; its partitions, action and configs where the clusters told (else None)."""
    out = []
    for source in sources:
        topic = dest.topic_for(source)
        d = by_topic.get(topic)
        out.append({
            "source": source, "topic": topic,
            "partitions": d.partitions if d is not None else None,
            "action": None if d is None else ("exists" if d.exists else "create"),
            "configs": None if d is None else (dict(sorted(d.create_configs.items())) if not d.exists
                                               else {"compression.type": d.compression_type}),
        })
    return out


def _destination(dest: Destination, target: Target | None, lane: LaneSpec | None,
                 topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": target.name if target is not None else dest.name,
        "lane": lane.name if lane is not None else None,
        "group_id": lane.group_id if lane is not None else None,
        "codec": dest.codec, "level": dest.level, "label": dest.label,
        "topic_template": dest.topic if dest.topic is not None else (
            "{source}.{codec}" if dest.level is None else "{source}.{codec}-{level}"),
        "batch": {"max_bytes": dest.batch.max_bytes, "max_records": dest.batch.max_records,
                  "linger_ms": dest.batch.linger_ms},
        "allow_broker_recompression": dest.allow_broker_recompression,
        "topics": topics,
    }


def plan_data(config: Config, plan: Plan | None, provision: Provision | None, checks: Sequence[Check], *,
              engine: str, offline: bool) -> dict[str, Any]:
    """The plan as data, in the documented shape (docs/running.md): the lanes, every route with its destinations
    (codec, level, batching, and per source the destination topic; its partitions and whether it is created where
    the clusters told), the topics a pattern passes over, the dead-letter topic, and every check with its outcome.
    `plan` None: the routes failed; `provision` None: the clusters did not tell (offline, or a check failed)."""
    by_topic = {d.topic: d for d in provision.destinations} if provision is not None else {}
    lane_of = {t.name: lane for lane in plan.lanes for t in lane.targets} if plan is not None else {}
    targets = iter(plan.targets) if plan is not None else None  # in the config's order: route by route
    out_routes = []
    for i, route in enumerate(config.routes):
        dests = []
        resolved: list[str] | None = [route.source] if route.source is not None else None
        for dest in route.destinations:
            target = next(targets) if targets is not None else None
            if target is not None and route.source is None and provision is not None:
                resolved = list(target.sources)
            sources = target.sources if target is not None else tuple(resolved or ())
            dests.append(_destination(dest, target, lane_of.get(target.name) if target is not None else None,
                                      _topics(dest, sources, by_topic)))
        out_routes.append({"route": i, "source": route.source, "source_pattern": route.source_pattern,
                           "sources": resolved, "destinations": dests})
    dlq = provision.dlq if provision is not None else None
    return {
        **_head(engine, offline, [], checks),
        "group_id": config.group_id,
        "lanes_mode": config.lanes,
        "guarantee": config.guarantee,
        "hot_path": config.hot_path,
        "lanes": [{"name": lane.name, "group_id": lane.group_id, "destinations": [t.name for t in lane.targets]}
                  for lane in (plan.lanes if plan is not None else ())],
        "routes": out_routes,
        "skipped": [{"route": s.route, "topic": s.topic, "why": s.why}
                    for s in (plan.skipped if plan is not None else ())],
        "dead_letter": None if not config.errors.dlq_topic else {
            "topic": config.errors.dlq_topic,
            "partitions": dlq.partitions if dlq is not None else None,
            "action": None if dlq is None else ("exists" if dlq.exists else "create"),
        },
    }


def refused_data(exc: ConfigError, *, engine: str, offline: bool) -> dict[str, Any]:
    """plan_data's shape for a config that did not load: its problems, one each, and nothing planned."""
    found = getattr(exc, "problems", None)
    problems = ([{"path": p.path, "problem": p.text, "where": p.where} for p in found] if found is not None
                else [{"path": "", "problem": logs.redact(str(exc)), "where": None}])
    return {**_head(engine, offline, problems, [Check("config", "failed", logs.redact(str(exc)))]),
            "group_id": None, "lanes_mode": None, "guarantee": None, "hot_path": None,
            "lanes": [], "routes": [], "skipped": [], "dead_letter": None}


def _head(engine: str, offline: bool, problems: list[dict[str, Any]], checks: Sequence[Check]) -> dict[str, Any]:
    return {"format": PLAN_FORMAT, "engine": engine, "offline": offline,
            "ok": not problems and not failed(checks), "problems": problems, "checks": [asdict(c) for c in checks]}
