"""The cutover gates, and the translation of a group's offsets: pure rules over facts the controller gathered.

A group moves to the destination only when it passes every gate of RULES (one table: what each checks, whether it
can be overridden, what to do when it refuses):

- members:  it has no active members (a running consumer would keep committing on the source); never overridden:
            Kafka does not let a live group's offsets be changed: stop the consumers, or --wait;
- copied:   the lane has committed past the group's offsets (every record before them is copied and mapped); never
            overridden: moving before it would skip the records not copied yet (a gap);
- lag:      the lane's lag is at most `migration.max_lag_records` on every partition; `--override lag`;
- verified: content verification reached the group's offsets (or all that was copied, with nothing between);
            `--override verified`;
- mismatch: no verification mismatch is recorded; never overridden: the copy differs from the source;
- errors:   the lane reported no failed record within `migration.error_window_s`; `--override errors`;
- rewind:   the translated offsets are not below the group's committed offsets on the destination (checked once
            they are computed); never overridden: the group would read records again.

An override is by name and recorded with the group (`forced`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from transcoder.errors import ConfigError, MigrationError
from transcoder.pipeline.offset_runs import PartitionMap


@dataclass(frozen=True)
class Rule:
    """One gate of the table: what it checks, whether `--override NAME` may move a group past it, and what to do
    when it refuses (for a gate that cannot be overridden: instead)."""

    name: str
    checks: str
    overridable: bool
    remedy: str


#: Every gate, in the order they are checked and reported.
RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("members", "the group has no active member on the source", False,
         "stop the group's consumers, or give --wait (Kafka does not let a live group's offsets be changed)"),
    Rule("copied", "the lane has copied past the group's offsets on every partition", False,
         "wait for the lane to copy up to the group: check that `transcoder run` runs and its lag falls"),
    Rule("lag", "the lane's lag is at most migration.max_lag_records on every partition", True,
         "wait for the lane to catch up"),
    Rule("verified", "verification reached the group's offsets", True, "run `transcoder migrate verify`"),
    Rule("mismatch", "no verification mismatch is recorded", False,
         "find and fix the mismatch's cause, then run `transcoder migrate verify` (a pass without one clears it)"),
    Rule("errors", "the lane failed no record within migration.error_window_s", True,
         "look at the lane's errors, or wait for migration.error_window_s to pass"),
    Rule("rewind", "the translated offsets are not below the group's committed offsets on the destination", False,
         "the group has read the copy further than the migration's state says (was the state topic lost or "
         "reset?): find out which is right before doing anything else"),
)}

#: The gates `--override NAME` may override; the others never move a group, whatever is given.
OVERRIDABLE: tuple[str, ...] = tuple(n for n, r in RULES.items() if r.overridable)
NEVER_OVERRIDDEN: tuple[str, ...] = tuple(n for n, r in RULES.items() if not r.overridable)


def override_flag(name: str) -> str:
    return f"--override {name}"


@dataclass(frozen=True)
class Gate:
    """A gate the group failed, and why."""

    name: str
    detail: str

    @property
    def rule(self) -> Rule:
        return RULES[self.name]

    @property
    def how(self) -> str:
        """What would let the group pass: the gate's remedy, and the flag that overrides it or that none does."""
        r = self.rule
        if r.overridable:
            return f"{r.remedy}, or override: {override_flag(r.name)}"
        return f"cannot be overridden: {r.remedy}"

    @property
    def line(self) -> str:
        return f"{self.name}: {self.detail} ({self.how})"


def overrides(names: Iterable[str]) -> frozenset[str]:
    """The gates named to be overridden; ConfigError naming one that does not exist or is never overridden."""
    out = frozenset(names)
    for n in sorted(out):
        if n not in RULES:
            raise ConfigError(f"--override {n}: no such gate; the gates that can be overridden: "
                              f"{', '.join(OVERRIDABLE)}")
        if not RULES[n].overridable:
            raise ConfigError(f"--override {n}: the {n} gate cannot be overridden ({RULES[n].remedy}); the gates "
                              f"that can be: {', '.join(OVERRIDABLE)}")
    return out


def blocking(found: Iterable[Gate], overridden: Collection[str]) -> tuple[list[Gate], list[Gate]]:
    """(the failed gates that still refuse the group, the failed gates overridden): a gate that cannot be
    overridden refuses whatever `overridden` names."""
    refuse: list[Gate] = []
    forced: list[Gate] = []
    for g in found:
        (forced if g.rule.overridable and g.name in overridden else refuse).append(g)
    return refuse, forced


