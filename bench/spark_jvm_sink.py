"""Spark's built-in (JVM) Kafka sink as a copier: how exact and how fast, with and without a timestamp fix.

    python -m bench.spark_jvm_sink [--count 300000] [--codecs none,lz4,zstd[:LEVEL]] [--master local[2]]
                                   [-b BOOTSTRAP] [--runs 1] [--out FILE | --no-out]

The alternative to writing from Spark's executors through transcoder's own confluent-kafka writer:
`df.write.format("kafka")`. That sink builds ProducerRecord(topic, partition, key, value, headers) and has no
timestamp column (SPARK-50160 proposed one and was closed unmerged), so every copied record gets the
producer's wall clock as CreateTime. Here each record carries its source timestamp in one extra header,
appended last (TIMESTAMP_HEADER, 8 bytes big-endian), and a producer interceptor written for this bench
(bench/java/TimestampFromHeaderInterceptor.java, compiled at run time, never a committed jar) moves it back
into the record and drops that header.

Without -b it starts the local Kafka (transcoder.dev.local_kafka) in a temporary directory and stops it after.
It seeds --count deterministic nginx records (keys, headers, timestamps from --start, by default
2026-01-01, so old; a few edge records: tombstones, empty keys, null header values, a source header of the
interceptor's own name) into a 3-partition topic, makes --warmups untimed warm-up copies, then, --runs times: one
copy per codec with the header and the interceptor; one "plain" copy (first codec) as the sink copies on its
own, WITHOUT header or interceptor (its timestamps are the wall clock); one "header-only" copy (first codec,
header appended, no interceptor: a diagnostic of what the header's SQL costs, --no-header-only-copy drops
it). Every copy is checked record by record against the source (key, value, headers in order with duplicates
and nulls, timestamp, CreateTime). Figures: records/s (wall time of the Spark write, its planning included),
CPU seconds per 1M records of the Spark JVM (driver and executors are one JVM in local mode: its /proc CPU)
plus this Python process, and the broker's CPU (local broker only). Results: bench/results/<date>-<kind>-
spark-jvm-sink-<master>.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import platform
import re
import resource
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from itertools import zip_longest
from pathlib import Path
from typing import Any, NamedTuple

from bench.copiers import descendants, process_cpu
from transcoder.codecs import CODECS, LEVELS

ROOT = Path(__file__).resolve().parents[1]
JAVA_SOURCE = ROOT / "bench" / "java" / "TimestampFromHeaderInterceptor.java"
INTERCEPTOR_CLASS = "transcoder.bench.TimestampFromHeaderInterceptor"
#: The header that carries the source timestamp to the interceptor (its Java HEADER names the same).
TIMESTAMP_HEADER = "__transcoder.timestamp"
#: Class files target the oldest Java Spark 4 runs on.
JAVA_RELEASE = "17"

#: librdkafka's (and confluent-kafka's) timestamp types.
NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME = 0, 1, 2
_TIMESTAMP_TYPES = {NOT_AVAILABLE: "none", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}

#: Codecs the Java client compresses with (every codec of the table), and whether they take a level (KIP-390,
#: kafka-clients 3.8+: gzip 1..9, lz4 1..17 (9, the default, is lz4-java's fast compressor; others its HC one),
#: zstd -131072..22).
JVM_CODECS = {c: LEVELS[c] is not None for c in CODECS}

#: The generator's default timeline start, 2026-01-01T00:00:00Z: timestamps far from any copy's wall clock.
DEFAULT_START = "2026-01-01T00:00:00+00:00"


class BenchError(RuntimeError):
    """One line saying what is missing or wrong; main() prints it and exits 2."""


# ------------------------------------------------------------------------------------------- pure helpers

def encode_timestamp(ms: int) -> bytes:
    """The header value the interceptor reads: epoch milliseconds as 8 big-endian bytes (a signed long)."""
    return struct.pack(">q", ms)


def decode_timestamp(value: bytes | None) -> int | None:
    """What the interceptor makes of a header value: the timestamp, or None (the producer's clock) for a
    negative one. ValueError for anything but 8 bytes (the interceptor throws; Kafka logs and sends as is)."""
    if value is None or len(value) != 8:
        raise ValueError(f"{TIMESTAMP_HEADER} must hold 8 bytes, not {None if value is None else len(value)}")
    ms = struct.unpack(">q", value)[0]
    return None if ms < 0 else ms


def timestamp_header_sql(headers: str = "headers", timestamp: str = "timestamp") -> str:
    """Spark SQL: the source's headers (null when a record has none) with the timestamp header appended.

    The long becomes 8 big-endian bytes through its hex text: hex() of a bigint has no leading zeros (and is
    16 two's-complement digits when negative), lpad makes it 16 digits, unhex 8 bytes. (CAST(bigint AS BINARY)
    would do the same but is refused under ANSI mode, Spark 4's default.)
    """
    value = f"unhex(lpad(hex(unix_millis({timestamp})), 16, '0'))"
    ours = f"array(named_struct('key', '{TIMESTAMP_HEADER}', 'value', {value}))"
    return f"concat(coalesce({headers}, array()), {ours}) AS headers"


def parse_codecs(text: str) -> list[tuple[str, int | None]]:
    """`none,lz4,zstd:6` -> [("none", None), ("lz4", None), ("zstd", 6)]; ValueError naming what is wrong."""
    out: list[tuple[str, int | None]] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, _, level_text = item.partition(":")
        if name not in JVM_CODECS:
            raise ValueError(f"unknown codec {name!r}; choose from {', '.join(JVM_CODECS)}")
        level = None
        if level_text:
            if not JVM_CODECS[name]:
                raise ValueError(f"codec {name} has no compression levels")
            try:
                level = int(level_text)
            except ValueError:
                raise ValueError(f"level {level_text!r} of {name} is not an integer") from None
        out.append((name, level))
    if not out:
        raise ValueError("no codec given")
    return out


def producer_options(bootstrap: str, destination: str, codec: str, level: int | None, *, batch_bytes: int,
                     linger_ms: int, interceptor: bool) -> dict[str, str]:
    """Options of `df.write.format("kafka")`: the topic and the `kafka.`-prefixed Java producer properties."""
    if codec not in JVM_CODECS:
        raise ValueError(f"unknown codec {codec!r}")
    if level is not None and not JVM_CODECS[codec]:
        raise ValueError(f"codec {codec} has no compression levels")
    opts = {
        "topic": destination,
        "kafka.bootstrap.servers": bootstrap,
        "kafka.compression.type": codec,
        "kafka.batch.size": str(batch_bytes),
        "kafka.linger.ms": str(linger_ms),
        "kafka.enable.idempotence": "true",
        "kafka.acks": "all",  # what idempotence needs (the Java client's default since 3.0, said here anyway)
    }
    if level is not None:
        opts[f"kafka.compression.{codec}.level"] = str(level)
    if interceptor:
        opts["kafka.interceptor.classes"] = INTERCEPTOR_CLASS
    return opts


class Rec(NamedTuple):
    """One record as a confluent-kafka consumer reads it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]  # order and duplicates kept; [] when none
    timestamp: int
    timestamp_type: int


_FIELDS = ("key", "value", "headers", "timestamp", "timestamp type")


def expected_copy(src: Rec) -> tuple[Any, ...]:
    """What an exact copy of `src` holds: the same key, value, headers and timestamp, as CreateTime (a
    LogAppendTime source record's timestamp is copied as the copy's CreateTime)."""
    return (src.key, src.value, src.headers, src.timestamp, CREATE_TIME)


def _fields(dst: Rec) -> tuple[Any, ...]:
    return (dst.key, dst.value, dst.headers, dst.timestamp, dst.timestamp_type)


def _show(v: Any, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclasses.dataclass
class Fidelity:
    """Record-by-record comparison of a copy with its source (every partition, in offset order).

    n_total counts positions: the longer of the source and the copy in each partition, so n_equal == n_total
    exactly when the copy is exact. `mismatches` counts differing records per field ("missing" / "extra"
    for records on one side only).
    """

    n_equal: int = 0
    n_total: int = 0
    first_difference: str | None = None
    mismatches: Counter[str] = dataclasses.field(default_factory=Counter)

    def add(self, other: Fidelity) -> None:
        self.n_equal += other.n_equal
        self.n_total += other.n_total
        self.first_difference = self.first_difference or other.first_difference
        self.mismatches.update(other.mismatches)

    @property
    def exact(self) -> bool:
        return self.n_equal == self.n_total

    def summary(self) -> str:
        head = f"{self.n_equal:,}/{self.n_total:,} equal"
        if self.exact:
            return head
        fields = ", ".join(f"{k} {n:,}" for k, n in self.mismatches.most_common())
        return f"{head} (differing: {fields}); first: {self.first_difference}"


def diff_partition(partition: int, source: Iterable[Rec], copy: Iterable[Rec]) -> Fidelity:
    """Compare one partition of the source with the same partition of the copy, position by position."""
    out = Fidelity()
    for src, dst in zip_longest(source, copy):
        out.n_total += 1
        if dst is None:
            out.mismatches["missing"] += 1
            out.first_difference = out.first_difference or (
                f"partition {partition}: source offset {src.offset} has no copy (the copy ends before it)")
            continue
        if src is None:
            out.mismatches["extra"] += 1
            out.first_difference = out.first_difference or (
                f"partition {partition}: copy offset {dst.offset} has no source record (the source ends before it)")
            continue
        want, got = expected_copy(src), _fields(dst)
        if want == got:
            out.n_equal += 1
            continue
        differing = [i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b]
        for i in differing:
            out.mismatches[_FIELDS[i]] += 1
        if out.first_difference is None:
            i = differing[0]
            a, b = want[i], got[i]
            if _FIELDS[i] == "timestamp type":
                a, b = _TIMESTAMP_TYPES.get(a, a), _TIMESTAMP_TYPES.get(b, b)
            out.first_difference = (f"partition {partition}, source offset {src.offset} / copy offset {dst.offset}: "
                                    f"{_FIELDS[i]} {_show(a)} expected, {_show(b)} copied"
                                    + (f" (also {', '.join(_FIELDS[j] for j in differing[1:])})"
                                       if len(differing) > 1 else ""))
    return out


def master_slug(master: str) -> str:
    """local[2] -> local2: a file-name-safe form of a Spark master URL."""
    return re.sub(r"[^A-Za-z0-9]+", "", master.split("://")[-1]) or "spark"


def per_million(cpu_seconds: float | None, records: int) -> float | None:
    return None if cpu_seconds is None or records <= 0 else cpu_seconds / records * 1e6


# -------------------------------------------------------------------------------- the interceptor's jar

def default_cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "transcoder" / "bench"


def _version_key(path: Path) -> tuple[int, ...]:
    m = re.search(r"-(\d+(?:\.\d+)*)\.jar$", path.name)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def kafka_clients_jar() -> Path:
    """The kafka-clients jar Ivy resolved for Spark's Kafka connector (the newest, should there be several)."""
    from transcoder.spark.session import ivy_dir

    jars = sorted((ivy_dir() / "jars").glob("org.apache.kafka_kafka-clients-*.jar"), key=_version_key)
    if not jars:
        raise BenchError(f"no kafka-clients jar in {ivy_dir() / 'jars'}: start a Spark session with the Kafka "
                         "connector once (e.g. `pytest tests/spark`), which resolves it from Maven Central")
    return jars[-1]


def _javac() -> str:
    found = shutil.which("javac")
    if found:
        return found
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    raise BenchError("javac is not on the PATH (nor in JAVA_HOME): the JVM-sink bench compiles its producer "
                     f"interceptor {JAVA_SOURCE.relative_to(ROOT)} at run time; install a JDK 17 or newer")


#: A fixed time for the jar's entries: the same source gives the same jar, byte for byte.
_ZIP_TIME = (2026, 1, 1, 0, 0, 0)


def build_interceptor(cache_dir: Path | None = None, *, source: Path = JAVA_SOURCE) -> Path:
    """The interceptor's jar, compiled with javac against the kafka-clients jar from the Ivy cache.

    It lives in `cache_dir` (default ~/.cache/transcoder/bench) under a name holding the hash of the source
    (and of the Java release targeted): a changed source gets a new jar, an unchanged one is not rebuilt.
    BenchError (one line) when javac or the kafka-clients jar is missing, or when the source does not compile.
    """
    cache_dir = Path(cache_dir or default_cache_dir())
    text = source.read_bytes()
    digest = hashlib.sha256(text + f"\0release={JAVA_RELEASE}".encode()).hexdigest()[:16]
    jar = cache_dir / f"timestamp-interceptor-{digest}.jar"
    if jar.is_file():
        return jar
    javac = _javac()
    clients = kafka_clients_jar()
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".build-") as tmp:
        classes = Path(tmp) / "classes"
        proc = subprocess.run([javac, "--release", JAVA_RELEASE, "-Xlint:all", "-Werror", "-encoding", "UTF-8",
                               "-cp", str(clients), "-d", str(classes), str(source)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            raise BenchError(f"javac could not compile {source.name} against {clients.name}: "
                             f"{lines[0] if lines else f'exit {proc.returncode}'}")
        staged = Path(tmp) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _ZIP_TIME),
                       f"Manifest-Version: 1.0\r\nCreated-By: bench/spark_jvm_sink.py (javac --release "
                       f"{JAVA_RELEASE}, against {clients.name})\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                info = zipfile.ZipInfo(path.relative_to(classes).as_posix(), _ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, path.read_bytes())
        staged.replace(jar)  # atomic: a concurrent build leaves one complete jar
    return jar


# ----------------------------------------------------------------------------------------- CPU readings

def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def spark_jvm_pid(spark: Any) -> int | None:
    """The pid of the Spark driver's JVM when it runs on this machine with the executors in it (a local
    master), else None (executors elsewhere: their CPU is not read here)."""
    if not str(spark.sparkContext.master).startswith("local"):
        return None
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def stop_spark(spark: Any, *, timeout: float = 60.0) -> None:
    """Stop the session and the JVM pyspark started for it (the gateway exits when its stdin closes): the
    Kafka producers Spark caches would otherwise live on, and keep calling a broker stopped after them."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(30)


# ------------------------------------------------------------------------------------------- Kafka side

def _admin(bootstrap: str) -> Any:
    from transcoder.kafka.clients import connect_admin

    return connect_admin({"bootstrap.servers": bootstrap})[0]


def topic_records(bootstrap: str, topic: str) -> int:
    """Records in a topic now: high - low watermark, summed over its partitions."""
    from transcoder.kafka.admin import describe, end_offsets

    admin = _admin(bootstrap)
    shape = describe(admin, topic)
    if shape is None:
        raise BenchError(f"topic {topic} does not exist")
    return sum(high - low for low, high in end_offsets(admin, {topic: shape}).values())


#: Topics that keep their old records (retention by time would delete them) as produced, with CreateTime.
TOPIC_CONFIG = {"retention.ms": "-1", "compression.type": "producer", "message.timestamp.type": "CreateTime"}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """A fresh topic with TOPIC_CONFIG; BenchError if it exists."""
    from transcoder.kafka.admin import ensure

    _, created = ensure(_admin(bootstrap), topic, partitions=partitions, config=TOPIC_CONFIG)
    if not created:
        raise BenchError(f"topic {topic} exists already: the bench copies into fresh topics only")


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from bench import measure

    measure.delete_topics(_admin(bootstrap), topics)  # a topic never created is no failure


def _partition_records(consumer: Any, topic: str, partition: int, timeout: float) -> Iterator[Rec]:
    """Every record of one partition from its beginning to its end (read_committed), in offset order."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    deadline = time.monotonic() + timeout
    try:
        while True:
            msgs = consumer.consume(2000, timeout=1.0)
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return
                    raise BenchError(f"reading {topic} [{partition}]: {err.str()}")
                ts_type, ts = m.timestamp()
                yield Rec(m.offset(), m.key(), m.value(), list(m.headers() or []), ts, ts_type)
            if time.monotonic() > deadline:
                raise BenchError(f"reading {topic} [{partition}]: not at its end after {timeout:.0f} s")
    finally:
        consumer.unassign()


def compare_detailed(bootstrap: str, source: str, destination: str, *, timeout: float = 600.0) -> Fidelity:
    """`compare`, with the mismatches counted per field."""
    from confluent_kafka import Consumer

    def consumer() -> Any:
        return Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-compare-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})

    src_c, dst_c = consumer(), consumer()
    try:
        src_parts = len(src_c.list_topics(source, timeout=10).topics[source].partitions)
        dst_parts = len(dst_c.list_topics(destination, timeout=10).topics[destination].partitions)
        if src_parts != dst_parts:
            raise BenchError(f"{source} has {src_parts} partitions and {destination} {dst_parts}: "
                             "a partition-by-partition comparison needs the same number")
        total = Fidelity()
        for p in range(src_parts):
            total.add(diff_partition(p, _partition_records(src_c, source, p, timeout),
                                     _partition_records(dst_c, destination, p, timeout)))
        return total
    finally:
        src_c.close()
        dst_c.close()


