"""A lane's checkpoint: what may be committed and in which order, one variant per guarantee.

at-least-once: acknowledgements counted (ledger) -> offset map durable -> the consumer's commit of the offsets
every destination acknowledged. exactly-once: the read positions past the last commit -> the transaction delivers
its records and map, adds the offsets, commits (writer.commit_transaction); when Kafka makes it abort, it is
aborted and its partitions read again from their last commit (or never committed, when they are leaving).

The checkpoint owns the lane's partition book (where each partition stands: read to, committed, withheld,
abandoned); the copy path pushes its read positions into the book, the checkpoint commits from it. exactly-once
also owns the drain before a commit (record sets) and the release of the group offsets a lost commit marker left
pending: each guarantee has one commit road. All of it runs on the lane's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Literal, Protocol, overload

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from transcoder.errors import TranscoderError
from transcoder.kafka.group_member import unfenced
from transcoder.kafka.writer import Sink, TransactionalSink
from transcoder.kafka.writer.transactions import TransactionStuck
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.commits import acknowledged_offsets, read_offsets, release_offsets
from transcoder.pipeline.partition_book import PartitionBook
from transcoder.pipeline.partitions import Partition, show

log = structlog.get_logger("transcoder.lane")

#: One read of the group's committed offsets on assignment waits this long; while they cannot be read (Kafka
#: unreachable, or unstable: a transaction still open) the lane says so (readiness) and asks again.
COMMITTED_READ_S = 10.0


class GroupConsumer(Protocol):
    """What a checkpoint uses of the lane's consumer (confluent_kafka.Consumer)."""

    @overload
    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[True]) -> None: ...
    @overload
    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[False]) -> Any: ...

    def consumer_group_metadata(self) -> Any: ...

    def committed(self, partitions: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]: ...


class Readiness(Protocol):
    """What a checkpoint tells the lane's readiness (service.readiness.Readiness)."""

    def cannot_copy(self, why: str, since: float) -> None: ...
    def waiting_on_kafka(self, why: str) -> None: ...


class Drain(Protocol):
    """What a transaction waits for before it commits (transaction_drain: TransactionDrain or NoDrain)."""

    limit_s: float

    @property
    def draining(self) -> bool: ...
    def step(self, now: float) -> bool | None: ...
    def forget(self) -> None: ...


