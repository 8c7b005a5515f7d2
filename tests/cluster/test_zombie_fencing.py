"""Exactly-once on the 3-broker cluster: two instances in one group, one of them paused (SIGSTOP) while it holds
partitions and an open transaction, long enough for the group to drop it and give its partitions to the other; woken
(SIGCONT), it must commit nothing of what it held. An independent read_committed reader then finds every source
record once, in order, per partition. Before KIP-447's generation went with the offsets, the woken instance's
transaction committed (its transactional id, of another set of partitions, was never fenced): 40 records twice in
2 of 27 tries.

Each pause is one try; TRANSCODER_ZOMBIE_PAUSES sets how many (CI: 2; looped locally, see the docs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import yaml
from confluent_kafka import Producer

from tests.support.cli import run_cli
from tests.support.configs import raw_config
from tests.support.three_brokers import read_committed

PAUSES = int(os.environ.get("TRANSCODER_ZOMBIE_PAUSES", "2"))
SESSION_TIMEOUT_MS = 6000
#: how long an instance stays paused: past the session time-out and the rebalance that gives its partitions away
PAUSE_S = 14


class Instance:
    """`transcoder run` in a child process of its own session, its stderr's JSON lines kept."""

    def __init__(self, config: str, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen([sys.executable, "-m", "transcoder", "run", "--config", config],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "TRANSCODER_LOG_LEVEL": "info"}, start_new_session=True)
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        self._reader = threading.Thread(target=lambda: [self.lines.append(line) for line in self.proc.stderr],
                                        daemon=True)
        self._reader.start()

    def events(self, event: str, since: int = 0) -> list[dict]:
        out = []
        for line in self.lines[since:]:
            if f'"{event}"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def holds(self) -> set[str]:
        """The partitions its last assignment gave it (none once it lost or gave them back since)."""
        held: set[str] = set()
        for line in self.lines:
            for event in ("partitions_assigned", "partitions_revoked", "partitions_lost"):
                if f'"{event}"' in line:
                    try:
                        parts = set(json.loads(line).get("partitions", []))
                    except ValueError:
                        continue
                    held = held | parts if event == "partitions_assigned" else held - parts
        return held

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGUSR1)  # every thread's stack to stderr: where it waits
            time.sleep(2)
            self.signal(signal.SIGKILL)
            raise AssertionError(f"{self.name} did not stop within 120 s of SIGTERM:\n"
                                 + "".join(self.lines[-60:])) from None
        finally:
            self._reader.join(timeout=30)


def _wait(what: str, ok, timeout: float, *instances: Instance) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {i.name}:\n" + "".join(i.lines[-30:]) for i in instances)
            raise AssertionError(f"{what} within {timeout:.0f} s\n{tails}")
        time.sleep(0.3)


def _feed(bootstrap: str, topic: str, stop: threading.Event, rate: int = 1500) -> None:
    """Records into the source at about `rate` a second until `stop`: every transaction of the copy holds some and
    commits within commit_interval_ms, so a woken instance's first commit races the group telling it its
    partitions are gone."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    n = 0
    while not stop.is_set():
        for _ in range(rate // 10):
            producer.produce(topic, value=f"fed-{n}".encode(), key=str(n).encode(), partition=n % 3)
            n += 1
        producer.poll(0)
        time.sleep(0.1)
    assert producer.flush(60) == 0


def test_a_paused_instance_commits_nothing_after_the_group_moved_on(cluster3, cluster_topic, tmp_path):
    bootstrap = cluster3.bootstrap
    source = cluster_topic(3)
    assert run_cli("seed", "--kind", "nginx", "--count", "20000", "--partitions", "3", "--topic", source,
                   "-b", bootstrap).returncode == 0
    raw = raw_config(cluster3, [{"source": source, "destinations": [{"codec": "lz4"}]}], guarantee="exactly-once")
    raw["cluster"]["config"] = {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    dest = f"{source}.lz4"
    a = b = None
    zombie_aborts = 0
    stop_feeding = threading.Event()
    feeder = threading.Thread(target=_feed, args=(bootstrap, source, stop_feeding), daemon=True)
    feeder.start()
    try:
        a = Instance(str(path), "a")
        _wait("instance a holds no partition", lambda: len(a.holds()) == 3, 120, a)
        b = Instance(str(path), "b")
        for pause in range(PAUSES):
            _wait(f"pause {pause}: both instances do not hold partitions", lambda: a.holds() and b.holds()
                  and not (a.holds() & b.holds()), 120, a, b)
            time.sleep(1)  # records into a's open transaction
            held = sorted(a.holds())
            woke_at = len(a.lines)
            a.signal(signal.SIGSTOP)  # still holds its producer, its open transaction and its partitions
            _wait(f"pause {pause}: b was not given a's partitions {held}",
                  lambda held=held: set(held) <= b.holds(), PAUSE_S + 60, a, b)
            time.sleep(max(0.0, PAUSE_S - 8))
            a.signal(signal.SIGCONT)
            # woken: its transaction aborts (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID on its offsets, or its partitions
            # found lost first), then it joins the group again like any other member
            _wait(f"pause {pause}: a did not join the group again after waking", lambda woke_at=woke_at: bool(
                a.events("partitions_assigned", woke_at)) or a.proc.poll() is not None, 120, a, b)
            zombie_aborts += len(a.events("transaction_aborted", woke_at))
        stop_feeding.set()
        feeder.join(timeout=90)
        assert a.stop() == 0, "".join(a.lines[-40:])
        assert b.stop() == 0, "".join(b.lines[-40:])
    finally:
        stop_feeding.set()
        for i in (a, b):
            if i is not None and i.proc.poll() is None:
                i.signal(signal.SIGCONT)
                i.signal(signal.SIGKILL)
    finish = run_cli("run", "--config", str(path), "--until-caught-up", timeout=300)
    assert finish.returncode == 0, finish.stderr[-3000:]
    for i in (a, b):
        assert "Traceback" not in "".join(i.lines), "".join(i.lines)[-3000:]
    want = read_committed(bootstrap, source)
    got = read_committed(bootstrap, dest)
    counts = {p: (Counter(r[0] for r in got)[p], Counter(r[0] for r in want)[p]) for p in range(3)}
    assert all(copied == source for copied, source in counts.values()), f"(copied, source) per partition: {counts}"
    for p in range(3):  # every source record once, in order, with its key, value, headers and timestamp
        assert [r[2:] for r in got if r[0] == p] == [r[2:] for r in want if r[0] == p], f"partition {p}"
    print(f"{PAUSES} pauses, {zombie_aborts} transactions aborted by the woken instance")
