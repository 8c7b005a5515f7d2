"""A local Kafka started by `transcoder local-kafka` (one broker or a cluster), seen from outside: its JVMs, a PATH
without Maven, a record round trip, a topic's records counted."""

from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def java_processes_using(state_dir: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kafka.Kafka" in cmdline and str(state_dir).encode() in cmdline:
                pids.append(int(proc.name))
    return pids


def path_without_maven(tmp_path: Path) -> str:
    """A PATH holding java only: an `up` that needed Maven (the network) would fail."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "java").symlink_to(shutil.which("java"))
    return str(bindir)


def round_trip(bootstrap: str) -> bytes | None:
    """Create a topic (auto-creation is off), produce one record and read it back."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the creation completes
    admin.create_topics([NewTopic("probe", 1, 1)])["probe"].result()
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce("probe", value=b"hello")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["probe"])
        for _ in range(60):
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                return msg.value()
        return None
    finally:
        c.close()


def count_records(bootstrap: str, topic: str) -> int:
    """Records in a topic, read back one by one."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "count", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    try:
        c.subscribe([topic])
        n, eof = 0, False
        for _ in range(600):
            msgs = c.consume(10_000, timeout=0.5)
            for m in msgs:
                if m.error() is None:
                    n += 1
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
            if eof and not msgs:
                break
        return n
    finally:
        c.close()
