"""Session fixtures: one real Kafka broker for the whole run, and factories for fresh topics and clients."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from transcoder.localkafka import LocalKafka


@dataclass
class Cluster:
    """The cluster tests talk to; `local` is set when this session started the broker itself."""

    bootstrap: str
    local: LocalKafka | None

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        """Stored .log segment files of one partition; needs the broker this session started."""
        if self.local is None:
            pytest.skip("reading stored segments needs the session's own broker, not TRANSCODER_TEST_BOOTSTRAP")
        st = self.local.state()
        assert st is not None, "the session's broker is not running"
        return sorted((Path(st.data_dir) / f"{topic}-{partition}").glob("*.log"))

    def stored_batches(self, topic: str, partition: int) -> list[dict[str, str]]:
        """One dict per stored record batch, as Kafka's DumpLogSegments describes it."""
        assert self.local is not None
        batches = []
        for seg in self.segment_files(topic, partition):
            for line in self.local.dump_log_segment(seg).splitlines():
                if line.startswith("baseOffset:"):
                    batches.append(dict(re.findall(r"(\w+): (\S+)", line)))
        return batches


    def throttle_producer(self, client_id: str, bytes_per_second: int | None) -> None:
        """Set (or, with None, remove) a broker quota on a producer client.id, with Kafka's ConfigCommand."""
        if self.local is None:
            pytest.skip("throttling a client needs the session's own broker")
        st = self.local.state()
        assert st is not None
        change = (["--add-config", f"producer_byte_rate={bytes_per_second}"] if bytes_per_second
                  else ["--delete-config", "producer_byte_rate"])
        proc = subprocess.run(["java", "-cp", st.classpath, "kafka.admin.ConfigCommand", "--bootstrap-server",
                               self.bootstrap, "--alter", *change, "--entity-type", "clients", "--entity-name",
                               client_id], capture_output=True, text=True, timeout=60)
        # Removing a quota that is not set fails in ConfigCommand; removal is meant to be idempotent.
        if proc.returncode != 0 and (bytes_per_second or "Invalid config" not in proc.stdout + proc.stderr):
            raise AssertionError(f"ConfigCommand failed: {proc.stdout} {proc.stderr}")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    external = os.environ.get("TRANSCODER_TEST_BOOTSTRAP")
    if external:
        yield Cluster(bootstrap=external, local=None)
        return
    local = LocalKafka(tmp_path_factory.mktemp("kafka"))
    st = local.up()
    try:
        yield Cluster(bootstrap=st.bootstrap, local=local)
    finally:
        local.down()


@pytest.fixture(scope="session")
def admin(kafka: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka.bootstrap})


@pytest.fixture
def topic_factory(admin: AdminClient, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a fresh, uniquely named topic: topic_factory(partitions=3, config={...})."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:80]

    def make(partitions: int = 1, config: dict[str, str] | None = None, name: str | None = None) -> str:
        topic = name or f"{base}-{uuid.uuid4().hex[:8]}"
        fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config or {})], operation_timeout=30)[topic]
        fut.result()
        return topic

    return make


@pytest.fixture
def producer_factory(kafka: Cluster) -> Iterator[Callable[..., Producer]]:
    made: list[Producer] = []

    def make(**conf: object) -> Producer:
        p = Producer({"bootstrap.servers": kafka.bootstrap, **conf})
        made.append(p)
        return p

    yield make
    for p in made:
        p.flush(30)


@pytest.fixture
def consumer_factory(kafka: Cluster) -> Iterator[Callable[..., Consumer]]:
    made: list[Consumer] = []

    def make(**conf: object) -> Consumer:
        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def read_topic(consumer_factory: Callable[..., Consumer], admin: AdminClient) -> Callable[..., list[Message]]:
    """Every record of a topic, from the beginning to the end offsets seen now, in partition order."""

    def read(topic: str, timeout: float = 60.0) -> list[Message]:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        consumer = consumer_factory()
        parts = [TopicPartition(topic, p) for p in sorted(md.partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
        wanted = {p: e for p, e in ends.items() if e > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        by_part: dict[int, list[Message]] = {p: [] for p in wanted}
        deadline = time.monotonic() + timeout
        while wanted and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error():
                    raise AssertionError(f"consume error: {msg.error()}")
                by_part[msg.partition()].append(msg)
                if msg.offset() + 1 >= wanted.get(msg.partition(), -1):
                    wanted.pop(msg.partition(), None)
        assert not wanted, f"timed out reading {topic}: partitions {sorted(wanted)} not read to the end"
        return [m for p in sorted(by_part) for m in by_part[p]]

    return read


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> "subprocess.CompletedProcess[str]":
    """Run the real `transcoder` command in a child process: real exit codes, real stderr."""
    import sys

    return subprocess.run([sys.executable, "-m", "transcoder", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TRANSCODER_LOG_LEVEL": "warning", **(env or {})})
