"""The offset-map topic: the writer records in it, for every destination partition, which source offsets its
delivered records are copies of (runs, pipeline.offset_runs); `transcoder migrate` reads it back.

The topic is compacted (and time-limited by `migration.offset_map_retention_ms`). A run is stored under the
key `<destination>/<partition>/<destination offset where it starts>`; while a run keeps growing (the usual
case: a copy without gaps), each flush rewrites its one record, so compaction keeps one record per run.
Entries of several runs (a compacted source's gaps) get the key of their first run and are not rewritten.

Durability is the engine's part: it calls `flush` before it commits source offsets, so a committed
source offset never has records whose map entries could be lost. Records delivered after the last flush
and lost with a crash are copied again from the last commit, and their new copies are mapped.

Each run's entry names the source topic's id it was copied from (KIP-516; the lane tells the recorder the id,
`source_id`), so that a topic deleted and recreated between two runs is found (the group's committed offsets go with
the topic, the map's ids do not) and verification tells the old topic's copies from the new one's. A recreation the
lane found is stored as an entry of its own (`store_lost`), key `<destination>/<partition>/recreated/<old id>/<at>`.

The same topic holds each lane's health, `lane/<destination>`: errors so far and the time of the last one
(the cutover gate reads it), and the copier's figures for the destination (records, their bytes, the bytes of the
batches produced, the lane's CPU: `migrate report` compares them with the prediction).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from transcoder.config import Config
from transcoder.errors import DeliveryError, KafkaUnavailableError, TopicError
from transcoder.kafka.admin import ensure
from transcoder.kafka.clients import client_config
from transcoder.pipeline.offset_runs import (
    MapBuilder,
    MapEntry,
    PartitionMap,
    Recreation,
    Run,
    partition_maps,
)

log = structlog.get_logger("transcoder.offset_map")

HEALTH_PREFIX = "lane/"
_HEALTH_EVERY_S = 10.0
#: The health records' format (their field `v`): 1, this version's; a record without it is version 1 (written before
#: it was recorded), one of a higher version was written by a newer transcoder and is refused (docs/upgrading.md).
HEALTH_FORMAT_VERSION = 1


def topic_configs(config: Config) -> dict[str, str]:
    retention = config.migration.offset_map_retention_ms if config.migration else 30 * 24 * 3600 * 1000
    return {"cleanup.policy": "compact,delete", "retention.ms": str(retention),
            # Compaction keeps one record per run: roll segments often enough for the cleaner to see them.
            "segment.ms": str(3600 * 1000), "min.cleanable.dirty.ratio": "0.1"}


def ensure_topic(admin: AdminClient, config: Config) -> bool:
    """Create the offset-map topic if missing (1 partition: one order for all); True when created."""
    _, created = ensure(admin, config.offset_map_topic, partitions=1, config=topic_configs(config))
    if created:
        log.info("offset_map_topic_created", topic=config.offset_map_topic)
    return created


@dataclass(frozen=True)
class CopierFigures:
    """A lane's figures for one destination since the lane started (cumulative)."""

    records: int  # produced, as of the producers' last statistics emission
    record_bytes: int  # keys + values + headers of the records produced
    wire_bytes: int  # the batches produced, framed and compressed
    cpu_s: float | None  # the lane's threads; None: not measured (an engine that does not attribute threads)


@dataclass(frozen=True)
class LaneHealth:
    destination: str
    errors_total: int
    last_error_ms: int | None
    at_ms: int
    #: None: a lane of an earlier version, or one that has not published figures yet
    copier: CopierFigures | None = None


