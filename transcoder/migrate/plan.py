"""`transcoder migrate plan`: the facts of a migration before it starts, and their rendering.

`make_plan` asks the clusters (topics, groups, sizes, broker versions); `assemble` turns those facts into a
`MigrationPlan` (pre-flight checks, projected disk and network, the stages) without I/O; `rows`, `as_dict`
and `render_table` only render. Figures are kept as numbers; rendering formats them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka.errors import KafkaError as KafkaPythonError

from transcoder.codecs import broker_recompresses
from transcoder.config import Config, MigrationConfig
from transcoder.errors import KafkaUnavailableError, TopicError, TranscoderError
from transcoder.kafka.admin import TopicShape, describe, describe_configs, end_offsets
from transcoder.kafka.clients import connect_admin
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.provisioning import zstd_problem
from transcoder.migrate.groups import GroupAdmin, GroupView, describe_group, groups_on
from transcoder.migrate.payoff import stored_bytes_per_record
from transcoder.migrate.target import pick
from transcoder.pipeline import routes
from transcoder.pipeline.routes import LaneSpec, Plan, Target

Status = Literal["ok", "problem", "check", "pending", "n/a"]

#: What `not measured` says before the shadow copy has stored anything.
NOT_MEASURED = "not measured yet: run the shadow copy first"


@dataclass(frozen=True)
class TopicFacts:
    """One topic as the cluster has it now; every figure None where the topic does not exist (yet)."""

    topic: str
    partitions: int | None
    replication_factor: int | None
    records: int | None  # end - start offsets, summed over partitions (a compacted topic holds fewer)
    disk_bytes: int | None  # on disk over every replica (DescribeLogDirs); None: the brokers did not say
    compression_type: str | None = None  # the topic's compression.type (asked of the destination only)
    end_offsets: int | None = None  # the partitions' end offsets summed: records ever written (retention aside)

    @property
    def exists(self) -> bool:
        return self.partitions is not None

    @property
    def bytes_per_record(self) -> float | None:
        """Bytes one record takes on one replica (as stored, and so as fetched); None: nothing to divide."""
        return stored_bytes_per_record(self.disk_bytes, self.replication_factor, self.records)


@dataclass(frozen=True)
class Check:
    """One pre-flight check: `problem` blocks the migration, `check` is for the operator to confirm."""

    name: str
    status: Status
    detail: str
    groups: tuple[str, ...] = ()  # the groups it names (zstd consumers, manual assignment)


@dataclass(frozen=True)
class GroupNetwork:
    """What one group would fetch to read its lag from either topic (fetch bytes follow the stored bytes)."""

    group_id: str
    lag_records: int
    source_fetch_bytes: float
    destination_fetch_bytes: float


@dataclass(frozen=True)
class Projection:
    """Disk and network expected from the shadow copy's measured bytes per record; None before it is measured."""

    source_bytes_per_record: float | None
    destination_bytes_per_record: float | None
    ratio: float | None  # source bytes per record / destination bytes per record
    #: The source's current records stored as the destination stores them, over the destination's replicas.
    projected_destination_disk_bytes: float | None
    groups: tuple[GroupNetwork, ...]
    note: str | None  # why there is no figure (NOT_MEASURED and why), None when measured

    @property
    def measured(self) -> bool:
        return self.ratio is not None


@dataclass(frozen=True)
class Stage:
    name: str
    does: str
    command: str


@dataclass(frozen=True)
class MigrationPlan:
    target: str  # the destination's name in the config (its lane, its metrics label)
    source: TopicFacts
    destination: TopicFacts
    codec: str
    level: int | None
    batch_max_bytes: int
    batch_linger_ms: int
    batch_max_records: int
    destination_cluster: str | None  # bootstrap servers of a separate destination cluster; None: the same one
    lane_group: str  # the consumer group of the lane that copies the source (never migrated)
    groups: tuple[GroupView, ...]
    max_produce_version: int | None  # of the destination brokers; None: not known
    checks: tuple[Check, ...]
    projection: Projection
    stages: tuple[Stage, ...]

    @property
    def label(self) -> str:
        return self.codec if self.level is None else f"{self.codec}-{self.level}"

    @property
    def problems(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == "problem")


