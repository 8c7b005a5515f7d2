"""Measuring one copy against the broker: destination progress and copier (and broker) CPU sampled
over the copy, whence the whole and the warmed span's figures (bench.spans), disk, end-to-end
latency of a live trickle; and the producer/consumer passes of the 2017 tables."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench import figures, spans
from bench.copiers import Running, machine_busy, process_cmdline, process_cpu, thread_cpu, trickle_command
from bench.figures import ClientRun, CopyRun, LiveLatency
from bench.spans import WARM, Sample, WarmRule
from transcoder.kafka.admin import delete_topics as admin_delete_topics
from transcoder.kafka.admin import describe, end_offsets
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.statistics import Window


def delete_topics(admin: AdminClient, topics: list[str]) -> None:
    """The bench's topics deleted, the answers awaited; one it could not delete is named (nothing is left silently)."""
    for topic, why in admin_delete_topics(admin, topics).items():
        print(f"could not delete topic {topic}: {why}", file=sys.stderr)


def record_count(admin: AdminClient, topic: str) -> int:
    """Records in a topic now (high - low watermarks over partitions); 0 while it does not exist."""
    shape = describe(admin, topic)
    if shape is None:
        return 0
    return sum(high - low for low, high in end_offsets(admin, {topic: shape}).values())


def measure_copy(admin: AdminClient, info: RawClient, running: Running, *, copier: str, codec: str,
                 records: int, uncompressed_bytes: int, launched: float, timeout: float,
                 broker_pid: int | None = None, poll_s: float = 0.1, rule: WarmRule = WARM) -> CopyRun:
    """Wait until the destination holds `records`, sampling it and the CPU every `poll_s`.

    Each sample is the destination's record count (end offsets), the copier's CPU seconds and, with
    `broker_pid` (a broker on this machine), the broker's. From them (bench.spans): time and CPU over
    the whole copy, from its first record in the destination to its last, and over the warmed span,
    from the warm boundary of `rule` to the last record (the CPU at the boundary interpolated
    between the samples around it).
    """
    deadline = time.monotonic() + timeout
    seen: dict[int, float] = {}  # pid -> CPU last read: a process that exited keeps its total
    kinds: dict[int, str] = {}  # pid -> figures.process_kind (a Spark copier's process trees only)

    def cpu() -> float:
        for pid in running.pids:  # read before `failed` reaps an exited process (a zombie's stat holds its total)
            seen[pid] = max(seen.get(pid, 0.0), process_cpu(pid))
            if running.tree and pid not in kinds:
                kinds[pid] = figures.process_kind(process_cmdline(pid))
        return sum(seen.values())

    def by_kind() -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, v in seen.items():
            kind = kinds.get(pid, "other")
            out[kind] = out.get(kind, 0.0) + v
        return out

    samples: list[Sample] = []
    machine: tuple[float, float] | None = None  # (time, machine_busy()) at the last sample before the first record
    kinds_at_start: dict[str, float] = {}  # by_kind() at the same sample
    busiest = _BusiestThread(lambda: running.pids)
    broker_busiest = _BusiestThread(lambda: [broker_pid] if broker_pid else [])
    while True:
        # the count is read by two admin requests (ms to tens of ms): the sample is their midpoint,
        # with the CPU read on both sides of them averaged
        t0, cpu0 = time.monotonic(), cpu()
        broker0 = process_cpu(broker_pid) if broker_pid else None
        n = record_count(admin, running.destination)
        t1, cpu1 = time.monotonic(), cpu()
        broker1 = process_cpu(broker_pid) if broker_pid else None
        why = running.failed()
        if why:
            raise RuntimeError(f"{copier} ({codec}) stopped: {why}")
        if n == 0 and not samples:  # the last sample before the first record starts their span
            machine = (t1, machine_busy())
            kinds_at_start = by_kind()
            busiest.start(t1)
            broker_busiest.start(t1)
        else:
            busiest.read(t1)
            broker_busiest.read(t1)
        if n > 0 or samples:  # from the first sample that sees a record in the destination on
            broker = None if broker0 is None or broker1 is None else (broker0 + broker1) / 2
            samples.append(Sample((t0 + t1) / 2, n, (cpu0 + cpu1) / 2, broker))
        if n >= records:
            break
        if t1 > deadline:
            raise RuntimeError(f"{copier} ({codec}): {n:,} of {records:,} records in {running.destination} "
                               f"after {timeout:.0f} s")
        time.sleep(poll_s)
    whole = spans.whole_span(samples, records)
    warm, note = spans.warmed_span(samples, records, rule)
    first_t = next(s.t for s in samples if s.records > 0)
    disk = info.topic_sizes([running.destination])[running.destination]
    return CopyRun(copier=copier, codec=codec, records=records, uncompressed_bytes=uncompressed_bytes,
                   seconds=max(whole.seconds, poll_s), cpu_seconds=whole.cpu_seconds,
                   startup_seconds=first_t - launched, disk_bytes=disk, broker_cpu_seconds=whole.broker_cpu_seconds,
                   warm=warm, warm_note=note, busiest_thread=busiest.cores(t1),
                   broker_busiest_thread=broker_busiest.cores(t1) if broker_pid else None,
                   machine_busy=(machine_busy() - machine[1]) / (t1 - machine[0])
                   if machine is not None and t1 > machine[0] else None,
                   cpu_by_process={k: v - kinds_at_start.get(k, 0.0) for k, v in by_kind().items()}
                   if running.tree else None)