def compare(bootstrap: str, source: str, destination: str) -> tuple[int, int, str | None]:
    """(n_equal, n_total, first_difference): the destination against the source, read with confluent-kafka
    consumers record by record per partition in offset order (key, value, headers as a list of tuples with
    order and duplicates, timestamp, and CreateTime as the timestamp type: a LogAppendTime source record is
    copied as CreateTime). n_equal == n_total exactly when the copy is exact."""
    f = compare_detailed(bootstrap, source, destination)
    return f.n_equal, f.n_total, f.first_difference


# ------------------------------------------------------------------------------------------------- copy

def batch_read_options(bootstrap: str, source: str) -> dict[str, str]:
    """The project's Kafka source options (transcoder.spark.source.read_options: headers, read_committed,
    failOnDataLoss, start) for a batch read of the whole topic: earliest to the latest offsets."""
    from transcoder import config
    from transcoder.spark.source import read_options

    conf = config.parse({"cluster": {"bootstrap_servers": bootstrap}, "group_id": "bench-spark-jvm-sink",
                         "routes": [{"source": source, "destinations": [{"codec": "none"}]}],
                         "start": "earliest"}, source="bench", environ={})
    opts = read_options(conf, [source])
    opts.update({"startingOffsets": "earliest", "endingOffsets": "latest"})
    return opts


