"""Copying sources stored in the old message format into destinations on a modern broker: magic v1 message sets
(gzip, snappy, lz4, uncompressed) keep every record exactly; magic v0 ones too, but for the timestamps v0 lacks.
The source really is stored so (DumpLogSegments). A destination in the old format is refused before anything is
copied; one whose topic stores v2 on the same old broker takes zstd."""

from __future__ import annotations

import time

import yaml
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE
from confluent_kafka.admin import AdminClient

from tests.legacy.conftest import PARTITIONS, RECORDS
from tests.support.cli import run_cli
from transcoder import config as cfg
from transcoder.kafka.provisioning import BrokerFormat, broker_format
from transcoder.service.runner import Service

DEST_CODECS = ("none", "zstd", "lz4")


def record(m) -> tuple:
    return (m.partition(), m.offset(), m.key(), m.value(), m.timestamp())


def config(source_bootstrap: str, routes: list[dict], destination_bootstrap: str | None = None) -> dict:
    return {"cluster": {"bootstrap_servers": source_bootstrap},
            **({"destination_cluster": {"bootstrap_servers": destination_bootstrap}} if destination_bootstrap else {}),
            "group_id": f"legacy-{time.monotonic_ns()}", "metrics": {"port": 0}, "commit_interval_ms": 200,
            "routes": routes}


def test_sources_are_stored_in_the_old_format(legacy, legacy_sources):
    stored = legacy.stored_batches([s.topic for s in legacy_sources], PARTITIONS)
    for s in legacy_sources:
        for partition in range(PARTITIONS):
            batches = stored[(s.topic, partition)]
            assert batches, f"{s.topic} [{partition}] stores nothing"
            assert {b["magic"] for b in batches} == {str(s.magic)}, f"{s.topic} [{partition}]: {batches[:2]}"
            assert {b["compresscodec"].lower() for b in batches} == {s.codec}, f"{s.topic} [{partition}]"
            if s.codec != "none":  # compressed wrappers of many records each
                assert len(batches) < RECORDS // PARTITIONS / 5, f"{s.topic} [{partition}]: {len(batches)} wrappers"
            else:
                assert len(batches) == RECORDS // PARTITIONS


def test_old_format_sources_are_copied_record_by_record(legacy, modern, legacy_sources, read_topic):
    # One shared lane (one consumer, a producer per codec): 27 isolated lanes would crowd two shared cores.
    conf = cfg.parse({**config(legacy.bootstrap, [{"source": s.topic,
                                                   "destinations": [{"codec": c} for c in DEST_CODECS]}
                                                  for s in legacy_sources], modern), "lanes": "shared"}, environ={})
    started = int(time.time() * 1000)
    Service(conf).run(until_caught_up=True)

    for s in legacy_sources:
        want = read_topic(legacy.bootstrap, s.topic)
        assert len(want) == RECORDS
        assert all(m.headers() is None for m in want)  # neither v0 nor v1 has headers
        assert {m.timestamp()[0] for m in want} == {TIMESTAMP_CREATE_TIME if s.magic else TIMESTAMP_NOT_AVAILABLE}
        assert sum(m.value() is None for m in want) == len(range(0, RECORDS, 9))
        for codec in DEST_CODECS:
            dest = f"{s.topic}.{codec}"
            got = read_topic(modern, dest)
            assert len(got) == len(want), dest
            for w, g in zip(want, got, strict=True):
                where = f"{dest} [{g.partition()}] offset {g.offset()}"
                assert not g.headers(), f"{where}: headers {g.headers()}"
                if s.magic:
                    assert record(g) == record(w), where
                else:  # v0 has no timestamps: the copy is stamped when it was written
                    assert record(g)[:4] == record(w)[:4], where
                    assert g.timestamp()[0] == TIMESTAMP_CREATE_TIME
                    assert started - 1000 <= g.timestamp()[1] <= int(time.time() * 1000), where


def test_a_destination_in_the_old_format_is_refused_in_one_line(legacy, legacy_sources, tmp_path):
    source = legacy_sources[0].topic
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config(legacy.bootstrap, [{"source": source, "destinations": [
        {"codec": "zstd"}, {"codec": "lz4"}]}])))
    proc = run_cli("run", "--config", str(path), "--until-caught-up", timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("transcoder: error: ")
    assert (f"destination {source}.zstd would be stored in message format 0.10.2 (v1): zstd needs the v2 "
            "record format (message format 0.11.0 or newer, Kafka 2.1 brokers)") in lines[0]
    assert (f"destination {source}.lz4 would be stored in message format 0.10.2 (v1): transcoder's "
            "idempotent producers need the v2 record format") in lines[0]
    topics = AdminClient({"bootstrap.servers": legacy.bootstrap}).list_topics(timeout=10).topics
    assert f"{source}.zstd" not in topics and f"{source}.lz4" not in topics  # refused before creating anything


def test_zstd_into_a_v2_topic_on_the_old_broker_is_copied(legacy, legacy_sources, new_topic, read_topic):
    """The old broker stores a topic created with message.format.version 2.1 as v2: zstd works there."""
    source = legacy_sources[0]
    dest = new_topic(legacy.bootstrap, PARTITIONS, {"message.format.version": "2.1", "compression.type": "producer"})
    conf = cfg.parse(config(legacy.bootstrap, [{"source": source.topic, "destinations": [
        {"codec": "zstd", "topic": dest}]}]), environ={})
    Service(conf).run(until_caught_up=True)
    want, got = read_topic(legacy.bootstrap, source.topic), read_topic(legacy.bootstrap, dest)
    assert [record(m) for m in got] == [record(m) for m in want]
    stored = legacy.stored_batches([dest], PARTITIONS)
    assert {(b["magic"], b["compresscodec"].lower()) for bs in stored.values() for b in bs} == {("2", "zstd")}


def test_pre_flight_reads_the_format_settings_only_where_they_apply(legacy, modern):
    assert broker_format(AdminClient({"bootstrap.servers": legacy.bootstrap})) == BrokerFormat("2.8", "0.10.2")
    assert broker_format(AdminClient({"bootstrap.servers": modern})) is None  # KRaft, Kafka 4: v2 only