class _BusiestThread:
    """The busiest thread of some processes from `start` (or the first `read`) on, in cores (CPU s per s): each
    thread's CPU is read at most every `every` s (a process may have a hundred threads) and once more at the end; a
    thread or a process that exits keeps its last reading (what it used after that, < `every` s, is not counted)."""

    def __init__(self, pids: Callable[[], list[int]], every: float = 0.3) -> None:
        self._pids, self._every = pids, every
        self._first: dict[tuple[int, int], float] | None = None
        self._last: dict[tuple[int, int], float] = {}
        self._t0 = self._t = 0.0

    def _now(self) -> dict[tuple[int, int], float]:
        return {(pid, tid): c for pid in self._pids() for tid, c in thread_cpu(pid).items()}

    def start(self, t: float) -> None:
        """Start (again) at `t`: the span's first reading."""
        self._first, self._t0, self._t = self._now(), t, t
        self._last = dict(self._first)

    def read(self, t: float, force: bool = False) -> None:
        if self._first is None:
            self.start(t)
        elif force or t - self._t >= self._every:
            self._last.update(self._now())
            self._t = t

    def cores(self, t: float) -> float | None:
        """Its CPU s per s from the first `read` to `t` (the copy's last sample), None if never read."""
        if self._first is None:
            return None
        self.read(t, force=True)
        first, span = self._first, t - self._t0
        used = max((c - first.get(k, 0.0) for k, c in self._last.items()), default=0.0)
        return used / span if span > 0 else None


#: the header of the live trickle's timed records
TIMED = [("bench-timed", b"1")]