def refusal_line(group: str, refuse: list[Gate]) -> str:
    """One line naming every gate that refuses the group, each with the flag that overrides it or what to do."""
    return f"cutover of group {group} refused: " + "; ".join(g.line for g in refuse) + "; nothing was committed"


@dataclass(frozen=True)
class Outcome:
    """A gate's outcome for one group (a dry run prints every gate's)."""

    name: str
    result: str  # pass | fail | overridden
    detail: str  # what is wrong; for a passing gate, what it checked
    how: str  # for a failed gate: the flag that overrides it, or that none does and what to do instead


def outcomes(found: Iterable[Gate], overridden: Collection[str]) -> list[Outcome]:
    """Every gate of RULES, in order: passed, failed (with how to pass), or failed and overridden."""
    by_name = {g.name: g for g in found}
    out = []
    for name, rule in RULES.items():
        g = by_name.get(name)
        if g is None:
            out.append(Outcome(name, "pass", rule.checks, ""))
        elif rule.overridable and name in overridden:
            out.append(Outcome(name, "overridden", g.detail, f"overridden by {override_flag(name)}"))
        else:
            out.append(Outcome(name, "fail", g.detail, g.how))
    return out


@dataclass(frozen=True)
class GateFacts:
    group: str
    members: tuple[str, ...]  # "client.id@host" of active members
    committed: Mapping[int, int]  # the group's committed source offsets
    #: the lane's committed source offsets; None where its group has none yet: then `copied` and `lag` are not
    #: checked, and `verified` must reach the group's offsets themselves
    lane_committed: Mapping[int, int] | None
    source_ends: Mapping[int, int]  # source high watermarks
    verified_through: Mapping[int, int]
    map_source_end: Mapping[int, int | None]  # one past the last source offset copied, per partition
    mismatch: str | None  # the recorded verification mismatch, if any
    last_error_ms: int | None  # the lane's last failed record
    now_ms: int
    max_lag_records: int
    error_window_s: float
    #: partitions to look at (the group's committed ones)
    partitions: tuple[int, ...] = field(default=())


def members_gate(group: str, members: Collection[str]) -> list[Gate]:
    """The `members` gate alone ("client.id@host" of each active member): a resumed cutover checks only it."""
    if not members:
        return []
    return [Gate("members", f"group {group} has {len(members)} active member(s): {', '.join(members)}")]


def failed(f: GateFacts) -> list[Gate]:
    """The gates the group does not pass, each with what is wrong (empty: it may move)."""
    out: list[Gate] = members_gate(f.group, f.members)
    parts = f.partitions or tuple(sorted(f.committed))
    lane = f.lane_committed
    if lane is not None:  # a partition never written to has nothing to copy: the lane is at its end
        lane = {**{p: 0 for p in parts if f.source_ends.get(p, 0) == 0}, **lane}
    behind = [p for p in parts if lane.get(p, -1) < f.committed[p]] if lane is not None else []
    if behind:
        assert lane is not None
        p = behind[0]
        out.append(Gate("copied", f"the lane has copied partition {p} only up to offset "
                                  f"{max(lane.get(p, 0), 0)}, the group is at {f.committed[p]}"
                                  + (f" (and {len(behind) - 1} more partitions)" if len(behind) > 1 else "")))
    lagging = [(p, f.source_ends.get(p, 0) - lane.get(p, 0)) for p in sorted(f.source_ends)] if lane is not None \
        else []
    lagging = [(p, n) for p, n in lagging if n > f.max_lag_records]
    if lagging:
        p, n = max(lagging, key=lambda x: x[1])
        out.append(Gate("lag", f"the lane lags {n:,} records on partition {p} "
                               f"(migration.max_lag_records: {f.max_lag_records:,})"))
    unverified = []
    for p in parts:
        v = f.verified_through.get(p, -1)
        end = f.map_source_end.get(p)
        reached = v >= f.committed[p] or (end is not None and v >= end and lane is not None
                                          and lane.get(p, -1) >= f.committed[p])
        if not reached:
            unverified.append((p, v))
    if unverified:
        p, v = unverified[0]
        out.append(Gate("verified", f"verification reached offset {max(v, 0)} of partition {p}, the group is at "
                                    f"{f.committed[p]}"))
    if f.mismatch:
        out.append(Gate("mismatch", f"verification found a mismatch: {f.mismatch}"))
    if f.last_error_ms is not None and f.now_ms - f.last_error_ms < f.error_window_s * 1000:
        ago = (f.now_ms - f.last_error_ms) / 1000
        out.append(Gate("errors", f"the lane failed a record {ago:.0f} s ago (migration.error_window_s: "
                                  f"{f.error_window_s:.0f})"))
    return out


