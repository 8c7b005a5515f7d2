"""The migration controller: each `transcoder migrate` step, as I/O around the pure gates and translation.

All state lives in the migration's state topic (migrate.state), so any machine can run any step, a
restarted controller resumes where the last one stopped, and every step is idempotent: a group already
moved is reported as such, a cutover interrupted after its offsets were computed commits those same
offsets. One controller at a time holds a migration (migrate.lease.Lease); a second one refuses.
A cutover's gates, translation and commit, and its dry run, are migrate.cutover.Cutover's: the controller hands
it the clients and the state writer it works with.

State keys (values are JSON objects):
  migration        source, destination, codec, stage (shadow|finished), started/finished times
  group/<id>       stage (source|moving|destination|rolling-back), offsets both sides, gates forced, history
  verify/<p>       verified_through of partition p, and when
  mismatch         the first verification mismatch found, until a verification passes it
  prediction       evaluate's figures for the destination's codec on the source's records (migrate.payoff)
  reading/<at>     what the clusters and the copier said at start, each cutover, finish (migrate.payoff)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from transcoder.config import Config
from transcoder.errors import ConfigError, KafkaUnavailableError, MigrationError
from transcoder.kafka import offset_map_topic
from transcoder.kafka.admin import SETTLE_S, SETTLING_ERRORS, settling, wait_settled
from transcoder.kafka.clients import client_config, connect_admin, retriable
from transcoder.kafka.protocol import RawClient
from transcoder.migrate import gates, groups, payoff, retry, verify
from transcoder.migrate.cutover import Cutover, DryRun, Moved, pick, refuse_rewind
from transcoder.migrate.lease import Lease
from transcoder.migrate.plan import human_bytes, topic_facts
from transcoder.migrate.realized import Payoffs
from transcoder.migrate.retry import until_deadline
from transcoder.migrate.state import StateStore, decode_offsets, encode_offsets, kafka_error, now_ms
from transcoder.migrate.target import Resolved, resolve
from transcoder.pipeline.offset_runs import PartitionMap

log = structlog.get_logger("transcoder.migrate")

STAGES = ("source", "moving", "destination", "rolling-back")


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
        self.cutovers = Cutover(self.r, self.mc, src_groups=self.src_groups, dst_groups=self.dst_groups, put=self._put,
                                watermarks=self.watermarks, first_records=self.first_records,
                                lane_committed=self.lane_committed)

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
            "codec": self.r.target.destination.label, "stage": "shadow", "started_ms": now_ms()}
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
            self._put(f"group/{g}", {"stage": "source", "source_offsets": encode_offsets(view.committed),
                                     "registered_ms": now_ms(), "history": [["source", now_ms()]]})
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
        at = now_ms()
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
        chosen = pick(self._groups(group_ids, all_groups=all_groups or percent is not None, st=st), percent, st)
        maps, health = self.maps()
        out = []
        for g in chosen:
            out.append(self.cutovers.move(g, st, maps, health, wait_s=wait_s, overridden=overridden))
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
        chosen = pick(self._groups(group_ids, all_groups=all_groups or percent is not None, st=st), percent, st)
        maps, health = self.maps()
        return [self.cutovers.dry_run(g, st, maps, health, wait_s=wait_s, overridden=overridden) for g in chosen]

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
                out.append(Moved(g, "already", decode_offsets(rec.get("source_offsets")), {}, [],
                                 "already on the source"))
                continue
            if stage == "rolling-back":
                src = decode_offsets(rec["rollback_offsets"])
                self.cutovers.quiet(g, self.r.source, wait_s)
            else:
                view = self.cutovers.quiet(g, self.r.destination, wait_s)
                src = gates.backward(g, dict(view.committed) or decode_offsets(rec.get("destination_offsets")), maps,
                                     decode_offsets(rec.get("source_offsets")))
                history = list(rec.get("history", [])) + [["rolling-back", now_ms()]]
                rec = {**rec, "stage": "rolling-back", "rollback_offsets": encode_offsets(src),
                       "destination_offsets_at_rollback": encode_offsets(dict(view.committed)), "history": history}
                self._put(f"group/{g}", rec)
                self.cutovers.quiet(g, self.r.source, wait_s)
            refuse_rewind("rollback", g, self.src_groups, self.r.source, src)
            groups.commit_offsets(self.src_groups, g, self.r.source, src)
            at = now_ms()
            self._put(f"group/{g}", {**rec, "stage": "source", "source_offsets": encode_offsets(src),
                                     "rolled_back_ms": at, "history": list(rec.get("history", [])) + [["source", at]]})
            log.info("group_rolled_back", group=g, source_offsets=encode_offsets(src))
            out.append(Moved(g, "moved", src, decode_offsets(rec.get("destination_offsets_at_rollback")), [],
                             "rolled back"))
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
            committed = decode_offsets(rec.get("source_offsets"))
            read_since = None
            if rec.get("stage") == "destination" and dst_view is not None:
                at = decode_offsets(rec.get("destination_offsets"))
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
            migration = {**migration, "stage": "finished", "finished_ms": now_ms()}
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