class Checkpoint:
    """Commits what a lane may commit, from its partition book. The at-least-once and exactly-once variants differ
    in what they commit and how; the lane calls the same methods on either."""

    def __init__(self, lane: str, writer: Sink, consumer: GroupConsumer, status: LaneStatus, timeout_s: float,
                 book: PartitionBook, readiness: Readiness) -> None:
        self.lane = lane
        self.writer = writer
        self.ledger = writer.ledger
        self.consumer = consumer
        self.status = status
        self.timeout_s = timeout_s
        #: where each partition of the assignment stands (the copy path pushes its read positions into it)
        self.book = book
        self.readiness = readiness

    @property
    def committed(self) -> Mapping[Partition, int]:
        """Source partition -> the offset last committed (or found committed on assignment)."""
        return self.book.committed

    @property
    def committed_ts(self) -> Mapping[Partition, int]:
        return self.book.committed_ts

    @property
    def draining(self) -> bool:
        """A transaction waits for its batches before it commits (exactly-once on record sets)."""
        return False

    # ------------------------------------------------------------------ the lane's calls
    def begin(self, assigned: AbstractSet[Partition]) -> None:
        """A new assignment (`assigned`: everything the lane holds now)."""

    def commit(self, partitions: Iterable[Partition], *, leaving: bool = False) -> None:
        """Commit what may be committed of `partitions`. `leaving`: they are being revoked or the lane stops."""
        raise NotImplementedError

    def revoke(self, partitions: list[Partition], assigned: AbstractSet[Partition]) -> None:
        """Partitions are revoked: commit what may be committed before they go."""
        raise NotImplementedError

    def lost(self) -> None:
        """Partitions were lost (another member owns them now): nothing more may be committed for them."""

    def answered(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The consumer's answer to a commit (its `on_commit`, served by its poll on the lane's thread)."""

    def settle(self, held: Iterable[Partition] = ()) -> None:
        """The loop's, after each poll: what a rebalance callback left to do outside it (`held`: the partitions the
        lane holds now)."""

    def close(self, assigned: AbstractSet[Partition], *, failed: bool) -> None:
        """The lane stops: deliver what is in flight and commit it (unless it `failed`)."""
        raise NotImplementedError

    def forget(self, partitions: Iterable[Partition]) -> None:
        """Partitions the lane no longer holds (revoked or lost)."""
        self.book.release(partitions)

    def found(self, tp: Partition, offset: int) -> None:
        """The group's committed offset of `tp`, read on assignment."""
        self.book.found(tp, offset)

    def restart(self, tp: Partition) -> None:
        """A partition read again from the start of a new topic (recreated): what was read of the old topic is
        delivered, and its old commit is no offset of the new one."""
        self.ledger.forget([tp])
        self.book.restart(tp)

    def read_committed(self, consumer: GroupConsumer, partitions: list[TopicPartition],
                       stopping: Callable[[], bool], group_id: str) -> list[TopicPartition]:
        """The group's committed offsets of `partitions`, asked again while they cannot be read and the lane runs
        (not `stopping`); after the first read that fails, what this guarantee leaves pending is released
        (`_release`)."""
        parts = show((p.topic, p.partition) for p in partitions)
        released = False
        failed_releases = 0
        since = time.monotonic()
        while True:
            try:
                return consumer.committed(partitions, timeout=COMMITTED_READ_S)
            except KafkaException as exc:
                err = exc.args[0]
                if not (err.retriable() or err.code() == KafkaError._TIMED_OUT) or stopping():
                    raise TranscoderError(f"lane {self.lane}: could not read group {group_id}'s committed offsets "
                                          f"of {parts}: {err.str()}") from None
                why = err.str()
            self.readiness.cannot_copy(f"group {group_id}'s committed offsets of {parts} unreadable: {why}", since)
            if released:
                continue
            why_not = self._release(partitions)
            if why_not is not None:  # Kafka unreachable: the reads go on, and it is tried again after each
                failed_releases += 1
                if failed_releases == 1:  # once, as lane_cannot_copy is
                    log.warning("group_offsets_not_released", lane=self.lane, partitions=parts, error=why_not,
                                note="tried again after each read that fails")
            else:
                released = True

    def _release(self, partitions: list[TopicPartition]) -> str | None:
        """What this guarantee leaves pending in the group once a read of its offsets failed: nothing
        at-least-once. Returns why it could not be released (None: released)."""
        return None

    # ------------------------------------------------------------------ shared
    def _acked_ts(self, offsets: dict[Partition, int]) -> dict[Partition, int | None]:
        """When the last record below each offset was acknowledged by every destination (None: not known)."""
        acked_ts: dict[Partition, int | None] = {}
        for tp in offsets:
            acked = [self.writer.acked_ts.get((d, tp[1])) for d in self.ledger.destinations_of.get(tp[0], ())]
            acked_ts[tp] = min(a for a in acked if a is not None) if acked and None not in acked else None
        return acked_ts

    def _record(self, offsets: dict[Partition, int], acked_ts: dict[Partition, int | None] | None = None) -> None:
        """Offsets committed: the last commits, when their records were acknowledged, the status."""
        self.book.committed_at(offsets, self._acked_ts(offsets) if acked_ts is None else acked_ts)
        self.status.committed = dict(self.book.committed)


def _topic_partitions(offsets: dict[Partition, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p, off) for (t, p), off in offsets.items()]


