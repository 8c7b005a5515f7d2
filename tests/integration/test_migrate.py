"""`transcoder migrate` end to end on the real broker: groups move to the copy and back with exact offsets.

Each scenario checks, record by record, that what a group read before the move plus what it reads after
equals the source: no gap, no duplicate (a SIGKILLed copy may add duplicates, never a gap). The scenarios whose
source has a shape of its own (a compacted one with tombstones and gaps, aborted transactions) copy with each engine:
the service, and Spark on the session's SparkSession (a plain topic on Spark, under both guarantees:
tests/spark/test_migrate_on_spark.py).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support import records
from tests.support.cli import one_line, run_cli
from tests.support.migration import (
    assert_exact,
    by_partition,
    committed_on,
    consume_group,
    cut_over,
    migrate,
    produce,
    read_all,
    setup,
)
from tests.support.records import Rec
from transcoder import config as cfg
from transcoder.kafka.offset_map_topic import OffsetMapRecorder
from transcoder.service.runner import Service


def copy(conf: cfg.Config) -> None:
    Service(conf).run(until_caught_up=True)


ENGINES = pytest.mark.parametrize("engine", ["service", "spark"], indirect=True)
#: the lease of the test of a dead controller's lease running out: long enough for the live follower's heartbeats
#: (every third of it) on a busy machine, short enough to wait for
EXPIRING_LEASE_MS = 8_000


def test_plain_topic_group_moves_at_the_exact_next_record_and_rolls_back_exactly(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=3)
    produce(kafka, source, 3000, 3)
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=1200)  # 40%
    path, conf, dest = setup(tmp_path, kafka, source)
    copy(conf)
    moved = cut_over(path, group)
    assert moved[0]["outcome"] == "moved"
    # on the destination, the group reads a part, then is rolled back to the source
    middle = consume_group(kafka, group, dest, stop_after=900)
    assert middle and len(middle) == 900
    back = json.loads(migrate("rollback", "--config", path, "--group", group, "--format", "json").stdout)
    assert back[0]["outcome"] == "moved"
    after = consume_group(kafka, group, source)
    src = read_all(kafka, source)
    assert_exact(src, before, middle + after)
    # and a second cutover of the same group, idempotent afterwards
    again = consume_group(kafka, group, source)  # at the end: nothing left
    assert again == []
    migrate("verify", "--config", path)
    first = json.loads(migrate("cutover", "--config", path, "--group", group, "--format", "json").stdout)
    second = json.loads(migrate("cutover", "--config", path, "--group", group, "--format", "json").stdout)
    assert first[0]["outcome"] == "moved" and second[0]["outcome"] == "already"
    assert consume_group(kafka, group, dest) == []  # it stands at the end of the copy too
    status = json.loads(migrate("status", "--config", path, "--format", "json").stdout)
    assert [(g["group"], g["stage"]) for g in status["groups"]] == [(group, "destination")]
    assert status["moved"] == 1 and status["mismatch"] is None
    savings = status["savings"]  # zstd on these small text records: fewer bytes per record on the copy
    assert savings["measured"] and savings["destination_bytes_per_record"] < savings["source_bytes_per_record"]
    fin = migrate("finish", "--config", path)
    assert "transcoder never deletes a topic" in fin.stdout
    assert json.loads(migrate("status", "--config", path,
                              "--format", "json").stdout)["migration"]["stage"] == "finished"


def _wait_cleaned(admin: AdminClient, kafka, topic: str, produced: int, timeout: float = 90) -> list[Rec]:
    deadline = time.monotonic() + timeout
    while True:
        recs = read_all(kafka, topic)
        if len(recs) < produced:
            return recs
        assert time.monotonic() < deadline, "the log cleaner did not compact the source in time"
        time.sleep(2)


@ENGINES
def test_compacted_topic_with_tombstones_after_cleaning(engine, kafka, topic_factory, admin, tmp_path):
    source = topic_factory(partitions=2, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "86400000"})
    for _ in range(4):  # bursts in separate segments, so the cleaner has closed segments to clean
        produce(kafka, source, 500, 2, keyed=lambda i: f"entity-{i % 60}".encode(), tombstone_every=7)
        time.sleep(0.3)
    src = _wait_cleaned(admin, kafka, source, 2000)
    # stop cleaning now, so the source and its copy (created with the same configs) stay as they are
    fut = admin.incremental_alter_configs([ConfigResource("topic", source, incremental_configs=[
        _set("segment.ms", "604800000"), _set("min.cleanable.dirty.ratio", "0.99")])])
    for f in fut.values():
        f.result()
    src = read_all(kafka, source)
    # the group commits in a compaction gap (offsets that no longer exist) where there is one after its position
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=int(len(src) * 0.4))
    for part in (0, 1):
        recs = [r for r in src if r[0] == part]
        read = [r for r in before if r[0] == part]
        pos = read[-1][1] + 1 if read else 0
        gap = next((a[1] + 1 for a, b in itertools.pairwise(recs) if b[1] > a[1] + 1 and a[1] + 1 >= pos), None)
        if gap is not None:  # the next record that exists is the same: nothing read changes
            before = [r for r in before if r[0] != part] + [r for r in recs if r[1] < gap]
            _commit(kafka, group, source, {part: gap})
            break
    assert any(r[3] is None for r in src), "no tombstone in the source"
    path, conf, dest = setup(tmp_path, kafka, source)
    engine(conf).run(until_caught_up=True)
    cut_over(path, group)
    after = consume_group(kafka, group, dest)
    assert_exact(src, before, after)
    assert any(r[3] is None for r in after) or any(r[3] is None for r in before)


def _set(name: str, value: str):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def _commit(kafka, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


@ENGINES
def test_source_with_aborted_transactions(engine, kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=3)  # partition 2 stays empty: nothing copied, nothing mapped
    records.produce_transactions(kafka.bootstrap, source, transactions=12, per=50, partitions=2,
                                 aborted=lambda t: t % 3 == 1)
    src = read_all(kafka, source)
    assert len(src) == 400
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=160)
    _commit(kafka, group, source, {2: 0})  # a group may hold an offset on a partition with no records
    path, conf, dest = setup(tmp_path, kafka, source)
    engine(conf).run(until_caught_up=True)
    cut_over(path, group)
    moved = json.loads(migrate("status", "--config", path, "--format", "json").stdout)
    assert moved["groups"][0]["stage"] == "destination"
    after = consume_group(kafka, group, dest)
    assert_exact(src, before, after)


def test_sigkill_of_the_copy_then_restart_then_cutover_never_leaves_a_gap(kafka, topic_factory, admin, tmp_path):
    source = topic_factory(partitions=2)
    assert run_cli("seed", "--kind", "json-logs", "--count", "20000", "--topic", source, "-b", kafka.bootstrap,
                   "--headers").returncode == 0
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=8000)
    path, conf, dest = setup(tmp_path, kafka, source)
    kafka.throttle_producer("transcoder-shadow", 400_000)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "transcoder", "run", "--config", path],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while _count(admin, dest) < 3000:
            assert time.monotonic() < deadline and proc.poll() is None, "the copy did not start"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert _count(admin, dest) < 20000, "the copy finished before it could be killed"
    finally:
        kafka.throttle_producer("transcoder-shadow", None)
    copy(conf)
    cut_over(path, group)
    after = consume_group(kafka, group, dest)
    src = by_partition(read_all(kafka, source))
    got_before, got_after = by_partition(before), by_partition(after)
    for p, want in src.items():
        seen = got_before.get(p, []) + got_after.get(p, [])
        assert set(seen) == set(want), f"partition {p}: a gap"
        # duplicates only where the copy replayed, and the order of first sightings is the source's
        assert list(dict.fromkeys(seen)) == want


def _count(admin: AdminClient, topic: str) -> int:
    from transcoder.kafka.admin import describe, end_offsets

    shape = describe(admin, topic)
    return 0 if shape is None else sum(h - lo for lo, h in end_offsets(admin, {topic: shape}).values())


def test_a_corrupted_destination_record_is_found_and_cutover_refuses(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    produce(kafka, source, 500, 1)
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=400)
    path, conf, dest = setup(tmp_path, kafka, source)
    copy(conf)  # records 0..499 copied, the lane committed 500
    produce(kafka, source, 300, 1)  # records 500..799
    # The test plays a faulty copier for record 500: a copy with its value changed, mapped as the lane maps.
    src = read_all(kafka, source)
    r = src[500]
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    landed: list[int] = []
    p.produce(dest, r[3] + b"!", r[2], partition=0, timestamp=r[5], headers=list(r[4]) or None,
              on_delivery=lambda err, m: landed.append(m.offset()))
    assert p.flush(10) == 0
    recorder = OffsetMapRecorder(conf, "test-faulty-copier")
    recorder.add(source, dest, 0, 500, landed[0])
    assert recorder.flush(10)
    _commit(kafka, f"{conf.group_id}.shadow", source, {0: 501})
    copy(conf)  # the rest, 501..799
    consume_group(kafka, group, source, stop_after=300)  # the group reads past 500: up to 700
    migrate("start", "--config", path, "--group", group)
    proc = migrate("verify", "--config", path, ok=False)
    assert proc.returncode == 3  # ExitCode.REFUSED: the copy differs
    assert f"partition 0: source offset 500 / destination offset {landed[0]}: value" in proc.stderr + proc.stdout
    proc = migrate("cutover", "--config", path, "--group", group, ok=False)
    assert proc.returncode != 0 and "cutover of group" in proc.stderr and "mismatch" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:  # nothing was committed on the destination
        assert c.committed([TopicPartition(dest, 0)], timeout=10)[0].offset < 0
    finally:
        c.close()


def test_a_second_controller_is_fenced_and_a_restarted_one_resumes(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    produce(kafka, source, 200, 1)
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=80)
    path, conf, dest = setup(tmp_path, kafka, source, lease_ms=EXPIRING_LEASE_MS)
    copy(conf)
    migrate("start", "--config", path, "--group", group)
    migrate("verify", "--config", path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    follower = subprocess.Popen([sys.executable, "-m", "transcoder", "migrate", "verify", "--config", path,
                                 "--follow", "--interval", "1", "--metrics-port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=(tmp_path / "follower.log").open("w"),
                                start_new_session=True)
    try:
        # the follower holds the migration once it serves its metrics (it starts serving after taking the lease)
        want = [f'transcoder_migration_verified_offset{{destination="{dest}",partition="0"}} 200.0',
                f'transcoder_migration_groups{{destination="{dest}",stage="source"}} 1.0',
                f'transcoder_migration_mismatches_total{{destination="{dest}"}} 0.0']
        deadline = time.monotonic() + 60
        while True:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                text = ""
            if all(w in text for w in want):
                break
            assert follower.poll() is None, (tmp_path / "follower.log").read_text()
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        proc = migrate("cutover", "--config", path, "--group", group, ok=False)
        assert proc.returncode != 0 and "held by controller" in proc.stderr, proc.stdout + proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        os.killpg(follower.pid, signal.SIGKILL)  # a controller dies holding the migration
        follower.wait(10)
    finally:
        if follower.poll() is None:
            os.killpg(follower.pid, signal.SIGKILL)
    time.sleep(EXPIRING_LEASE_MS / 1000 + 0.5)  # its lease expires
    # a new controller, from the state topic alone: the migration, the group, the verification are there
    status = json.loads(migrate("status", "--config", path, "--format", "json").stdout)
    assert status["groups"][0]["stage"] == "source" and status["verified_through"]["0"] == 200
    moved = json.loads(migrate("cutover", "--config", path, "--group", group, "--format", "json").stdout)
    assert moved[0]["outcome"] == "moved"
    assert_exact(read_all(kafka, source), before, consume_group(kafka, group, dest))


def test_bad_input_is_one_line_and_changes_nothing(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    produce(kafka, source, 100, 1)
    path, conf, dest = setup(tmp_path, kafka, source)
    copy(conf)
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=50)
    migrate("start", "--config", path, "--group", group)
    migrate("verify", "--config", path)

    proc = migrate("cutover", "--config", path, "--group", "no-such-group", ok=False)
    assert proc.returncode != 0 and "no-such-group" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = migrate("cutover", "--config", path, "--destination", "nope", "--group", group, ok=False)
    assert proc.returncode == 2 and "'nope' is not in the config" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

    member = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": "live-app",
                       "enable.auto.commit": False})
    member.subscribe([source])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment():
            member.poll(0.2)
            assert time.monotonic() < deadline
        proc = migrate("cutover", "--config", path, "--group", group, ok=False)
        assert proc.returncode != 0 and "live-app" in proc.stderr and "--wait" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        member.close()
    proc = migrate("finish", "--config", path, ok=False)  # the group still reads the source
    assert proc.returncode != 0 and group in proc.stderr and "still read" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    status = json.loads(migrate("status", "--config", path, "--format", "json").stdout)
    assert [(g["group"], g["stage"]) for g in status["groups"]] == [(group, "source")]
    assert status["migration"]["stage"] == "shadow"
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        assert c.committed([TopicPartition(dest, 0)], timeout=10)[0].offset < 0
    finally:
        c.close()


# ---------------------------------------------------------------- the edges (issue 29 rows 3, 4, 5)
def _live_member(kafka, group: str, topic: str, partitions: int, client_id: str) -> Consumer:
    """A member of `group` that is assigned every partition of `topic` and never commits."""
    member = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": client_id,
                       "enable.auto.commit": False, "auto.offset.reset": "latest"})
    member.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(member.assignment()) < partitions:
        member.poll(0.2)
        assert time.monotonic() < deadline, "the member was never assigned the topic"
    return member


def test_a_lost_state_topic_is_named_and_a_cutover_never_moves_a_group_backwards(kafka, topic_factory, admin,
                                                                                 tmp_path):
    source = topic_factory(partitions=3)
    produce(kafka, source, 600, 3)
    group = f"app-{uuid.uuid4().hex[:6]}"
    before = consume_group(kafka, group, source, stop_after=240)
    path, conf, dest = setup(tmp_path, kafka, source)
    copy(conf)
    first = cut_over(path, group)[0]
    assert first["outcome"] == "moved"
    after = consume_group(kafka, group, dest)  # the group reads the copy to its end
    assert_exact(read_all(kafka, source), before, after)
    read_to = committed_on(kafka, group, dest, 3)
    assert sum(read_to.values()) == 600
    # the state topic is deleted
    admin.delete_topics([conf.state_topic])[conf.state_topic].result(30)
    deadline = time.monotonic() + 60
    while conf.state_topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    # start names the lost state instead of starting again
    proc = migrate("start", "--config", path, "--group", group, ok=False)
    line = one_line(proc)
    assert proc.returncode != 0, proc.stdout
    assert conf.state_topic in line and group in line and "--force-restart" in line, line
    assert ", ".join(f"{p}:{o}" for p, o in sorted(read_to.items())) in line, line
    # forced to start anew, a cutover still refuses to rewind the group: nothing is delivered twice
    migrate("start", "--config", path, "--group", group, "--force-restart")
    migrate("verify", "--config", path)
    proc = migrate("cutover", "--config", path, "--group", group, "--override", "lag", "--override", "verified",
                   "--override", "errors", ok=False)
    line = one_line(proc)
    assert proc.returncode == 3, proc.stdout
    m = re.search(rf"group {group} refused: it would move the group backwards on {re.escape(dest)} \[(\d+)\] from "
                  r"its committed offset (\d+) to (\d+)", line)
    assert m, line
    p, committed, translated = (int(x) for x in m.groups())
    assert committed == read_to[p] and translated == first["destination_offsets"][str(p)] < committed, line
    assert committed_on(kafka, group, dest, 3) == read_to  # nothing committed
    assert consume_group(kafka, group, dest) == []  # nothing to read again


def test_finish_refuses_while_a_live_member_is_assigned_the_source_without_a_commit(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=3)
    produce(kafka, source, 300, 3)
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=100)
    path, conf, dest = setup(tmp_path, kafka, source)
    copy(conf)
    assert cut_over(path, group)[0]["outcome"] == "moved"
    reader = f"never-committed-{uuid.uuid4().hex[:6]}"
    member = _live_member(kafka, reader, source, 3, "live-reader")
    try:
        proc = migrate("finish", "--config", path, ok=False)
        line = one_line(proc)
        assert proc.returncode != 0, proc.stdout
        assert reader in line and "live-reader@" in line and "[0,1,2]" in line and source in line, line
    finally:
        member.close()
    assert committed_on(kafka, reader, source, 3) == {}
    status = json.loads(migrate("status", "--config", path, "--format", "json").stdout)
    assert status["migration"]["stage"] == "shadow"
    # the reader gone, the migration finishes
    done = json.loads(migrate("finish", "--config", path, "--format", "json").stdout)
    assert done["migration"]["stage"] == "finished"


def test_sigterm_or_sigint_to_a_waiting_cutover_releases_its_lease(kafka, topic_factory, tmp_path):
    from transcoder.migrate.lease import holder
    from transcoder.migrate.state import StateStore, now_ms

    source = topic_factory(partitions=1)
    produce(kafka, source, 100, 1)
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=40)
    path, conf, dest = setup(tmp_path, kafka, source, lease_ms=120_000)  # a kept lease would refuse for 2 minutes
    copy(conf)
    migrate("start", "--config", path, "--group", group)
    store = StateStore(conf, dest)
    member = _live_member(kafka, group, source, 1, "still-running")
    try:
        for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            waiting = subprocess.Popen([sys.executable, "-m", "transcoder", "migrate", "cutover", "--config", path,
                                        "--group", group, "--wait", "--wait-timeout", "120"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env={**os.environ, "TRANSCODER_LOG_LEVEL": "warning"})
            try:
                deadline = time.monotonic() + 60
                while holder(store.read_records(), now_ms()) is None:  # it holds the migration, and waits
                    assert waiting.poll() is None, waiting.communicate()
                    assert time.monotonic() < deadline
                    time.sleep(0.3)
                time.sleep(1.0)  # into its wait for the member to leave
                waiting.send_signal(sig)
                out, err = waiting.communicate(timeout=60)
            finally:
                if waiting.poll() is None:
                    waiting.kill()
            assert waiting.returncode == code, err
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
            assert f"stopped by {signal.Signals(sig).name}" in err
            assert holder(store.read_records(), now_ms()) is None  # released: no live controller
            assert [k for k, v in store.read().items() if k.startswith("controller/")] == []
            # the next controller is not refused
            migrate("verify", "--config", path)
    finally:
        member.close()
        store.close()
    assert committed_on(kafka, group, dest, 1) == {}  # the interrupted cutover committed nothing


def test_a_rollback_never_moves_a_group_backwards_on_the_source(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    produce(kafka, source, 200, 1)
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=50)
    path, conf, dest = setup(tmp_path, kafka, source)
    copy(conf)
    assert cut_over(path, group)[0]["outcome"] == "moved"
    assert len(consume_group(kafka, group, dest, stop_after=30)) == 30  # at 80 on the copy: 80 on the source
    _commit(kafka, group, source, {0: 150})  # meanwhile someone moved the group on the source past that
    proc = migrate("rollback", "--config", path, "--group", group, ok=False)
    line = one_line(proc)
    assert proc.returncode != 0, proc.stdout
    assert (f"rollback of group {group} refused: it would move the group backwards on {source} [0] from its "
            "committed offset 150 to 80") in line, line
    assert committed_on(kafka, group, source, 1) == {0: 150}  # nothing committed