# ---------------------------------------------------------------- pure: facts -> plan
def project(source: TopicFacts, destination: TopicFacts, groups: Sequence[GroupView]) -> Projection:
    """Disk and network from the measured bytes per record of both topics."""
    src, dst = source.bytes_per_record, destination.bytes_per_record
    note = None
    if not destination.exists:
        note = f"{NOT_MEASURED} (the destination topic does not exist yet)"
    elif not destination.records:
        note = f"{NOT_MEASURED} (the destination holds no records)"
    elif dst is None:
        note = f"{NOT_MEASURED} (the brokers report no size for the destination yet)"
    elif not source.records:
        note = "not measured: the source holds no records"
    elif src is None:
        note = "not measured: the brokers report no size for the source"
    if note is not None:
        return Projection(src, dst, None, None, (), note)
    assert src is not None and dst is not None
    projected = (source.records or 0) * dst * (destination.replication_factor or 1)
    nets = tuple(GroupNetwork(g.group_id, g.lag, g.lag * src, g.lag * dst) for g in groups)
    return Projection(src, dst, src / dst, projected, nets, None)


def _members_phrase(g: GroupView) -> str:
    if not g.members:
        return f"{g.group_id} (no member now: check its application)"
    return f"{g.group_id} ({', '.join(sorted({m.label for m in g.members}))})"


def checks(*, target: Target, source: TopicFacts, destination: TopicFacts, groups: Sequence[GroupView],
           max_produce_version: int | None, migration: MigrationConfig | None, offset_map_topic: str,
           state_topic: str, destination_bootstrap: str, projection: Projection) -> tuple[Check, ...]:
    """The pre-flight checks, from the facts."""
    d = target.destination
    codec = d.codec
    out: list[Check] = []

    if migration is None:
        out.append(Check("migration config", "problem",
                         "the config has no `migration:` section, so the lanes record no offset map and no group "
                         "can be moved: add `migration: {}` (defaults) and restart the copy"))
    else:
        out.append(Check("migration config", "ok",
                         f"offset map in {offset_map_topic}, state in {state_topic}; cutover gate: lag at most "
                         f"{migration.max_lag_records:,} records, no lane error within {migration.error_window_s:g} s"))

    if codec == "zstd":
        one = Plan(lanes=(LaneSpec(name=target.name, group_id="", targets=(target,)),))
        why = zstd_problem(one, max_produce_version)
        if why:
            out.append(Check("zstd brokers", "problem", why))
        elif max_produce_version is None:
            out.append(Check("zstd brokers", "check", "the destination brokers' Produce versions could not be "
                                                      "asked: zstd needs v7 (Kafka 2.1 or newer)"))
        else:
            out.append(Check("zstd brokers", "ok", f"the destination brokers speak Produce up to "
                                                   f"v{max_produce_version}; zstd needs v7 (Kafka 2.1)"))
        if groups:
            out.append(Check(
                "zstd consumers", "check",
                "consumers older than Kafka 2.1 cannot read zstd (KIP-110: Java clients before 2.1 fail with "
                "UNSUPPORTED_COMPRESSION_TYPE): check the client version of every group before its cutover: "
                + "; ".join(_members_phrase(g) for g in groups),
                tuple(g.group_id for g in groups)))
        else:
            out.append(Check("zstd consumers", "check",
                             f"no group reads {source.topic} now; any consumer of {destination.topic} must read zstd "
                             "(Java clients 2.1 or newer, KIP-110)"))
    else:
        out.append(Check("zstd brokers", "n/a", f"the codec is {codec}"))

    if not destination.exists:
        out.append(Check("broker recompression", "ok", f"{destination.topic} does not exist yet: it is created with "
                                                       "compression.type=producer, keeping batches as produced"))
    else:
        ctype = destination.compression_type or "producer"
        if broker_recompresses(ctype, codec):
            fix = (f"kafka-configs --bootstrap-server {destination_bootstrap} --alter --entity-type topics "
                   f"--entity-name {destination.topic} --add-config compression.type=producer")
            if d.allow_broker_recompression:
                out.append(Check("broker recompression", "check",
                                 f"{destination.topic} has compression.type={ctype}: the broker recompresses every "
                                 f"{codec} batch (allowed by allow_broker_recompression); to stop it: {fix}"))
            else:
                out.append(Check("broker recompression", "problem",
                                 f"{destination.topic} has compression.type={ctype}: the broker would recompress "
                                 f"every {codec} batch; fix: {fix}"))
        else:
            out.append(Check("broker recompression", "ok", f"{destination.topic} has compression.type={ctype}: "
                                                           "batches are stored as produced"))

    if destination.exists and destination.partitions != source.partitions:
        out.append(Check("partitions", "problem",
                         f"{destination.topic} has {destination.partitions} partitions but {source.topic} has "
                         f"{source.partitions}: records of partition p must land in p; delete it or name another "
                         "topic"))
    elif destination.exists:
        out.append(Check("partitions", "ok", f"{source.partitions} on both sides"))
    else:
        out.append(Check("partitions", "ok", f"{source.topic} has {source.partitions}: the destination is created "
                                             "with as many"))

    simple = [g for g in groups if g.simple]
    if simple:
        out.append(Check(
            "manual assignment", "check",
            f"{', '.join(g.group_id for g in simple)} committed without joining (assign()): such consumers are no "
            "members, so a running one cannot be seen: make sure none runs before its cutover",
            tuple(g.group_id for g in simple)))

    if projection.measured:
        out.append(Check("disk and network", "ok",
                         f"measured on {destination.records:,} records of {destination.topic}"))
    else:
        out.append(Check("disk and network", "pending", projection.note or NOT_MEASURED))
    return tuple(out)