def copy_jvm(spark: Any, bootstrap: str, source: str, destination: str, codec: str, level: int | None, *,
             batch_bytes: int = 1_048_576, linger_ms: int = 500, interceptor: bool = True,
             header: bool | None = None, broker_pid: int | None = None) -> dict[str, Any]:
    """Copy the whole `source` topic into `destination` with Spark's Kafka sink, as one batch job.

    Each row keeps its source partition (the `partition` column) and, with `interceptor`, carries its source
    timestamp in TIMESTAMP_HEADER for the interceptor (whose jar must be on the session's class path:
    spark.jars). Without it the copy gets the producer's wall clock, which is what the sink does on its own.
    `header` (default: as `interceptor`) appends the timestamp header with or without the interceptor: a
    header without interceptor is a diagnostic copy (what the header's SQL costs), never an exact one.

    Returns records (what the destination gained), seconds (wall time of the write, planning included),
    jvm_cpu_seconds (the Spark JVM, driver and executors, local masters only, else None),
    python_cpu_seconds (this process), cpu_seconds (their sum), broker_cpu_seconds (with `broker_pid`),
    records_per_s and cpu_s_per_1m.
    """
    writer_opts = producer_options(bootstrap, destination, codec, level, batch_bytes=batch_bytes,
                                   linger_ms=linger_ms, interceptor=interceptor)
    df = spark.read.format("kafka").options(**batch_read_options(bootstrap, source)).load()
    header = interceptor if header is None else header
    out = df.selectExpr("key", "value", "partition", timestamp_header_sql() if header else "headers")
    return {"codec": codec, "level": level, "interceptor": interceptor, "header": header,
            **timed(spark, broker_pid, bootstrap, destination,
                    lambda: out.write.format("kafka").options(**writer_opts).mode("append").save())}


