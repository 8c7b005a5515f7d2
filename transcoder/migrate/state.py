"""The state of a migration in a compacted topic.

`StateStore` keeps the records of one migration in the state topic (`config.state_topic`): one partition, so
every reader sees one order; compacted, so the latest value per key is kept. Keys are `<migration>/<key>`,
values JSON objects, a tombstone deletes a key. Several migrations share the topic and never see each other.
The lease that keeps a second controller from acting on a migration is kept in the same records (migrate.lease).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import structlog
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from transcoder.config import Config
from transcoder.errors import (
    ConfigError,
    KafkaUnavailableError,
    MigrationError,
    TopicError,
)
from transcoder.kafka.admin import (
    SETTLE_S,
    SETTLING_ERRORS,
    describe_configs,
    ensure,
    settling,
    wait_settled,
)
from transcoder.kafka.clients import (
    ErrorTracker,
    client_config,
    connect_admin,
    retriable,
)
from transcoder.migrate import retry
from transcoder.migrate.retry import until_deadline

log = structlog.get_logger("transcoder.migrate")

#: Topic configs of a state topic it creates (segments rolled hourly so the cleaner keeps the log short).
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(3600 * 1000)}
#: How long a read may go without reaching the end offset it started with.
_READ_STALL_S = 30.0


def now_ms() -> int:
    """Wall-clock milliseconds: heartbeats are compared across hosts, so not a monotonic clock."""
    return int(time.time() * 1000)


def encode_offsets(offsets: Mapping[int, int]) -> dict[str, int]:
    """Offsets by partition as a state value holds them (JSON object keys are strings), in partition order."""
    return {str(p): o for p, o in sorted(offsets.items())}


def decode_offsets(doc: Mapping[str, Any] | None) -> dict[int, int]:
    """Offsets by partition from a state value's field (encode_offsets'); {} for a field not there."""
    return {int(p): int(o) for p, o in (doc or {}).items()}


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError a KafkaException carries, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


@dataclass(frozen=True)
class StateRecord:
    """The latest record of one key: its value (None: a tombstone), where it is and when it was written."""

    key: str
    value: dict[str, Any] | None
    offset: int
    timestamp_ms: int


#: The state records' format: field `_format` of every value this version writes, 1. A value without it was written
#: before the version was recorded and is version 1 too, read as it is; a higher version was written by a newer
#: transcoder and is refused (docs/upgrading.md). The field is the store's: callers neither give nor see it.
STATE_FORMAT_VERSION = 1
STATE_FORMAT_FIELD = "_format"


def encode_value(value: Mapping[str, Any]) -> bytes:
    """A state value as stored: the caller's JSON object with the format version."""
    if STATE_FORMAT_FIELD in value:
        raise ValueError(f"`{STATE_FORMAT_FIELD}` is the state record's format version, not a field of its value")
    return json.dumps({**value, STATE_FORMAT_FIELD: STATE_FORMAT_VERSION}, separators=(",", ":"),
                      sort_keys=True).encode()


def decode_value(value: bytes, *, migration: str, key: str, topic: str, offset: int) -> dict[str, Any]:
    """The JSON object stored as a state value (its format version taken out), from the record of `key` at `offset`
    of `topic` (partition 0); MigrationError in one line naming it when the record is no state value of this
    migration, or one a newer transcoder wrote (the version found)."""
    where = f"migration {migration}: state record {key} at partition 0 offset {offset} of topic {topic}"
    try:
        decoded = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        decoded, why = None, f"not JSON ({exc})"
    else:
        why = "not a JSON object"
    if not isinstance(decoded, dict):
        raise MigrationError(f"{where} is {why}; it was not written by transcoder: delete that key",
                             topic=topic, partition=0, offset=offset)
    v = decoded.pop(STATE_FORMAT_FIELD, 1)  # written before the version was recorded: 1
    if isinstance(v, int) and not isinstance(v, bool) and v > STATE_FORMAT_VERSION:
        raise MigrationError(f"{where} was written in state format version {v} by a newer transcoder; this one "
                             f"reads version {STATE_FORMAT_VERSION}: upgrade transcoder to go on with this migration "
                             "(docs/upgrading.md)", topic=topic, partition=0, offset=offset)
    if v != STATE_FORMAT_VERSION:
        raise MigrationError(f"{where} has state format version {v!r}, not {STATE_FORMAT_VERSION}; it was not "
                             "written by transcoder: delete that key", topic=topic, partition=0, offset=offset)
    return decoded


