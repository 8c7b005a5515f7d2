"""The cutover gates on the real broker (issue 44): `copied` and `mismatch` refuse whatever is overridden (`--force`,
every `--override`), with exit 3 and nothing committed; `cutover --dry-run` changes nothing and prints the offsets
the cutover then commits. One migration, two groups (each migrate step takes seconds: they share it)."""

from __future__ import annotations

import json
import uuid

from tests.support.cli import one_line
from tests.support.migration import assert_exact, committed_on, consume_group, migrate, produce, read_all, setup
from transcoder.migrate.state import StateStore
from transcoder.service.runner import Service

OVERRIDE_ALL = ("--override", "lag", "--override", "verified", "--override", "errors")


def _refused_line(proc, gate: str) -> str:
    """The error line of a refused cutover (after --force's deprecation warning, if any)."""
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("transcoder: error: ")]
    assert f"{gate}: " in line and "cannot be overridden" in line, line
    return line


def test_copied_and_mismatch_refuse_every_override_and_a_dry_run_prints_what_the_cutover_commits(
        kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=3)
    produce(kafka, source, 300, 3)  # 100 per partition
    ok, behind = f"app-{uuid.uuid4().hex[:6]}", f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, ok, source, stop_after=130)  # within what the lane copies
    path, conf, dest = setup(tmp_path, kafka, source)
    Service(conf).run(until_caught_up=True)  # the lane has committed 100 on each partition
    produce(kafka, source, 300, 3)  # not copied: 100..199 on each partition
    consume_group(kafka, behind, source, stop_after=450)  # past the lane on one partition at least
    migrate("start", "--config", path, "--group", ok, "--group", behind)
    migrate("verify", "--config", path)
    store = StateStore(conf, dest)
    try:
        # copied: neither --force nor every --override moves the group
        forced = migrate("cutover", "--config", path, "--group", behind, "--force", ok=False)
        assert "--force is deprecated" in forced.stderr and "--override lag" in forced.stderr
        line = _refused_line(forced, "copied")
        assert "verified:" not in line, line  # overridden by --force: only what cannot be overridden is left
        line = one_line(migrate("cutover", "--config", path, "--group", behind, *OVERRIDE_ALL, ok=False))
        assert line.startswith(f"transcoder: error: cutover of group {behind} refused: copied: the lane has copied "
                               "partition ") and "check that `transcoder run` runs" in line, line
        dry = migrate("cutover", "--config", path, "--group", behind, "--dry-run", "--override", "verified",
                      "--format", "json", ok=False)
        assert dry.returncode == 3, dry.stdout + dry.stderr
        (plan,) = json.loads(dry.stdout)
        results = {g["gate"]: g["result"] for g in plan["gates"]}
        assert plan["outcome"] == "refused" and results["copied"] == "fail" and results["verified"] == "overridden"
        assert results["members"] == results["mismatch"] == results["rewind"] == "pass", plan

        # a recorded mismatch (as `migrate verify` records one; its next pass without one clears it): the same
        store.put("mismatch", {"line": "partition 1: source offset 7 / destination offset 7: value differs",
                               "partition": 1, "source_offset": 7, "at_ms": 0})
        line = _refused_line(migrate("cutover", "--config", path, "--group", ok, "--force", ok=False), "mismatch")
        assert "value differs" in line and "`transcoder migrate verify`" in line and "copied:" not in line, line
        assert committed_on(kafka, behind, dest, 3) == {} and committed_on(kafka, ok, dest, 3) == {}
        state = store.read()
        assert state[f"group/{behind}"]["stage"] == state[f"group/{ok}"]["stage"] == "source"
        store.delete("mismatch")

        # the dry run: every gate passes; it writes nothing (no lease either) and commits nothing
        written = store.read_records()
        (plan,) = json.loads(migrate("cutover", "--config", path, "--group", ok, "--dry-run", "--format",
                                     "json").stdout)
        assert plan["outcome"] == "would move", plan
        assert {g["gate"]: g["result"] for g in plan["gates"]} == {
            "members": "pass", "copied": "pass", "lag": "pass", "verified": "pass", "mismatch": "pass",
            "errors": "pass", "rewind": "pass"}
        assert store.read_records() == written
        assert committed_on(kafka, ok, dest, 3) == {}
    finally:
        store.close()

    (moved,) = json.loads(migrate("cutover", "--config", path, "--group", ok, "--format", "json").stdout)
    assert moved["outcome"] == "moved" and moved["forced"] == []
    # per partition, the dry run's offsets are those the cutover committed, from the same source offsets
    assert moved["destination_offsets"] == plan["destination_offsets"]
    assert moved["source_offsets"] == plan["source_offsets"]
    assert committed_on(kafka, ok, dest, 3) == {int(p): o for p, o in plan["destination_offsets"].items()}
    copied = [r for r in read_all(kafka, source) if r[1] < 100]
    assert_exact(copied, before, consume_group(kafka, ok, dest))  # it reads the exact next records
    assert committed_on(kafka, behind, dest, 3) == {}

    # a cutover interrupted after its commit (the state still says `moving`): the dry run says it would resume with
    # the offsets recorded, and the cutover then records the group as moved, committing nothing again
    read_to = committed_on(kafka, ok, dest, 3)
    with StateStore(conf, dest) as store:
        rec = store.read()[f"group/{ok}"]
        store.put(f"group/{ok}", {**rec, "stage": "moving", "history": rec["history"][:-1]})
    (plan,) = json.loads(migrate("cutover", "--config", path, "--group", ok, "--dry-run", "--format",
                                 "json").stdout)
    assert plan["outcome"] == "would resume" and plan["destination_offsets"] == moved["destination_offsets"]
    assert [(g["gate"], g["result"]) for g in plan["gates"]] == [("members", "pass"), ("rewind", "pass")]
    (again,) = json.loads(migrate("cutover", "--config", path, "--group", ok, "--format", "json").stdout)
    assert again["outcome"] == "moved" and "its commit had landed" in again["detail"], again
    assert committed_on(kafka, ok, dest, 3) == read_to
