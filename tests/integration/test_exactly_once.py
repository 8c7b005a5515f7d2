"""guarantee: exactly-once on the real broker: transactions per lane, offsets committed in them, zombies fenced.

The faults (broker killed, outage, SIGKILLs, rebalance storms) run with both guarantees in test_faults.py;
here: what exactly-once itself promises, record by record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from tests.support.cli import run_cli
from tests.support.configs import make_config, raw_config
from tests.support.records import produce_transactions, read_all
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka import offset_map_topic as offset_map
from transcoder.kafka.clients import retriable
from transcoder.kafka.protocol import RawClient
from transcoder.pipeline.commits import transactional_id
from transcoder.service.runner import Service


def _source_records(bootstrap: str, topic: str) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for p, _, k, v, h, ts in read_all(bootstrap, topic):
        out.setdefault(p, []).append((k, v, h, ts))
    return out


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


#: exactly-once record by record (librdkafka's transactional producer) and on record sets (transcoder's
#: transactional BatchProducer), each with the offset map in its transactions, at zstd 6 and 19
PATHS = [pytest.param({"hot_path": "records", "migration": {}}, 6, id="records"),
         pytest.param({"hot_path": "batches", "migration": {}}, 6, id="batches"),
         pytest.param({"hot_path": "batches"}, 19, id="batches-zstd-19")]


@pytest.mark.parametrize("path,level", PATHS)
def test_every_record_once_in_transactions_with_offsets_and_map(kafka, topic_factory, admin, path, level):
    source = topic_factory(partitions=3)
    # A transactional source with aborted transactions: its offsets have gaps that must not be copied.
    produce_transactions(kafka.bootstrap, source, transactions=12, per=500, partitions=3,
                         aborted=lambda t: t % 4 == 1, headers=True)
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd", "level": level,
                                                                     "batch": {"max_bytes": 65536}}]}],
                       guarantee="exactly-once", **path)
    assert conf.batched == (path["hot_path"] == "batches")
    Service(conf).run(until_caught_up=True)
    dest = f"{source}.zstd-{level}"

    want = _source_records(kafka.bootstrap, source)
    got = _source_records(kafka.bootstrap, dest)
    assert sum(map(len, want.values())) == 9 * 500
    assert got == want  # every committed source record, once, in order, key/value/headers/timestamp equal

    # The destination was written in transactions: its batches are transactional, with commit markers.
    batches = kafka.stored_batches(dest, 0)
    assert batches and all(b["isTransactional"] == "true" for b in batches)
    assert any(b.get("isControl") == "true" for b in batches)

    # The source offsets were committed in the transactions: to the end of every partition.
    ends = {p: admin_end for p, admin_end in
            ((p, Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "x"}).get_watermark_offsets(
                TopicPartition(source, p), timeout=10)[1]) for p in range(3))}
    assert _committed(kafka.bootstrap, f"{conf.group_id}.{dest}", source, 3) == ends

    if conf.migration is None:
        return
    # The offset map was written in the same transactions: every destination record maps to its source record.
    map_batches = kafka.stored_batches(conf.offset_map_topic, 0)
    assert map_batches and all(b["isTransactional"] == "true" for b in map_batches)
    maps, _ = offset_map.read(conf, dest)
    src = {(p, o): (k, v, h, ts) for p, o, k, v, h, ts in read_all(kafka.bootstrap, source)}
    for p, o, k, v, h, ts in read_all(kafka.bootstrap, dest):
        assert src[(p, maps[p].source_of(o))] == (k, v, h, ts)


def _dest_end(bootstrap: str, topic: str, partitions: int) -> int:
    """The topic's records, or 0 while a partition just created has no leader yet (NOT_LEADER_FOR_PARTITION right
    after creation failed this test once in CI)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    except KafkaException as exc:
        if retriable(exc.args[0]):  # Kafka's retriable codes: NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, ...
            return 0
        raise
    finally:
        c.close()