class AtLeastOnce(Checkpoint):
    """Commit order: acknowledgements counted -> offsets every destination acknowledged (the ledger) -> the offset
    map durable -> the consumer's commit. A commit that fails (a rebalance, a coordinator move) is left to the next.

    The loop's commits are asynchronous, one at a time: the answer comes through the consumer's poll (`answered`)
    and the loop keeps turning meanwhile. A synchronous commit stood in the loop for as long as the group
    coordinator was away (a broker cut off for 25 s: 25 s of a loop that checked nothing, /readyz 200 throughout).
    Partitions leaving (revoked, or the lane stopping) are committed synchronously: their commit must land first."""

    def __init__(self, lane: str, writer: Sink, consumer: GroupConsumer, status: LaneStatus, timeout_s: float,
                 book: PartitionBook, readiness: Readiness) -> None:
        super().__init__(lane, writer, consumer, status, timeout_s, book, readiness)
        #: the commit whose answer is awaited: (its offsets, when their records were acknowledged, clock() asked)
        self._asked: tuple[dict[Partition, int], dict[Partition, int | None], float] | None = None
        #: a fatal answer to an asynchronous commit, raised by the next commit
        self._fatal: KafkaError | None = None

    def commit(self, partitions: Iterable[Partition], *, leaving: bool = False) -> None:
        if self._fatal is not None:
            raise KafkaException(self._fatal)
        # 1. acknowledgements counted
        self.writer.flush_acked()
        self.status.dead_lettered = self.writer.dead_lettered
        tps = list(partitions)
        if not tps:
            return
        if not leaving and self._asked is not None and time.monotonic() - self._asked[2] < self.timeout_s:
            return  # the last commit's answer first (the consumer's poll serves it); then what is new
        # 2. the offsets every destination acknowledged, from the book's read positions
        offsets = acknowledged_offsets(tps, self.book.read_positions(tps), self.ledger, self.book.committed,
                                       self.book.withheld)
        if not offsets:
            # nothing to commit: the lane's health and figures still go to the offset map (every 10 s), without
            # waiting for them
            self.writer.flush_map(0)
            return
        # 3. the offset map durable
        if not self.writer.flush_map(min(10.0, self.timeout_s)):
            log.warning("commit_deferred", lane=self.lane, reason="offset map not acknowledged yet",
                        topic=self.writer.config.offset_map_topic)
            return
        acked_ts = self._acked_ts(offsets)
        try:  # 4. the consumer's commit, into the book (the loop's: when its answer comes)
            if leaving:
                self.consumer.commit(offsets=_topic_partitions(offsets), asynchronous=False)
            else:
                self.consumer.commit(offsets=_topic_partitions(offsets), asynchronous=True)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise
            # A rebalance in progress or a coordinator move: the next commit covers these offsets.
            log.warning("commit_failed", lane=self.lane, error=err.str(), partitions=show(sorted(offsets)))
            return
        if leaving:
            self._record(offsets, acked_ts)
        else:
            self._asked = (offsets, acked_ts, time.monotonic())

    def answered(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The answer to the loop's commit: what was committed goes into the book. Answers to other commits (those
        of partitions leaving, made synchronously; one given up on after `timeout_s`) are not this one's."""
        answer = {(p.topic, p.partition): p.offset for p in partitions}
        if self._asked is None or answer != self._asked[0]:
            return
        offsets, acked_ts, _ = self._asked
        self._asked = None
        failed = {(p.topic, p.partition): p.error for p in partitions if p.error is not None}
        if err is not None or failed:
            why = err if err is not None else next(iter(failed.values()))
            if why.fatal():
                self._fatal = why
            # A rebalance in progress or a coordinator move: the next commit covers these offsets.
            log.warning("commit_failed", lane=self.lane, error=why.str(),
                        partitions=show(sorted(failed or offsets)))
            if err is not None:
                return
        held = self.book.assigned
        self._record({tp: off for tp, off in offsets.items() if tp in held and tp not in failed},
                     {tp: ts for tp, ts in acked_ts.items() if tp in held and tp not in failed})

    def forget(self, partitions: Iterable[Partition]) -> None:
        self._asked = None  # what it asked of them is not the book's any more; the next commit asks again
        super().forget(partitions)

    def revoke(self, partitions: list[Partition], assigned: AbstractSet[Partition]) -> None:
        self.writer.drain(self.timeout_s)
        self.commit(partitions, leaving=True)

    def close(self, assigned: AbstractSet[Partition], *, failed: bool) -> None:
        if not failed:
            self.writer.drain(self.timeout_s)
        else:
            self.writer.tick(time.monotonic(), flush=True)
            for p in self.writer.producers:
                p.flush(self.timeout_s)
        self.commit(assigned, leaving=True)

    def restart(self, tp: Partition) -> None:
        self.writer.drain(self.timeout_s)  # what was read of the old topic is delivered first
        self._asked = None  # an answer about the old topic is no offset of the new one
        super().restart(tp)


