"""A transactional batch producer's transactions (exactly-once, Kafka's transaction protocol v1): the caller's calls
(init, begin, the group's offsets, commit, abort) and the sender's (partitions added before their first batch, a
batch the transaction cannot have), over its state (transaction_state: a state enum and its legal moves) and its
requests (transaction_requests: each asked of its coordinator until done).

Nothing is sent again outside the transaction: what cannot be delivered makes it abortable (`doom`), and after every
abort the producer bumps its epoch (InitProducerId with its own id and epoch, KIP-588), which also tells a
coordinator's time-out abort (accepted) from another instance's takeover (PRODUCER_FENCED: `fail`, for good).
The state moves under the producer's lock, by the caller's thread and the sender's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import structlog

from transcoder.kafka.group_member import GroupMetadataError, group_member
from transcoder.kafka.producer.accumulator import RecordAccumulator
from transcoder.kafka.producer.batches import Batch, Partition
from transcoder.kafka.producer.errors import TIMED_OUT, ProduceError
from transcoder.kafka.producer.guarantee import Admission
from transcoder.kafka.producer.reports import DeliveryReports
from transcoder.kafka.producer.sequences import ProducerSequences
from transcoder.kafka.producer.transaction_requests import TransactionRequests, Transactions
from transcoder.kafka.producer.transaction_state import TransactionManager, TxnEvent, TxnState
from transcoder.kafka.protocol import RawClient

T = TypeVar("T")


def _log() -> Any:
    return structlog.get_logger("transcoder.batchproducer")  # looked up at use: the configuration of then


class TransactionSession:
    """One transactional id's transactions, as one batch producer lives them."""

    def __init__(self, requests: TransactionRequests, coordinator: RawClient, *, lock: threading.Lock,
                 sequences: ProducerSequences, accumulator: RecordAccumulator, reports: DeliveryReports) -> None:
        self.requests = requests
        #: the coordinators' connection (apart from the Produce requests': a throttled one must not hold a commit)
        self.coordinator = coordinator
        self.state = TransactionManager(requests.transactions.transactional_id)
        self._lock, self._seq, self._acc, self._reports = lock, sequences, accumulator, reports

    @property
    def transactions(self) -> Transactions:
        """The transactional id, its time-out and its consumer group."""
        return self.requests.transactions

    @property
    def client_id(self) -> str:
        return self.requests.client_id

    @property
    def doomed(self) -> bool:
        """Whether the open transaction cannot commit any more (the caller aborts it)."""
        return self.state.failed

    # ------------------------------------------------------------------ the caller's calls
    def init(self, timeout: float, *, own: bool) -> None:
        """InitProducerId for the transactional id: a new epoch, sequences from 0. `own`: with this producer's
        id and epoch (KIP-588), refused with PRODUCER_FENCED when another instance holds the id now."""
        pid, epoch = (self._seq.producer_id, self._seq.epoch) if own else (-1, -1)
        with self._lock:
            self.state.transition(TxnEvent.INIT)
        pid, epoch = self._call(self.requests.init_producer_id, self.coordinator, pid, epoch,
                                time.monotonic() + timeout)
        with self._lock:
            self._seq.renew(pid, epoch)
            self.state.initialized()
        _log().info("producer_id", client_id=self.client_id, producer_id=pid, epoch=epoch,
                    transactional_id=self.transactions.transactional_id)

    def begin(self) -> None:
        """A transaction begins with its first batch (the sender adds its partition): nothing to ask here."""
        self._move(TxnEvent.BEGIN)

    def send_offsets(self, offsets: Sequence[Any], group_metadata: Any, timeout: float) -> None:
        """Commit the consumer group's `offsets` (TopicPartitions) with the open transaction, as the group's
        `group_metadata` member (KIP-447; None: no member). GroupMetadataError when it is not librdkafka's."""
        group_id = self.transactions.group_id
        member = group_member(group_metadata) if group_metadata is not None else None  # None: no member (tests)
        if member is not None and member.is_member and member.group_id != group_id:
            raise GroupMetadataError(f"producer {self.client_id}: offsets of group {member.group_id} offered to a "
                                     f"transaction of group {group_id}")
        with self._lock:
            self._raise_failed()
            self.state.check(TxnEvent.ADD)  # the offsets are added once the coordinator answered
        commits = {(o.topic, o.partition): o.offset for o in offsets}

        def added() -> None:
            with self._lock:
                self.state.added(offsets=True)

        self._call(self.requests.add_offsets, self.coordinator, self._seq.producer_id, self._seq.epoch, commits,
                   time.monotonic() + timeout, added, member)

    def commit(self, left: int, limit: float, deadline: float) -> None:
        """EndTxn (commit), once every batch is delivered (`left`: the records not delivered within `limit`
        seconds, which make it abortable)."""
        with self._lock:
            self._raise_failed()
            partitions = sorted(self.state.partitions)
        if left:
            where = ", ".join(f"{t} [{p}]" for t, p in partitions[:8]) + (
                f" and {len(partitions) - 8} more" if len(partitions) > 8 else "")
            raise ProduceError(TIMED_OUT, f"producer {self.client_id}: {left} records of the transaction "
                               f"({where or 'no partition added yet'}) not delivered within {limit:g} s",
                               txn_requires_abort=True)
        self._end(True, deadline)

    def abort(self, deadline: float) -> None:
        """Drop what the open transaction holds (queued, or waiting to be sent again; reports not yet served),
        abort it (EndTxn) and bump the epoch (KIP-588), so no batch of it can ever land later."""
        with self._lock:
            if self.state.state is TxnState.FATAL_ERROR:
                raise self.state.error
            self.state.transition(TxnEvent.ABORT)
            self._acc.purge_holding_lock()
            self._reports.clear_holding_lock()
        try:
            self._end(False, deadline)
        except ProduceError as exc:
            if not exc.txn_requires_abort:
                raise
            # fenced, or the coordinator aborted it already (transaction.timeout.ms): the epoch bump below says
        self.init(max(1.0, deadline - time.monotonic()), own=True)

    def _end(self, commit: bool, deadline: float) -> None:
        """EndTxn, when the transaction holds anything (a commit: after COMMIT, an abort: in ABORTING); the next
        one begins empty."""
        if commit:
            self._move(TxnEvent.COMMIT)
        if self.state.holds_anything:
            self._call(self.requests.end, self.coordinator, self._seq.producer_id, self._seq.epoch, commit, deadline)
        with self._lock:
            self.state.ended()

    def _move(self, event: TxnEvent) -> None:
        """The caller's move of the transaction: its ProduceError when it failed, else `event`."""
        with self._lock:
            self._raise_failed()
            self.state.transition(event)

    def _raise_failed(self) -> None:
        """Under the lock: the transaction's ProduceError, when it failed (abortable, or fatal)."""
        if self.state.failed:
            raise self.state.error

    def _call(self, request: Callable[..., T], *args: Any) -> T:
        """A transaction request of the caller's: a fatal refusal stops the producer (every later call raises it)."""
        try:
            return request(*args)
        except ProduceError as exc:
            if exc.fatal:
                self.fail(exc)
            raise

    # ------------------------------------------------------------------ the sender's calls (guarantee.Guarantee)
    @property
    def produce_fields(self) -> dict[str, str]:
        """Each Produce request carries the transactional id."""
        return {"transactional_id": self.transactions.transactional_id}

    def admit(self, batches: Mapping[Partition, Batch]) -> Admission:
        """A round's batches: lost when the transaction failed (nothing more of it is sent); else the partitions
        not in the transaction yet are added first (those not added wait for the next round)."""
        if self.state.failed:
            self.drop(list(batches.values()), self.state.error)
            return Admission(lost=True)
        new = {tp for tp in batches if not self.holds(tp)}
        return Admission(busy=self.add_partitions(new) if new else False)

    def holds(self, tp: Partition) -> bool:
        """Whether `tp` was added to the open transaction."""
        return tp in self.state.partitions

    def abandon(self, batches: Sequence[Batch], error: ProduceError) -> bool:
        """Nothing is sent again outside the transaction: the batches are dropped, the transaction doomed."""
        self.drop(batches, error)
        return True

    def add_partitions(self, tps: set[Partition]) -> bool:
        """Add partitions to the open transaction before their first batch; True when the coordinator was busy.
        Those not added yet are sent next round; a refusal dooms the transaction (or, fatal, stops the producer)."""
        answer = self.requests.add_partitions(self.coordinator, self._seq.producer_id, self._seq.epoch, tps)
        for refused in answer.refused:
            (self.fail if refused.fatal else self.doom)(refused)
        with self._lock:
            self.state.added(answer.added)
        return answer.busy

    def drop(self, batches: Sequence[Batch], err: ProduceError) -> None:
        """Batches the open transaction cannot have; it is doomed (the caller aborts it and reads their records
        again). They get no report: nothing of theirs is committed."""
        self._acc.discard(batches)
        self.doom(err)

    def doom(self, err: ProduceError) -> None:
        """The open transaction cannot commit (the caller sees it at its next commit, flush or poll)."""
        with self._lock:
            if self.state.doom(err):
                _log().warning("transaction_abortable", client_id=self.client_id, error=str(err))
        self._reports.wake()

    def fail(self, err: ProduceError) -> None:
        """Refused for good: the producer stops (every later transaction call raises `err`)."""
        with self._lock:
            self.state.fail(err)
            _log().warning("transaction_failed", client_id=self.client_id, error=str(err))
        self._reports.wake()