class StateStore:
    """The records of one migration in the state topic: `read` the latest value per key, `put` and `delete` them.

    Writes are synchronous (acks=all, idempotent producer): when `put` returns, every later `read` (by any
    process) sees the record. A read covers the topic from its start to the end offset seen when the read
    starts. Thread-safe: one lock serializes reads and writes (the lease heartbeats from a thread of its own).
    A read is tried again through a failover (a broker or the partition's leader not answering: migrate.retry)
    for at most `timeout_s`, each try waiting at most `try_s`; a write waits for its acknowledgement at most the
    delivery timeout (librdkafka retries it meanwhile). Then KafkaUnavailableError, never a hang.
    """

    def __init__(self, config: Config, migration: str, *, topic: str | None = None,
                 timeout_s: float = 10.0, delivery_timeout_ms: int = 10_000, try_s: float = 10.0) -> None:
        if not migration or "/" in migration:
            raise ConfigError(f"migration id {migration!r} must be non-empty and contain no '/': "
                              "it prefixes the migration's keys in the state topic")
        self.migration = migration
        self.topic = topic or config.state_topic
        self.timeout_s = timeout_s
        #: One read's try: its metadata and watermark requests each wait at most this long.
        self.try_s = min(try_s, timeout_s)
        #: A write not acknowledged within this is an error (librdkafka's message.timeout.ms).
        self.delivery_timeout_ms = delivery_timeout_ms
        self._base = config.target_cluster.librdkafka()
        self._bootstrap = self._base.get("bootstrap.servers", "<unset>")
        self._prefix = f"{migration}/"
        self._lock = threading.RLock()
        self._producer: Producer | None = None
        self._producer_errors: ErrorTracker | None = None
        self._consumer: Consumer | None = None
        self._consumer_errors: ErrorTracker | None = None
        self._ensured = False  # ensure_topic ran: the topic exists and is compacted

    # -- topic ------------------------------------------------------------------------------------------------

    def ensure_topic(self) -> None:
        """Create the state topic if missing (1 partition, compacted); refuse one that is not compacted or has
        more than one partition (records would be deleted, or lose their one order)."""
        with self._lock:
            if self._ensured:
                return
            try:
                admin, _ = connect_admin(self._base, timeout=self.try_s)
            except KafkaUnavailableError as exc:
                raise KafkaUnavailableError(f"migration {self.migration}: cannot create or check state topic "
                                            f"{self.topic}: {exc}; check the cluster is reachable and run the "
                                            "command again", topic=self.topic) from exc
            shape, created = ensure(admin, self.topic, partitions=None, config=STATE_TOPIC_CONFIGS)
            if shape.partitions != 1:
                raise TopicError(f"state topic {self.topic} has {shape.partitions} partitions, not 1: its records "
                                 "would have no single order; set migration.state_topic to a new topic",
                                 topic=self.topic)
            if created:
                log.info("state_topic_created", topic=self.topic)
            else:
                policy = describe_configs(admin, [self.topic])[self.topic].effective.get("cleanup.policy", "")
                if "compact" not in policy.split(","):
                    raise TopicError(f"state topic {self.topic} has cleanup.policy={policy}, not compact: migration "
                                     "state would be deleted by retention; set cleanup.policy=compact on it, or set "
                                     "migration.state_topic to a new topic", topic=self.topic)
            self._ensured = True

    # -- reading ----------------------------------------------------------------------------------------------

    def read(self) -> dict[str, dict[str, Any]]:
        """The latest value of every key of this migration (without the `<migration>/` prefix); deleted keys absent.

        An empty or missing topic gives {}. MigrationError when a value of this migration is not a JSON object.
        """
        return {k: r.value for k, r in self.read_records().items() if r.value is not None}

    def read_records(self) -> dict[str, StateRecord]:
        """The latest record of every key of this migration, tombstones included (value None)."""
        with self._lock:
            raw = until_deadline(self._read_raw, what=f"read state topic {self.topic} of migration {self.migration}",
                                 timeout_s=self.timeout_s, fields={"topic": self.topic},
                                 retry_on=lambda e: retry.retriable(e) and not settling(e))  # those: _read_raw
        out: dict[str, StateRecord] = {}
        for key, (value, offset, ts) in raw.items():
            name = key[len(self._prefix):]
            if value is None:
                out[name] = StateRecord(name, None, offset, ts)
                continue
            decoded = decode_value(value, migration=self.migration, key=key, topic=self.topic, offset=offset)
            out[name] = StateRecord(name, decoded, offset, ts)
        return out

    def _reader(self) -> Consumer:
        if self._consumer is None:
            tracker = ErrorTracker()
            self._consumer = Consumer(client_config(self._base, **{
                # No group is joined (partitions are assigned) and nothing is committed; librdkafka wants an id.
                "group.id": "transcoder-migration-state-reader", "enable.auto.commit": False,
                "enable.auto.offset.store": False, "isolation.level": "read_committed",
                "enable.partition.eof": True, "error_cb": tracker,
            }))
            self._consumer_errors = tracker
        return self._consumer

    def _unreachable(self, what: str, exc: BaseException, tracker: ErrorTracker | None) -> KafkaUnavailableError:
        if tracker is not None and tracker.last is not None:
            why = tracker.last.str()
        elif isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            why = exc.args[0].str()
        else:
            why = str(exc)
        err = kafka_error(exc)
        return KafkaUnavailableError(f"migration {self.migration}: cannot {what} state topic {self.topic} at "
                                     f"{self._bootstrap} within {self.try_s:g}s: {why}; check the cluster is "
                                     "reachable and run the command again", topic=self.topic,
                                     kafka_error=err.name() if err is not None else "_TIMED_OUT",
                                     retriable=err is None or retriable(err))

    def _read_raw(self) -> dict[str, tuple[bytes | None, int, int]]:
        """Key -> (value, offset, timestamp) of the latest record of each key with this migration's prefix."""
        consumer = self._reader()
        try:
            ends = wait_settled(lambda: self._ends(consumer), timeout_s=max(self.try_s, SETTLE_S))
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return {}  # created by us, and gone since (or never visible): no state
            if err is not None and err.code() in SETTLING_ERRORS:
                raise KafkaUnavailableError(
                    f"migration {self.migration}: partition 0 of state topic {self.topic} still answers "
                    f"{err.name()} {max(self.try_s, SETTLE_S):g}s after it was asked for: its leader is not "
                    "elected (check the brokers' controller) and run the command again", topic=self.topic,
                    partition=0, kafka_error=err.name(), retriable=True) from exc
            raise self._unreachable("read", exc, self._consumer_errors) from exc
        if ends is None:
            return {}
        low, high = ends
        latest: dict[str, tuple[bytes | None, int, int]] = {}
        if high <= low:
            return latest
        consumer.assign([TopicPartition(self.topic, 0, low)])
        try:
            pos = low
            stall = time.monotonic() + _READ_STALL_S
            while pos < high:
                if time.monotonic() >= stall:
                    raise KafkaUnavailableError(
                        f"migration {self.migration}: reading state topic {self.topic} stalled at offset {pos} of "
                        f"{high} for {_READ_STALL_S:g}s; check the cluster and run the command again",
                        topic=self.topic, partition=0, offset=pos)
                # consume() returns after `timeout` unless it has the full count: a short one, in a loop
                for m in consumer.consume(1000, timeout=0.05):
                    pos = max(pos, self._take(m, high, latest))
        finally:
            consumer.unassign()
        return latest

    def _ends(self, consumer: Consumer) -> tuple[int, int] | None:
        """(low, high) watermarks of partition 0; None when the topic does not exist and was not created by this
        store. A KafkaException with the error of the metadata or the watermark request (SETTLING_ERRORS while
        the topic is new, which `wait_settled` waits out; UNKNOWN_TOPIC_OR_PART too when this store created it)."""
        try:
            md = consumer.list_topics(self.topic, timeout=self.try_s)
        except KafkaException:
            consumer.poll(0)  # serves error_cb: the connection error behind the timeout
            raise
        t = md.topics.get(self.topic)
        if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            if not self._ensured:  # never created: no state
                return None
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))  # created a moment ago
        if t.error is not None:
            if t.error.code() in SETTLING_ERRORS:
                raise KafkaException(t.error)
            raise KafkaUnavailableError(f"migration {self.migration}: cannot read state topic {self.topic}: "
                                        f"{t.error.str()}", topic=self.topic, kafka_error=t.error.name(),
                                        retriable=retriable(t.error))
        p0 = t.partitions.get(0)
        if p0 is not None and p0.error is not None and p0.error.code() in SETTLING_ERRORS:
            raise KafkaException(p0.error)
        return consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=self.try_s)

    def _take(self, m: Message, high: int, latest: dict[str, tuple[bytes | None, int, int]]) -> int:
        """Fold one message into `latest`; the offset read up to."""
        err = m.error()
        offset = m.offset()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                assert offset is not None  # an end of partition names its offset
                return offset  # the end: compaction may have left the last offsets empty
            raise KafkaUnavailableError(f"migration {self.migration}: reading state topic {self.topic}: "
                                        f"{err.str()}", topic=self.topic, partition=0, kafka_error=err.name(),
                                        retriable=retriable(err))
        assert offset is not None  # a record's
        if offset >= high:  # written after the read started: the next read sees it
            return offset
        key = (m.key() or b"").decode("utf-8", errors="replace")
        if key.startswith(self._prefix):
            _, ts = m.timestamp()
            latest[key] = (m.value(), offset, ts)
        return offset + 1

    # -- writing ----------------------------------------------------------------------------------------------

    def _writer(self) -> Producer:
        if self._producer is None:
            tracker = ErrorTracker()
            self._producer = Producer(client_config(self._base, **{
                "enable.idempotence": True, "acks": "all", "linger.ms": 0,
                "message.timeout.ms": self.delivery_timeout_ms,
                # A topic the broker would auto-create is not compacted: ensure_topic creates it instead.
                "allow.auto.create.topics": False, "error_cb": tracker,
            }))
            self._producer_errors = tracker
        return self._producer

    def put(self, key: str, value: Mapping[str, Any]) -> int:
        """Store `value` (a JSON object) under `key`; its offset once acknowledged."""
        return self.put_many({key: value})[key]

    def delete(self, key: str) -> int:
        """Delete `key` (a tombstone); the tombstone's offset once acknowledged."""
        return self.put_many({key: None})[key]

    def put_many(self, items: Mapping[str, Mapping[str, Any] | None]) -> dict[str, int]:
        """Store several keys (None: delete) in one flush, in the order given; key -> offset.

        On an error none of the offsets is returned; records acknowledged before it stay written.
        """
        for key in items:
            if not key:
                raise ValueError("a state key must be non-empty")
        payloads = {k: (None if v is None else encode_value(v)) for k, v in items.items()}
        with self._lock:
            self.ensure_topic()
            producer = self._writer()
            offsets: dict[str, int] = {}
            failed: list[tuple[str, KafkaError]] = []

            def delivered(key: str) -> Any:
                def cb(err: KafkaError | None, msg: Message) -> None:
                    if err is not None:
                        failed.append((key, err))
                    else:
                        offset = msg.offset()
                        assert offset is not None  # an acknowledged record's
                        offsets[key] = offset
                return cb

            for key, payload in payloads.items():
                try:
                    producer.produce(self.topic, payload, f"{self._prefix}{key}".encode(), partition=0,
                                     on_delivery=delivered(key))
                except (KafkaException, BufferError) as exc:
                    raise MigrationError(f"migration {self.migration}: cannot write state key {key} to topic "
                                         f"{self.topic}: {exc}", topic=self.topic) from exc
            left = producer.flush(self.delivery_timeout_ms / 1000 + self.try_s)
            if failed:
                key, err = failed[0]
                why = err.str()
                last = self._producer_errors.last if self._producer_errors else None
                if last is not None and last.code() != err.code():
                    why += f" ({last.str()})"
                cls = KafkaUnavailableError if retriable(err) or err.code() == KafkaError._MSG_TIMED_OUT \
                    else MigrationError
                raise cls(f"migration {self.migration}: cannot write state key {key} to topic {self.topic}: "
                          f"{why}; check the cluster and run the command again", topic=self.topic,
                          kafka_error=err.name())
            if left or len(offsets) != len(payloads):
                raise KafkaUnavailableError(f"migration {self.migration}: {left} state record(s) for topic "
                                            f"{self.topic} not acknowledged in time; check the cluster and run "
                                            "the command again", topic=self.topic)
        return offsets

    # -- lifecycle --------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush what is still queued and close the clients."""
        with self._lock:
            if self._producer is not None:
                left = self._producer.flush(self.delivery_timeout_ms / 1000)
                self._producer = None
                if left:
                    log.warning("state_records_not_flushed", topic=self.topic, records=left)
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
