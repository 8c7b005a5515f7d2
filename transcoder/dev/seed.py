"""`transcoder seed`: write realistic records into a topic, from files or built-in generators."""

from __future__ import annotations

import gzip
import io
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from transcoder.dev import datagen
from transcoder.dev.datagen import Record
from transcoder.errors import ConfigError, DeliveryError, InputError
from transcoder.kafka.admin import ensure
from transcoder.kafka.clients import client_config, connect_admin

FILE_FORMATS = ("auto", "lines", "ndjson")
_NDJSON_SUFFIXES = (".ndjson", ".jsonl", ".ndjson.gz", ".jsonl.gz")


class FileSource:
    """Records from a file or a directory of files: one record per line, or NDJSON.

    `where` names the file and line of the record last yielded, for error messages.
    Records carry timestamp 0, which the producer turns into the time of sending.
    """

    def __init__(self, path: Path, *, fmt: str = "auto", key_field: str | None = None) -> None:
        # `fmt` is --input-format on every command that reads files (seed, evaluate), as the errors say
        if fmt not in FILE_FORMATS:
            raise ConfigError(f"--input-format must be one of {', '.join(FILE_FORMATS)}, not {fmt!r}")
        if not path.exists():
            raise InputError(f"input {path} does not exist")
        if path.is_dir():
            self.files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not self.files:
                raise InputError(f"input directory {path} holds no files")
        else:
            self.files = [path]
        self.fmt = fmt
        self.key_field = key_field
        self.where = ""
        if key_field is not None and not any(self._is_ndjson(f) for f in self.files):
            raise ConfigError("--key-field needs NDJSON input (.ndjson or .jsonl files, or --input-format ndjson)")

    def _is_ndjson(self, path: Path) -> bool:
        if self.fmt != "auto":
            return self.fmt == "ndjson"
        return path.name.endswith(_NDJSON_SUFFIXES)

    @staticmethod
    def _open(path: Path) -> io.BufferedIOBase:
        try:
            return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from exc

    def __iter__(self) -> Iterator[Record]:
        for path in self.files:
            ndjson = self._is_ndjson(path)
            with self._open(path) as f:
                for lineno, raw in enumerate(f, 1):
                    self.where = f"{path}:{lineno}"
                    line = raw.rstrip(b"\r\n")
                    if not line:
                        continue
                    key = None
                    if ndjson:
                        key = self._ndjson_key(line)
                    yield Record(key=key, value=line, headers=(), timestamp_ms=0)

    def _ndjson_key(self, line: bytes) -> bytes | None:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{self.where}: not a JSON object ({exc})") from exc
        if self.key_field is None:
            return None
        if not isinstance(obj, dict) or self.key_field not in obj:
            raise InputError(f"{self.where}: no field {self.key_field!r} for the record key")
        k = obj[self.key_field]
        if k is None:
            return None
        return (k if isinstance(k, str) else json.dumps(k, separators=(",", ":"))).encode()


@dataclass
class SeedResult:
    topic: str
    partitions: int
    created: bool
    records: int
    bytes: int  # key + value + header bytes, as produced (uncompressed)
    seconds: float

    def summary(self) -> str:
        avg = self.bytes / self.records if self.records else 0
        rate = self.records / self.seconds if self.seconds > 0 else 0
        return (
            f"seeded {self.records:,} records, {self.bytes / 1e6:,.1f} MB (avg {avg:,.0f} B) into "
            f"{self.topic} ({self.partitions} partitions, {'created' if self.created else 'existing'}) "
            f"in {self.seconds:,.1f}s: {rate:,.0f} records/s"
        )


def record_size(r: Record) -> int:
    size = len(r.key or b"") + len(r.value or b"")
    for name, val in r.headers:
        size += len(name) + len(val or b"")
    return size


def _estimated_count(count: int | None, max_bytes: int | None) -> int:
    if count is not None:
        return count
    return (max_bytes or 0) // 200 + 1


def generator_start_ms(count: int | None, max_bytes: int | None, events_per_second: float,
                       now_ms: int) -> int:
    """Start the generated timeline in the past so that it ends about now.

    Kafka deletes segments by record timestamp and rejects timestamps far in the future
    (log.message.timestamp.after.max.ms), so seeded data must sit near the present.
    """
    return now_ms - int(_estimated_count(count, max_bytes) * 1000 / events_per_second)


#: Kafka's default time retention (log.retention.hours 168)
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000


