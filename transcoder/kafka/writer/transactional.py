"""exactly-once: what a transactional sink does whichever path feeds it (`TransactionalFront`). The lane's one
destination is written by a transactional producer made by `begin_transactions`, with the transactional id of the
partitions assigned; the offset map is written in its transactions. Its calls are WriterTransactions'; what a
transaction holds (the records' ledger entries, failures, open batches, map entries) is the sink's: delivered before
a commit, forgotten after an abort. The two sinks (kafka.writer.records, kafka.writer.record_sets) say how their
producer is made, retired, abandoned, and what an abort drops first."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from transcoder.errors import TranscoderError
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.writer.parts import SinkFront, SinkParts
from transcoder.kafka.writer.transactions import WriterTransactions
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target

P = TypeVar("P", bound="Producer | BatchProducer")


class TransactionalFront(SinkFront, ABC, Generic[P]):
    """The transactions of one lane's one destination (`target`), through producers of kind P."""

    def __init__(self, parts: SinkParts, target: Target, transactions: WriterTransactions) -> None:
        super().__init__(parts)
        self.target = target
        #: its transactional calls, and their state (the transactional id, the retries logged)
        self.transactions = transactions
        #: the transactional producer of the partitions assigned; None before the first assignment
        self.producer: P | None = None
        self._group_id = ""  # the group whose offsets the transactions commit (begin_transactions)

    # ------------------------------------------------------------------ what each path says
    @abstractmethod
    def _make(self, transactional_id: str, group_id: str) -> P:
        """A new transactional producer of `transactional_id` (its transactions are not initialised yet)."""

    @abstractmethod
    def _route(self, producer: P) -> None:
        """The destination's records go to `producer` from now on."""

    @abstractmethod
    def _unroute(self) -> None:
        """The destination's records go nowhere (and what waited for the old producer is dropped) until `_route`."""

    @abstractmethod
    def _retire(self, producer: P, timeout: float) -> None:
        """The previous producer, which committed or aborted, handing over to a new one."""

    @abstractmethod
    def _before_abort(self, producer: P, timeout: float) -> None:
        """What goes (or is dropped) before the open transaction is aborted."""

    @abstractmethod
    def _next_after_abort(self, producer: P, timeout: float) -> None:
        """Begin the transaction after an abort of `producer`'s, in a new epoch of the transactional id: a request of
        the aborted transaction that timed out here but is still on its way to the broker must never land in the
        next one (as KIP-890's epoch bump per transaction ensures, for the clients that have it)."""

    @abstractmethod
    def _abandon(self, producer: P) -> None:
        """A producer stuck in a call (TransactionStuck): its records purged, their reports served."""

    @abstractmethod
    def _own(self) -> list[BatchProducer]:
        """The producers transcoder runs itself: their statistics asked for, closed with the sink."""

    @abstractmethod
    def tick(self, now: float, *, flush: bool = False) -> None: ...

    # ------------------------------------------------------------------ the Sink's calls
    @property
    def producers(self) -> list[P]:
        return [] if self.producer is None else [self.producer]

    @property
    def transactional_id(self) -> str | None:
        """The transactional id of the partitions assigned (once `begin_transactions` started)."""
        return self.transactions.transactional_id

    @transactional_id.setter
    def transactional_id(self, value: str | None) -> None:
        self.transactions.transactional_id = value

    def poll(self, timeout: float) -> None:
        """Serve delivery reports (waiting up to `timeout`)."""
        if self.producer is not None:
            self._txn_call(self.producer.poll, timeout)
        self.parts.dead_letters.poll()

    def handle_failures(self) -> None:
        """As at least once; a record failed because the producer was fenced stops the lane, saying so."""
        failures = self.parts.failures
        failures.raise_fatal()
        if failures.fenced():
            raise self.transactions.fatal(None, failures.records)  # every record of the transaction failed so
        failures.handle()

    def drain(self, timeout: float) -> None:
        """Wait for every produced record's delivery report (bounded by `timeout`), failures handled."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.tick(time.monotonic(), flush=True)
        if self.producer is not None:
            self.producer.flush(left())
        self.parts.settle(left, timeout, self.handle_failures)

    def final_statistics(self) -> None:
        self.parts.final_statistics(self._own(), len(self.producers), self.poll)

    def close(self, timeout: float) -> None:
        self.parts.close(self._own(), timeout)

    # ------------------------------------------------------------------ the transactions
    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None:
        """Make the transactional producer of `transactional_id` (the lane's partitions), fence any earlier
        holder of that id (init_transactions aborts what it left open) and begin a transaction whose offsets are
        `group_id`'s. Called on every assignment; the previous producer has committed or aborted."""
        self._group_id = group_id
        if self.producer is not None:
            self._retire(self.producer, timeout)
        self.producer = None
        self._unroute()
        p = self._make(transactional_id, group_id)
        self.transactions.begin(p, transactional_id, timeout)
        self.producer = p
        self._route(p)
        self.parts.offset_map.write_through(p)

    def commit_transaction(self, offsets: list[TopicPartition], group: Any, timeout: float,
                           retrying: Callable[[str], None] | None = None) -> None:
        """Deliver what the transaction holds, add its offset map and the consumer's `offsets`, commit, and
        begin the next transaction. KafkaException when the transaction must be aborted (`abort_transaction`);
        TranscoderError when this producer is fenced or a record failed. `retrying` is told why each time a
        call is asked again (the lane says so in its readiness: it waits on Kafka, it is not stuck)."""
        p = self._current()
        self.tick(time.monotonic(), flush=True)  # the open batches belong to this transaction
        if self._txn_call(p.flush, timeout):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"records not delivered within {timeout:.0f} s",
                                            txn_requires_abort=True))
        self.handle_failures()
        self.flush_map(timeout)  # the offset map, written by the transactional producer (write_through)
        self.transactions.commit(p, offsets, group, timeout, retrying)

    def abort_transaction(self, timeout: float, retrying: Callable[[str], None] | None = None) -> None:
        """Abort the open transaction, forget what it held (its records' reports, failures and map entries:
        the caller reads them again from the last commit) and begin the next one, in a new epoch
        (`_next_after_abort`). `retrying`: as for commit_transaction."""
        p = self._current()
        self._before_abort(p, timeout)
        self.transactions.abort(p, timeout, retrying)
        self._txn_call(p.poll, 0)  # the aborted records' reports: their ledger entries are dropped below
        self._forget_transaction()
        self._next_after_abort(p, timeout)

    def replace_producer(self, timeout: float) -> None:
        """A producer stuck in a call (TransactionStuck): its records purged, what its transaction held forgotten
        (read again from the last commit), and a new producer takes its transactional id over (fencing it)."""
        self._abandon(self._current())
        self._forget_transaction()
        self.producer = None  # neither flushed nor destroyed: its call still holds it
        self.begin_transactions(self.transactions.transactional_id or "", timeout, self._group_id)

    def release_group_offsets(self, partitions: list[TopicPartition], group: Any, timeout: float,
                              known: Mapping[Partition, int] | None = None) -> str | None:
        """End the group's offset commits this producer id left pending: committed with `known`, else aborted
        (WriterTransactions.release_group_offsets). None when done, else why not."""
        return self.transactions.release_group_offsets(self._current(), partitions, group, timeout,
                                                       self.abort_transaction, self.replace_producer, known)

    def _current(self) -> P:
        if self.producer is None:
            raise TranscoderError(f"lane {self.name}: no transaction begun (nothing assigned)")
        return self.producer

    def _forget_transaction(self) -> None:
        """What an aborted transaction held: its records' reports, failures and map entries."""
        self.parts.failures.records.clear()
        self.parts.ledger.reset()
        self.parts.offset_map.discard()

    def _txn_call(self, call: Callable[[float], int], timeout: float) -> int:
        return self.transactions.call(call, timeout, self.parts.failures.records)