def stages(*, target: str, source: str, destination: str, groups: Sequence[str], lane_group: str,
           offset_map_topic: str, state_topic: str, verify_range_records: int, max_lag_records: int,
           error_window_s: float, separate_cluster: bool, groups_named: bool = False,
           config_path: str = "CONFIG") -> tuple[Stage, ...]:
    """What follows the plan, in order, with the command of each step."""
    base = f"transcoder migrate {{}} -c {config_path} --destination {target}"
    out = [
        Stage("start", f"record the migration in {state_topic} with its groups (each on the source); the lanes "
                       f"(group {lane_group}) record in {offset_map_topic} which source offsets every copied record "
                       f"of {destination} comes from; the copy itself runs as `transcoder run -c {config_path}`",
              base.format("start") + ("".join(f" --group {g}" for g in groups) if groups_named else " --all-groups")),
        Stage("verify", f"compare {destination} with {source} record by record (key, value, headers, timestamp) in "
                        f"ranges of {verify_range_records:,} records per partition; --follow keeps verifying",
              base.format("verify")),
    ]
    gates_text = (f"gates: no active member; the lane copied past the group's offsets; lane lag at most "
                  f"{max_lag_records:,} records per partition; verified up to the group's offsets with no mismatch; "
                  f"no lane error within {error_window_s:g} s (--force overrides, recorded)")
    moved = "; then point its consumers at the destination cluster" if separate_cluster else ""
    for g in groups or ("GROUP",):
        stop = "stop its consumers (or --wait), " if groups else "stop the group's consumers, "
        out.append(Stage(f"cutover {g}", f"{stop}translate its committed offsets on {source} through the offset "
                                         f"map and commit them on {destination}{moved}; {gates_text}",
                         base.format("cutover") + f" --group {g} --wait"))
    out += [
        Stage("rollback", f"move a cut-over group back to {source}, at the source offsets its offsets on "
                          f"{destination} map to (possible at any stage)",
              base.format("rollback") + " --group GROUP --wait"),
        Stage("finish", f"close the migration once no group reads {source}; producers and retention are left to you "
                        "(nothing is deleted)", base.format("finish")),
    ]
    return tuple(out)