def retention_for(start_ms: int, now_ms: int) -> str | None:
    """The `retention.ms` a topic seeded with timestamps from `start_ms` on needs so that the broker keeps them: None
    when Kafka's default week covers them, else their age plus a week (a broker deletes a segment whose newest
    timestamp is older than retention.ms at its next retention check, however new the records are to it)."""
    age = now_ms - start_ms
    return None if age <= DEFAULT_RETENTION_MS else str(age + DEFAULT_RETENTION_MS)


class _Pacer:
    """Holds the producing loop to `rate` records per second."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.t0 = time.monotonic()

    def wait(self, sent: int) -> None:
        if self.rate:
            ahead = sent / self.rate - (time.monotonic() - self.t0)
            if ahead > 0:
                time.sleep(ahead)


class _DeliveryFailures:
    """Producer `on_delivery` (called for failures only): keeps a count and the first failure."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.count += 1
            if self.first is None:
                self.first = f"{msg.topic()} [{msg.partition()}]: {err.str()}"


def seed(
    records: Iterable[Record],
    *,
    cluster: Mapping[str, Any],
    topic: str,
    count: int | None = None,
    max_bytes: int | None = None,
    partitions: int | None = None,
    replication_factor: int = -1,
    topic_config: Mapping[str, str] | None = None,
    compression: str = "none",
    rate: float | None = None,
    where: Callable[[], str] = lambda: "",
    progress: Callable[[int, int], None] = lambda _n, _b: None,
) -> SeedResult:
    """Produce `records` to `topic` until `count` records or `max_bytes` bytes; create the topic if missing."""
    admin, _ = connect_admin(cluster)
    shape, created = ensure(admin, topic, partitions=partitions, replication_factor=replication_factor,
                            config=topic_config, fix="drop --partitions to use it as it is, or choose another topic")
    failures = _DeliveryFailures()
    producer = Producer(client_config(
        cluster,
        **{
            "enable.idempotence": True,
            "compression.type": compression,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            # The Java client's partitioner: keyed records land where any Kafka client puts them.
            "partitioner": "murmur2_random",
            "delivery.report.only.error": True,
            "on_delivery": failures,
        },
    ))
    pacer = _Pacer(rate)
    sent = sent_bytes = 0
    t0 = time.monotonic()
    produce = producer.produce
    try:
        for rec in records:
            if (count is not None and sent >= count) or (max_bytes is not None and sent_bytes >= max_bytes):
                break
            headers: list[tuple[str, str | bytes | None]] | None = list(rec.headers) or None
            while True:
                try:
                    produce(topic, value=rec.value, key=rec.key, headers=headers, timestamp=rec.timestamp_ms)
                    break
                except BufferError:
                    producer.poll(0.05)  # the local queue is full: let deliveries drain it
                except KafkaException as exc:
                    err = exc.args[0]
                    at = where() or f"record #{sent + 1}"
                    if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                        raise InputError(
                            f"{at}: record of {record_size(rec):,} bytes is larger than the producer's "
                            f"message.max.bytes; nothing after it was sent ({sent:,} records were)"
                        ) from exc
                    raise DeliveryError(f"{at}: cannot produce to {topic}: {err.str()}") from exc
            sent += 1
            sent_bytes += record_size(rec)
            if sent % 2048 == 0:
                producer.poll(0)
                progress(sent, sent_bytes)
                if failures.count:
                    break
            if rate:
                pacer.wait(sent)
    finally:
        # Whatever stops the loop, what was handed to the producer is delivered (or reported).
        remaining = producer.flush(60)
    progress(sent, sent_bytes)
    if failures.count or remaining:
        raise DeliveryError(
            f"{failures.count + remaining:,} of {sent:,} records were not delivered to {topic}"
            + (f"; first failure: {failures.first}" if failures.first else f"; {remaining:,} still queued after 60s")
        )
    if count is not None and sent < count:
        raise InputError(f"the input ran out after {sent:,} records, before the {count:,} asked for")
    return SeedResult(topic=topic, partitions=shape.partitions, created=created, records=sent,
                      bytes=sent_bytes, seconds=time.monotonic() - t0)


def generated(kind: str, *, seed_value: int, keys: bool, headers: bool, start_ms: int,
              events_per_second: float) -> Iterator[Record]:
    if kind not in datagen.KINDS:
        raise ConfigError(f"unknown --kind {kind!r}; choose one of {', '.join(datagen.KINDS)}")
    return datagen.generate(kind, seed=seed_value, keys=keys, headers=headers, start_ms=start_ms,
                            events_per_second=events_per_second)