class OffsetMapRecorder:
    """Builds runs from delivery reports (`add`, from the writer's delivery callbacks) and stores them (`flush`)."""

    def __init__(self, config: Config, client_id: str, *, make: Callable[[dict[str, Any]], Any] = Producer,
                 external: bool = False) -> None:
        """`external`: the map is written by a producer given later (`write_through`): exactly-once writes
        it in the lane's own transactions, so a map entry is visible exactly when its records are."""
        self.topic = config.offset_map_topic
        self.builder = MapBuilder()
        self.add = self.builder.add
        self._external = external
        self._producer: Any = None if external else make(client_config(config.target_cluster.librdkafka(), **{
            "client.id": client_id, "enable.idempotence": True, "linger.ms": 5, "compression.type": "zstd",
        }))
        #: (destination, partition) -> (key, the single run last stored under it, its source id): a run still growing
        self._growing: dict[tuple[str, int], tuple[bytes, Run, str | None]] = {}
        self._failed: list[str] = []
        self._health: dict[str, tuple[int, int | None, Callable[[], CopierFigures] | None]] = {}
        self._health_at = 0.0

    def source_id(self, topic: str, topic_id: str) -> None:
        """The source topic's id (KIP-516) from now on: runs that begin after this are stamped with it. The lane
        calls it once it knows the id, and after a recreation only once what it read of the old topic was
        delivered (on_source_loss: continue)."""
        self.builder.ids[topic] = topic_id

    def write_through(self, producer: Any) -> None:
        """Write the map with `producer` from now on (a transactional producer: within its transactions)."""
        self._producer = producer

    def discard(self) -> None:
        """Drop what was added since the last flush (its records' transaction was aborted)."""
        self.builder.take()
        self._growing.clear()
        self._failed.clear()

    def _delivered(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self._failed.append(err.str())

    def _key_for(self, e: MapEntry) -> bytes:
        """Continue the growing run's record when `e` is one run continuing it; else a new record."""
        where = (e.destination_topic, e.partition)
        grown = self._growing.get(where)
        first = e.runs[0]
        if grown is not None and len(e.runs) == 1:
            key, run, sid = grown
            if first.source == run.source_end and first.dest == run.dest_end and sid == e.source_id:
                merged = Run(run.source, run.dest, run.count + first.count)
                self._growing[where] = (key, merged, sid)
                return key
        key = f"{e.destination_topic}/{e.partition}/{first.dest}".encode()
        if len(e.runs) == 1:
            self._growing[where] = (key, first, e.source_id)
        else:  # a record of several runs is written once; the next one starts a record of its own
            self._growing.pop(where, None)
        return key

    def health(self, destination: str, errors_total: int, last_error_ms: int | None,
               copier: Callable[[], CopierFigures] | None = None) -> None:
        """The lane's error count for one destination, and its figures (`copier`: asked when stored); stored with
        the next flush every 10 s."""
        self._health[destination] = (errors_total, last_error_ms, copier)

    def flush(self, timeout: float) -> bool:
        """Store every run added so far; True when all are acknowledged (the caller may then commit).

        False: not all acknowledged within `timeout` (commit later). DeliveryError: the map topic refused
        a record; nothing may be committed past it.
        """
        produce = self._producer.produce
        for e in self.builder.take():
            key = self._key_for(e)
            grown = self._growing.get((e.destination_topic, e.partition))
            entry = e
            if grown is not None and grown[0] == key and len(e.runs) == 1:
                entry = MapEntry(e.source_topic, e.destination_topic, e.partition, (grown[1],),
                                 source_id=e.source_id)
            produce(self.topic, entry.encode(), key, on_delivery=self._delivered)
        now = time.monotonic()
        if self._health and now >= self._health_at:
            self._write_health()
            self._health_at = now + _HEALTH_EVERY_S
        left: int = self._producer.flush(timeout)
        if self._failed:
            why, self._failed = self._failed[0], []
            raise DeliveryError(f"the offset map could not be written to {self.topic}: {why}; no source offset "
                                "is committed past it (the records are copied again on restart)", topic=self.topic)
        return left == 0

    def _write_health(self) -> None:
        at = int(time.time() * 1000)
        for dest, (n, last, copier) in self._health.items():
            doc: dict[str, Any] = {"v": HEALTH_FORMAT_VERSION, "errors_total": n, "last_error_ms": last, "at_ms": at}
            if copier is not None:
                doc["copier"] = asdict(copier())
            self._producer.produce(self.topic, json.dumps(doc).encode(), f"{HEALTH_PREFIX}{dest}".encode(),
                                   on_delivery=self._delivered)

    def close(self, timeout: float) -> None:
        """Deliver what is left; the lane's last health and figures with it (its own producer only: a transactional
        one's records go in a transaction, and the last one is over)."""
        if self._producer is None:
            return
        if self._health and not self._external:
            self._write_health()
        self._producer.flush(timeout)


def store_lost(config: Config, gaps: list[tuple[str, str, int, int, int]], timeout: float, *,
               source_id: str | None = None, recreated: Recreation | None = None) -> None:
    """Mark source ranges lost before they were copied, as (source, destination, partition, lo, hi): source offsets
    [lo, hi) of `partition` have no copy in `destination`, and never will. Each is one entry of its own, key
    `<destination>/<partition>/lost/<lo>` (never compacted away by a run), stored now and outside any transaction:
    the lane that found the loss may stop (or abort) next. DeliveryError when it cannot be stored.

    `source_id`: the id of the topic whose offsets were lost. `recreated`: the topic was deleted and recreated (the
    entry names both ids, key `<destination>/<partition>/recreated/<old id>/<lo>`); its range, kept for readers of
    the format before, may then be empty (lo == hi: nothing known lost) and is not stored as a range."""
    if not gaps:
        return
    producer = Producer(client_config(config.target_cluster.librdkafka(), **{
        "client.id": "transcoder-offset-map-loss", "enable.idempotence": True}))
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed.append(err.str())

    for source, dest, partition, lo, hi in gaps:
        e = MapEntry(source, dest, partition, (), ((lo, hi),) if hi > lo else (), source_id, recreated)
        key = (f"{dest}/{partition}/recreated/{recreated.old_id or '-'}/{lo}" if recreated is not None
               else f"{dest}/{partition}/lost/{lo}")
        producer.produce(config.offset_map_topic, e.encode(), key.encode(), on_delivery=delivered)
    left = producer.flush(timeout)
    if failed or left:
        why = failed[0] if failed else f"not acknowledged within {timeout:g} s"
        raise DeliveryError(f"the offset map could not mark source records lost before they were copied in "
                            f"{config.offset_map_topic}: {why}", topic=config.offset_map_topic)


def read(config: Config, destination_topic: str, *, timeout: float = 60.0
         ) -> tuple[dict[int, PartitionMap], LaneHealth | None]:
    """The map of every partition of `destination_topic`, and its lane's health, read to the end seen now.

    TopicError when the map topic does not exist (no lane ever recorded one); DeliveryError never.
    """
    topic = config.offset_map_topic
    consumer = Consumer(client_config(config.target_cluster.librdkafka(), **{
        "group.id": "transcoder-offset-map-reader", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True,
    }))
    try:
        md = consumer.list_topics(topic, timeout=min(timeout, 15))
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise TopicError(f"offset-map topic {topic} does not exist: no lane has recorded an offset map yet "
                             "(add a `migration:` section to the config and run the copy)", topic=topic)
        latest: dict[bytes, bytes | None] = {}
        where: dict[bytes, tuple[int, int]] = {}
        for p in sorted(t.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=min(timeout, 15))
            if high <= low:
                continue
            _read_partition(consumer, topic, p, low, high, timeout, latest, where)
    finally:
        consumer.close()
    return _decoded(latest, where, topic, destination_topic)


def _read_partition(consumer: Consumer, topic: str, p: int, low: int, high: int, timeout: float,
                    latest: dict[bytes, bytes | None], where: dict[bytes, tuple[int, int]]) -> None:
    """Partition `p` of the map topic read from `low` to `high`: each key's latest value into `latest`, its
    partition and offset into `where`."""
    consumer.assign([TopicPartition(topic, p, low)])
    deadline = time.monotonic() + timeout
    pos = low
    while pos < high:
        if time.monotonic() > deadline:
            raise KafkaUnavailableError(f"reading offset-map topic {topic} [{p}] stalled at offset {pos} "
                                        f"of {high}", topic=topic, partition=p, offset=pos)
        for m in consumer.consume(10_000, timeout=1.0):
            err = m.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise KafkaUnavailableError(f"reading offset-map topic {topic}: {err.str()}",
                                            topic=topic, partition=p)
            offset = m.offset()
            assert offset is not None  # a record's, or the end's: only other errors come without one
            if err is not None:
                pos = max(pos, offset)  # the end: compaction may have left the last offsets empty
                continue
            k = m.key() or b""
            latest[k] = m.value()
            where[k] = (p, offset)
            pos = offset + 1


def decode_entry(value: bytes, *, topic: str, partition: int, offset: int) -> MapEntry:
    """The map entry stored at `offset` of `partition` of map topic `topic`; TopicError, in one line naming where
    it is, for a record that is none (or of a newer format: what version, docs/upgrading.md)."""
    try:
        return MapEntry.decode(value)
    except ValueError as exc:
        raise TopicError(f"offset-map topic {topic} partition {partition} offset {offset}: {exc}", topic=topic,
                         partition=partition, offset=offset) from exc


def decode_health(value: bytes, destination_topic: str, *, topic: str, partition: int, offset: int) -> LaneHealth:
    """A lane's health record (key `lane/<destination>`) stored at `offset` of `partition` of map topic `topic`;
    TopicError, in one line naming where it is, for a record that is none or of a newer format."""
    where = f"offset-map topic {topic} partition {partition} offset {offset}"
    try:
        h = json.loads(value)
        v = h.get("v", 1)  # records written before the version was: 1
        if isinstance(v, int) and not isinstance(v, bool) and v > HEALTH_FORMAT_VERSION:
            raise TopicError(f"{where}: lane health written in format version {v} by a newer transcoder; this one "
                             f"reads version {HEALTH_FORMAT_VERSION}: upgrade transcoder to read it "
                             "(docs/upgrading.md)", topic=topic, partition=partition, offset=offset)
        if v != HEALTH_FORMAT_VERSION:
            raise ValueError(f"format {v!r}, expected {HEALTH_FORMAT_VERSION}")
        last = h.get("last_error_ms")
        c = h.get("copier")  # the copier's figures (none in a record of an earlier version, or not published yet)
        copier = None if not c else CopierFigures(int(c["records"]), int(c["record_bytes"]), int(c["wire_bytes"]),
                                                  None if c.get("cpu_s") is None else float(c["cpu_s"]))
        return LaneHealth(destination_topic, int(h["errors_total"]), None if last is None else int(last),
                          int(h["at_ms"]), copier)
    except (TypeError, KeyError, AttributeError, ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError too
        raise TopicError(f"{where}: not a lane health record: {exc}", topic=topic, partition=partition,
                         offset=offset) from exc


def _decoded(latest: dict[bytes, bytes | None], where: dict[bytes, tuple[int, int]], topic: str,
             destination_topic: str) -> tuple[dict[int, PartitionMap], LaneHealth | None]:
    """`destination_topic`'s partition maps and lane health from the map topic's latest values."""
    entries = []
    health = None
    prefix = f"{destination_topic}/".encode()
    for k, v in latest.items():
        if v is None:
            continue
        partition, offset = where[k]
        if k == f"{HEALTH_PREFIX}{destination_topic}".encode():
            health = decode_health(v, destination_topic, topic=topic, partition=partition, offset=offset)
        elif k.startswith(prefix) and k.count(b"/") >= 2:
            entries.append(decode_entry(v, topic=topic, partition=partition, offset=offset))
    return partition_maps(entries, destination_topic), health