def tree_cpu(pid: int, seen: dict[int, float]) -> float:
    """CPU seconds of a process and its descendants (the Spark JVM and its Python workers); `seen` keeps the
    last reading of each, so a worker that exits keeps its share."""
    for p in descendants(pid):
        seen[p] = max(seen.get(p, 0.0), process_cpu(p))
    return sum(seen.values())


def timed(spark: Any, broker_pid: int | None, bootstrap: str, destination: str, write: Any) -> dict[str, Any]:
    """Run `write()` and measure it: records the destination gained, wall seconds, CPU of the Spark JVM and its
    children, of this process and of the broker, and the per-1M figures."""
    before = topic_records(bootstrap, destination)
    jvm = spark_jvm_pid(spark)
    seen: dict[int, float] = {}
    jvm0, py0, broker0 = (tree_cpu(jvm, seen) if jvm else None), _self_cpu(), (
        process_cpu(broker_pid) if broker_pid else None)
    t0 = time.perf_counter()
    extra = write() or {}
    seconds = time.perf_counter() - t0
    jvm_cpu = tree_cpu(jvm, seen) - jvm0 if jvm and jvm0 is not None else None
    py_cpu = _self_cpu() - py0
    broker_cpu = process_cpu(broker_pid) - broker0 if broker_pid and broker0 is not None else None
    records = topic_records(bootstrap, destination) - before
    cpu = None if jvm_cpu is None else jvm_cpu + py_cpu
    return {"destination": destination, "records": records, "seconds": seconds, "jvm_cpu_seconds": jvm_cpu,
            "python_cpu_seconds": py_cpu, "cpu_seconds": cpu, "broker_cpu_seconds": broker_cpu,
            "records_per_s": records / seconds if seconds > 0 else 0.0,
            "cpu_s_per_1m": per_million(cpu, records), "broker_cpu_s_per_1m": per_million(broker_cpu, records),
            **extra}