def assemble(config: Config, target: Target, *, source: TopicFacts, destination: TopicFacts,
             groups: Sequence[GroupView], lane_group: str, max_produce_version: int | None,
             groups_named: bool = False, config_path: str = "CONFIG") -> MigrationPlan:
    """The plan from the facts gathered (no I/O)."""
    d = target.destination
    migration = config.migration
    gates = migration or MigrationConfig()
    projection = project(source, destination, groups)
    found = checks(target=target, source=source, destination=destination, groups=groups,
                   max_produce_version=max_produce_version, migration=migration,
                   offset_map_topic=config.offset_map_topic, state_topic=config.state_topic,
                   destination_bootstrap=config.target_cluster.bootstrap_servers, projection=projection)
    steps = stages(target=target.name, source=source.topic, destination=destination.topic,
                   groups=[g.group_id for g in groups], lane_group=lane_group,
                   offset_map_topic=config.offset_map_topic, state_topic=config.state_topic,
                   verify_range_records=gates.verify_range_records, max_lag_records=gates.max_lag_records,
                   error_window_s=gates.error_window_s, separate_cluster=config.destination_cluster is not None,
                   groups_named=groups_named, config_path=config_path)
    return MigrationPlan(
        target=target.name, source=source, destination=destination, codec=d.codec, level=d.level,
        batch_max_bytes=d.batch.max_bytes, batch_linger_ms=d.batch.linger_ms, batch_max_records=d.batch.max_records,
        destination_cluster=config.destination_cluster.bootstrap_servers if config.destination_cluster else None,
        lane_group=lane_group, groups=tuple(groups), max_produce_version=max_produce_version, checks=found,
        projection=projection, stages=steps)


# ---------------------------------------------------------------- I/O: ask the clusters
def topic_facts(admin: AdminClient, info: RawClient, topic: str, *, with_config: bool) -> TopicFacts:
    shape = describe(admin, topic)
    if shape is None:
        return TopicFacts(topic, None, None, None, None, None)
    try:
        md = admin.list_topics(topic=topic, timeout=10).topics[topic]
    except KafkaException as exc:
        raise KafkaUnavailableError(f"cannot describe topic {topic}: {exc.args[0]}", topic=topic) from exc
    replication = max((len(p.replicas) for p in md.partitions.values()), default=0) or None
    offsets = end_offsets(admin, {topic: TopicShape(topic, shape.partitions)})
    records = sum(high - low for low, high in offsets.values())
    try:
        disk: int | None = info.topic_sizes([topic])[topic]
    except (KafkaPythonError, TranscoderError, OSError):  # e.g. an ACL refusing DescribeLogDirs: "not measured"
        disk = None
    ctype = None
    if with_config:
        ctype = describe_configs(admin, [topic])[topic].effective.get("compression.type", "producer")
    return TopicFacts(topic, shape.partitions, replication, records, disk, ctype,
                      end_offsets=sum(high for _, high in offsets.values()))


def _produce_version(info: RawClient) -> int | None:
    try:
        return info.max_produce_version()
    except (KafkaPythonError, TranscoderError, OSError):  # not asked: the zstd check says so
        return None


def _groups(ga: GroupAdmin, topic: str, names: Iterable[str] | None, lane_groups: Iterable[str]) -> list[GroupView]:
    if names is None:
        return groups_on(ga, topic, exclude=lane_groups)
    return [describe_group(ga, g, topic) for g in dict.fromkeys(names)]


def make_plan(config: Config, destination: str | None, *, groups: list[str] | None,
              config_path: str = "CONFIG") -> MigrationPlan:
    """Everything `migrate plan` shows, asked of the clusters now.

    `destination`: a destination's name (or topic) in the config; may be None when the config has one.
    `groups`: only these groups (MigrationError for one unknown, or without offsets on the source);
    None: every group with committed offsets on the source but the config's lane groups.
    """
    src_admin, src_md = connect_admin(config.cluster.librdkafka())
    dst_admin = connect_admin(config.destination_cluster.librdkafka())[0] if config.destination_cluster else src_admin
    resolved = pick(config, routes.plan(config, src_md.topics), destination)
    src_info = RawClient(config.cluster.librdkafka())
    dst_info = RawClient(config.destination_cluster.librdkafka()) if config.destination_cluster else src_info
    try:
        source = topic_facts(src_admin, src_info, resolved.source, with_config=False)
        if not source.exists:
            raise TopicError(f"source topic {resolved.source} does not exist", topic=resolved.source)
        dest = topic_facts(dst_admin, dst_info, resolved.destination, with_config=True)
        version = _produce_version(dst_info)
    finally:
        src_info.close()
        if dst_info is not src_info:
            dst_info.close()
    timeout_s = config.migration.api_timeout_ms / 1000 if config.migration else 60.0
    ga = GroupAdmin.connect(config.cluster.librdkafka(), admin=src_admin, timeout_s=timeout_s)
    try:
        views = _groups(ga, resolved.source, groups, resolved.lane_groups)
    finally:
        ga.close()
    return assemble(config, resolved.target, source=source, destination=dest, groups=views,
                    lane_group=resolved.lane_group, max_produce_version=version, groups_named=groups is not None,
                    config_path=config_path)


