"""The legacy-source tests (in `make test`, all on one worker; alone: `python -m pytest tests/legacy`): a source cluster
that stores the old message format — ZooKeeper and a Kafka 3.x broker with message format 0.10.2, so magic v1
message sets (tests/support/legacy_kafka.py) — and a modern KRaft broker (transcoder.dev.local_kafka) as the
destination cluster. Fixtures, the source topics every test reads, and the constants they are written with."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.legacy_kafka import LegacyKafka
from tests.support.records import read_messages
from transcoder.dev.local_kafka import LocalKafka


@pytest.fixture(scope="session")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LegacyKafka]:
    """The source cluster: every topic stored as magic v1 unless its own message.format.version says otherwise."""
    cluster = LegacyKafka(tmp_path_factory.mktemp("legacy")).up()
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def modern(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The destination cluster's bootstrap: one KRaft broker of transcoder.dev.local_kafka's default version."""
    local = LocalKafka(tmp_path_factory.mktemp("modern"))
    st = local.up(heap="512m", lean=True)
    try:
        yield st.bootstrap
    finally:
        local.down()


def _create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
                        operation_timeout=30)[name].result()
    return name


@pytest.fixture
def new_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """new_topic(bootstrap, partitions=1, config={...}, suffix=""): a fresh, uniquely named topic there."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:60]

    def make(bootstrap: str, partitions: int = 1, config: dict[str, str] | None = None, suffix: str = "") -> str:
        return _create_topic(bootstrap, f"{base}{suffix}-{uuid.uuid4().hex[:6]}", partitions, config)

    return make


#: The codecs a magic v1 message set can be compressed with (v1 has no zstd), and none.
SOURCE_CODECS = ("gzip", "snappy", "lz4", "none")
PARTITIONS = 3
RECORDS = 900


@dataclass(frozen=True)
class Source:
    topic: str
    codec: str
    compacted: bool
    magic: int


def produce_records(bootstrap: str, topic: str, codec: str, *, compacted: bool) -> None:
    """RECORDS records with keys, null and empty keys (not on a compacted topic, which refuses null keys), null
    values (tombstones), empty values, a few of 120 kB, explicit partitions, CreateTime timestamps a day old and
    some out of order; written in 6 rounds with a 50 ms linger, so each partition holds 6 compressed wrappers of
    50 records (uncompressed: a message each)."""
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50,
                  "message.max.bytes": 1_000_000})
    errors: list[object] = []
    base = int(time.time() * 1000) - 86_400_000
    for i in range(RECORDS):
        if compacted:
            key: bytes | None = f"entity-{i % 120}".encode()
        else:
            key = None if i % 7 == 0 else b"" if i % 11 == 0 else f"user-{i % 50}".encode()
        value: bytes | None
        if i % 9 == 0:
            value = None
        elif i % 13 == 0:
            value = b""
        elif i % 301 == 5:
            value = (f"{i:06d}" * 20_000).encode()
        else:
            value = f'{{"n":{i},"path":"/api/items/{i % 77}","pad":"{"x" * (i % 90)}"}}'.encode()
        ts = base + i * 1000 - (5000 if i % 17 == 0 else 0)
        p.produce(topic, key=key, value=value, partition=i % PARTITIONS, timestamp=ts,
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
        if i % 150 == 149:  # several wrappers per partition, of 50 records each
            assert p.flush(60) == 0
    assert not errors, errors[:3]


@pytest.fixture(scope="session")
def legacy_sources(legacy: LegacyKafka) -> list[Source]:
    """Source topics on the legacy broker, written once per session and only read by the tests: per codec a
    plain and a compacted topic in magic v1, and one snappy topic in magic v0 (message.format.version 0.9.0,
    records without timestamps)."""
    out = []
    run = uuid.uuid4().hex[:6]
    for codec in SOURCE_CODECS:
        for compacted in (False, True):
            config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99"} if compacted else {}
            name = _create_topic(legacy.bootstrap, f"v1-{codec}{'-compacted' if compacted else ''}-{run}",
                                 PARTITIONS, config)
            produce_records(legacy.bootstrap, name, codec, compacted=compacted)
            out.append(Source(name, codec, compacted, 1))
    name = _create_topic(legacy.bootstrap, f"v0-snappy-{run}", PARTITIONS, {"message.format.version": "0.9.0"})
    produce_records(legacy.bootstrap, name, "snappy", compacted=False)
    out.append(Source(name, "snappy", False, 0))
    return out


@pytest.fixture
def read_topic() -> Callable[..., list[Message]]:
    """read_topic(bootstrap, topic): every record up to the end offsets seen now, partition by partition in
    offset order."""
    return lambda bootstrap, topic, timeout=60.0: read_messages(bootstrap, topic, timeout=timeout)

