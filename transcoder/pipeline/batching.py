"""Pure: re-batching for the batches transcoder builds itself (by size, record count and linger),
and what to do with a partition's answer to a Produce request.

One batch per partition is sent at a time (a Produce request carries at most one v2 batch per
partition, and sending serially per partition keeps idempotent sequences simple: a batch that
failed for good hands its sequence numbers back to the next one).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

R = TypeVar("R")
TP = tuple[str, int]

#: Bytes a record costs in a batch besides its key, value and headers (length, attributes,
#: timestamp and offset deltas, key/value lengths, header count), as librdkafka estimates it.
RECORD_OVERHEAD = 20


@dataclass
class _Open(Generic[R]):
    created: float  # monotonic seconds of the first record
    records: list[R] = field(default_factory=list)
    size: int = 0


class Accumulator(Generic[R]):
    """Records per partition, closed into batches at `max_bytes` / `max_records`, or after `linger_s`.

    A record larger than `max_bytes` forms a batch of its own. Time is passed in, never read.
    """

    def __init__(self, *, max_bytes: int, max_records: int, linger_s: float) -> None:
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.linger_s = linger_s
        self._open: dict[TP, _Open[R]] = {}
        self._closed: dict[TP, deque[list[R]]] = {}
        self.records = 0  # records held, open or closed
        self.bytes = 0  # their sizes (as given to `add`)

    def __len__(self) -> int:
        return self.records

    def add(self, tp: TP, record: R, size: int, now: float) -> bool:
        """Hold a record; True when that changed when a batch is due (a batch opened or closed)."""
        cost = size + RECORD_OVERHEAD
        changed = False
        batch = self._open.get(tp)
        if batch is not None and batch.records and batch.size + cost > self.max_bytes:
            self._close(tp)
            batch = None
        if batch is None:
            batch = self._open[tp] = _Open(created=now)
            changed = True
        batch.records.append(record)
        batch.size += cost
        self.records += 1
        self.bytes += size
        if batch.size >= self.max_bytes or len(batch.records) >= self.max_records:
            self._close(tp)
            changed = True
        return changed

    def _close(self, tp: TP) -> None:
        batch = self._open.pop(tp)
        self._closed.setdefault(tp, deque()).append(batch.records)

    def take(self, now: float, *, flush: bool = False,
             skip: set[TP] | frozenset[TP] = frozenset()) -> dict[TP, list[R]]:
        """At most one batch per partition: a closed one, else an open one past its linger (or any, with flush).

        Partitions in `skip` (a batch of theirs is still in flight) are left alone.
        """
        out: dict[TP, list[R]] = {}
        for tp in list(self._closed):
            if tp in skip:
                continue
            q = self._closed[tp]
            out[tp] = q.popleft()
            if not q:
                del self._closed[tp]
        for tp in list(self._open):
            if tp in out or tp in skip:
                continue
            batch = self._open[tp]
            if flush or now - batch.created >= self.linger_s:
                out[tp] = self._open.pop(tp).records
        return out

    def taken(self, records: int, size: int) -> None:
        """Records left the accumulator for good (delivered or failed): stop counting them."""
        self.records -= records
        self.bytes -= size

    def clear(self) -> None:
        """Forget every record held (an aborted transaction's: they are read and written again)."""
        self._open.clear()
        self._closed.clear()
        self.records = self.bytes = 0

    def put_back(self, tp: TP, batches: list[list[R]]) -> None:
        """Batches to send before anything else of the partition (the halves of a split batch)."""
        q = self._closed.setdefault(tp, deque())
        for b in reversed(batches):
            q.appendleft(b)

    def next_due(self, now: float) -> float | None:
        """Seconds until some batch may be taken (0: one may be now); None when nothing is held."""
        if self._closed:
            return 0.0
        if not self._open:
            return None
        return max(0.0, min(b.created for b in self._open.values()) + self.linger_s - now)


class Outcome(Enum):
    DELIVERED = "delivered"
    RETRY = "retry"  # send the same bytes again: same producer id and sequence, so never duplicated
    SPLIT = "split"  # too large for the topic: send the two halves as batches of their own
    RENEW = "renew"  # the broker forgot this producer id: take a new one, then send the batch again
    FAILED = "failed"  # the broker refused the batch for good: it was not written


MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
DUPLICATE_SEQUENCE_NUMBER = 46  # the broker already has this batch: it was written once
UNKNOWN_PRODUCER_ID = 59
#: Refusals after which the producer's sequences no longer match the broker's: take a new producer id.
SEQUENCE_BROKEN_CODES = frozenset({45, 47})  # OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH


def outcome(error_code: int, records: int, retriable: bool) -> Outcome:
    """What to do with a batch after the broker's answer for its partition.

    `retriable`: Kafka's flag for the error code (the caller reads it from Kafka's error table).
    """
    if error_code in (0, DUPLICATE_SEQUENCE_NUMBER):
        return Outcome.DELIVERED
    if retriable:
        return Outcome.RETRY
    if error_code == UNKNOWN_PRODUCER_ID:
        return Outcome.RENEW
    if error_code in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE) and records > 1:
        return Outcome.SPLIT
    return Outcome.FAILED


def next_sequence(sequence: int, records: int) -> int:
    """Kafka's producer sequence wraps at 2**31 - 1 back to 0."""
    return (sequence + records) % (2**31)


class TxnStep(Enum):
    """What a transactional producer does after the transaction coordinator's (or group coordinator's) answer."""

    DONE = "done"
    RETRY = "retry"  # the same request again after a back-off (the coordinator is busy or loading)
    REFIND = "refind"  # the coordinator moved: look it up again (FindCoordinator), then retry
    #: the epoch is not this producer's: another instance took over the transactional id, or the coordinator
    #: aborted the transaction (transaction.timeout.ms) and bumped it; telling them apart is InitProducerId's
    #: (KIP-588: it accepts this producer's last epoch after a timeout, refuses it after a takeover)
    FENCED = "fenced"
    ABORTABLE = "abortable"  # this transaction cannot commit: abort it and read its records again
    FATAL = "fatal"  # never recoverable by this producer (authorization, unsupported)


COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_PRODUCER_EPOCH = 47
CONCURRENT_TRANSACTIONS = 51  # the previous transaction's markers are still being written
PRODUCER_FENCED = 90
#: Kafka's codes that no retry or abort can mend: authorization (transactional id, group, topic), unsupported.
TXN_FATAL_CODES = frozenset({29, 30, 35, 53, 87})
TXN_FENCED_CODES = frozenset({INVALID_PRODUCER_EPOCH, PRODUCER_FENCED})


def txn_step(error_code: int, retriable: bool) -> TxnStep:
    """What to do after a transaction request's answer (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
    TxnOffsetCommit, EndTxn). `retriable`: Kafka's flag for the code."""
    if error_code == 0:
        return TxnStep.DONE
    if error_code in (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR):
        return TxnStep.REFIND
    if error_code in TXN_FENCED_CODES:
        return TxnStep.FENCED
    if error_code in TXN_FATAL_CODES:
        return TxnStep.FATAL
    if error_code in (COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS) or retriable:
        return TxnStep.RETRY
    return TxnStep.ABORTABLE
