"""Live scoring's capture, on a lane's thread: windows of consecutive records of one partition, per destination.

Every `interval_s` the lane calls `tick`: a window opens for each destination of the lane (unless the scorer
still holds an unscored window of it); a window still open from the last interval goes to the scorer as it
is (a quiet partition), if it holds any record. While windows are open, the lane hands each consumed batch to
`offer`; with none open, the lane's only cost is one attribute check per consumed batch (`capturing`) and one
comparison per loop turn (`due`).

A window binds to one partition of the destination's source topic: of those present in a batch, the first
after the partition its previous window sampled, wrapping around (samples rotate over the partitions that
carry traffic). It takes that partition's records in offset order (offsets already taken are skipped: a rebalance's
re-delivery) until the next record would take it past `limit` record bytes (key + value + headers, as the
writer counts them; a first record larger than `limit` is taken alone). Then it goes to the scorer.

Nothing here talks to Kafka: records are anything with confluent_kafka.Message's accessors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from transcoder.evaluate.batches import Record, record_size

TIMESTAMP_NOT_AVAILABLE = 0  # confluent_kafka.TIMESTAMP_NOT_AVAILABLE; the writer then produces timestamp 0


@dataclass(frozen=True)
class SampleTarget:
    """One destination topic of a lane, as sampling sees it."""

    destination: str  # the destination topic: what scoring and its metrics are keyed by
    source: str  # its source topic
    limit: int  # record bytes per window at most


@dataclass
class Window:
    """Consecutive records of one source partition, captured for one destination."""

    target: SampleTarget
    partition: int | None = None  # None until bound (the first batch with records of the source)
    first_offset: int = -1
    last_offset: int = -1
    records: list[Record] = field(default_factory=list)
    nbytes: int = 0

    @property
    def where(self) -> dict[str, Any]:
        """Where the window's records come from, for logs."""
        return {"destination": self.target.destination, "source": self.target.source, "partition": self.partition,
                "first_offset": self.first_offset, "last_offset": self.last_offset, "records": len(self.records)}


def take(window: Window, msgs: Iterable[Any], last_partition: int = -1) -> bool:
    """Add the batch's records of the window's partition (binding it first if needed); True once it is full."""
    src = window.target.source
    if window.partition is None:
        present = {m.partition() for m in msgs if m.error() is None and m.topic() == src}
        if not present:
            return False
        after = [p for p in present if p > last_partition]
        window.partition = min(after) if after else min(present)
    part, limit, records = window.partition, window.target.limit, window.records
    for m in msgs:
        if m.partition() != part or m.error() is not None or m.topic() != src:
            continue
        offset = m.offset()
        if offset <= window.last_offset:
            continue  # delivered again after a rebalance: already in the window
        headers = m.headers()
        ts_type, ts = m.timestamp()
        record = (m.key(), m.value(), tuple(headers) if headers else (),
                  0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts)
        size = record_size(record)
        if records and window.nbytes + size > limit:
            return True
        if not records:
            window.first_offset = offset
        records.append(record)
        window.nbytes += size
        window.last_offset = offset
        if window.nbytes >= limit:
            return True
    return False


class Sampler:
    """A lane's windows. Only the lane's thread calls it; `submit`, `wanted` and `failed` are the scorer's."""

    def __init__(self, targets: Sequence[SampleTarget], interval_s: float, *, submit: Callable[[Window], None],
                 wanted: Callable[[str], bool], failed: Callable[[Window, BaseException], None], now: float) -> None:
        self.targets = tuple(targets)
        self.interval_s = interval_s
        self.submit, self.wanted, self.failed = submit, wanted, failed
        #: monotonic time of the next `tick`: the first windows open at once
        self.due = now
        #: True while a window is open: the lane then hands each consumed batch to `offer`
        self.capturing = False
        self._open: list[Window] = []
        self._last_partition: dict[str, int] = {}  # destination -> partition its last window sampled

    def tick(self, now: float) -> None:
        """Open this interval's windows; a window left open from the last one is scored as it is."""
        for w in self._open:
            if w.records:
                self._submit(w)
        self._open = [Window(t) for t in self.targets if self.wanted(t.destination)]
        self.capturing = bool(self._open)
        self.due = now + self.interval_s

    def open_windows(self) -> tuple[Window, ...]:
        """The windows still open (a caller that fetches records to offer, as the Spark engine's driver does, fetches
        a bound window's partition)."""
        return tuple(self._open)

    def offer(self, msgs: Sequence[Any]) -> None:
        """A consumed batch (the lane's, as it copies it): records of the open windows' partitions are taken."""
        still = []
        for w in self._open:
            try:
                full = take(w, msgs, self._last_partition.get(w.target.destination, -1))
            except Exception as exc:  # noqa: BLE001 - a sample is not worth a lane: reported, the window dropped
                self.failed(w, exc)
                continue
            if w.partition is not None:
                self._last_partition[w.target.destination] = w.partition
            if full:
                self._submit(w)
            else:
                still.append(w)
        self._open = still
        self.capturing = bool(still)

    def _submit(self, w: Window) -> None:
        try:
            self.submit(w)
        except Exception as exc:  # noqa: BLE001 - reported (log, metric, /status), never raised into the lane
            self.failed(w, exc)
