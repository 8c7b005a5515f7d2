"""A lane's checkpoint: what may be committed and in which order, one variant per guarantee.

at-least-once: acknowledgements counted (ledger) -> offset map durable -> the consumer's commit of the offsets
every destination acknowledged. exactly-once: the read positions past the last commit -> the transaction delivers
its records and map, adds the offsets, commits (writer.commit_transaction); when Kafka makes it abort, it is
aborted and its partitions read again from their last commit (or never committed, when they are leaving).

The checkpoint holds where each partition's commit stands (`committed`, and exactly-once `first_read`,
`abandoned`); the lane tells it where it has read (`positions`) and how to read a partition again (`rewind`).
All of it runs on the lane's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import structlog
from confluent_kafka import KafkaException, TopicPartition

from transcoder.kafka.writer import TransactionalSink as Writer
from transcoder.kafka.writer.transactions import TransactionStuck
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.commits import (
    acknowledged_offsets,
    read_offsets,
    rewind_offset,
)
from transcoder.pipeline.partitions import Partition, show

log = structlog.get_logger("transcoder.lane")


class GroupConsumer(Protocol):
    """What a checkpoint uses of the lane's consumer (confluent_kafka.Consumer)."""

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> Any: ...

    def consumer_group_metadata(self) -> Any: ...


Positions = Callable[[list[Partition]], dict[Partition, int | None]]


class Checkpoint:
    """Commits what a lane may commit; holds each partition's last commit. The at-least-once and exactly-once
    variants differ in what they commit and how; the lane calls the same methods on either."""

    #: whether an aborted transaction reads partitions again (exactly-once only)
    rewinds = False

    def __init__(self, lane: str, writer: Writer, consumer: GroupConsumer, status: LaneStatus, timeout_s: float,
                 positions: Positions) -> None:
        self.lane = lane
        self.writer = writer
        self.ledger = writer.ledger
        self.consumer = consumer
        self.status = status
        self.timeout_s = timeout_s
        #: the lane's read positions of partitions it holds: the next offset it would hand the writer
        self.positions = positions
        #: source partition -> the offset last committed (or found committed on assignment)
        self.committed: dict[Partition, int] = {}
        #: source partition -> the group's commit as this process last knew it (committed or read back), kept when
        #: the partition goes: what a later assignment releases a lost commit marker's pending offsets with
        self.known: dict[Partition, int] = {}
        #: source partition -> when its last committed record was acknowledged (ms; lag in seconds)
        self.committed_ts: dict[Partition, int] = {}
        #: partitions nothing is committed for: a recreated topic's under on_source_loss: stop (the old topic's
        #: position is no offset of the new one)
        self.withheld: set[Partition] = set()
        #: exactly-once: per partition never committed, the first offset read (where an aborted transaction
        #: rewinds to); always empty at-least-once
        self.first_read: dict[Partition, int] = {}

    # ------------------------------------------------------------------ the lane's calls
    def begin(self, assigned: set[Partition]) -> None:
        """A new assignment (`assigned`: everything the lane holds now)."""

    def commit(self, partitions: Iterable[Partition], *, leaving: bool = False) -> None:
        """Commit what may be committed of `partitions`. `leaving`: they are being revoked or the lane stops."""
        raise NotImplementedError

    def revoke(self, partitions: list[Partition], assigned: set[Partition]) -> None:
        """Partitions are revoked: commit what may be committed before they go."""
        raise NotImplementedError

    def lost(self) -> None:
        """Partitions were lost (another member owns them now): nothing more may be committed for them."""

    def settle(self, held: Iterable[Partition] = ()) -> None:
        """The loop's, after each poll: what a rebalance callback left to do outside it (`held`: the partitions the
        lane holds now)."""

    def close(self, assigned: set[Partition], *, failed: bool) -> None:
        """The lane stops: deliver what is in flight and commit it (unless it `failed`)."""
        raise NotImplementedError

    def forget(self, partitions: Iterable[Partition]) -> None:
        """Partitions the lane no longer holds (revoked or lost)."""
        for tp in partitions:
            self.committed.pop(tp, None)

    def found(self, tp: Partition, offset: int) -> None:
        """The group's committed offset of `tp`, read on assignment."""
        self.committed[tp] = offset
        self.known[tp] = offset

    def restart(self, tp: Partition) -> None:
        """A partition read again from the start of a new topic (recreated): its old commit is no offset of it."""
        self.committed.pop(tp, None)
        self.known.pop(tp, None)
        self.first_read.pop(tp, None)

    def unstarted(self, tp: Partition) -> bool:
        """Whether the first offset read of `tp` is still to be noted (`started`)."""
        return False

    def started(self, tp: Partition, offset: int) -> None:
        """The first offset this assignment read of a partition never committed."""
        self.first_read[tp] = offset

    def rewind_offset(self, tp: Partition) -> int | None:
        """Where a partition is read again after an abort (None: not known)."""
        return rewind_offset(tp, self.committed, self.first_read)

    # ------------------------------------------------------------------ shared
    def _record(self, offsets: dict[Partition, int]) -> None:
        """Offsets committed: the last commits, when their records were acknowledged, the status."""
        for tp, off in offsets.items():
            self.committed[tp] = off
            self.known[tp] = off
            acked = [self.writer.acked_ts.get((d, tp[1])) for d in self.ledger.destinations_of.get(tp[0], ())]
            if acked and None not in acked:
                self.committed_ts[tp] = min(acked)  # type: ignore[type-var]
        self.status.committed = dict(self.committed)