def copy_writer(spark: Any, bootstrap: str, source: str, destination: str, codec: str, level: int | None, *,
                batch_bytes: int = 1_048_576, linger_ms: int = 500, broker_pid: int | None = None) -> dict[str, Any]:
    """Copy the whole `source` topic into `destination` the way the Spark engine writes a micro-batch: the same
    batch read, then the engine's task function (transcoder.spark.sink: Arrow batches into the project's
    writer in the Python workers), as one batch job. CPU: the Spark JVM, its Python workers and this process."""
    import pickle

    from transcoder import config as cfg
    from transcoder.pipeline import routes
    from transcoder.spark import sink

    conf = cfg.parse({"cluster": {"bootstrap_servers": bootstrap}, "group_id": f"bench-writer-{destination}",
                      "routes": [{"source": source, "destinations": [{
                          "codec": codec, "level": level, "topic": destination,
                          "batch": {"max_bytes": batch_bytes, "linger_ms": linger_ms}}]}],
                      "metrics": {"port": 0}}, environ={})
    lane = routes.plan(conf, [source]).lanes[0]
    task = sink.task_function(conf, destination, lane, time.time() * 1000)
    df = spark.read.format("kafka").options(**batch_read_options(bootstrap, source)).load()

    def write() -> None:
        tallies = [pickle.loads(r.tally) for r in df.selectExpr(*sink.COLUMNS).mapInArrow(task, sink.RESULT_SCHEMA)
                   .collect()]
        fatal = next((t.fatal for t in tallies if t.fatal), None)
        if fatal:
            raise BenchError(fatal)

    return {"codec": codec, "level": level, "interceptor": False, "header": False,
            **timed(spark, broker_pid, bootstrap, destination, write)}


