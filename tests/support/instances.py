"""`transcoder run` instances in child processes and a source fed while they copy: what the cluster tests
(tests/cluster) drive and watch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from confluent_kafka import Producer

from tests.support.faults import events_in


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
        """Its log lines of `event` (from line `since` on), parsed."""
        return events_in(self.lines[since:], event)

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


def wait_for(what: str, ok: Callable[[], object], timeout: float, *instances: Instance) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {i.name}:\n" + "".join(i.lines[-30:]) for i in instances)
            raise AssertionError(f"{what} within {timeout:.0f} s\n{tails}")
        time.sleep(0.3)


class Feeder:
    """Records into a topic of `partitions` partitions at about `rate` a second, from a thread, until `stop()`:
    record n has key n and value fed-n (each unique) in partition n % partitions; `first` of them at once."""

    def __init__(self, bootstrap: str, topic: str, *, rate: int = 1500, partitions: int = 3, first: int = 0) -> None:
        self.topic, self.rate, self.partitions = topic, rate, partitions
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                                   "acks": "all"})
        self._send(first)
        assert self._producer.flush(60) == 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _send(self, n: int) -> None:
        for _ in range(n):
            while True:
                try:
                    self._producer.produce(self.topic, value=f"fed-{self.sent}".encode(),
                                           key=str(self.sent).encode(), partition=self.sent % self.partitions)
                    break
                except BufferError:  # a broker away: librdkafka's queue full until it is back
                    self._producer.poll(0.1)
            self.sent += 1
        self._producer.poll(0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._send(self.rate // 10)
            time.sleep(0.1)

    def stop(self) -> int:
        """Stop feeding; every record sent is acknowledged (idempotent: each once). How many were sent."""
        self._stop.set()
        self._thread.join(timeout=60)
        assert self._producer.flush(120) == 0, f"{self.topic}: fed records not acknowledged within 120 s"
        return self.sent
