"""Reading whole topics the way a read_committed consumer sees them, for record-by-record comparisons."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition

#: partition, offset, key, value, headers, timestamp (ms)
Rec = tuple[int, int, bytes | None, bytes | None, tuple, int]


def rec(m: Any) -> Rec:
    return (m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


def read_all(bootstrap: str, topic: str, *, timeout: float = 60.0) -> list[Rec]:
    """Every committed record of a topic, partition by partition, in offset order (transaction markers and
    aborted records are not records: the end of each partition is found by its EOF event, not its offsets)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True})
    out: list[Rec] = []
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        # Every partition's offsets before the first fetch: the broker answers a connection's requests one at a
        # time, and an offset query asked while a fetch of the last partition waits there is held up behind it
        # (10 s on a starved CI machine: "held back by preceding FetchRequest").
        marks = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in sorted(md.partitions)}
        for p, (low, high) in marks.items():
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + timeout
            while True:
                assert time.monotonic() < deadline, f"timed out reading {topic} [{p}]"
                m = c.poll(1.0)
                if m is None:
                    continue
                if m.error():
                    break  # the end of the partition
                out.append(rec(m))
    finally:
        c.close()
    return out


def produce_transactions(bootstrap: str, topic: str, *, transactions: int, per: int, partitions: int,
                         aborted: Callable[[int], bool], headers: bool = False) -> None:
    """`transactions` transactions of `per` records each (record n: key k<n>, value v<n>, partition n % partitions,
    recent timestamps), transaction t aborted where `aborted(t)`: a source whose offsets have gaps (commit
    markers, aborted records) that read_committed readers never see."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    ts = int(time.time() * 1000)
    for t in range(transactions):
        p.begin_transaction()
        for i in range(per):
            n = t * per + i
            p.produce(topic, f"v{n}".encode(), f"k{n}".encode(), partition=n % partitions, timestamp=ts + n,
                      headers=[("n", str(n).encode())] if headers else None)
        if aborted(t):
            # Delivered first: an abort racing the partitions' AddPartitionsToTxn fails with INVALID_TXN_STATE
            # (librdkafka issue 4849).
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)


def read_messages(bootstrap: str, topic: str, *, timeout: float = 60.0) -> list[Message]:
    """Every record of a topic, from offset 0 to the end offsets seen now, partition by partition in offset
    order, as confluent-kafka Messages (read_uncommitted: what is stored)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        md = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(md.partitions)}
        wanted = {p: e for p, e in ends.items() if e > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        by_part: dict[int, list[Message]] = {p: [] for p in wanted}
        deadline = time.monotonic() + timeout
        while wanted and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error():
                    raise AssertionError(f"consume error on {topic}: {msg.error()}")
                by_part[msg.partition()].append(msg)
                if msg.offset() + 1 >= wanted.get(msg.partition(), -1):
                    wanted.pop(msg.partition(), None)
        assert not wanted, f"timed out reading {topic}: partitions {sorted(wanted)} not read to the end"
        return [m for p in sorted(by_part) for m in by_part[p]]
    finally:
        consumer.close()


def read_with_java_consumer(bootstrap: str, topic: str, count: int, *, timeout_ms: int = 30_000) -> list[Rec]:
    """`count` records of a topic as Kafka's own Java consumer reads them (ConsoleConsumer, read_committed, CRCs
    checked), in the order it prints them. Keys, values and headers must be text without newlines or ASCII
    separators (0x1d-0x1f)."""
    import os
    import shutil
    import subprocess

    from transcoder.dev.kafka_jars import fetch

    fields = ["print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value"]
    cmd = [shutil.which("java") or "java", "-cp", os.path.join(fetch(), "*"),
           "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic", topic,
           "--from-beginning", "--max-messages", str(count), "--timeout-ms", str(timeout_ms),
           "--isolation-level", "read_committed", "--command-property", "check.crcs=true",
           *[a for f in fields for a in ("--formatter-property", f"{f}=true")],
           "--formatter-property", "key.separator=\x1f", "--formatter-property", "headers.separator=\x1d",
           "--formatter-property", "null.literal=\x1enull"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_ms / 1000 + 60)
    assert proc.returncode == 0, f"the Java consumer failed on {topic}: {proc.stderr.strip()[-800:]}"

    def text(s: str) -> bytes | None:
        return None if s == "\x1enull" else s.encode()

    out: list[Rec] = []
    for line in proc.stdout.split("\n")[:-1]:  # not splitlines: it splits at 0x1c-0x1e too
        ts, partition, offset, headers, key, value = line.split("\x1f")
        hs = () if headers == "NO_HEADERS" else tuple(
            (k, text(v)) for k, v in (h.split(":", 1) for h in headers.split("\x1d")))
        out.append((int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")), text(key),
                    text(value), hs, int(ts.removeprefix("CreateTime:"))))
    return out
