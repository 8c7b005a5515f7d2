"""A cutover (`transcoder migrate cutover`): the facts its gates are judged on, the translation of a group's source
offsets to the copy's, the commit on the destination, and its dry run, which does all but write.

`Cutover` moves one group at a time; migrate.controller.Controller chooses the groups, holds the migration's lease
and hands it what it works with: the resolved migration, its config, the group clients of both clusters, the state
writer (a controller that lost its lease writes nothing) and the readers of the clusters' offsets. A group moves
source -> moving (its offsets both sides recorded) -> destination (committed there); a cutover interrupted while
moving commits the offsets it had computed. The rewind check and the wait for a group's members are a rollback's
too (`refuse_rewind`, `Cutover.quiet`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from transcoder.config import MigrationConfig
from transcoder.errors import MigrationError, RefusedError
from transcoder.kafka import offset_map_topic
from transcoder.migrate import gates, groups
from transcoder.migrate.state import decode_offsets, encode_offsets, now_ms
from transcoder.migrate.target import Resolved
from transcoder.pipeline.offset_runs import PartitionMap

log = structlog.get_logger("transcoder.migrate")


@dataclass
class DryRun:
    """What a cutover would do to one group, changing nothing."""

    group: str
    stage: str
    outcome: str  # would move | would resume | already | refused
    gates: list[gates.Outcome]
    source_offsets: dict[int, int]
    #: the offsets the cutover would commit on the destination; None where the offset map cannot say (detail: why)
    destination_offsets: dict[int, int] | None
    forced: list[str]  # the failed gates the overrides given would override
    detail: str = ""


@dataclass
class Moved:
    group: str
    outcome: str  # moved | already | refused
    source_offsets: dict[int, int]
    destination_offsets: dict[int, int]
    forced: list[str]
    detail: str = ""


class Watermarks(Protocol):
    """(low, high) of each partition of `topic`, on the destination's cluster with `destination`."""

    def __call__(self, topic: str, *, destination: bool = False) -> dict[int, tuple[int, int]]: ...


def pick(chosen: Iterable[str], percent: float | None, st: Mapping[str, Any]) -> list[str]:
    """The groups a cutover takes of `chosen`: all, or with `percent` that share of them (at least one), among
    those not on the destination yet, in their order."""
    chosen = list(chosen)
    if percent is None:
        return chosen
    waiting = [g for g in chosen if st.get(f"group/{g}", {}).get("stage", "source") != "destination"]
    return waiting[:max(1, math.ceil(len(chosen) * percent / 100))] if waiting else []


def resumed_commit_landed(committed: Mapping[int, int], translated: Mapping[int, int]) -> bool:
    """Pure: whether an interrupted cutover's commit had been made, its group's offsets on the destination being
    those it computed or past them on every partition (the group read on after it; nothing else commits there)."""
    return bool(translated) and all(p in committed and committed[p] >= o for p, o in translated.items())


def refuse_rewind(step: str, g: str, ga: groups.GroupAdmin, topic: str, offsets: Mapping[int, int]) -> None:
    """RefusedError (nothing committed) if committing `offsets` would move group `g` backwards on `topic`."""
    found = gates.rewinds(groups.committed_on(ga, g, topic), offsets)
    if found:
        log.info("rewind_refused", step=step, group=g, topic=topic,
                 partitions={r.partition: [r.committed, r.translated] for r in found})
        raise RefusedError(gates.rewind_line(step, g, topic, found), topic=topic,
                           partition=found[0].partition, offset=found[0].committed)


def _members(view: groups.GroupView) -> tuple[str, ...]:
    return tuple(f"{m.client_id}@{m.host}" for m in view.members)


