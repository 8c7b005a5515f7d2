"""The cutover gates on the real broker (issue 44): `copied` and `mismatch` refuse whatever is overridden (`--force`,
every `--override`), with exit 3 and nothing committed; `cutover --dry-run` changes nothing and prints the offsets
the cutover then commits."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, TopicPartition

from tests.support.cli import one_line
from tests.support.migration import assert_exact, consume_group, migrate, produce, read_all, setup
from transcoder.migrate.state import StateStore
from transcoder.service.runner import Service

OVERRIDE_ALL = ("--override", "lag", "--override", "verified", "--override", "errors")


def _committed_on(kafka, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                              timeout=10) if tp.offset >= 0}
    finally:
        c.close()


def _stage(path: str, group: str) -> str:
    status = json.loads(migrate("status", "--config", path, "--format", "json").stdout)
    return {g["group"]: g["stage"] for g in status["groups"]}[group]


def _refused_line(proc, gate: str) -> str:
    """The error line of a refused cutover (after --force's deprecation warning, if any)."""
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("transcoder: error: ")]
    assert f"{gate}: " in line and "cannot be overridden" in line, line
    return line


def test_a_group_past_the_lane_is_moved_by_no_override(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=3)
    produce(kafka, source, 300, 3)
    path, conf, dest = setup(tmp_path, kafka, source)
    Service(conf).run(until_caught_up=True)  # the lane has committed 100 on each partition
    produce(kafka, source, 300, 3)  # not copied: 100..199 on each partition
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=450)  # past the lane on one partition at least
    migrate("start", "--config", path, "--group", group)
    migrate("verify", "--config", path)

    forced = migrate("cutover", "--config", path, "--group", group, "--force", ok=False)
    assert "--force is deprecated" in forced.stderr and "--override lag" in forced.stderr
    line = _refused_line(forced, "copied")
    assert "verified:" not in line, line  # overridden by --force: only what cannot be overridden is left
    line = one_line(migrate("cutover", "--config", path, "--group", group, *OVERRIDE_ALL, ok=False))
    assert line.startswith(f"transcoder: error: cutover of group {group} refused: copied: the lane has copied "
                           "partition ") and "check that `transcoder run` runs" in line, line
    usage = migrate("cutover", "--config", path, "--group", group, "--override", "copied", ok=False)
    assert usage.returncode == 2 and "'copied' is not one of" in usage.stderr, usage.stderr

    dry = migrate("cutover", "--config", path, "--group", group, "--dry-run", "--override", "verified",
                  "--format", "json", ok=False)
    assert dry.returncode == 3, dry.stdout + dry.stderr
    (plan,) = json.loads(dry.stdout)
    results = {g["gate"]: g["result"] for g in plan["gates"]}
    assert plan["outcome"] == "refused" and results["copied"] == "fail" and results["verified"] == "overridden"
    assert results["members"] == results["mismatch"] == results["rewind"] == "pass", plan

    assert _committed_on(kafka, group, dest, 3) == {}  # nothing committed on the destination
    assert _stage(path, group) == "source"


def test_a_recorded_mismatch_refuses_then_a_dry_run_prints_the_offsets_the_cutover_commits(kafka, topic_factory,
                                                                                          tmp_path):
    source = topic_factory(partitions=3)
    produce(kafka, source, 600, 3)
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=250)
    path, conf, dest = setup(tmp_path, kafka, source)
    Service(conf).run(until_caught_up=True)
    migrate("start", "--config", path, "--group", group)
    migrate("verify", "--config", path)
    store = StateStore(conf, dest)
    try:  # as `migrate verify` records one (it clears it on its next pass without one)
        store.put("mismatch", {"line": "partition 1: source offset 7 / destination offset 7: value differs",
                               "partition": 1, "source_offset": 7, "at_ms": 0})
        for extra in (("--force",), OVERRIDE_ALL):
            proc = migrate("cutover", "--config", path, "--group", group, *extra, ok=False)
            line = _refused_line(proc, "mismatch")
            assert "value differs" in line and "`transcoder migrate verify`" in line, line
        assert _committed_on(kafka, group, dest, 3) == {} and _stage(path, group) == "source"
        store.delete("mismatch")

        state = store.read_records()  # the lease's key included: a dry run takes none
        dry = migrate("cutover", "--config", path, "--group", group, "--dry-run", "--format", "json")
        (plan,) = json.loads(dry.stdout)
        assert plan["outcome"] == "would move", plan
        assert {g["gate"]: g["result"] for g in plan["gates"]} == {
            "members": "pass", "copied": "pass", "lag": "pass", "verified": "pass", "mismatch": "pass",
            "errors": "pass", "rewind": "pass"}
        assert store.read_records() == state  # nothing written to the migration's state
        assert _committed_on(kafka, group, dest, 3) == {}  # nothing committed
        table = migrate("cutover", "--config", path, "--group", group, "--dry-run").stdout
        assert f"group {group} (source): would move" in table and "mismatch" in table
        assert store.read_records() == state
    finally:
        store.close()

    (moved,) = json.loads(migrate("cutover", "--config", path, "--group", group, "--format", "json").stdout)
    assert moved["outcome"] == "moved" and moved["forced"] == []
    # per partition, the dry run's offsets are those the cutover committed, and the source offsets it started from
    assert moved["destination_offsets"] == plan["destination_offsets"]
    assert moved["source_offsets"] == plan["source_offsets"]
    assert _committed_on(kafka, group, dest, 3) == {int(p): o for p, o in plan["destination_offsets"].items()}
    assert_exact(read_all(kafka, source), before, consume_group(kafka, group, dest))  # the exact next records