def live_latency(bootstrap: str, source: str, destination: str, *, records: list[tuple[bytes | None, bytes]],
                 rate: float, timeout: float = 120.0) -> LiveLatency:
    """p50 and p99 seconds from a record's source timestamp (set at produce) to reading it from the destination.

    Produces `records` (key, value) into `source` at `rate` records/s, each stamped with the time it
    is produced, while a consumer reads the destination from its end. One record goes first, untimed, and is read
    from the destination before the trickle starts: the producer's start-up (an idempotent producer asks for its
    id; 0.5 s here) and the first batch to a new destination partition (its leader looked up) are no part of the
    copier's latency on a live stream. The stream goes on at the same rate (the same records again, untimed: no
    `bench-timed` header) until every timed record is read, so that the last ones are copied as on a live stream,
    not in a last batch that only its linger closes.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-latency-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5, "auto.offset.reset": "latest"})
    md = consumer.list_topics(destination, timeout=10).topics[destination]
    ends = [TopicPartition(destination, p, consumer.get_watermark_offsets(TopicPartition(destination, p),
                                                                          timeout=10)[1])
            for p in md.partitions]
    consumer.assign(ends)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    latencies: list[float] = []
    sent = 0
    timed_span = 0.0  # from the first timed record sent to the last
    try:
        warm_key, warm_value = records[0]
        producer.produce(source, warm_value, key=warm_key, timestamp=int(time.time() * 1000))
        producer.flush(30)
        deadline = time.monotonic() + timeout
        while not [m for m in consumer.consume(10, timeout=0.1) if m.error() is None]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: the first record did not reach {destination} within {timeout:.0f} s")
        t0 = time.monotonic()
        deadline = t0 + timeout
        while len(latencies) < len(records):
            due = int((time.monotonic() - t0) * rate) + 1
            while sent < due:
                key, value = records[sent % len(records)]
                producer.produce(source, value, key=key, timestamp=int(time.time() * 1000),
                                 headers=TIMED if sent < len(records) else None)
                sent += 1
                if sent == len(records):
                    timed_span = time.monotonic() - t0
            producer.poll(0)
            for m in consumer.consume(500, timeout=0.005):
                if m.error() is None:
                    if m.headers() == TIMED:
                        latencies.append(time.time() - m.timestamp()[1] / 1000)
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {destination}: {m.error().str()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: {len(latencies)} of {len(records)} records reached {destination} "
                                   f"within {timeout:.0f} s")
        producer.flush(30)
    finally:
        consumer.close()
    p = dict(Window.from_values(latencies).percentiles)
    return LiveLatency(rate=rate, reached=(len(records) - 1) / timed_span if timed_span > 0 else rate,
                       records=len(latencies), sent=sent + 1, p50=p[0.5], p99=p[0.99])


def live_latency_compiled(binary: Path, bootstrap: str, source: str, destination: str, *,
                          records: list[tuple[bytes | None, bytes]], timed: int, rate: float, workdir: Path,
                          timeout: float = 120.0) -> LiveLatency:
    """As `live_latency`, driven by bench/franz_go/trickle (Go), which keeps up with the rates a lane copies at:
    `records` replayed round and round at `rate`, 3 s untimed first, then `timed` records timed, then untimed until
    every timed one is read. Its producer's own share (timestamp -> acknowledgement) is given apart."""
    replay = workdir / "trickle.records"
    replay.write_text("".join(f"{base64.b64encode(k or b'').decode()}\t{base64.b64encode(v).decode()}\n"
                              for k, v in records))
    t0, busy0 = time.monotonic(), machine_busy()
    done = subprocess.run(trickle_command(binary, bootstrap, source, destination, replay, rate=rate, timed=timed,
                                          timeout=timeout), capture_output=True, text=True, check=False)
    busy = (machine_busy() - busy0) / max(time.monotonic() - t0, 1e-3)
    if done.returncode != 0:
        raise RuntimeError(f"latency trickle into {source}: {done.stderr.strip()[-600:]}")
    got = json.loads(done.stdout)
    return LiveLatency(rate=got["rate"], reached=got["reached_rate"], records=got["timed"], sent=got["sent"],
                       p50=got["p50"],
                       p99=got["p99"], driver="franz-go", produce_p99=got["produce_p99"], all_p50=got["all_p50"],
                       all_p99=got["all_p99"], machine_busy=busy)


def status_latency(url: str, destination: str, records: int, timeout: float = 30.0) -> tuple[float, float]:
    """(p50, p99) seconds transcoder's /status at `url` gives for `destination`, once it counts `records` records
    out there (its tallies are flushed at commits)."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{url}/status", timeout=10) as answer:
            doc = json.load(answer)
        row = next((d for lane in doc["lanes"] for d in lane["destinations"] if d["topic"] == destination), None)
        if row is not None and row["records_out"] >= records and row["latency_p99_seconds"] is not None:
            return row["latency_p50_seconds"], row["latency_p99_seconds"]
        if time.monotonic() > deadline:
            raise RuntimeError(f"/status: {destination} holds {row and row['records_out']} of {records} records "
                               f"after {timeout:.0f} s")
        time.sleep(0.5)


def produce_pass(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]], codec: str,
                 info: RawClient) -> ClientRun:
    """The 2017 producer table: produce the records with `codec` (librdkafka defaults otherwise)."""
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  "queue.buffering.max.messages": 2_000_000, "enable.idempotence": True})
    size = 0
    t0 = time.perf_counter()
    for key, value in records:
        while True:
            try:
                p.produce(topic, value, key)
                break
            except BufferError:
                p.poll(0.05)
        size += (len(key) if key else 0) + len(value)
    left = p.flush(120)
    seconds = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered to {topic}")
    return ClientRun(codec=codec, records=len(records), uncompressed_bytes=size, seconds=seconds,
                     traffic_bytes=info.topic_sizes([topic])[topic])


def consume_pass(bootstrap: str, topic: str, records: int, codec: str, info: RawClient) -> ClientRun:
    """The 2017 consumer table: read every record of `topic` (written with `codec`)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-consume-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    n = size = 0
    t0 = None
    deadline = time.monotonic() + 300
    try:
        while n < records:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is not None:
                    continue
                if t0 is None:
                    t0 = time.perf_counter()
                n += 1
                size += len(m.key() or b"") + len(m.value() or b"")
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {n} of {records} records of {topic} in 300 s")
        seconds = time.perf_counter() - (t0 or time.perf_counter())
    finally:
        c.close()
    return ClientRun(codec=codec, records=n, uncompressed_bytes=size, seconds=seconds,
                     traffic_bytes=info.topic_sizes([topic])[topic])