@pytest.mark.parametrize("hot_path", ["records", "batches"])
def test_an_instance_with_the_same_partitions_fences_a_paused_one(kafka, topic_factory, admin, tmp_path, hot_path):
    source = topic_factory(partitions=2)
    assert run_cli("seed", "--kind", "nginx", "--count", "40000", "--topic", source, "-b", kafka.bootstrap
                   ).returncode == 0
    raw = raw_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}], guarantee="exactly-once",
                     hot_path=hot_path)
    raw["cluster"]["config"] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    dest = f"{source}.lz4"
    kafka.throttle_producer(f"transcoder-{dest}", 300_000)
    lines: list[str] = []
    try:
        zombie = subprocess.Popen([sys.executable, "-m", "transcoder", "run", "--config", str(path)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "TRANSCODER_LOG_LEVEL": "info"}, start_new_session=True)
        reader = threading.Thread(target=lambda: [lines.append(line) for line in zombie.stderr], daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while dest not in admin.list_topics(timeout=10).topics or _dest_end(kafka.bootstrap, dest, 2) < 3000:
            assert time.monotonic() < deadline, "the copy did not start"
            time.sleep(0.5)
        os.killpg(zombie.pid, signal.SIGSTOP)  # paused: still holds its producer and an open transaction
        # Another instance: once the group drops the paused member (session timeout), it is assigned the same
        # partitions, so the same transactional id, and fences the paused one (its open transaction is aborted).
        kafka.throttle_producer(f"transcoder-{dest}", None)
        proc = run_cli("run", "--config", str(path), "--until-caught-up")
        assert proc.returncode == 0, proc.stderr
        copied = _source_records(kafka.bootstrap, dest)
        assert copied == _source_records(kafka.bootstrap, source)  # exactly once, in order, across the hand-over
        woke = len(lines)
        os.killpg(zombie.pid, signal.SIGCONT)
        # Woken, it either finds itself fenced (its open transaction held records: it stops with one line
        # saying so, committing nothing) or, when it was paused between transactions (nothing open to fence),
        # finds its partitions lost and joins the group again as a member like any other.
        deadline = time.monotonic() + 120
        while zombie.poll() is None and not any('"partitions_assigned"' in line for line in lines[woke:]):
            if time.monotonic() > deadline:
                before = len(lines)
                os.kill(zombie.pid, signal.SIGUSR1)  # every thread's stack to its stderr: where it waits
                time.sleep(2)
                pytest.fail("the paused instance neither stopped nor joined again within 120 s of waking:\n"
                            + "".join(lines[-40:before]) + "\nits threads' stacks (SIGUSR1):\n"
                            + "".join(lines[before:]))
            time.sleep(0.5)
        if zombie.poll() is None:
            assert any('"partitions_lost"' in line for line in lines[woke:]), "".join(lines[woke:])
            os.killpg(zombie.pid, signal.SIGTERM)
            assert zombie.wait(timeout=120) == 0, "".join(lines[-40:])
        reader.join(timeout=30)
    finally:
        kafka.throttle_producer(f"transcoder-{dest}", None)
        if zombie.poll() is None:
            os.killpg(zombie.pid, signal.SIGKILL)
    err = "".join(lines)
    if zombie.returncode != 0:
        assert "another instance took over transactional.id" in err, err[-3000:]
    stuck = [line for line in lines if '"lane_stop_stuck"' in line]
    if stuck:  # bounded and said (the service exits), but why its stop hung is worth a look: shown in CI's summary
        warnings.warn(f"the fenced instance's lane stop did not return: {stuck[0][:4000]}", stacklevel=1)
    assert "Traceback" not in err
    # Whatever the paused instance did on waking, it wrote nothing that any reader of committed data sees.
    assert _source_records(kafka.bootstrap, dest) == copied


def _leave_offsets_pending(kafka, transactional_id: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """An offset commit of `transactional_id`'s producer, pending on `group` with no transaction that owns it: what
    a broker killed at the wrong moment left in CI (the group's offsets unstable for good). Made by a TxnOffsetCommit
    without AddOffsetsToTxn, which the broker accepts only with its transaction verification (KIP-890) off for the
    moment (a dynamic setting of the session's broker, restored at once)."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    node = str(admin.describe_cluster().result().nodes[0].id)

    def verification(op: AlterConfigOpType, value: str) -> None:
        entry = ConfigEntry("transaction.partition.verification.enable", value, incremental_operation=op)
        for f in admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.BROKER, node,
                                                                 incremental_configs=[entry])]).values():
            f.result()

    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        deadline = time.monotonic() + 60
        while True:  # the coordinators may still be loading: asked again until then
            try:
                txn_node = info.find_coordinator(transactional_id, 1)
                code, pid, epoch = info.init_producer_id(transactional_id=transactional_id, coordinator=txn_node)
                group_node = info.find_coordinator(group, 0)
            except KafkaUnavailableError:
                code = -1
            if code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert code == 0, f"InitProducerId for {transactional_id}: error {code}"
        verification(AlterConfigOpType.SET, "false")
        try:
            time.sleep(1)  # a dynamic broker setting applies asynchronously
            assert info.txn_offset_commit(transactional_id, group, pid, epoch, offsets,
                                          coordinator=group_node) == dict.fromkeys(offsets, 0)
        finally:
            verification(AlterConfigOpType.DELETE, "")
    finally:
        info.close()


@pytest.mark.parametrize("hot_path", ["records", "batches"])
def test_offsets_a_dead_producer_left_pending_are_released_and_everything_copied(kafka, topic_factory, hot_path):
    """The group's offsets unstable for good (an offset commit of the lane's own transactional id pending, with no
    transaction left to end it: CI of 2ec9bb2, the broker SIGKILLed and restarted): the lane aborts a transaction
    of the group's offsets only, whose marker ends it, and copies every record once. It used to wait for the
    broker to time out a transaction that did not exist, then die with a raw traceback (confluent-kafka raises a
    failure inside on_assign as a bare KafkaError)."""
    if kafka.local is None:
        pytest.skip("turning the broker's transaction verification off needs the session's own broker")
    source = topic_factory(partitions=2)
    produce_transactions(kafka.bootstrap, source, transactions=4, per=250, partitions=2, aborted=lambda t: t == 2)
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd", "level": 3}]}],
                       guarantee="exactly-once", hot_path=hot_path, transaction_timeout_ms=10_000)
    dest = f"{source}.zstd-3"
    group = f"{conf.group_id}.{dest}"
    _leave_offsets_pending(kafka, transactional_id(group, [(source, 0), (source, 1)]), group,
                           {(source, 0): 100, (source, 1): 100})
    stuck = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        with pytest.raises(KafkaException, match="Timed out"):  # as in CI: unstable, with no end in sight
            stuck.committed([TopicPartition(source, 0), TopicPartition(source, 1)], timeout=6)
    finally:
        stuck.close()

    Service(conf).run(until_caught_up=True)

    want = _source_records(kafka.bootstrap, source)
    assert sum(map(len, want.values())) == 3 * 250
    assert _source_records(kafka.bootstrap, dest) == want  # every record once, in order; none skipped to 100
    ends = {p: Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "x"}).get_watermark_offsets(
        TopicPartition(source, p), timeout=10)[1] for p in range(2)}
    assert _committed(kafka.bootstrap, group, source, 2) == ends