# ------------------------------------------------------------------------------------------------- data

def edge_records(records: Iterable[Any], *, every: int = 1000) -> Iterator[Any]:
    """The generator's records with a few deterministic edge cases mixed in (4 per `every`): a tombstone,
    an empty (not null) key, a header with a null value, and a source header of the interceptor's own name
    (a day before the record's time: the interceptor must take the copy's last header, not this one)."""
    for i, r in enumerate(records):
        k = i % every
        if k == every // 4:
            r = dataclasses.replace(r, value=None)
        elif k == every // 2:
            r = dataclasses.replace(r, key=b"")
        elif k == 3 * every // 4:
            r = dataclasses.replace(r, headers=(*r.headers, ("trace", None)))
        elif k == every - 1:
            r = dataclasses.replace(r, headers=(*r.headers, (TIMESTAMP_HEADER,
                                                             encode_timestamp(r.timestamp_ms - 86_400_000))))
        yield r


def seed_source(bootstrap: str, topic: str, *, kind: str, count: int, partitions: int, start_ms: int,
                seed_value: int, edges: bool) -> Any:
    from transcoder.dev import datagen
    from transcoder.dev.seed import seed

    records: Iterable[Any] = datagen.generate(kind, seed=seed_value, keys=True, headers=True, start_ms=start_ms)
    if edges:
        records = edge_records(records)
    result = seed(records, cluster={"bootstrap.servers": bootstrap}, topic=topic, count=count, partitions=partitions,
                  topic_config=TOPIC_CONFIG)
    if not result.created:
        raise BenchError(f"topic {topic} existed before the bench seeded it")
    return result


# ------------------------------------------------------------------------------------------------- main

def _fmt(v: float | None, spec: str = ",.2f") -> str:
    return "n/a" if v is None else format(v, spec)


def _label(codec: str, level: int | None) -> str:
    return codec if level is None else f"{codec}:{level}"