# ---------------------------------------------------------------- rendering
def human_bytes(n: float | None) -> str:
    """1234567 -> '1.23 MB' (decimal units, as the other tables); None -> '-'."""
    if n is None:
        return "-"
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _topic_line(t: TopicFacts) -> str:
    if not t.exists:
        return "does not exist yet (created when the copy starts)"
    rf = f", replication {t.replication_factor}" if t.replication_factor else ""
    bpr = t.bytes_per_record
    per = f", {bpr:,.1f} B per record" if bpr is not None else ""
    return f"{t.partitions} partitions{rf}; {_count(t.records)} records, {human_bytes(t.disk_bytes)} on disk{per}"


def _lags(g: GroupView) -> str:
    return ", ".join(f"{p}:{lag:,}" for p, lag in g.lag_by_partition.items())


def rows(plan: MigrationPlan) -> list[tuple[str, str, str]]:
    """The plan as (section, item, text) rows, in the order shown."""
    out: list[tuple[str, str, str]] = []
    batching = (f"{plan.label}; batches up to {plan.batch_max_bytes:,} B or {plan.batch_max_records:,} records, "
                f"linger {plan.batch_linger_ms} ms")
    out.append(("topics", f"source {plan.source.topic}", _topic_line(plan.source)))
    out.append(("topics", f"destination {plan.destination.topic}", _topic_line(plan.destination)))
    out.append(("topics", f"codec of {plan.target}", batching + (
        f"; on cluster {plan.destination_cluster}" if plan.destination_cluster else "")))
    out.append(("topics", "copied by", f"lane group {plan.lane_group}"))
    if not plan.groups:
        out.append(("groups", "-", f"no consumer group has committed offsets on {plan.source.topic}"))
    for g in plan.groups:
        members = ", ".join(f"{m.label} [{','.join(map(str, m.partitions)) or '-'}]" for m in g.members) or "none"
        kind = "; manual assignment" if g.simple else ""
        uncommitted = f"; no offset on {','.join(map(str, g.uncommitted))}" if g.uncommitted else ""
        text = f"{g.state}{kind}; members: {members}; lag {g.lag:,} ({_lags(g)}){uncommitted}"
        out.append(("groups", g.group_id, text))
    for c in plan.checks:
        out.append(("pre-flight", c.name, f"{c.status}: {c.detail}"))
    p = plan.projection
    if not p.measured:
        out.append(("disk and network", "measured", p.note or NOT_MEASURED))
    else:
        src_bpr, dst_bpr = p.source_bytes_per_record or 0.0, p.destination_bytes_per_record or 0.0
        src_disk, projected = plan.source.disk_bytes or 0, p.projected_destination_disk_bytes or 0.0
        change = (f"saves {human_bytes(src_disk - projected)}" if projected <= src_disk
                  else f"adds {human_bytes(projected - src_disk)}")
        text = (f"{src_bpr:,.1f} B source, {dst_bpr:,.1f} B destination: ratio {p.ratio:.2f}x "
                f"(measured on {_count(plan.destination.records)} copied records)")
        out.append(("disk and network", "bytes per record", text))
        text = (f"{human_bytes(projected)} for the source's {_count(plan.source.records)} records "
                f"(the source takes {human_bytes(src_disk)}; {change})")
        out.append(("disk and network", "destination disk", text))
        text = (f"{human_bytes(src_bpr * 1_000_000)} per million records from the source, "
                f"{human_bytes(dst_bpr * 1_000_000)} from the destination, per group")
        out.append(("disk and network", "consumer fetch", text))
        for n in p.groups:
            text = (f"its lag of {n.lag_records:,} records: {human_bytes(n.source_fetch_bytes)} from the source, "
                    f"{human_bytes(n.destination_fetch_bytes)} from the destination")
            out.append(("disk and network", f"group {n.group_id}", text))
    for s in plan.stages:
        out.append(("stages", s.name, f"{s.does}\n$ {s.command}"))
    return out