def _topic_partitions(offsets: dict[Partition, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p, off) for (t, p), off in offsets.items()]


class AtLeastOnce(Checkpoint):
    """Commit order: acknowledgements counted -> offsets every destination acknowledged (the ledger) -> the offset
    map durable -> the consumer's commit. A commit that fails (a rebalance, a coordinator move) is left to the next."""

    def commit(self, partitions: Iterable[Partition], *, leaving: bool = False) -> None:
        self.writer.flush_acked()
        self.status.dead_lettered = self.writer.dead_lettered
        tps = list(partitions)
        if not tps:
            return
        offsets = acknowledged_offsets(tps, self.positions(tps), self.ledger, self.committed, self.withheld)
        if not offsets:
            return
        if not self.writer.flush_map(min(10.0, self.timeout_s)):
            log.warning("commit_deferred", lane=self.lane, reason="offset map not acknowledged yet",
                        topic=self.writer.config.offset_map_topic)
            return
        try:
            self.consumer.commit(offsets=_topic_partitions(offsets), asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise
            # A rebalance in progress or a coordinator move: the next commit covers these offsets.
            log.warning("commit_failed", lane=self.lane, error=err.str())
            return
        self._record(offsets)

    def revoke(self, partitions: list[Partition], assigned: set[Partition]) -> None:
        self.writer.drain(self.timeout_s)
        self.commit(partitions, leaving=True)

    def close(self, assigned: set[Partition], *, failed: bool) -> None:
        if not failed:
            self.writer.drain(self.timeout_s)
        else:
            self.writer.tick(time.monotonic(), flush=True)
            for p in self.writer.producers:
                p.flush(self.timeout_s)
        self.commit(assigned, leaving=True)


class ExactlyOnce(Checkpoint):
    """Commit order: (record sets, from the loop) the transaction's batches acknowledged -> the read positions
    past the last commit -> the transaction's records and offset map
    delivered, the offsets added, the transaction committed (writer.commit_transaction) -> acknowledgements
    counted. When Kafka makes the transaction abort it is aborted; its partitions are read again from their last
    commit (`rewind`), or, when they are leaving, never committed from here (`abandoned`)."""

    rewinds = True

    def __init__(self, lane: str, writer: Writer, consumer: GroupConsumer, status: LaneStatus, timeout_s: float,
                 positions: Positions, *, group_id: str, transactional_id: Callable[[set[Partition]], str],
                 rewind: Callable[[list[Partition]], None], waiting: Callable[[str], None],
                 drained: Callable[[], bool | None] | None = None, drain_limit_s: float = 0.0) -> None:
        super().__init__(lane, writer, consumer, status, timeout_s, positions)
        self.group_id = group_id
        self._transactional_id = transactional_id
        #: record sets: whether the transaction's batches are all acknowledged (True), cannot be (False: a batch
        #: failed in it, or not within `drain_limit_s`), or not yet (None: the lane's loop turns meanwhile)
        self._drained = drained
        self.drain_limit_s = drain_limit_s
        #: reads partitions again from `rewind_offset` (the lane's fetcher or consumer)
        self._rewind = rewind
        #: told why a transaction call is asked again (the lane's readiness)
        self._waiting = waiting
        #: partitions whose read positions are past records of an aborted transaction that were not rewound (they
        #: were leaving: a revoke, the shutdown). Never committed: the next owner, or the next run, reads them again
        #: from the last commit. A commit after the abort (the revoke of close(), after the shutdown's abort) would
        #: otherwise commit those positions, and the aborted records were lost.
        self.abandoned: set[Partition] = set()
        #: the lane failed: its open transaction is aborted and nothing more is committed
        self.failed = False
        #: partitions were lost (another member owns them): the open transaction is aborted by the loop (`settle`),
        #: never inside the rebalance callback; nothing is committed before
        self.abort_due = False

    @property
    def open(self) -> bool:
        """Whether a transaction may be committed: one is open (something assigned) and the lane has not failed."""
        return bool(self.writer.producers) and not self.failed

    def begin(self, assigned: set[Partition]) -> None:
        """The transactional producer of this assignment. Its id is the lane's and the partitions': an instance
        restarted (or any other) with the same partitions fences this one's open transaction."""
        self.settle()  # lost and assigned again in one poll: the lost transaction ends first
        tid = self._transactional_id(assigned)
        self.writer.begin_transactions(tid, self.timeout_s, self.group_id)
        self.first_read.clear()
        log.info("transactions_begun", lane=self.lane, transactional_id=tid, partitions=show(sorted(assigned)))

    def commit(self, partitions: Iterable[Partition], *, leaving: bool = False) -> None:
        if not self.open:
            return  # nothing assigned yet, or the lane failed: its open transaction is aborted
        tps = list(partitions)
        if self.abort_due:  # a lost transaction: aborted, and what it held of `partitions` read again
            if leaving:
                self.abandoned.update(tps)
            self.settle(() if leaving else tps)
            return
        if self._drained is not None and not leaving:  # leaving: commit_transaction delivers them, waiting
            drained = self._drained()
            if drained is None:
                return  # the loop goes on (polling, readiness) and commits once the batches are acknowledged
            if not drained:
                self.abort(tps, "a batch failed in it" if self.writer.transaction_doomed() else
                           f"its batches were not acknowledged within {self.drain_limit_s:g} s (half of "
                           "transaction_timeout_ms)")
                return
        offsets = read_offsets(tps, self.positions(tps) if tps else {}, self.committed,
                               self.abandoned | self.withheld)
        if not offsets:
            return
        try:
            self.writer.commit_transaction(_topic_partitions(offsets), self.consumer.consumer_group_metadata(),
                                           self.timeout_s, retrying=self._waiting)
        except KafkaException as exc:
            self.abort(tps, exc.args[0].str(), leaving=leaving)
            return
        except TransactionStuck as exc:
            self.replace(tps, str(exc), leaving=leaving)
            return
        self.writer.flush_acked()
        for tp in offsets:
            self.first_read.pop(tp, None)
        self._record(offsets)

    def abort(self, partitions: list[Partition], why: str, *, leaving: bool = False) -> None:
        """Abort the open transaction (Kafka's reason, or the lane's) and read `partitions` again from the last
        commit; when they are `leaving`, nothing read of them since the last commit is ever committed."""
        log.warning("transaction_aborted", lane=self.lane, error=why, transactional_id=self.writer.transactional_id,
                    note="its records are read and written again from the last commit")
        if leaving:
            self.abandoned.update(partitions)
        self.writer.abort_transaction(self.timeout_s, retrying=self._waiting)
        if not leaving:
            self._rewind(partitions)

    def replace(self, partitions: list[Partition], why: str, *, leaving: bool = False) -> None:
        """The transactional producer is stuck in a call (TransactionStuck): a new one takes its transactional id
        over (its open transaction is aborted) and `partitions` are read again from the last commit, as `abort`."""
        log.warning("transactional_producer_replaced", lane=self.lane, error=why,
                    transactional_id=self.writer.transactional_id,
                    note="a new producer took the transactional id over; its records are read and written again "
                         "from the last commit")
        if leaving:
            self.abandoned.update(partitions)
        self.writer.replace_producer(self.timeout_s)
        if not leaving:
            self._rewind(partitions)

    def revoke(self, partitions: list[Partition], assigned: set[Partition]) -> None:
        self.commit(assigned, leaving=True)  # eager rebalancing: the whole assignment goes

    def lost(self) -> None:
        """Another member owns them now: what the open transaction holds must never be committed. Only noted here
        (this runs inside the consumer's rebalance callback, where a network wait holds the group's poll: seen 20-40 s
        there, after `Not coordinator`); the loop aborts it (`settle`), and nothing is committed before."""
        if self.writer.producers:
            self.abort_due = True

    def settle(self, held: Iterable[Partition] = ()) -> None:
        """The loop's, after each poll: the abort a lost assignment left due. Bounded as every abort is (the
        transaction's time-out and 30 s); the readiness says what it waits on meanwhile. Partitions still `held`
        (none under the eager protocol exactly-once uses: a loss is the whole assignment) are read again from their
        last commit, as after any abort."""
        if not self.abort_due:
            return
        self.abort_due = False
        if self.writer.producers:
            log.warning("transaction_aborted", lane=self.lane, error="partitions lost to another member of the group",
                        transactional_id=self.writer.transactional_id,
                        note="its records are never committed; the new owner copies them")
            self.writer.abort_transaction(self.timeout_s, retrying=self._waiting)
        tps = list(held)
        if tps:
            self._rewind(tps)

    def close(self, assigned: set[Partition], *, failed: bool) -> None:
        if failed:
            self.failed = True  # nothing more is committed, not even by the revoke of close()
            self.abort_due = False
            if self.writer.producers:
                self.writer.abort_transaction(self.timeout_s)
        else:
            self.commit(assigned, leaving=True)

    def forget(self, partitions: Iterable[Partition]) -> None:
        tps = list(partitions)
        super().forget(tps)
        self.abandoned.difference_update(tps)

    def unstarted(self, tp: Partition) -> bool:
        return tp not in self.committed and tp not in self.first_read