def report(rows: list[dict[str, Any]], *, command: str, machine: str, data: str, notes: list[str]) -> str:
    head = ("| copy | timestamp header | interceptor | records | seconds | records/s | Spark JVM + Python CPU s "
            "per 1M | broker CPU s per 1M | fidelity (equal/total) | first difference |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        f: Fidelity = r["fidelity"]
        lines.append(f"| {r['name']} | {'yes' if r['header'] else 'no'} | {'yes' if r['interceptor'] else 'no'} | "
                     f"{r['records']:,} | "
                     f"{r['seconds']:.2f} | {r['records_per_s']:,.0f} | {_fmt(r['cpu_s_per_1m'])} | "
                     f"{_fmt(r['broker_cpu_s_per_1m'])} | {f.n_equal:,}/{f.n_total:,} | "
                     f"{(f.first_difference or '').replace('|', '/')} |")
    return "\n".join([f"# Spark: the JVM Kafka sink (with the interceptor) and transcoder's writer — {data}", "",
                      f"Command: `{command}`", "", f"Machine: {machine}",
                      "", *lines, "", *[f"- {n}" for n in notes], ""])


def machine_line() -> str:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    from importlib import metadata

    return (f"{platform.machine()}, nproc {os.cpu_count()}, {platform.system()} {platform.release()}; "
            f"{java[0] if java else 'java ?'}; Python {platform.python_version()}, "
            f"pyspark {metadata.version('pyspark')}, confluent-kafka {metadata.version('confluent-kafka')}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=300_000, help="Records to seed (default %(default)s).")
    ap.add_argument("--kind", default="nginx", help="Generator kind (default %(default)s).")
    ap.add_argument("--codecs", default="none,lz4,zstd", help="codec[:level],... (default %(default)s).")
    ap.add_argument("--master", default="local[2]", help="Spark master (default %(default)s).")
    ap.add_argument("-b", "--bootstrap-servers", help="An existing cluster instead of a local Kafka.")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--start", default=DEFAULT_START, help="Generator timeline start, ISO-8601 with zone.")
    ap.add_argument("--seed", type=int, default=0, help="Generator seed.")
    ap.add_argument("--edge-records", action=argparse.BooleanOptionalAction, default=True,
                    help="Mix in tombstones, empty keys, null header values, a same-named source header.")
    ap.add_argument("--runs", type=int, default=1, help="Timed copies per codec, interleaved.")
    ap.add_argument("--warmups", type=int, default=8,
                    help="Untimed copies first, cycling through the codecs (JIT, producers' and consumers' start-up: "
                         "on 2 cores the JVM needed ~8 copies of 300k records to reach its steady speed; after a "
                         "single one, copies ran 1.5-2.5x slower than later ones). Default %(default)s.")
    ap.add_argument("--header-only-copy", action=argparse.BooleanOptionalAction, default=True,
                    help="A diagnostic copy per run: the timestamp header appended, no interceptor (the cost of "
                         "the header's SQL apart from the interceptor's).")
    ap.add_argument("--batch-bytes", type=int, default=1_048_576)
    ap.add_argument("--linger-ms", type=int, default=500)
    ap.add_argument("--out", type=Path, help="Results file (default bench/results/<date>-<kind>-spark-jvm-sink-"
                                             "<master>.md).")
    ap.add_argument("--no-out", action="store_true", help="Write no results file.")
    args = ap.parse_args(argv)
    try:
        codecs = parse_codecs(args.codecs)
        start = datetime.fromisoformat(args.start)
        if start.tzinfo is None:
            raise ValueError(f"--start {args.start!r} needs a time zone")
        if args.count <= 0 or args.partitions <= 0 or args.runs <= 0 or args.warmups < 0:
            raise ValueError("--count, --partitions and --runs must be positive, --warmups not negative")
        _run(args, codecs, int(start.timestamp() * 1000))
    except (BenchError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def _run(args: argparse.Namespace, codecs: list[tuple[str, int | None]], start_ms: int) -> None:
    from transcoder import logs
    from transcoder.errors import TranscoderError

    logs.configure("warning")
    jar = build_interceptor()  # before anything starts: a missing JDK fails in a second
    load0 = os.getloadavg()[0]
    print(f"interceptor: {jar}", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="transcoder-bench-jvm-sink-"))
    local = None
    broker_pid = None
    bootstrap = args.bootstrap_servers
    run_id = f"{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}"
    source = f"bench.jvm-sink.{run_id}.source"
    topics = [source]
    spark = None
    try:
        if bootstrap is None:
            from transcoder.dev.local_kafka import LocalKafka

            local = LocalKafka(work / "kafka")
            st = local.up()
            bootstrap, broker_pid = st.bootstrap, st.pid
        seeded = seed_source(bootstrap, source, kind=args.kind, count=args.count, partitions=args.partitions,
                             start_ms=start_ms, seed_value=args.seed, edges=args.edge_records)
        print(seeded.summary(), file=sys.stderr)

        from transcoder.config import SparkConfig
        from transcoder.spark import session

        scratch = work / "spark"
        for d in (scratch / "spark", scratch / "tmp"):
            d.mkdir(parents=True)
        t0 = time.perf_counter()
        spark = session.build(SparkConfig(master=args.master, conf={
            "spark.jars": str(jar),
            "spark.ui.enabled": False,  # no web UI: it would bind port 4040
            # Spark's scratch files and the JVM's temporary files (lz4-java's and zstd-jni's native
            # libraries) in the run's own directory, removed with it
            "spark.local.dir": str(scratch / "spark"),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch / 'tmp'}",
            "spark.sql.shuffle.partitions": args.partitions,
        }), app_name="bench-spark-jvm-sink")
        print(f"SparkSession ({args.master}) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

        def one(name: str, codec: str, level: int | None, interceptor: bool, header: bool | None = None, *,
                warmup: bool = False, writer: bool = False) -> dict[str, Any]:
            dest = f"bench.jvm-sink.{run_id}.{name.replace(':', '-').replace(' ', '-')}"
            topics.append(dest)
            create_topic(bootstrap, dest, args.partitions)
            if writer:
                r = copy_writer(spark, bootstrap, source, dest, codec, level, batch_bytes=args.batch_bytes,
                                linger_ms=args.linger_ms, broker_pid=broker_pid)
            else:
                r = copy_jvm(spark, bootstrap, source, dest, codec, level, batch_bytes=args.batch_bytes,
                             linger_ms=args.linger_ms, interceptor=interceptor, header=header, broker_pid=broker_pid)
            r["name"] = name
            # Warm-up copies are not checked; their topics go with the others at the end (deleting them now would
            # put the broker's deletion work into the next timed copy).
            if not warmup:
                r["fidelity"] = compare_detailed(bootstrap, source, dest)
            print(f"{name:>28}  {r['records']:>9,} records  "
                  f"{r['seconds']:6.2f} s  {r['records_per_s']:>9,.0f} records/s  "
                  f"CPU {_fmt(r['cpu_s_per_1m'])} s/1M (broker {_fmt(r['broker_cpu_s_per_1m'])})"
                  + ("" if warmup else f"  fidelity {r['fidelity'].summary()}"), file=sys.stderr, flush=True)
            return r

        for i in range(args.warmups):
            codec, level = codecs[i % len(codecs)]
            one(f"warmup {i + 1} {_label(codec, level)}", codec, level, True, warmup=True)
            one(f"warmup {i + 1} writer {_label(codec, level)}", codec, level, False, warmup=True, writer=True)
        rows = []
        first = codecs[0]
        for run in range(1, args.runs + 1):
            tag = f" run {run}" if args.runs > 1 else ""
            for codec, level in codecs:  # the two ways of writing, side by side, interleaved
                rows.append(one(_label(codec, level) + tag, codec, level, True))
                rows.append(one(_label(codec, level) + " transcoder writer" + tag, codec, level, False, writer=True))
            rows.append(one(_label(*first) + " plain" + tag, first[0], first[1], False))
            if args.header_only_copy:
                rows.append(one(_label(*first) + " header-only" + tag, first[0], first[1], False, header=True))
    except TranscoderError as exc:
        raise BenchError(str(exc)) from exc
    finally:
        if spark is not None:
            stop_spark(spark)
        if local is not None:
            local.down()
        elif bootstrap is not None:
            delete_topics(bootstrap, topics)
        shutil.rmtree(work, ignore_errors=True)

    avg = seeded.bytes / seeded.records if seeded.records else 0
    data = (f"{args.kind}, {seeded.records:,} records, {avg:,.0f} B average (key + value + headers), "
            f"{args.partitions} partitions, timestamps from {datetime.fromtimestamp(start_ms / 1000, UTC):%Y-%m-%d}")
    notes = [
        (f"Spark {args.master}, one batch job per copy: `spark.read.format(\"kafka\")` of the whole topic with the "
        "project's read options, `df.write.format(\"kafka\")` with kafka.batch.size "
        f"{args.batch_bytes}, kafka.linger.ms {args.linger_ms}, kafka.enable.idempotence true, the `partition` "
        "column from the source partition; the interceptor copies take the source timestamp through "
        f"the `{TIMESTAMP_HEADER}` header and {INTERCEPTOR_CLASS}."),
        ("records/s: records over the wall time of the write (job planning and the source's offset lookup "
        "included). CPU: utime+stime of the Spark JVM and its child processes (/proc; in local mode driver and "
        "executors are one JVM: Kafka consumer, Spark, the Java producer and its compression; the Python workers "
        "for the transcoder writer rows) plus this Python process; the "
        "broker's separately."),
        "Fidelity: every record of every partition in offset order, against the source: key, value, headers "
        "(order, duplicates, nulls), timestamp, CreateTime." + (
            " The source holds edge records (4 per 1,000): tombstones, empty keys, null header values, a "
            f"source header named {TIMESTAMP_HEADER}." if args.edge_records else ""),
        (f"Codec levels: {', '.join(_label(c, lv) for c, lv in codecs)} (no level: the Java client's default, "
        "lz4 9 = lz4-java's fast compressor, zstd 3)."),
        ("Rows \"transcoder writer\": the Spark engine's way (transcoder.spark.sink: the same read, Arrow "
         "batches into the project's writer, librdkafka, in the Python workers; timestamps native, no "
         "interceptor), as one batch job like the sink's; CPU there includes the Python workers."),
        ("Rows: the codecs with the timestamp header and the interceptor (the exact copies); \"plain\": the "
         "sink as it is, no header, no interceptor (wall-clock timestamps); \"header-only\": the header "
         "appended but no interceptor (a diagnostic: the header's SQL without the interceptor, so the header "
         "stays and the timestamps are the wall clock)."),
        (f"{args.warmups} warm-up copies (untimed, not shown) ran first, cycling through the codecs (JIT: with "
         "fewer, the first timed copies are 1.5-2.5x slower than later ones)."),
        (f"Load average (1 min) at the start and the end of the run: {load0:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs (the broker, Spark and anything else on the machine share them)."),
    ]
    command = shlex.join([".venv/bin/python", "-m", "bench.spark_jvm_sink", *(sys.argv[1:])])
    text = report(rows, command=command, machine=machine_line(), data=data, notes=notes)
    print(text)
    if not args.no_out:
        path = args.out or (ROOT / "bench" / "results" /
                            f"{datetime.now(UTC):%Y-%m-%d}-{args.kind}-spark-jvm-sink-"
                            f"{master_slug(args.master)}.md")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"written to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