def forward(group: str, committed: Mapping[int, int], maps: Mapping[int, PartitionMap],
            first_record_at: Mapping[int, int | None], dest_ends: Mapping[int, int]) -> dict[int, int]:
    """The destination offsets of a group committed at `committed` on the source.

    `first_record_at[p]`: the offset of the first source record at or after the committed offset (None: none);
    needed where the group is before the start of the map. MigrationError where the map cannot say.
    """
    out = {}
    for p, c in sorted(committed.items()):
        m = maps.get(p)
        first = first_record_at.get(p)
        if m is None or not m:
            if first is None:  # nothing at or after c in the source: the group is at its end
                out[p] = dest_ends.get(p, 0)
                continue
            raise MigrationError(f"group {group}: partition {p} has no offset map, but the source has records "
                                 f"from offset {first}: the lane has not copied them with a `migration:` section")
        start = m.source_start
        assert start is not None
        if first is not None and first < start:
            raise MigrationError(f"group {group}: partition {p}: the offset map starts at source offset {start}, the "
                                 f"group is at {c} and the source has records from {first}: those were copied "
                                 "before the `migration:` section was set (or their map expired)")
        d = m.forward(c)
        if d is None:
            end = m.dest_end
            assert end is not None
            d = end
        out[p] = d
    return out


def backward(group: str, committed: Mapping[int, int], maps: Mapping[int, PartitionMap],
             at_cutover: Mapping[int, int]) -> dict[int, int]:
    """The source offsets of a group committed at `committed` on the destination (rollback).

    `at_cutover`: the group's source offsets recorded at its cutover, for partitions nothing was copied of.
    """
    out = {}
    for p, d in sorted(committed.items()):
        m = maps.get(p)
        if m is not None and m:
            c = m.backward(d)
            assert c is not None
            out[p] = c
        elif p in at_cutover:
            out[p] = at_cutover[p]
        else:
            raise MigrationError(f"group {group}: partition {p} of the destination has no offset map and no "
                                 "recorded cutover offset: its position cannot be translated back")
    return out


@dataclass(frozen=True)
class Rewind:
    """A partition where committing the translated offset would move the group backwards."""

    partition: int
    committed: int  # the group's committed offset there now
    translated: int  # the offset the step would commit


def rewinds(current: Mapping[int, int], translated: Mapping[int, int]) -> list[Rewind]:
    """Partitions where `translated` is below the group's `current` committed offset, by partition.

    A cutover (on the destination) or a rollback (on the source) that committed those would deliver the records
    between them again: it is refused, whatever is overridden. Partitions without a current commit never rewind.
    """
    return [Rewind(p, current[p], t) for p, t in sorted(translated.items()) if p in current and t < current[p]]


def rewind_gate(topic: str, found: list[Rewind]) -> list[Gate]:
    """The `rewind` gate (a dry run reports it beside the others; a cutover refuses with rewind_line)."""
    return [Gate("rewind", _rewind_detail(topic, found))] if found else []


def _rewind_detail(topic: str, found: list[Rewind]) -> str:
    r = found[0]
    more = f" (and {len(found) - 1} more partition(s))" if len(found) > 1 else ""
    behind = sum(x.committed - x.translated for x in found)
    return (f"it would move the group backwards on {topic} [{r.partition}] from its committed offset {r.committed} "
            f"to {r.translated}{more}, delivering {behind:,} record(s) again")


def rewind_line(step: str, group: str, topic: str, found: list[Rewind]) -> str:
    """One line naming the first rewind (group, topic, partition, both offsets) and how many more there are."""
    return (f"{step} of group {group} refused: {_rewind_detail(topic, found)}; the "
            f"group has read {topic} further than the migration's state says (was the state topic lost or reset?): "
            "nothing was committed" + ("; a rewind cannot be overridden" if step == "cutover" else ""))
