"""Retries as Kafka's own clients do them, and every retriable error counted by name.

`Backoff`: exponential back-off with jitter per key (a broker, a partition, a request), as KIP-580 has Kafka's
clients retry: `retry.backoff.ms` (100 ms) doubling to `retry.backoff.max.ms` (1000 ms), each delay within +-20%
of its term (random), back to the start once the key succeeds. Time and randomness are passed in, so unit tests
reach it all.

`KafkaErrors`: each retriable error a client of transcoder's own met (a Fetch, a Produce, a metadata or coordinator
request), counted by (Kafka's error name, topic, broker) for `transcoder_kafka_errors_total`, and the last one per
partition, which a lane names when nothing is acknowledged for a while (`in_flight_summary`). One tally per process
(`KAFKA_ERRORS`), as the clients that count into it are built by the lanes and writers, not by the metrics; a test
passes its own.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from transcoder.errors import TranscoderError

#: Kafka's defaults (Java client and librdkafka): the first retry after 100 ms, doubling to 1 s (KIP-580).
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
#: Each delay is its term times a random factor within 1 +- JITTER (KIP-580's 0.2).
JITTER = 0.2


def retry_backoff_of(librdkafka: Mapping[str, Any]) -> tuple[int, int]:
    """(retry.backoff.ms, retry.backoff.max.ms) of a cluster's client properties, Kafka's defaults where unset.
    TranscoderError, one line naming the property, for a value that is not a whole number of milliseconds."""
    out = []
    for name, default in (("retry.backoff.ms", RETRY_BACKOFF_MS), ("retry.backoff.max.ms", RETRY_BACKOFF_MAX_MS)):
        value = librdkafka.get(name, default)
        try:
            ms = int(value)
            ok = ms == float(value) and ms >= 0 and not isinstance(value, bool)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise TranscoderError(f"cluster config {name}: {value!r} is not a whole number of milliseconds")
        out.append(ms)
    return out[0], out[1]


def delay_ms(failures: int, base_ms: float, max_ms: float, *, jitter: float = JITTER,
             rand: Callable[[], float] = random.random) -> float:
    """The pause before retrying after `failures` failures in a row (1: the first retry), as Kafka's
    ExponentialBackoff computes it: base_ms * 2^(failures-1), the exponent capped where the term reaches max_ms,
    times a random factor within 1 +- jitter, capped at max_ms. max_ms under base_ms: always base_ms."""
    if failures <= 0:
        return 0.0
    if max_ms <= base_ms or base_ms <= 0:
        return float(base_ms)
    exp = min(failures - 1, math.log(max_ms / base_ms, 2))
    factor = 1.0 + jitter * (2.0 * rand() - 1.0)
    return min(float(max_ms), base_ms * 2 ** exp * factor)


class Backoff:
    """Failures in a row per key -> the pause before its next try (`delay_ms`); a success resets the key.
    Monotonic seconds are passed in; `rand` (in [0, 1)) gives the jitter."""

    def __init__(self, base_ms: float = RETRY_BACKOFF_MS, max_ms: float = RETRY_BACKOFF_MAX_MS, *,
                 jitter: float = JITTER, rand: Callable[[], float] = random.random) -> None:
        self.base_ms, self.max_ms, self.jitter = base_ms, max_ms, jitter
        self._rand = rand
        self._keys: dict[Hashable, tuple[int, float]] = {}  # key -> (failures in a row, no retry before)

    def failed(self, key: Hashable, now: float) -> float:
        """One more failure of `key` at `now`: the pause (seconds) before its next try."""
        failures = self._keys.get(key, (0, 0.0))[0] + 1
        pause = delay_ms(failures, self.base_ms, self.max_ms, jitter=self.jitter, rand=self._rand) / 1000
        self._keys[key] = (failures, now + pause)
        return pause

    def succeeded(self, key: Hashable) -> None:
        self._keys.pop(key, None)

    def failures(self, key: Hashable) -> int:
        return self._keys.get(key, (0, 0.0))[0]

    def wait(self, key: Hashable, now: float) -> float:
        """Seconds until `key` may be tried again (0: now)."""
        st = self._keys.get(key)
        return 0.0 if st is None else max(0.0, st[1] - now)

    def ready(self, key: Hashable, now: float) -> bool:
        return self.wait(key, now) <= 0.0


#: Kafka's names for codes kafka-python (and librdkafka) still call by an older one.
_RENAMED = {"NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER"}


def kafka_error_name(error: BaseException | int) -> str:
    """Kafka's name of an error: for a code or a broker's answer, the protocol's (NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER); for what the client met itself, kafka-python's class (KafkaConnectionError,
    KafkaTimeoutError, NodeNotReadyError), but UNKNOWN_BROKER_ID for a broker id its metadata does not hold."""
    import kafka.errors

    if isinstance(error, int):
        cls: type[BaseException] = kafka.errors.for_code(error)
        name = str(getattr(cls, "message", None) or cls.__name__)
        return _RENAMED.get(name, name)
    if isinstance(error, kafka.errors.UnknownBrokerIdError):
        return "UNKNOWN_BROKER_ID"
    if isinstance(error, kafka.errors.BrokerResponseError) and error.message:
        return _RENAMED.get(str(error.message), str(error.message))
    named = getattr(error, "kafka_error", None)  # transcoder's errors carry Kafka's name when they have one
    if named:
        return str(named)
    cause = error.__cause__
    if isinstance(error, TranscoderError) and isinstance(cause, BaseException):
        return kafka_error_name(cause)
    return type(error).__name__


@dataclass(frozen=True)
class LastError:
    """The last retriable error of a partition: Kafka's name, the broker that answered it (None: no broker), how
    many in a row it follows, and when (monotonic)."""

    error: str
    broker: int | None
    count: int
    at: float


class KafkaErrors:
    """Retriable errors by (error, topic, broker) since the process started, and the last one per partition.
    Thread-safe: a lane's fetcher and its producers' sender threads count into one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, str], int] = {}
        self._last: dict[tuple[str, int], LastError] = {}

    def count(self, error: str, *, topic: str = "", broker: int | None = None, partitions: Iterable[int] = (),
              now: float | None = None) -> None:
        """One more `error` (Kafka's name) for `topic` ("" where none) from `broker` (None: no broker, a request
        that found none); it is the last error of `partitions` (of the topic) too."""
        key = (error, topic, "" if broker is None else str(broker))
        at = time.monotonic() if now is None else now
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            for partition in partitions if topic else ():
                last = self._last.get((topic, partition))
                count = last.count + 1 if last is not None and last.error == error else 1
                self._last[(topic, partition)] = LastError(error, broker, count, at)

    def counts(self) -> dict[tuple[str, str, str], int]:
        """(error, topic, broker) -> errors so far ("" for no topic, no broker)."""
        with self._lock:
            return dict(self._counts)

    def last(self, topics: Iterable[str] | None = None, since: float | None = None) -> dict[tuple[str, int], LastError]:
        """The last error of each partition (of `topics`; seen at or after `since`, monotonic)."""
        wanted = None if topics is None else set(topics)
        with self._lock:
            return {tp: e for tp, e in self._last.items()
                    if (wanted is None or tp[0] in wanted) and (since is None or e.at >= since)}


