"""The staged migration's end-to-end steps as the tests drive them: a source produced, groups consuming and
committing, `transcoder migrate` run, and what a group read compared with the source, partition by partition."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support import records
from tests.support.cli import run_cli
from tests.support.configs import raw_config
from tests.support.records import Rec, rec
from transcoder import config as cfg

#: the controllers' lease in `setup`'s config
LEASE_MS = 20_000


def content(r: Rec) -> tuple:
    """What a copy keeps of a record: everything but its offset."""
    return (r[0], r[2], r[3], r[4], r[5])


def setup(tmp_path, kafka, source: str, *, extra: dict | None = None, **migration) -> tuple[str, cfg.Config, str]:
    """A config of one lane `shadow` (zstd) with a `migration:` section (and `extra` keys): its file, its model
    and its destination topic. The controllers' lease is 20 s (a heartbeat every 6.7 s): a 3-s lease was lost by a
    live controller whose heartbeat thread the busy CI machine left unscheduled for 3.4 s (official CI, 2026-11-29);
    a test of a lease's expiry passes its own."""
    raw = raw_config(kafka, [{"source": source, "destinations": [{"codec": "zstd", "name": "shadow"}]}],
                     migration={"lease_ms": LEASE_MS, **migration}, **(extra or {}))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path), cfg.parse(raw, environ={}), f"{source}.zstd"


def produce(kafka, topic: str, n: int, partitions: int, *, keyed: Callable[[int], bytes | None] | None = None,
            tombstone_every: int = 0) -> None:
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    ts = int(time.time() * 1000) - 600_000
    for i in range(n):
        key = keyed(i) if keyed else f"k{i}".encode()
        value = (None if tombstone_every and i % tombstone_every == tombstone_every - 1
                 else f"v{i}-{'x' * (i % 40)}".encode())
        headers = [("h", f"{i}".encode()), ("h", None)] if i % 3 == 0 else None
        p.produce(topic, value, key, partition=i % partitions, timestamp=ts + i, headers=headers)
    assert p.flush(30) == 0


def committed_on(kafka, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Group `group`'s committed offsets of `topic` (partitions without one left out), read with a plain consumer."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                              timeout=10) if tp.offset >= 0}
    finally:
        c.close()


def read_all(kafka, topic: str) -> list[Rec]:
    return records.read_all(kafka.bootstrap, topic)


def consume_group(kafka, group: str, topic: str, *, stop_after: int | None = None, commit: bool = True) -> list[Rec]:
    """Read as group `group` from its committed offsets (earliest where none): to the end, or `stop_after` records,
    then commit what was read and leave."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.subscribe([topic])
    out: list[Rec] = []
    eof: set[int] = set()
    parts = len(c.list_topics(topic, timeout=10).topics[topic].partitions)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and len(eof) < parts and (stop_after is None or len(out) < stop_after):
            for m in c.consume(50 if stop_after is None else max(1, min(50, stop_after - len(out))), timeout=1.0):
                if m.error():
                    eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                out.append(rec(m))
        if commit and out:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return out


def by_partition(recs: list[Rec]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for r in recs:
        out.setdefault(r[0], []).append(content(r))
    return out


def assert_exact(source: list[Rec], before: list[Rec], after: list[Rec]) -> None:
    """Per partition: what the group read before, then after the move, is the source: no gap, no duplicate."""
    want = by_partition(source)
    got_before, got_after = by_partition(before), by_partition(after)
    for p in want:
        assert got_before.get(p, []) + got_after.get(p, []) == want[p], f"partition {p}"


def migrate(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = run_cli("migrate", *args)
    if ok:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def cut_over(path: str, group: str, *extra: str) -> list[dict]:
    migrate("start", "--config", path, "--group", group)
    migrate("verify", "--config", path)
    return json.loads(migrate("cutover", "--config", path, "--group", group, "--format", "json", *extra).stdout)
