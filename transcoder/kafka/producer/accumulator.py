"""What waits to be sent by one batch producer: the records produced (per partition, closed into batches by size,
record count and linger: pipeline.batching.Accumulator) and the sections handed in by `produce_sections` (batches
re-batched elsewhere, per partition in order), counted until their reports are served.

Shaped after aiokafka's `producer/message_accumulator.py`: one object the caller adds to and the sender drains,
one batch per partition at a time, waiting for data under the producer's lock. It also knows the aborts so far
(`purges`): a batch the sender hands back after an abort began went with its transaction and is not queued again.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from transcoder.kafka.producer.batches import Batch, Partition, Record
from transcoder.pipeline.batching import Accumulator

#: The sender waits for batches at most this long at a time (then looks again: closing, aborted).
IDLE_WAIT_S = 0.5


@dataclass
class Pending:
    """The sender's batches between rounds: those to send again (after their partition's back-off), and those sealed
    ahead while the last round was in flight; `purges`: the aborts they were taken after."""

    purges: int
    retry: dict[Partition, Batch] = field(default_factory=dict)
    ahead: dict[Partition, Batch] = field(default_factory=dict)


@dataclass
class Drained:
    """What a round sends: batches due again, and the records and sections taken from the queue."""

    due: dict[Partition, Batch]
    taken: dict[Partition, list[Record]]
    sections: dict[Partition, Any]


class RecordAccumulator:
    """One producer's queue: records and sections per partition, under the producer's lock (`lock`, shared with
    the reports and the transaction: the caller's thread and the sender's move them together)."""

    def __init__(self, lock: threading.Lock, *, client_id: str, max_bytes: int, max_records: int, linger_ms: int,
                 queue_max_bytes: int) -> None:
        self.client_id = client_id
        self._lock = lock
        self._wake = threading.Condition(lock)  # the sender waits on it for batches
        self._idle = threading.Condition(lock)  # an abort waits on it for the round in flight
        self._records: Accumulator[Record] = Accumulator(max_bytes=max_bytes, max_records=max_records,
                                                         linger_s=linger_ms / 1000)
        #: batches made elsewhere (transcoder_native Sections), per partition in order, and the records they hold
        #: until reported
        self._sections: dict[Partition, deque[Any]] = {}
        self._section_records = 0
        self._queue_max_bytes = queue_max_bytes
        self._flushing = False
        self._closing = False
        self._busy = False  # the sender is in a round (outside the lock)
        self._purges = 0  # aborts so far: a round that began before one drops what it holds
        self._round_purges = 0  # the aborts before the sender's round in flight began

    # ------------------------------------------------------------------ the caller's side
    def add(self, tp: Partition, record: Record) -> None:
        """Queue one record; BufferError when the queue is full, RuntimeError once closed."""
        size = record[4]
        with self._lock:
            self._check_open()
            if self._records.bytes and self._records.bytes + size > self._queue_max_bytes:
                raise BufferError(f"producer {self.client_id}: queue full ({self._records.bytes} bytes)")
            if self._records.add(tp, record, size, time.monotonic()):
                self._wake.notify()

    def add_sections(self, tp: Partition, sections: Sequence[Any]) -> None:
        """Queue sections of `tp`, in order; RuntimeError once closed."""
        with self._lock:
            self._check_open()
            self._sections.setdefault(tp, deque()).extend(sections)
            self._section_records += sum(len(x) for x in sections)
            self._wake.notify()

    def _check_open(self) -> None:
        if self._closing:
            raise RuntimeError(f"producer {self.client_id} is closed")

    def __len__(self) -> int:
        """Records held, in flight, or delivered with the report not yet served."""
        return len(self._records) + self._section_records

    def served(self, b: Batch) -> None:
        """`b`'s report was served (or it was dropped with its transaction): its records are no longer counted."""
        with self._lock:
            self._release(b)

    def _release(self, b: Batch) -> None:
        if b.section is not None:
            self._section_records -= b.count
        elif b.records is not None:
            self._records.taken(len(b.records), b.size)

    def discard(self, batches: Sequence[Batch]) -> None:
        """Batches that get no report (lost with their transaction): marked reported, no longer counted."""
        with self._lock:
            for b in batches:
                b.reported = True
                self._release(b)

    def flushing(self, on: bool) -> None:
        """While flushing, every batch is due at once (linger ignored)."""
        with self._lock:
            self._flushing = on
            if on:
                self._wake.notify()

    def close(self) -> None:
        """No more records; the sender stops after its round in flight."""
        with self._lock:
            self._closing = True
            self._wake.notify()

    def purge_holding_lock(self) -> None:
        """An abort: drop everything queued, wait for the sender's round in flight to end (bounded by the request
        timeout), drop what it put back meanwhile; the round's batches are dropped by the sender (`purges`). The
        caller holds the producer's lock (the one its parts share): the abort's move of the transaction, this purge
        and the reports' are one step, so the sender takes no round between them."""
        self._purges += 1
        self._records.clear()
        self._sections.clear()
        while self._busy:
            self._idle.wait(0.1)
        self._records.clear()
        self._section_records = 0

    @property
    def purges(self) -> int:
        """The aborts so far."""
        return self._purges

    # ------------------------------------------------------------------ the sender's side
    def next_round(self, pending: Pending, wait: Callable[[Partition, float], float]) -> Drained | None:
        """Wait until a round has something to send and take it (None: closing). The batches to send again whose
        partition's back-off is over (`wait`: the seconds left) are due; the other partitions' batches go
        meanwhile. After an abort, what `pending` held is gone with its transaction."""
        with self._lock:
            self._busy = False
            self._idle.notify_all()
            while True:
                if self._closing:  # close() flushed what it could: the rest is not committed, not lost
                    return None
                if pending.purges != self._purges:
                    pending.purges, pending.retry, pending.ahead = self._purges, {}, {}
                now = time.monotonic()
                due = {tp: b for tp, b in pending.retry.items() if wait(tp, now) <= 0}
                taken, sections = self._take(now, skip=pending.retry.keys() | pending.ahead.keys())
                if taken or due or sections or pending.ahead:
                    break
                waits = [IDLE_WAIT_S, *(wait(tp, now) for tp in pending.retry)]
                if (linger := self._records.next_due(now)) is not None:
                    waits.append(linger)
                self._wake.wait(min(waits))
            self._busy = True
            self._round_purges = pending.purges
            return Drained(due, taken, sections)

    def take_ahead(self, purges: int, skip: Collection[Partition]
                   ) -> tuple[dict[Partition, list[Record]], dict[Partition, Any]]:
        """While the broker writes a round, the next batches (none after an abort since `purges`, or once closing)."""
        with self._lock:
            if purges != self._purges or self._closing:
                return {}, {}
            return self._take(time.monotonic(), skip=skip)

    def _take(self, now: float, *, skip: Collection[Partition] = frozenset()
              ) -> tuple[dict[Partition, list[Record]], dict[Partition, Any]]:
        """Under the lock: the batches due now and the next section of each partition, one batch per partition
        (a Produce request holds one per partition), none of the partitions in `skip`."""
        taken = self._records.take(now, flush=self._flushing, skip=set(skip))
        sections = {tp: q.popleft() for tp, q in self._sections.items() if q and tp not in skip and tp not in taken}
        return taken, sections

    def put_back(self, b: Batch) -> None:
        """A batch sealed ahead goes back to the front of its partition's queue, to be sealed again: a batch of
        its partition before it was not delivered. Not after an abort began meanwhile: it went with its
        transaction."""
        with self._lock:
            if self._purges != self._round_purges:
                return
            if b.section is not None:
                self._sections.setdefault(b.tp, deque()).appendleft(b.section)
            else:
                assert b.records is not None
                self._records.put_back(b.tp, [b.records])

    def split_back(self, b: Batch, pieces: list[Any] | None = None) -> None:
        """A batch too large for the topic goes back as its two halves (or as `pieces`, sections or lists of
        records in order: the cut of a batch refused for some records), to be sealed as batches of their own. Not
        after an abort began meanwhile: it went with its transaction."""
        with self._lock:
            if self._purges != self._round_purges:
                return
            if b.section is not None:
                self._sections.setdefault(b.tp, deque()).extendleft(reversed(pieces or b.section.split()))
            else:
                assert b.records is not None
                half = len(b.records) // 2
                self._records.put_back(b.tp, pieces or [b.records[:half], b.records[half:]])

