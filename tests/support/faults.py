"""Fault injection against the real broker: `transcoder run` as a child process, the record-by-record
comparison of a source and its destination, and the samples a fault test reports (RSS, readiness, lag)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import yaml
from confluent_kafka import Producer

from tests.support.configs import raw_config
from tests.support.records import read_all

#: key, value, headers, timestamp: what a copy must keep of every record
Fingerprint = tuple[bytes | None, bytes | None, tuple, int]


# ------------------------------------------------------------------ configs and processes
def write_config(directory: Path, kafka: Any, routes: list[dict], *, bootstrap: str | None = None,
                 name: str = "config.yaml", **extra: Any) -> str:
    """A config file for the session's broker (through `bootstrap`, e.g. the proxy's, when given)."""
    raw = raw_config(kafka, routes, **extra)
    if bootstrap is not None:
        raw["cluster"]["bootstrap_servers"] = bootstrap
    # A member SIGKILLed leaves the group after session.timeout.ms (45 s by default): until then its successor
    # waits for the rebalance. Faults kill members on purpose.
    raw["cluster"]["config"] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                                **raw["cluster"].get("config", {})}
    path = directory / name
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def start(path: str, *args: str, log: Path | None = None, level: str = "info") -> subprocess.Popen:
    """`transcoder run --config path` in a child process of its own session (os.killpg reaches it all).

    stderr goes to `log` when given (a long run logs more than a pipe holds unread); else to a pipe."""
    err: Any = subprocess.PIPE if log is None else open(log, "a")  # the child owns it
    try:
        return subprocess.Popen([sys.executable, "-m", "transcoder", "run", "--config", path, *args],
                                stdout=subprocess.PIPE if log is None else subprocess.DEVNULL, stderr=err, text=True,
                                env={**os.environ, "TRANSCODER_LOG_LEVEL": level}, start_new_session=True)
    finally:
        if log is not None:
            err.close()


def kill(p: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the process group of a child started by `start` (ignored when it is gone)."""
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0, what: str = "a condition",
             interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(interval)


def dest_offsets(admin: Any, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) of a topic; {} before it exists."""
    from transcoder.kafka.admin import describe, end_offsets

    shape = describe(admin, topic)
    return {} if shape is None else {p: lh for (_, p), lh in end_offsets(admin, {topic: shape}).items()}


def dest_count(admin: Any, topic: str) -> int:
    """Offsets written to a topic (records, plus transaction markers under exactly-once)."""
    return sum(high - low for low, high in dest_offsets(admin, topic).values())


def log_events(path: Path, event: str) -> list[dict]:
    """The JSON log lines of `event` a child wrote to `path`."""
    return events_in(path.read_text(errors="replace").splitlines(), event)


def events_in(lines: Iterable[str], event: str) -> list[dict]:
    """The JSON log lines of `event` among `lines` (a child's stderr), parsed."""
    import json

    out = []
    for line in lines:
        if f'"event": "{event}"' in line:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


# ------------------------------------------------------------------ samples
def rss_bytes(pid: int) -> int | None:
    """Resident set size of a process (Linux /proc), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def http_get(port: int, path: str, timeout: float = 3.0) -> tuple[int | None, str]:
    """(status, body) of a GET on a child's endpoints; (None, why) when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return None, repr(exc)


def metric(port: int, name: str, **labels: str) -> float | None:
    """One sample of a child's /metrics, by name and (a subset of) labels."""
    status, body = http_get(port, "/metrics")
    if status != 200:
        return None
    for line in body.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


# ------------------------------------------------------------------ source records
def produce_records(bootstrap: str, topic: str, n: int, *, partitions: int, start: int = 0, seed: int = 0) -> int:
    """`n` distinct nginx-like records (key k<i>, a header on every third, explicit timestamps), record i to
    partition i % partitions; about 200 bytes each, half of them random (so compression gains ~2x, not 20x).
    Returns the smallest record size (key + value + headers), the unit the duplicate bounds are counted in."""
    rnd = random.Random(seed + start)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                  "compression.type": "lz4"})
    ts0 = int(time.time() * 1000) - 3_600_000
    smallest = 1 << 30
    for i in range(start, start + n):
        key = f"k{i:08d}".encode()
        value = (f'10.0.{i % 256}.{i % 97} - - [22/Nov/2026:10:{i % 60:02d}:00 +0000] "GET /api/v1/items/{i % 311}'
                 f' HTTP/1.1" 200 {rnd.randrange(100, 9999)} "-" "curl/8.{i % 9}" '
                 f'req={rnd.getrandbits(256):064x}').encode()
        headers = [("trace", f"{i:08x}".encode())] if i % 3 == 0 else None
        smallest = min(smallest, len(key) + len(value) + (13 if headers else 0))
        while True:
            try:
                p.produce(topic, value=value, key=key, partition=i % partitions, timestamp=ts0 + i, headers=headers)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    return smallest


# ------------------------------------------------------------------ the comparison
@dataclass
class PartitionComparison:
    partition: int
    source: int  # records in the source
    destination: int  # records in the destination
    lost: int  # source records (counted with their multiplicity) missing from the destination
    duplicates: int  # destination records beyond each source record's own count
    foreign: int  # destination records that are no source record
    in_order: bool  # first sightings in the destination follow the source's order
    first_disorder: str | None = None


