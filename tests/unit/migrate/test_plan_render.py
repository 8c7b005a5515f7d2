"""The migration plan from facts, without Kafka: projections, pre-flight checks, stages, rows, JSON, rich."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from transcoder import config as cfg
from transcoder.migrate import plan as planning
from transcoder.migrate.groups import GroupView, Member
from transcoder.migrate.plan import TopicFacts
from transcoder.pipeline import routes


def _config(codec: str = "zstd", migration: dict | None = None, **dest: object) -> cfg.Config:
    raw = {"cluster": {"bootstrap_servers": "broker:9092"}, "group_id": "tc",
           "routes": [{"source": "orders", "destinations": [{"codec": codec, "name": "shadow", "topic": "orders.z",
                                                              **dest}]}]}
    if migration is not None:
        raw["migration"] = migration
    return cfg.parse(raw, environ={})


def _target(config: cfg.Config) -> routes.Target:
    return routes.plan(config, []).targets[0]


SOURCE = TopicFacts("orders", partitions=3, replication_factor=3, records=1_000_000, disk_bytes=3_000_000_000)
# Half the records copied so far, at 250 B per record on each of 2 replicas: 4x smaller than the source's 1,000 B.
DEST = TopicFacts("orders.z", partitions=3, replication_factor=2, records=500_000, disk_bytes=250_000_000,
                  compression_type="producer")
GROUPS = (
    GroupView("billing", "Stable", (Member("m-1", "billing-app", "10.0.0.7", (0, 1, 2)),),
              committed={0: 100, 1: 200}, ends={0: 1100, 1: 200, 2: 50}),
    GroupView("audit", "Empty", (), committed={0: 0, 1: 0, 2: 0}, ends={0: 1100, 1: 200, 2: 50}, simple=True),
)


def _plan(config: cfg.Config | None = None, *, source: TopicFacts = SOURCE, destination: TopicFacts = DEST,
          groups=GROUPS, version: int | None = 9, named: bool = False) -> planning.MigrationPlan:
    config = config or _config(migration={})
    return planning.assemble(config, _target(config), source=source, destination=destination, groups=groups,
                             lane_group="tc.shadow", max_produce_version=version, groups_named=named,
                             config_path="svc.yaml")


def test_projection_from_measured_bytes_per_record():
    p = _plan().projection
    assert p.measured and p.note is None
    assert p.source_bytes_per_record == pytest.approx(1000.0)  # 3 GB over 3 replicas and 1M records
    assert p.destination_bytes_per_record == pytest.approx(250.0)
    assert p.ratio == pytest.approx(4.0)
    assert p.projected_destination_disk_bytes == pytest.approx(1_000_000 * 250 * 2)  # over the 2 replicas
    billing, audit = p.groups
    assert (billing.group_id, billing.lag_records) == ("billing", 1000)
    assert billing.source_fetch_bytes == pytest.approx(1_000_000) and billing.destination_fetch_bytes == 250_000
    assert (audit.lag_records, audit.source_fetch_bytes) == (1350, pytest.approx(1_350_000))


@pytest.mark.parametrize(("destination", "why"), [
    (TopicFacts("orders.z", None, None, None, None), "(the destination topic does not exist yet)"),
    (TopicFacts("orders.z", 3, 1, 0, 0, "producer"), "(the destination holds no records)"),
    (TopicFacts("orders.z", 3, 1, 10, 0, "producer"), "(the brokers report no size for the destination yet)"),
])
def test_not_measured_before_the_shadow_copy(destination, why):
    plan = _plan(destination=destination)
    assert not plan.projection.measured
    assert plan.projection.note == f"{planning.NOT_MEASURED} {why}"
    assert ("disk and network", "measured", plan.projection.note) in planning.rows(plan)
    check = next(c for c in plan.checks if c.name == "disk and network")
    assert check.status == "pending" and check.detail.startswith("not measured yet: run the shadow copy first")


def test_rows_format_bytes_and_ratio():
    r = {(section, item): text for section, item, text in planning.rows(_plan())}
    assert r[("disk and network", "bytes per record")] == (
        "1,000.0 B source, 250.0 B destination: ratio 4.00x (measured on 500,000 copied records)")
    assert r[("disk and network", "destination disk")] == (
        "500 MB for the source's 1,000,000 records (the source takes 3 GB; saves 2.5 GB)")
    assert r[("disk and network", "group billing")] == (
        "its lag of 1,000 records: 1 MB from the source, 250 kB from the destination")
    assert r[("topics", "source orders")] == (
        "3 partitions, replication 3; 1,000,000 records, 3 GB on disk, 1,000.0 B per record")
    assert r[("groups", "billing")] == (
        "Stable; members: billing-app@10.0.0.7 [0,1,2]; lag 1,000 (0:1,000, 1:0); no offset on 2")
    assert r[("groups", "audit")].startswith("Empty; manual assignment; members: none; lag 1,350")
    assert r[("topics", "codec of shadow")].startswith("zstd; batches up to 1,048,576 B or 100,000 records, linger 500")


def test_human_bytes():
    assert [planning.human_bytes(n) for n in (None, 0, 999, 1000, 1_234_567, 2.5e12)] == [
        "-", "0 B", "999 B", "1 kB", "1.23 MB", "2.5 TB"]


def test_checks_pass_on_a_sound_migration():
    plan = _plan()
    status = {c.name: c.status for c in plan.checks}
    assert status == {"migration config": "ok", "zstd brokers": "ok", "zstd consumers": "check",
                      "broker recompression": "ok", "partitions": "ok", "manual assignment": "check",
                      "disk and network": "ok"}
    assert plan.problems == ()
    zstd = next(c for c in plan.checks if c.name == "zstd consumers")
    assert zstd.groups == ("billing", "audit")
    assert "KIP-110" in zstd.detail and "billing (billing-app@10.0.0.7)" in zstd.detail
    assert "audit (no member now: check its application)" in zstd.detail
    assert next(c for c in plan.checks if c.name == "manual assignment").groups == ("audit",)


def test_checks_find_the_problems():
    old_brokers = _plan(version=3)
    [zstd] = old_brokers.problems
    assert zstd.name == "zstd brokers" and "Produce up to v3" in zstd.detail and "Kafka 2.1" in zstd.detail

    gzip = TopicFacts("orders.z", 4, 1, 10, 1000, "gzip")
    plan = _plan(_config(), destination=gzip)  # no migration section either
    problems = {c.name: c.detail for c in plan.problems}
    assert set(problems) == {"migration config", "broker recompression", "partitions"}
    assert problems["broker recompression"] == (
        "orders.z has compression.type=gzip: the broker would recompress every zstd batch; fix: kafka-configs "
        "--bootstrap-server broker:9092 --alter --entity-type topics --entity-name orders.z --add-config "
        "compression.type=producer")
    assert "4 partitions but orders has 3" in problems["partitions"]
    assert "`migration:`" in problems["migration config"]

    allowed = _plan(_config(migration={}, allow_broker_recompression=True),
                    destination=TopicFacts("orders.z", 3, 1, 10, 1000, "gzip"))
    assert {c.name: c.status for c in allowed.checks}["broker recompression"] == "check"

    lz4 = _plan(_config("lz4", migration={}), version=3)
    assert {c.name: c.status for c in lz4.checks}["zstd brokers"] == "n/a"
    assert "zstd consumers" not in {c.name for c in lz4.checks}
    assert lz4.problems == ()


def test_stages_in_order_with_their_commands():
    stages = _plan(named=True).stages
    assert [s.name for s in stages] == ["start", "verify", "cutover billing", "cutover audit", "rollback", "finish"]
    cmd = {s.name: s.command for s in stages}
    assert cmd["start"] == "transcoder migrate start -c svc.yaml --destination shadow --group billing --group audit"
    assert cmd["cutover audit"] == "transcoder migrate cutover -c svc.yaml --destination shadow --group audit --wait"
    assert cmd["finish"] == "transcoder migrate finish -c svc.yaml --destination shadow"
    assert "lane lag at most 10,000 records" in next(s.does for s in stages if s.name == "cutover billing")
    assert "tc.offset-map" in stages[0].does

    found = _plan(groups=()).stages  # no group read the source: a placeholder cutover, every group at start
    assert [s.name for s in found] == ["start", "verify", "cutover GROUP", "rollback", "finish"]
    assert found[0].command.endswith("--all-groups")


def test_as_dict_is_json_with_numbers():
    doc = json.loads(json.dumps(planning.as_dict(_plan()), sort_keys=True))
    assert doc["target"] == "shadow"
    assert doc["destination"]["codec"] == "zstd" and doc["destination"]["batch"]["max_bytes"] == 1_048_576
    assert doc["source"]["bytes_per_record"] == pytest.approx(1000.0)
    assert doc["projection"]["ratio"] == pytest.approx(4.0) and doc["projection"]["measured"] is True
    assert doc["groups"][0]["committed"] == {"0": 100, "1": 200}
    assert doc["groups"][0]["lag"] == 1000 and doc["groups"][0]["members"][0]["client_id"] == "billing-app"
    assert doc["problems"] == 0
    assert [s["name"] for s in doc["stages"]][:2] == ["start", "verify"]

    empty = planning.as_dict(_plan(destination=TopicFacts("orders.z", None, None, None, None)))
    assert empty["projection"]["ratio"] is None and empty["destination"]["exists"] is False


def test_render_table_prints_every_section():
    console = Console(record=True, width=200)
    planning.render_table(_plan(_config(), destination=TopicFacts("orders.z", 4, 1, 10, 1000, "gzip")), console)
    text = console.export_text()
    for section in ("topics", "groups", "pre-flight", "disk and network", "stages"):
        assert section in text
    assert "problem: orders.z has compression.type=gzip" in text
    assert "billing-app@10.0.0.7 [0,1,2]" in text  # brackets survive rich markup
    assert "3 problem(s) to fix before `migrate start`" in text