#: The process's tally (module doc): what /metrics exports as transcoder_kafka_errors_total.
KAFKA_ERRORS = KafkaErrors()


def in_flight_summary(pending: Mapping[tuple[str, int], Iterable[tuple[int, ...]]],
                      errors: Mapping[tuple[str, int], LastError], *, limit: int = 8) -> str:
    """Where records wait for an acknowledgement, and why as far as Kafka said: per destination partition with
    records in flight (most first, at most `limit`), its records and its last error with the broker that answered
    it, e.g. `orders.zstd [1] 1,200 records (NOT_ENOUGH_REPLICAS from broker 3, 535 times)`. `pending`: a
    ledger's, destination partition -> entries: one record (offset, size) or a run (first, last, records, size)."""
    waiting = []
    for tp, entries in pending.items():
        n = sum(e[2] if len(e) == 4 else 1 for e in entries)
        if n:
            waiting.append((n, tp))
    waiting.sort(key=lambda x: (-x[0], x[1]))
    parts = []
    for n, (topic, partition) in waiting[:limit]:
        text = f"{topic} [{partition}] {n:,} records"
        e = errors.get((topic, partition))
        if e is not None:
            where = f" from broker {e.broker}" if e.broker is not None else ""
            text += f" ({e.error}{where}, {e.count:,} {'time' if e.count == 1 else 'times'})"
        parts.append(text)
    if len(waiting) > limit:
        parts.append(f"{len(waiting) - limit} more partitions")
    return "; ".join(parts)