class Cutover:
    """Moves groups of one migration from its source to its copy (`move`), or says what it would do (`dry_run`)."""

    def __init__(self, r: Resolved, mc: MigrationConfig, *, src_groups: groups.GroupAdmin,
                 dst_groups: groups.GroupAdmin, put: Callable[[str, dict[str, Any]], None], watermarks: Watermarks,
                 first_records: Callable[[str, Mapping[int, int]], dict[int, int | None]],
                 lane_committed: Callable[[], dict[int, int] | None]) -> None:
        self.r, self.mc = r, mc
        self.src_groups, self.dst_groups = src_groups, dst_groups
        self._put, self._watermarks = put, watermarks
        self._first_records, self._lane_committed = first_records, lane_committed

    def move(self, g: str, st: Mapping[str, Any], maps: Mapping[int, PartitionMap],
             health: offset_map_topic.LaneHealth | None, *, wait_s: float | None,
             overridden: Collection[str]) -> Moved:
        """Cut group `g` over (state `st`, offset map `maps`): RefusedError when a gate not in `overridden` fails."""
        rec = dict(st.get(f"group/{g}") or {})
        stage = rec.get("stage", "source")
        if stage == "destination":
            return Moved(g, "already", decode_offsets(rec.get("source_offsets")),
                         decode_offsets(rec.get("destination_offsets")), list(rec.get("forced", [])),
                         "already on the destination")
        if stage == "moving":  # an interrupted cutover: commit the offsets it had computed
            src, dst = decode_offsets(rec["source_offsets"]), decode_offsets(rec["destination_offsets"])
            refuse = gates.members_gate(g, _members(self._source_view(g, wait_s)))
            if refuse:
                raise RefusedError(gates.refusal_line(g, refuse))
            landed = groups.committed_on(self.dst_groups, g, self.r.destination)
            if resumed_commit_landed(landed, dst):
                # the commit was made before the interruption (and the group may have read on since): done
                return self._moved(g, rec, src, dst, list(rec.get("forced", [])),
                                   "resumed an interrupted cutover (its commit had landed)")
            refuse_rewind("cutover", g, self.dst_groups, self.r.destination, dst)
            groups.commit_offsets(self.dst_groups, g, self.r.destination, dst)
            return self._moved(g, rec, src, dst, list(rec.get("forced", [])), "resumed an interrupted cutover")
        committed, failed = self._gates(g, st, maps, health, wait_s)
        refuse, overrode = gates.blocking(failed, overridden)
        if refuse:
            raise RefusedError(gates.refusal_line(g, refuse))
        forced = [x.name for x in overrode]
        if forced:
            log.warning("cutover_gates_forced", group=g, gates=[f"{x.name}: {x.detail}" for x in overrode])
        dst = self._translate(g, committed, maps)
        refuse_rewind("cutover", g, self.dst_groups, self.r.destination, dst)
        history = list(rec.get("history", [])) + [["moving", now_ms()]]
        self._put(f"group/{g}", {**rec, "stage": "moving", "source_offsets": encode_offsets(committed),
                                 "destination_offsets": encode_offsets(dst), "forced": forced, "history": history})
        groups.commit_offsets(self.dst_groups, g, self.r.destination, dst)
        return self._moved(g, {**rec, "history": history}, committed, dst, forced, "")

    def dry_run(self, g: str, st: Mapping[str, Any], maps: Mapping[int, PartitionMap],
                health: offset_map_topic.LaneHealth | None, *, wait_s: float | None,
                overridden: Collection[str]) -> DryRun:
        """What `move` would do to group `g`, every gate evaluated, changing nothing."""
        rec = dict(st.get(f"group/{g}") or {})
        stage = rec.get("stage", "source")
        if stage == "destination":
            return DryRun(g, stage, "already", [], decode_offsets(rec.get("source_offsets")),
                          decode_offsets(rec.get("destination_offsets")), list(rec.get("forced", [])),
                          "already on the destination")
        if stage == "moving":  # resumed: its gates were evaluated when it started; only members and rewind left
            src, recorded = decode_offsets(rec["source_offsets"]), decode_offsets(rec["destination_offsets"])
            failed = gates.members_gate(g, _members(self._source_view(g, wait_s)))
            landed = groups.committed_on(self.dst_groups, g, self.r.destination)
            if not resumed_commit_landed(landed, recorded):
                failed += gates.rewind_gate(self.r.destination, gates.rewinds(landed, recorded))
            found = [o for o in gates.outcomes(failed, ()) if o.name in ("members", "rewind")]
            return DryRun(g, stage, "refused" if failed else "would resume", found, src, recorded,
                          list(rec.get("forced", [])), "an interrupted cutover: it commits the offsets it computed")
        committed, failed = self._gates(g, st, maps, health, wait_s)
        dst: dict[int, int] | None = None
        detail = ""
        try:
            dst = self._translate(g, committed, maps)
        except MigrationError as exc:  # the map cannot say: the group's row says why, and it would be refused
            detail = str(exc)
        if dst is not None:
            failed += gates.rewind_gate(self.r.destination,
                                        gates.rewinds(groups.committed_on(self.dst_groups, g, self.r.destination), dst))
        refuse, overrode = gates.blocking(failed, overridden)
        return DryRun(g, stage, "refused" if refuse or dst is None else "would move",
                      gates.outcomes(failed, overridden), committed, dst, [x.name for x in overrode],
                      detail or (gates.refusal_line(g, refuse) if refuse else ""))

    def quiet(self, g: str, topic: str, wait_s: float | None) -> groups.GroupView:
        """Group `g` on `topic` (the source or the copy) once it has no members: MigrationError naming them when it
        has and `wait_s` is None, else waited out for at most `wait_s`."""
        ga = self.src_groups if topic == self.r.source else self.dst_groups
        view = groups.describe_group(ga, g, topic)
        if view.members:
            if wait_s is None:
                raise MigrationError(f"group {g} has active members: "
                                     f"{', '.join(f'{m.client_id}@{m.host}' for m in view.members)} "
                                     "(stop them, or use --wait)")
            view = groups.wait_empty(ga, g, topic, timeout_s=wait_s)
        return view

    def _source_view(self, g: str, wait_s: float | None) -> groups.GroupView:
        """The group on the source, its members waited out first when `wait_s` is given."""
        view = groups.describe_group(self.src_groups, g, self.r.source)
        if view.members and wait_s is not None:
            view = groups.wait_empty(self.src_groups, g, self.r.source, timeout_s=wait_s)
        return view

    def _gates(self, g: str, st: Mapping[str, Any], maps: Mapping[int, PartitionMap],
               health: offset_map_topic.LaneHealth | None, wait_s: float | None
               ) -> tuple[dict[int, int], list[gates.Gate]]:
        """The group's committed source offsets, and the gates (but rewind) it fails now."""
        view = self._source_view(g, wait_s)
        committed = dict(view.committed)
        ends = self._watermarks(self.r.source)
        mismatch = st.get("mismatch", {}).get("line")
        facts = gates.GateFacts(
            group=g, members=_members(view), committed=committed,
            lane_committed=self._lane_committed(), source_ends={p: h for p, (_, h) in ends.items()},
            verified_through={int(k.split("/", 1)[1]): int(v["verified_through"]) for k, v in st.items()
                              if k.startswith("verify/")},
            map_source_end={p: m.source_end for p, m in maps.items()}, mismatch=mismatch,
            last_error_ms=health.last_error_ms if health else None, now_ms=now_ms(),
            max_lag_records=self.mc.max_lag_records, error_window_s=self.mc.error_window_s)
        return committed, gates.failed(facts)

    def _translate(self, g: str, committed: Mapping[int, int], maps: Mapping[int, PartitionMap]) -> dict[int, int]:
        """The destination offsets of group `g` committed at `committed` on the source (gates.forward)."""
        # where the map does not reach back to the group's offset, whether a record lies between decides
        starts = {p: c for p, c in committed.items() if not maps.get(p) or (maps[p].source_start or 0) > c}
        first = self._first_records(self.r.source, starts) if starts else {}
        first.update({p: c for p, c in committed.items() if p not in starts})
        dest_ends = {p: h for p, (_, h) in self._watermarks(self.r.destination, destination=True).items()}
        return gates.forward(g, committed, maps, first, dest_ends)

    def _moved(self, g: str, rec: Mapping[str, Any], src: dict[int, int], dst: dict[int, int], forced: list[str],
               detail: str) -> Moved:
        at = now_ms()
        self._put(f"group/{g}", {**rec, "stage": "destination", "source_offsets": encode_offsets(src),
                                 "destination_offsets": encode_offsets(dst), "forced": forced, "moved_ms": at,
                                 "history": list(rec.get("history", [])) + [["destination", at]]})
        log.info("group_cut_over", group=g, source=self.r.source, destination=self.r.destination,
                 source_offsets=encode_offsets(src), destination_offsets=encode_offsets(dst), forced=forced)
        return Moved(g, "moved", src, dst, forced, detail)