def _topic_dict(t: TopicFacts) -> dict[str, Any]:
    return {"topic": t.topic, "exists": t.exists, "partitions": t.partitions,
            "replication_factor": t.replication_factor, "records": t.records, "disk_bytes": t.disk_bytes,
            "bytes_per_record": t.bytes_per_record, "compression_type": t.compression_type}


def _group_dict(g: GroupView) -> dict[str, Any]:
    return {"group_id": g.group_id, "state": g.state, "manual_assignment": g.simple,
            "members": [{"consumer_id": m.consumer_id, "client_id": m.client_id, "host": m.host,
                         "partitions": list(m.partitions)} for m in g.members],
            "committed": {str(p): o for p, o in g.committed.items()},
            "ends": {str(p): o for p, o in sorted(g.ends.items())},
            "lag": g.lag, "lag_by_partition": {str(p): lag for p, lag in g.lag_by_partition.items()}}


def as_dict(plan: MigrationPlan) -> dict[str, Any]:
    """The plan as JSON-ready data: numbers as numbers, partitions as string keys."""
    p = plan.projection
    return {
        "target": plan.target,
        "source": _topic_dict(plan.source),
        "destination": {**_topic_dict(plan.destination), "codec": plan.codec, "level": plan.level,
                        "batch": {"max_bytes": plan.batch_max_bytes, "linger_ms": plan.batch_linger_ms,
                                  "max_records": plan.batch_max_records},
                        "cluster": plan.destination_cluster},
        "lane_group": plan.lane_group,
        "groups": [_group_dict(g) for g in plan.groups],
        "max_produce_version": plan.max_produce_version,
        "checks": [{"name": c.name, "status": c.status, "detail": c.detail, "groups": list(c.groups)}
                   for c in plan.checks],
        "problems": len(plan.problems),
        "projection": {
            "measured": p.measured, "note": p.note, "ratio": p.ratio,
            "source_bytes_per_record": p.source_bytes_per_record,
            "destination_bytes_per_record": p.destination_bytes_per_record,
            "projected_destination_disk_bytes": p.projected_destination_disk_bytes,
            "groups": [{"group_id": n.group_id, "lag_records": n.lag_records,
                        "source_fetch_bytes": n.source_fetch_bytes,
                        "destination_fetch_bytes": n.destination_fetch_bytes} for n in p.groups],
        },
        "stages": [{"name": s.name, "does": s.does, "command": s.command} for s in plan.stages],
    }


_STATUS_STYLE = {"ok": "green", "problem": "bold red", "check": "yellow", "pending": "cyan", "n/a": "dim"}


def render_table(plan: MigrationPlan, console: Any) -> None:
    """Print the plan with rich: one table per section; a check's status in colour."""
    from rich.markup import escape
    from rich.table import Table

    sections: dict[str, list[tuple[str, str]]] = {}
    for section, item, text in rows(plan):
        sections.setdefault(section, []).append((item, text))
    console.print(f"migration plan: {plan.source.topic} -> {plan.destination.topic} ({plan.label})")
    for section, items in sections.items():
        t = Table(title=section, title_justify="left", show_header=False, expand=False)
        t.add_column("item", no_wrap=True)
        t.add_column("text")
        for item, text in items:
            if section == "pre-flight":
                status, _, rest = text.partition(": ")
                text = f"[{_STATUS_STYLE.get(status, '')}]{escape(status)}[/]: {escape(rest)}"
            else:
                text = escape(text)
            t.add_row(escape(item), text)
        console.print(t)
    if plan.problems:
        console.print(f"[bold red]{len(plan.problems)} problem(s) to fix before `migrate start`[/]")