@dataclass
class Comparison:
    source_topic: str
    destination_topic: str
    partitions: list[PartitionComparison] = field(default_factory=list)

    @property
    def source(self) -> int:
        return sum(p.source for p in self.partitions)

    @property
    def destination(self) -> int:
        return sum(p.destination for p in self.partitions)

    @property
    def lost(self) -> int:
        return sum(p.lost for p in self.partitions)

    @property
    def duplicates(self) -> int:
        return sum(p.duplicates for p in self.partitions)

    @property
    def foreign(self) -> int:
        return sum(p.foreign for p in self.partitions)

    @property
    def in_order(self) -> bool:
        return all(p.in_order for p in self.partitions)

    def summary(self) -> str:
        disorder = "; ".join(p.first_disorder for p in self.partitions if p.first_disorder) or "none"
        return (f"{self.destination_topic}: source {self.source}, destination {self.destination}, lost {self.lost}, "
                f"duplicates {self.duplicates}, foreign {self.foreign}, out of order: {disorder}")


def compare_records(source: list[tuple], destination: list[tuple], *, source_topic: str = "source",
                    destination_topic: str = "destination") -> Comparison:
    """Record by record, per partition: every source record (key, value, headers, timestamp) in the destination,
    the destination's first sightings in the source's order; losses, duplicates and foreign records counted.

    Both sides are read_all()'s tuples (partition, offset, key, value, headers, timestamp)."""
    want: dict[int, list[Fingerprint]] = {}
    got: dict[int, list[Fingerprint]] = {}
    for side, recs in ((want, source), (got, destination)):
        for p, _, k, v, h, ts in recs:
            side.setdefault(p, []).append((k, v, h, ts))
    out = Comparison(source_topic, destination_topic)
    for p in sorted(set(want) | set(got)):
        w, g = want.get(p, []), got.get(p, [])
        cw, cg = Counter(w), Counter(g)
        foreign = sum(c for f, c in cg.items() if f not in cw)
        lost = sum((cw - cg).values())
        duplicates = sum((cg - cw).values()) - foreign
        first_w = list(dict.fromkeys(w))
        first_g = [f for f in dict.fromkeys(g) if f in cw]
        disorder = None
        if [f for f in first_w if f in cg] != first_g:
            seen = [f for f in first_w if f in cg]
            i = next(i for i, (a, b) in enumerate(zip(seen, first_g, strict=False)) if a != b)
            disorder = (f"[{p}] destination's record {i} is source record {first_w.index(first_g[i])}, "
                        f"not {first_w.index(seen[i])}")
        out.partitions.append(PartitionComparison(p, len(w), len(g), lost, duplicates, foreign, disorder is None,
                                                  disorder))
    return out


def compare_topics(bootstrap: str, source: str, destination: str) -> Comparison:
    """compare_records of two topics as read_committed readers see them."""
    return compare_records(read_all(bootstrap, source, timeout=120), read_all(bootstrap, destination, timeout=120),
                           source_topic=source, destination_topic=destination)


# ------------------------------------------------------------------ the duplicate bound
def duplicate_bound(*, max_in_flight_bytes: int, smallest_record: int, records_per_s: float,
                    commit_interval_ms: int, faults: int = 1, consume_batch: int = 2000) -> int:
    """At-least-once: how many records a copy may write twice, per fault that interrupts it.

    A lane commits, every commit_interval_ms, the oldest source offset some destination has not acknowledged,
    asynchronously, one commit at a time. A fault (its process killed, its partitions handed over, the broker
    killed) makes the next owner read again from the last commit answered: what was acknowledged since it was asked
    (commit_interval_ms, plus the time the answer to the next commit takes, which the loop waits for: counted as one
    more commit_interval_ms; plus the 0.2 s a loop turn may wait for records) and what was in flight (the lane
    stops reading past max_in_flight_bytes, after at most one consume batch more). Per fault: in-flight records + 2 x
    commit_interval_ms (+ 0.2 s) of traffic. (One interval was the bound while commits were synchronous: a broker
    SIGKILLed with a commit asked exceeded it by 165 records of 3,954, fresh-clone CI.)"""
    in_flight = max_in_flight_bytes // smallest_record + consume_batch
    interval = int(records_per_s * (2 * commit_interval_ms / 1000 + 0.2)) + 1
    return faults * (in_flight + interval)


class Throughput:
    """The peak copy rate of some destinations (records/s over >= 1 s windows), from their end offsets, sampled
    every half second by a thread of its own (a broker that is down is simply not sampled)."""

    def __init__(self, admin: Any, topics: list[str]) -> None:
        self.admin, self.topics = admin, topics
        self.samples: dict[str, list[tuple[float, int]]] = {t: [] for t in topics}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="throughput", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for t in self.topics:
                try:
                    self.samples[t].append((time.monotonic(), dest_count(self.admin, t)))
                except Exception:  # noqa: BLE001 - the broker is down or the topic not there yet
                    continue

    def peak(self, topic: str) -> float:
        best, samples = 0.0, self.samples[topic]
        for i, (t0, n0) in enumerate(samples):
            for t1, n1 in samples[i + 1:]:
                if t1 - t0 >= 1.0:
                    best = max(best, (n1 - n0) / (t1 - t0))
                    break
        return best
