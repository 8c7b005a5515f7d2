"""The migration controller: each `transcoder migrate` step, as I/O around the pure gates and translation.

All state lives in the migration's state topic (migrate.state), so any machine can run any step, a
restarted controller resumes where the last one stopped, and every step is idempotent: a group already
moved is reported as such, a cutover interrupted after its offsets were computed commits those same
offsets. One controller at a time holds a migration (migrate.lease.Lease); a second one refuses.

State keys (values are JSON objects):
  migration        source, destination, codec, stage (shadow|finished), started/finished times
  group/<id>       stage (source|moving|destination|rolling-back), offsets both sides, gates forced, history
  verify/<p>       verified_through of partition p, and when
  mismatch         the first verification mismatch found, until a verification passes it
  prediction       evaluate's figures for the destination's codec on the source's records (migrate.payoff)
  reading/<at>     what the clusters and the copier said at start, each cutover, finish (migrate.payoff)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from transcoder.config import Config
from transcoder.errors import ConfigError, KafkaUnavailableError, MigrationError, RefusedError
from transcoder.kafka import offset_map_topic
from transcoder.kafka.admin import SETTLE_S, SETTLING_ERRORS, settling, wait_settled
from transcoder.kafka.clients import client_config, connect_admin, retriable
from transcoder.kafka.protocol import RawClient
from transcoder.migrate import gates, groups, payoff, retry, verify
from transcoder.migrate.lease import Lease
from transcoder.migrate.plan import human_bytes, topic_facts
from transcoder.migrate.realized import Payoffs
from transcoder.migrate.retry import until_deadline
from transcoder.migrate.state import StateStore, kafka_error
from transcoder.migrate.target import Resolved, resolve
from transcoder.pipeline.offset_runs import PartitionMap

log = structlog.get_logger("transcoder.migrate")

STAGES = ("source", "moving", "destination", "rolling-back")


def _members(view: groups.GroupView) -> tuple[str, ...]:
    return tuple(f"{m.client_id}@{m.host}" for m in view.members)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ints(d: Mapping[str, Any] | None) -> dict[int, int]:
    return {int(k): int(v) for k, v in (d or {}).items()}


def _strs(d: Mapping[int, int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(d.items())}


def _parts(ps: Iterable[int]) -> str:
    return ",".join(str(p) for p in ps)


def _offsets_line(d: Mapping[int, int]) -> str:
    return ", ".join(f"{p}:{o}" for p, o in sorted(d.items()))


@dataclass
class GroupStatus:
    group: str
    stage: str
    source_lag: int | None
    destination_lag: int | None
    verified: bool
    forced: list[str] = field(default_factory=list)
    moved_ms: int | None = None


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


class Controller:
    def __init__(self, config: Config, destination: str | None, *, command: str, owner: str | None = None) -> None:
        if config.migration is None:
            raise ConfigError("the config has no `migration:` section: add one (an empty `migration: {}` will do), "
                              "restart the copy so its lanes record the offset map, then run `transcoder migrate`")
        self.config = config
        self.mc = config.migration
        self.r: Resolved = resolve(config, destination)
        #: Each Kafka call's time, its retries through a failover included (migration.api_timeout_ms).
        self.api_timeout_s = self.mc.api_timeout_ms / 1000
        self.src_admin, _ = connect_admin(config.cluster.librdkafka())
        self.dst_admin = self.src_admin if config.destination_cluster is None else connect_admin(
            config.target_cluster.librdkafka())[0]
        # Group calls (to a group's coordinator) through their own clients: migrate.coordinator says why.
        self.src_groups = groups.GroupAdmin.connect(config.cluster.librdkafka(), admin=self.src_admin,
                                                    timeout_s=self.api_timeout_s)
        self.dst_groups = self.src_groups if config.destination_cluster is None else groups.GroupAdmin.connect(
            config.target_cluster.librdkafka(), admin=self.dst_admin, timeout_s=self.api_timeout_s)
        self.store = StateStore(config, self.r.destination, timeout_s=self.api_timeout_s,
                                delivery_timeout_ms=self.mc.api_timeout_ms)
        self.command = command
        self.lease = Lease(self.store, lease_ms=self.mc.lease_ms, owner=owner, command=command)
        self.payoffs = Payoffs(config, self.r.target, self.r.source, self.r.destination, src_admin=self.src_admin,
                               dst_admin=self.dst_admin, put=self._put, lane_committed=self.lane_committed,
                               health=lambda: self.maps()[1], sample_records=self.mc.predict_sample_records)

    def close(self) -> None:
        """Close the state store and the group clients (on this, their owner's, thread)."""
        try:
            self.store.close()
        finally:
            self.src_groups.close()
            if self.dst_groups is not self.src_groups:
                self.dst_groups.close()

    # ------------------------------------------------------------------ holding the migration
    def __enter__(self) -> Self:
        self.store.ensure_topic()
        try:
            self.lease.acquire()
            self.lease.start_heartbeats()
        except Exception:  # refused, or the cluster: acquire wrote no claim it did not take back
            self.close()
            raise
        except BaseException:  # a signal while acquiring: a claim it may have written is withdrawn, not left
            try:
                self.lease.withdraw()
            except Exception:
                log.exception("lease_release_failed", migration=self.r.destination, owner=self.lease.owner)
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        """Release the lease however the step ends (an error, SIGTERM/SIGINT raised as an exception by the CLI),
        so the next controller need not wait for it to expire."""
        try:
            self._release(failing=exc is not None)
        finally:
            self.close()

    def _release(self, *, failing: bool) -> None:
        if not failing:
            self.lease.release()
            return
        try:
            self.lease.release()
        except Exception:  # the step's own error is the one to report; this one is logged, not lost
            log.exception("lease_release_failed", migration=self.r.destination, owner=self.lease.owner)

    def state(self) -> dict[str, dict[str, Any]]:
        return self.store.read()

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self.lease.check()  # a controller that lost its lease writes nothing
        self.store.put(key, value)

    def _started(self, st: Mapping[str, Any]) -> dict[str, Any]:
        m = st.get("migration")
        if m is None:
            raise MigrationError(f"migration {self.r.destination} has not been started: run `transcoder migrate "
                                 "start` first")
        return m

    # ------------------------------------------------------------------ facts
    def watermarks(self, topic: str, *, destination: bool = False) -> dict[int, tuple[int, int]]:
        """(low, high) of each partition of `topic`, its leaders' failovers waited out (migration.api_timeout_ms)."""
        conf = (self.config.target_cluster if destination else self.config.cluster).librdkafka()
        c = Consumer(client_config(conf, **{"group.id": "transcoder-migrate-watermarks", "enable.auto.commit": False}))
        try:
            return until_deadline(lambda: _watermarks(c, topic), what=f"read the offsets of {topic}",
                                  timeout_s=self.api_timeout_s, fields={"topic": topic})
        finally:
            c.close()

    def first_records(self, topic: str, offsets: Mapping[int, int]) -> dict[int, int | None]:
        """The offset of the first (committed) source record at or after each offset; None: none now."""
        out: dict[int, int | None] = {}
        ends = self.watermarks(topic)
        c = Consumer(client_config(self.config.cluster.librdkafka(), **{
            "group.id": "transcoder-migrate-reader", "enable.auto.commit": False,
            "isolation.level": "read_committed", "enable.partition.eof": True}))
        try:
            for p, start in offsets.items():
                low, high = ends.get(p, (0, 0))
                start = max(start, low)
                if start >= high:
                    out[p] = None
                    continue
                c.assign([TopicPartition(topic, p, start)])
                deadline = time.monotonic() + max(30.0, self.api_timeout_s)
                found: int | None = -1
                while found == -1:
                    if time.monotonic() > deadline:
                        raise MigrationError(f"reading {topic} [{p}] from offset {start} stalled", topic=topic,
                                             partition=p, offset=start)
                    m = c.poll(1.0)
                    if m is None:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            found = None
                            continue
                        raise MigrationError(f"reading {topic} [{p}]: {err.str()}", topic=topic, partition=p)
                    found = m.offset()
                out[p] = found
        finally:
            c.close()
        return out

    def lane_committed(self) -> dict[int, int] | None:
        """The lane's committed source offsets (both engines commit them under a migration); None when its group
        has none yet."""
        try:
            return dict(groups.describe_group(self.src_groups, self.r.lane_group, self.r.source).committed)
        except MigrationError:
            return None

    def maps(self) -> tuple[dict[int, PartitionMap], offset_map_topic.LaneHealth | None]:
        return read_maps(self.config, self.r.destination)

    # ------------------------------------------------------------------ start
    def start(self, group_ids: Iterable[str], *, all_groups: bool, force_restart: bool = False
              ) -> tuple[dict[str, Any], list[str], bool]:
        """Record the migration and the groups it moves; return (migration, groups, whether the copy runs).

        A migration with no state whose destination already has groups' commits (other than the lanes') was
        cut over before and lost its state topic: refused unless `force_restart`.
        """
        st = self.state()
        if "migration" not in st and not force_restart:
            self._refuse_lost_state()
        chosen = self._groups(group_ids, all_groups=all_groups, st=st, registering=True)
        migration = st.get("migration") or {
            "source": self.r.source, "destination": self.r.destination, "target": self.r.target.name,
            "codec": self.r.target.destination.label, "stage": "shadow", "started_ms": _now_ms()}
        if migration.get("stage") == "finished":
            raise MigrationError(f"migration {self.r.destination} is finished; start a new one with another "
                                 "destination")
        # Every group new to the migration is looked up before anything is written: one that the cluster does not
        # know (a typo) or that does not read the source refuses the whole step, and the migration, the offset-map
        # topic and the other groups stay as they were.
        views = {g: groups.describe_group(self.src_groups, g, self.r.source) for g in chosen
                 if f"group/{g}" not in st}
        offset_map_topic.ensure_topic(self.dst_admin, self.config)
        if "migration" not in st:
            self._put("migration", migration)
        for g, view in views.items():
            self._put(f"group/{g}", {"stage": "source", "source_offsets": _strs(view.committed),
                                     "registered_ms": _now_ms(), "history": [["source", _now_ms()]]})
        self.payoffs.start(st)
        try:
            lane = groups.describe_group(self.src_groups, self.r.lane_group, self.r.source)
            running = bool(lane.members)
        except MigrationError:
            running = False
        return migration, chosen, running

    def _refuse_lost_state(self) -> None:
        """MigrationError when groups have committed offsets on the destination: a migration happened there, and
        its state (in the state topic) is gone. The offset map is no sign of one: the lanes record it before
        `start`; a group's commit on the copy is (only a cutover makes one, or a consumer of the copy)."""
        moved = groups.groups_on(self.dst_groups, self.r.destination, exclude=self.r.lane_groups)
        if not moved:
            return
        g = moved[0]
        others = f" and {len(moved) - 1} more group(s) ({', '.join(v.group_id for v in moved[1:4])})" \
            if len(moved) > 1 else ""
        raise MigrationError(
            f"migration {self.r.destination} has no state in state topic {self.store.topic}, but group {g.group_id} "
            f"has committed offsets on {self.r.destination} ({_offsets_line(g.committed)}){others}: a cutover "
            f"happened, and the state topic was deleted, lost or changed (migration.state_topic); restore it, or "
            "start anew with `migrate start --force-restart` (a cutover then still refuses to move a group "
            "backwards)", topic=self.store.topic)

    def _groups(self, group_ids: Iterable[str], *, all_groups: bool, st: Mapping[str, Any],
                registering: bool = False) -> list[str]:
        ids = list(dict.fromkeys(group_ids))
        if all_groups:
            if registering:
                ids += [v.group_id for v in groups.groups_on(self.src_groups, self.r.source,
                                                             exclude=self.r.lane_groups)]
            ids += [k.split("/", 1)[1] for k in st if k.startswith("group/")]
            ids = list(dict.fromkeys(ids))
        if not ids:
            raise ConfigError("name the groups: --group G (repeatable) or --all-groups")
        if self.r.lane_group in ids:
            raise ConfigError(f"group {self.r.lane_group} is transcoder's own lane: it is not migrated")
        return ids

    # ------------------------------------------------------------------ verify
    def verify(self, progress: verify.ProgressLine | None = None) -> dict[int, verify.PartitionResult]:
        """Verify from where the last verification stopped to the end copied now; record the outcome. `progress`:
        told how far it is after each range."""
        st = self.state()
        self._started(st)
        maps, _ = self.maps()
        starts = {int(k.split("/", 1)[1]): int(v["verified_through"]) for k, v in st.items()
                  if k.startswith("verify/")}
        # Up to what the lane committed (where it commits to a group): past it, a record refused and re-sent alone
        # may still land after later copies, and would look missing for a moment.
        lane = self.lane_committed()
        results = verify.verify(self.config, self.r.source, self.r.destination, maps, starts, ends=lane,
                                progress=progress)
        at = _now_ms()
        first = next((r.mismatch for _, r in sorted(results.items()) if r.mismatch is not None), None)
        for p, res in sorted(results.items()):
            if starts.get(p) != res.verified_through or first is None:
                self._put(f"verify/{p}", {"verified_through": res.verified_through, "at_ms": at})
        if first is not None:
            self._put("mismatch", {"line": first.line, "partition": first.partition,
                                   "source_offset": first.source_offset, "at_ms": at})
            log.error("verification_mismatch", migration=self.r.destination, mismatch=first.line)
        elif "mismatch" in st:
            self.lease.check()
            self.store.delete("mismatch")
            log.info("verification_mismatch_cleared", migration=self.r.destination, was=st["mismatch"].get("line"))
        last = max((k for k in st if k.startswith("reading/")), default=None)
        if last is None or at - int(st[last]["at_ms"]) >= payoff.READING_EVERY_MS:  # disk over time, for the report
            self.payoffs.record("verify", groups_moved=_moved_count(st))
        return results

    # ------------------------------------------------------------------ cutover
    def cutover(self, group_ids: Iterable[str], *, all_groups: bool = False, percent: float | None = None,
                wait_s: float | None = None, overrides: Collection[str] = ()) -> list[Moved]:
        """Move each chosen group whose gates pass, or whose failed gates are all in `overrides` (gates.OVERRIDABLE
        only); RefusedError at the first group refused (those before it stay moved)."""
        overridden = gates.overrides(overrides)
        st = self.state()
        self._started(st)
        chosen = self._chosen(group_ids, all_groups=all_groups, percent=percent, st=st)
        maps, health = self.maps()
        out = []
        for g in chosen:
            out.append(self._cutover_one(g, st, maps, health, wait_s=wait_s, overridden=overridden))
            st = self.state()
            if out[-1].outcome == "moved":  # the copy's figures and lag as the group moves
                self.payoffs.record(f"cutover:{g}", groups_moved=_moved_count(st))
        return out

    def cutover_dry_run(self, group_ids: Iterable[str], *, all_groups: bool = False, percent: float | None = None,
                        wait_s: float | None = None, overrides: Collection[str] = ()) -> list[DryRun]:
        """What `cutover` would do to each chosen group, every gate evaluated and the offsets it would commit,
        changing nothing: no state written, no offset committed, no lease needed (`wait_s`: wait, reading only, for
        the group's members to leave, as the cutover would)."""
        overridden = gates.overrides(overrides)
        st = self.state()
        self._started(st)
        chosen = self._chosen(group_ids, all_groups=all_groups, percent=percent, st=st)
        maps, health = self.maps()
        return [self._dry_run_one(g, st, maps, health, wait_s=wait_s, overridden=overridden) for g in chosen]

    def _chosen(self, group_ids: Iterable[str], *, all_groups: bool, percent: float | None,
                st: Mapping[str, Any]) -> list[str]:
        chosen = self._groups(group_ids, all_groups=all_groups or percent is not None, st=st)
        if percent is not None:
            waiting = [g for g in chosen if st.get(f"group/{g}", {}).get("stage", "source") != "destination"]
            chosen = waiting[:max(1, math.ceil(len(chosen) * percent / 100))] if waiting else []
        return chosen

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
        ends = self.watermarks(self.r.source)
        mismatch = st.get("mismatch", {}).get("line")
        facts = gates.GateFacts(
            group=g, members=_members(view), committed=committed,
            lane_committed=self.lane_committed(), source_ends={p: h for p, (_, h) in ends.items()},
            verified_through={int(k.split("/", 1)[1]): int(v["verified_through"]) for k, v in st.items()
                              if k.startswith("verify/")},
            map_source_end={p: m.source_end for p, m in maps.items()}, mismatch=mismatch,
            last_error_ms=health.last_error_ms if health else None, now_ms=_now_ms(),
            max_lag_records=self.mc.max_lag_records, error_window_s=self.mc.error_window_s)
        return committed, gates.failed(facts)

    def _translate(self, g: str, committed: Mapping[int, int], maps: Mapping[int, PartitionMap]) -> dict[int, int]:
        """The destination offsets of group `g` committed at `committed` on the source (gates.forward)."""
        # where the map does not reach back to the group's offset, whether a record lies between decides
        starts = {p: c for p, c in committed.items() if not maps.get(p) or (maps[p].source_start or 0) > c}
        first = self.first_records(self.r.source, starts) if starts else {}
        first.update({p: c for p, c in committed.items() if p not in starts})
        dest_ends = {p: h for p, (_, h) in self.watermarks(self.r.destination, destination=True).items()}
        return gates.forward(g, committed, maps, first, dest_ends)

    def _cutover_one(self, g: str, st: Mapping[str, Any], maps: Mapping[int, PartitionMap],
                     health: offset_map_topic.LaneHealth | None, *, wait_s: float | None,
                     overridden: Collection[str]) -> Moved:
        rec = dict(st.get(f"group/{g}") or {})
        stage = rec.get("stage", "source")
        if stage == "destination":
            return Moved(g, "already", _ints(rec.get("source_offsets")), _ints(rec.get("destination_offsets")),
                         list(rec.get("forced", [])), "already on the destination")
        if stage == "moving":  # an interrupted cutover: commit the offsets it had computed
            src, dst = _ints(rec["source_offsets"]), _ints(rec["destination_offsets"])
            refuse = gates.members_gate(g, _members(self._source_view(g, wait_s)))
            if refuse:
                raise RefusedError(gates.refusal_line(g, refuse))
            landed = groups.committed_on(self.dst_groups, g, self.r.destination)
            if resumed_commit_landed(landed, dst):
                # the commit was made before the interruption (and the group may have read on since): done
                return self._moved(g, rec, src, dst, list(rec.get("forced", [])),
                                   "resumed an interrupted cutover (its commit had landed)")
            self._refuse_rewind("cutover", g, self.dst_groups, self.r.destination, dst)
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
        self._refuse_rewind("cutover", g, self.dst_groups, self.r.destination, dst)
        history = list(rec.get("history", [])) + [["moving", _now_ms()]]
        self._put(f"group/{g}", {**rec, "stage": "moving", "source_offsets": _strs(committed),
                                 "destination_offsets": _strs(dst), "forced": forced, "history": history})
        groups.commit_offsets(self.dst_groups, g, self.r.destination, dst)
        return self._moved(g, {**rec, "history": history}, committed, dst, forced, "")

    def _dry_run_one(self, g: str, st: Mapping[str, Any], maps: Mapping[int, PartitionMap],
                     health: offset_map_topic.LaneHealth | None, *, wait_s: float | None,
                     overridden: Collection[str]) -> DryRun:
        rec = dict(st.get(f"group/{g}") or {})
        stage = rec.get("stage", "source")
        if stage == "destination":
            return DryRun(g, stage, "already", [], _ints(rec.get("source_offsets")),
                          _ints(rec.get("destination_offsets")), list(rec.get("forced", [])),
                          "already on the destination")
        if stage == "moving":  # resumed: its gates were evaluated when it started; only members and rewind left
            src, recorded = _ints(rec["source_offsets"]), _ints(rec["destination_offsets"])
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

    def _refuse_rewind(self, step: str, g: str, ga: groups.GroupAdmin, topic: str, offsets: Mapping[int, int]
                       ) -> None:
        """RefusedError (nothing committed) if committing `offsets` would move group `g` backwards on `topic`."""
        found = gates.rewinds(groups.committed_on(ga, g, topic), offsets)
        if found:
            log.info("rewind_refused", step=step, group=g, topic=topic,
                     partitions={r.partition: [r.committed, r.translated] for r in found})
            raise RefusedError(gates.rewind_line(step, g, topic, found), topic=topic,
                               partition=found[0].partition, offset=found[0].committed)

    def _moved(self, g: str, rec: Mapping[str, Any], src: dict[int, int], dst: dict[int, int], forced: list[str],
               detail: str) -> Moved:
        at = _now_ms()
        self._put(f"group/{g}", {**rec, "stage": "destination", "source_offsets": _strs(src),
                                 "destination_offsets": _strs(dst), "forced": forced, "moved_ms": at,
                                 "history": list(rec.get("history", [])) + [["destination", at]]})
        log.info("group_cut_over", group=g, source=self.r.source, destination=self.r.destination,
                 source_offsets=_strs(src), destination_offsets=_strs(dst), forced=forced)
        return Moved(g, "moved", src, dst, forced, detail)

    def _quiet(self, g: str, topic: str, wait_s: float | None, force: bool) -> groups.GroupView:
        view = groups.describe_group(self.src_groups if topic == self.r.source else self.dst_groups, g, topic)
        if view.members:
            if wait_s is None:
                raise MigrationError(f"group {g} has active members: "
                                     f"{', '.join(f'{m.client_id}@{m.host}' for m in view.members)} "
                                     "(stop them, or use --wait)")
            view = groups.wait_empty(self.src_groups if topic == self.r.source else self.dst_groups, g, topic,
                                     timeout_s=wait_s)
        return view

    # ------------------------------------------------------------------ rollback
    def rollback(self, group_ids: Iterable[str], *, all_groups: bool = False, wait_s: float | None = None
                 ) -> list[Moved]:
        st = self.state()
        self._started(st)
        maps, _ = self.maps()
        out = []
        for g in self._groups(group_ids, all_groups=all_groups, st=st):
            rec = dict(st.get(f"group/{g}") or {})
            stage = rec.get("stage", "source")
            if stage == "source":
                out.append(Moved(g, "already", _ints(rec.get("source_offsets")), {}, [], "already on the source"))
                continue
            if stage == "rolling-back":
                src = _ints(rec["rollback_offsets"])
                self._quiet(g, self.r.source, wait_s, False)
            else:
                view = self._quiet(g, self.r.destination, wait_s, False)
                src = gates.backward(g, dict(view.committed) or _ints(rec.get("destination_offsets")), maps,
                                     _ints(rec.get("source_offsets")))
                history = list(rec.get("history", [])) + [["rolling-back", _now_ms()]]
                rec = {**rec, "stage": "rolling-back", "rollback_offsets": _strs(src),
                       "destination_offsets_at_rollback": _strs(dict(view.committed)), "history": history}
                self._put(f"group/{g}", rec)
                self._quiet(g, self.r.source, wait_s, False)
            self._refuse_rewind("rollback", g, self.src_groups, self.r.source, src)
            groups.commit_offsets(self.src_groups, g, self.r.source, src)
            at = _now_ms()
            self._put(f"group/{g}", {**rec, "stage": "source", "source_offsets": _strs(src), "rolled_back_ms": at,
                                     "history": list(rec.get("history", [])) + [["source", at]]})
            log.info("group_rolled_back", group=g, source_offsets=_strs(src))
            out.append(Moved(g, "moved", src, _ints(rec.get("destination_offsets_at_rollback")), [], "rolled back"))
        return out

    # ------------------------------------------------------------------ status and finish
    def status(self) -> dict[str, Any]:
        st = self.state()
        migration = self._started(st)
        src_ends = self.watermarks(self.r.source)
        dst_ends = self.watermarks(self.r.destination, destination=True)
        verified = {int(k.split("/", 1)[1]): int(v["verified_through"]) for k, v in st.items()
                    if k.startswith("verify/")}
        rows = []
        for key in sorted(k for k in st if k.startswith("group/")):
            g = key.split("/", 1)[1]
            rec = st[key]
            src_lag = dst_lag = None
            try:
                v = groups.describe_group(self.src_groups, g, self.r.source)
                src_lag = sum(max(0, src_ends[p][1] - c) for p, c in v.committed.items() if p in src_ends)
            except MigrationError:
                pass
            dst_view = None
            try:
                dst_view = groups.describe_group(self.dst_groups, g, self.r.destination)
                dst_lag = sum(max(0, dst_ends[p][1] - c) for p, c in dst_view.committed.items() if p in dst_ends)
            except MigrationError:
                pass
            committed = _ints(rec.get("source_offsets"))
            read_since = None
            if rec.get("stage") == "destination" and dst_view is not None:
                at = _ints(rec.get("destination_offsets"))
                read_since = sum(max(0, c - at.get(p, c)) for p, c in dst_view.committed.items())
            rows.append({"group": g, "stage": rec.get("stage"), "source_lag": src_lag, "destination_lag": dst_lag,
                         "verified": all(verified.get(p, -1) >= c for p, c in committed.items()),
                         "forced": rec.get("forced", []), "moved_ms": rec.get("moved_ms"),
                         "read_from_destination": read_since})
        return {"migration": migration, "groups": rows, "savings": self._savings(rows),
                "verified_through": {str(p): v for p, v in sorted(verified.items())},
                "source_end": {str(p): h for p, (_, h) in src_ends.items()},
                "mismatch": st.get("mismatch", {}).get("line"),
                "moved": sum(1 for r in rows if r["stage"] == "destination"), "total": len(rows)}

    def _savings(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Disk the copy saves against its source (bytes per record, measured on both topics as stored), and
        the network the moved groups saved so far (records they read from the copy since their cutover)."""
        info = RawClient(self.config.cluster.librdkafka())
        dinfo = info if self.config.destination_cluster is None else RawClient(self.config.target_cluster.librdkafka())
        try:
            src = topic_facts(self.src_admin, info, self.r.source, with_config=False)
            dst = topic_facts(self.dst_admin, dinfo, self.r.destination, with_config=False)
        finally:
            info.close()
            if dinfo is not info:
                dinfo.close()
        sb, db = src.bytes_per_record, dst.bytes_per_record
        read = sum(r["read_from_destination"] or 0 for r in rows)
        if sb is None or db is None or not dst.records:
            return {"measured": False, "records_read_from_destination": read,
                    "line": "savings: not measured yet (no records on disk on one side)"}
        per_record = sb - db
        disk = per_record * dst.records * (dst.replication_factor or 1)
        network = per_record * read
        return {"measured": True, "source_bytes_per_record": sb, "destination_bytes_per_record": db,
                "disk_saved_bytes": disk, "records_read_from_destination": read, "network_saved_bytes": network,
                "line": f"savings: {sb:.1f} -> {db:.1f} B per record ({sb / db:.2f}x); disk {human_bytes(disk)} "
                        f"for the {dst.records:,} records copied; network {human_bytes(network)} so far for the "
                        f"{read:,} records moved groups read from the copy"}

    def finish(self) -> dict[str, Any]:
        st = self.state()
        migration = self._started(st)
        left = [k.split("/", 1)[1] for k, v in st.items() if k.startswith("group/") and v.get("stage") != "destination"]
        if left:
            raise MigrationError(f"migration {self.r.destination} cannot finish: group(s) {', '.join(sorted(left))} "
                                 "still read the source (cut them over, or roll them back and leave them out)")
        assigned = groups.assigned_on(self.src_groups, self.r.source, exclude=self.r.lane_groups)
        if assigned:
            names = "; ".join(f"{v.group_id} (" + ", ".join(f"{m.label} [{_parts(m.partitions)}]"
                                                          for m in v.members if m.partitions) + ")"
                              for v in assigned)
            raise MigrationError(f"migration {self.r.destination} cannot finish: group(s) {names} have live members "
                                 f"assigned partitions of {self.r.source} (committed or not): stop them, or add "
                                 "their groups (migrate start --group G) and cut them over", topic=self.r.source)
        readers = [v for v in groups.groups_on(self.src_groups, self.r.source, exclude=self.r.lane_groups)
                   if v.members and f"group/{v.group_id}" not in st]
        if readers:
            names = ", ".join(f"{v.group_id} ({', '.join(m.client_id for m in v.members)})" for v in readers)
            raise MigrationError(f"migration {self.r.destination} cannot finish: group(s) {names} still read "
                                 f"{self.r.source} with active members and are not part of the migration "
                                 "(add them: migrate start --group G, then cut them over)")
        if migration.get("stage") != "finished":
            self.payoffs.record("finish", groups_moved=_moved_count(st))
            migration = {**migration, "stage": "finished", "finished_ms": _now_ms()}
            self._put("migration", migration)
        return migration

    # ------------------------------------------------------------------ report
    def report(self) -> payoff.Payoff:
        """Predicted against realized: the state's prediction and readings, and (before the finish) one more reading
        taken now, shown and not stored (reports hold no lease)."""
        st = dict(self.state())
        migration = self._started(st)
        if migration.get("stage") != "finished":
            now = self.payoffs.read("report", groups_moved=_moved_count(st))
            st[payoff.reading_key(now)] = now.as_dict()
        return payoff.payoff(st, migration=self.r.destination)


def _moved_count(st: Mapping[str, Any]) -> int:
    return sum(1 for k, v in st.items() if k.startswith("group/") and v.get("stage") == "destination")


def resumed_commit_landed(committed: Mapping[int, int], translated: Mapping[int, int]) -> bool:
    """Pure: whether an interrupted cutover's commit had been made, its group's offsets on the destination being
    those it computed or past them on every partition (the group read on after it; nothing else commits there)."""
    return bool(translated) and all(p in committed and committed[p] >= o for p, o in translated.items())


def _watermarks(c: Consumer, topic: str, timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """One try at each partition's (low, high) of `topic` through consumer `c`: KafkaUnavailableError with Kafka's
    error name when a broker does not answer (migrate.retry decides whether to try again)."""
    try:
        md = c.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if md is None or (md.error is not None and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise MigrationError(f"topic {topic} does not exist", topic=topic)
        if md.error is not None:
            raise KafkaException(md.error)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s) for p in sorted(md.partitions)}
    except KafkaException as exc:
        err = kafka_error(exc)
        raise KafkaUnavailableError(f"cannot read the offsets of {topic}: {err.str() if err else exc}", topic=topic,
                                    kafka_error=err.name() if err else None,
                                    retriable=err is None or retriable(err)) from exc


def read_maps(config: Config, destination: str, *, read: Callable[[Config, str], Any] = offset_map_topic.read,
              settle_s: float = SETTLE_S, timeout_s: float | None = None
              ) -> tuple[dict[int, PartitionMap], offset_map_topic.LaneHealth | None]:
    """The offset map of `destination` (offset_map_topic.read), its first moments waited out: `start` creates the
    offset-map topic when missing, and the step after it may find its partition without a leader yet
    (NOT_LEADER_FOR_PARTITION and the like, at most `settle_s`), and a failover of its leader (any retriable error,
    for at most `timeout_s`: default migration.api_timeout_ms). Any Kafka error left: one line naming the topic."""
    if timeout_s is None:
        timeout_s = config.migration.api_timeout_ms / 1000 if config.migration else 60.0
    try:
        return until_deadline(lambda: wait_settled(lambda: read(config, destination), timeout_s=settle_s),
                              what=f"read offset-map topic {config.offset_map_topic}", timeout_s=timeout_s,
                              fields={"topic": config.offset_map_topic},
                              retry_on=lambda e: retry.retriable(e) and not settling(e))  # those: settle_s
    except KafkaException as exc:
        err = kafka_error(exc)
        why = f"{err.name()}: {err.str()}" if err is not None else str(exc)
        still = f" after {settle_s:g}s" if err is not None and err.code() in SETTLING_ERRORS else ""
        raise KafkaUnavailableError(f"cannot read offset-map topic {config.offset_map_topic}{still}: {why}; check "
                                    "the cluster and run the command again", topic=config.offset_map_topic,
                                    kafka_error=err.name() if err is not None else None) from exc


def admin_for(config: Config) -> AdminClient:
    return connect_admin(config.cluster.librdkafka())[0]