class ExactlyOnce(Checkpoint):
    """Commit order: (record sets, from the loop) the transaction's batches acknowledged -> the read positions
    past the last commit -> the transaction's records and offset map
    delivered, the offsets added, the transaction committed (writer.commit_transaction) -> acknowledgements
    counted. When Kafka makes the transaction abort it is aborted; its partitions are read again from their last
    commit (`rewind`), or, when they are leaving, never committed from here (`abandoned`)."""

    writer: TransactionalSink

    def __init__(self, lane: str, writer: TransactionalSink, consumer: GroupConsumer, status: LaneStatus,
                 timeout_s: float, book: PartitionBook, readiness: Readiness, *, group_id: str,
                 transactional_id: Callable[[AbstractSet[Partition]], str],
                 rewind: Callable[[dict[Partition, int | None]], None],
                 drain: Drain) -> None:
        super().__init__(lane, writer, consumer, status, timeout_s, book, readiness)
        self.group_id = group_id
        self._transactional_id = transactional_id
        #: whether the transaction's batches are all acknowledged (True), cannot be (False: a batch failed in it, or
        #: not within its limit), or not yet (None: the lane's loop turns meanwhile); always True on records
        self.drain = drain
        #: reads partitions again from offsets (the copy path's)
        self._rewind_to = rewind
        #: the lane failed: its open transaction is aborted and nothing more is committed
        self.failed = False
        #: partitions were lost (another member owns them): the open transaction is aborted by the loop (`settle`),
        #: never inside the rebalance callback; nothing is committed before
        self.abort_due = False

    @property
    def draining(self) -> bool:
        return self.drain.draining

    def _waiting(self, why: str) -> None:
        """A transaction call asked again (the coordinator unreachable): the readiness says why."""
        self.readiness.waiting_on_kafka(why)

    def _rewind(self, tps: list[Partition]) -> None:
        """Read each partition again from its last commit (or where this assignment began reading)."""
        self._rewind_to({tp: self.book.rewind_offset(tp) for tp in tps})
        log.info("partitions_rewound", lane=self.lane, partitions=show(tps))

    @property
    def open(self) -> bool:
        """Whether a transaction may be committed: one is open (something assigned) and the lane has not failed."""
        return bool(self.writer.producers) and not self.failed

    def begin(self, assigned: AbstractSet[Partition]) -> None:
        """The transactional producer of this assignment. Its id is the lane's and the partitions': an instance
        restarted (or any other) with the same partitions fences this one's open transaction."""
        self.settle()  # lost and assigned again in one poll: the lost transaction ends first
        tid = self._transactional_id(assigned)
        self.writer.begin_transactions(tid, self.timeout_s, self.group_id)
        self.book.begin()
        log.info("transactions_begun", lane=self.lane, transactional_id=tid, partitions=show(sorted(assigned)))

    def commit(self, partitions: Iterable[Partition], *, leaving: bool = False) -> None:
        if not self.open:
            return  # nothing assigned yet, or the lane failed: its open transaction is aborted
        tps = list(partitions)
        if self.abort_due:  # a lost transaction: aborted, and what it held of `partitions` read again
            if leaving:
                self.book.abandon(tps)
            self.settle(() if leaving else tps)
            return
        if not leaving:  # 1. (record sets) the batches acknowledged; leaving: commit_transaction delivers them
            drained = self.drain.step(time.monotonic())
            if drained is None:
                return  # the loop goes on (polling, readiness) and commits once the batches are acknowledged
            if not drained:
                self.abort(tps, "a batch failed in it" if self.writer.transaction_doomed() else
                           f"its batches were not acknowledged within {self.drain.limit_s:g} s (half of "
                           "transaction_timeout_ms)")
                return
        # 2. the book's read positions past the last commit
        offsets = read_offsets(tps, self.book.read_positions(tps), self.book.committed,
                               self.book.abandoned | self.book.withheld)
        if not offsets:
            return
        metadata = self.consumer.consumer_group_metadata()
        stale = unfenced(metadata)
        if stale is not None:  # librdkafka learnt of the loss before the loop's poll (lost, then settle) did
            self.abort(tps, stale, leaving=leaving)
            return
        try:  # 3. the transaction's records and map delivered, the offsets added, the transaction committed
            self.writer.commit_transaction(_topic_partitions(offsets), metadata, self.timeout_s,
                                           retrying=self._waiting)
        except KafkaException as exc:
            self.abort(tps, exc.args[0].str(), leaving=leaving)
            return
        except TransactionStuck as exc:
            self.replace(tps, str(exc), leaving=leaving)
            return
        self.writer.flush_acked()  # 4. acknowledgements counted; the commit into the book
        self._record(offsets)

    def abort(self, partitions: list[Partition], why: str, *, leaving: bool = False) -> None:
        """Abort the open transaction (Kafka's reason, or the lane's) and read `partitions` again from the last
        commit; when they are `leaving`, nothing read of them since the last commit is ever committed."""
        log.warning("transaction_aborted", lane=self.lane, error=why, transactional_id=self.writer.transactional_id,
                    note="its records are read and written again from the last commit")
        if leaving:
            self.book.abandon(partitions)
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
            self.book.abandon(partitions)
        self.writer.replace_producer(self.timeout_s)
        if not leaving:
            self._rewind(partitions)

    def revoke(self, partitions: list[Partition], assigned: AbstractSet[Partition]) -> None:
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

    def close(self, assigned: AbstractSet[Partition], *, failed: bool) -> None:
        if failed:
            self.failed = True  # nothing more is committed, not even by the revoke of close()
            self.abort_due = False
            if self.writer.producers:
                self.writer.abort_transaction(self.timeout_s)
        else:
            self.commit(assigned, leaving=True)

    def forget(self, partitions: Iterable[Partition]) -> None:
        super().forget(partitions)
        self.drain.forget()  # the transaction waiting to commit went with them (committed or aborted)

    def _release(self, partitions: list[TopicPartition]) -> str | None:
        """A transaction's offsets left pending with no transaction left (a commit marker lost: a broker killed at
        the wrong moment) end only with a marker of this producer id: committed with the offsets this process knows
        (`release_offsets`), else aborted."""
        tps = [(p.topic, p.partition) for p in partitions]
        known = release_offsets(tps, self.book.known)
        why_not = self.writer.release_group_offsets(partitions, self.consumer.consumer_group_metadata(),
                                                    self.timeout_s, known)
        if why_not is None:
            log.warning("group_offsets_released", lane=self.lane, partitions=show(tps), how="committed" if
                        known else "aborted", offsets=known and dict(zip(show(known), known.values(), strict=True)),
                        transactional_id=self.writer.transactional_id, note="what this producer id left pending")
        return why_not
