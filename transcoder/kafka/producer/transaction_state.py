"""Where the batch producer's transaction stands: a state, the events that move it, and the one table of legal moves.

Pure: no I/O, no lock, no clock (the batch producer calls it under its own lock). Shaped after aiokafka's
`producer/transaction_manager.py`: an illegal move raises TransactionStateError naming the state and the event,
instead of a flag quietly set twice. The error a failed transaction carries is kept as the caller's object (the
batch producer keeps confluent_kafka's KafkaError, which its callers read), never read here.

The states, as the batch producer lives them:

- UNINITIALIZED: built, no producer id yet.
- INITIALIZING: InitProducerId asked (the first, or the epoch bump after every abort, KIP-588).
- READY: an empty transaction is open (a transaction begins with its first batch or its offsets).
- IN_TRANSACTION: partitions or the group's offsets have been added; EndTxn has something to end.
- COMMITTING: EndTxn (commit) asked; asked again after a retriable failure.
- ABORTING: the abort purged what was held; EndTxn (abort) asked, then the epoch bumped (INIT).
- ABORTABLE_ERROR: a batch or request the transaction needed failed; it cannot commit, the caller aborts it.
- FATAL_ERROR: refused for good (fenced at the epoch bump, not authorized): the producer stops, every later call
  of the caller's raises the error again.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from transcoder.errors import TranscoderError


class TxnState(Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


class TxnEvent(Enum):
    INIT = "init"  # InitProducerId asked: the first, or the epoch bump that ends an abort
    INITIALIZED = "initialized"  # a producer id and epoch taken: an empty transaction is open
    BEGIN = "begin"  # the caller begins a transaction (the open one is empty: nothing to ask)
    ADD = "add"  # a partition (AddPartitionsToTxn) or the group's offsets (AddOffsetsToTxn) added
    COMMIT = "commit"  # EndTxn (commit) asked
    ABORT = "abort"  # the caller aborts: what is held is purged, EndTxn (abort) asked
    END = "end"  # EndTxn answered, or there was nothing to end
    DOOM = "doom"  # something the transaction needs failed: it can only be aborted
    FAIL = "fail"  # refused for good: the producer stops


S, E = TxnState, TxnEvent

#: Every legal (state, event) and the state it leads to; any pair not here is a bug of the caller's.
TRANSITIONS: dict[tuple[TxnState, TxnEvent], TxnState] = {
    (S.UNINITIALIZED, E.INIT): S.INITIALIZING,
    (S.INITIALIZING, E.INIT): S.INITIALIZING,  # asked again: the last InitProducerId failed retriably
    (S.INITIALIZING, E.INITIALIZED): S.READY,
    (S.INITIALIZING, E.ABORT): S.ABORTING,  # an abort asked again after its epoch bump failed retriably
    (S.INITIALIZING, E.DOOM): S.INITIALIZING,  # a batch of the aborted transaction: gone with the old epoch
    (S.INITIALIZING, E.FAIL): S.FATAL_ERROR,
    (S.READY, E.BEGIN): S.READY,
    (S.READY, E.ADD): S.IN_TRANSACTION,
    (S.READY, E.COMMIT): S.COMMITTING,  # nothing to end: the commit is a no-op
    (S.READY, E.ABORT): S.ABORTING,
    (S.READY, E.DOOM): S.ABORTABLE_ERROR,
    (S.READY, E.FAIL): S.FATAL_ERROR,
    (S.IN_TRANSACTION, E.ADD): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, E.COMMIT): S.COMMITTING,
    (S.IN_TRANSACTION, E.ABORT): S.ABORTING,
    (S.IN_TRANSACTION, E.DOOM): S.ABORTABLE_ERROR,
    (S.IN_TRANSACTION, E.FAIL): S.FATAL_ERROR,
    (S.COMMITTING, E.COMMIT): S.COMMITTING,  # asked again after a retriable failure
    (S.COMMITTING, E.END): S.READY,
    (S.COMMITTING, E.ABORT): S.ABORTING,  # EndTxn refused: the caller aborts
    (S.COMMITTING, E.DOOM): S.ABORTABLE_ERROR,
    (S.COMMITTING, E.FAIL): S.FATAL_ERROR,
    (S.ABORTING, E.ADD): S.ABORTING,  # the round in flight when the abort began added it: EndTxn ends it too
    (S.ABORTING, E.ABORT): S.ABORTING,  # asked again after a retriable failure
    (S.ABORTING, E.END): S.ABORTING,  # the abort goes on with the epoch bump
    (S.ABORTING, E.INIT): S.INITIALIZING,
    (S.ABORTING, E.DOOM): S.ABORTING,  # the round in flight failed: it is being aborted already
    (S.ABORTING, E.FAIL): S.FATAL_ERROR,
    (S.ABORTABLE_ERROR, E.ADD): S.ABORTABLE_ERROR,  # added with the partition that failed: EndTxn ends it too
    (S.ABORTABLE_ERROR, E.ABORT): S.ABORTING,
    (S.ABORTABLE_ERROR, E.DOOM): S.ABORTABLE_ERROR,  # the first reason is kept
    (S.ABORTABLE_ERROR, E.FAIL): S.FATAL_ERROR,
    (S.FATAL_ERROR, E.ADD): S.FATAL_ERROR,  # the sender's round in flight: nothing follows
    (S.FATAL_ERROR, E.DOOM): S.FATAL_ERROR,
    (S.FATAL_ERROR, E.FAIL): S.FATAL_ERROR,
}

del S, E


class TransactionStateError(TranscoderError):
    """A transaction call in a state that does not allow it: a bug of the caller's, never Kafka's doing."""


class TransactionManager:
    """One transactional producer's transaction: its state, what EndTxn must end, and why it failed."""

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = TxnState.UNINITIALIZED
        #: the partitions added to the open transaction (AddPartitionsToTxn answered)
        self.partitions: set[tuple[str, int]] = set()
        #: whether the group's offsets were added (AddOffsetsToTxn answered)
        self.offsets = False
        #: why the transaction cannot commit (ABORTABLE_ERROR) or the producer stopped (FATAL_ERROR); else None
        self.error: Any = None

    def check(self, event: TxnEvent) -> TxnState:
        """The state `event` leads to, without moving; TransactionStateError naming the state and event when the
        table has no such move."""
        to = TRANSITIONS.get((self.state, event))
        if to is None:
            raise TransactionStateError(f"transactional.id {self.transactional_id}: illegal transition: "
                                        f"{event.value} in state {self.state.value}")
        return to

    def transition(self, event: TxnEvent) -> TxnState:
        """Move by `event` (TransactionStateError when illegal, see `check`)."""
        self.state = self.check(event)
        return self.state

    @property
    def failed(self) -> bool:
        """Whether the open transaction can no longer commit (ABORTABLE_ERROR or FATAL_ERROR)."""
        return self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    @property
    def holds_anything(self) -> bool:
        """Whether EndTxn has something to end (partitions or offsets were added)."""
        return bool(self.partitions) or self.offsets

    def initialized(self) -> None:
        """A producer id and epoch taken: an empty transaction, no error."""
        self.transition(TxnEvent.INITIALIZED)
        self._empty()

    def added(self, partitions: Iterable[tuple[str, int]] = (), *, offsets: bool = False) -> None:
        """Partitions (or the group's offsets) now in the transaction; nothing added, no move."""
        partitions = set(partitions)
        if not partitions and not offsets:
            return
        self.transition(TxnEvent.ADD)
        self.partitions |= partitions
        self.offsets = self.offsets or offsets

    def ended(self) -> None:
        """EndTxn answered (or nothing to end): the next transaction begins empty."""
        self.transition(TxnEvent.END)
        self._empty()

    def doom(self, error: Any) -> bool:
        """The transaction cannot commit because of `error`; True when this is its first reason."""
        first = self.state is not TxnState.ABORTABLE_ERROR and self.state is not TxnState.FATAL_ERROR
        to = self.transition(TxnEvent.DOOM)
        if to is TxnState.ABORTABLE_ERROR and first:
            self.error = error
            return True
        return False

    def fail(self, error: Any) -> None:
        """Refused for good: `error` is what every later call raises."""
        first = self.state is not TxnState.FATAL_ERROR
        self.transition(TxnEvent.FAIL)
        if first:
            self.error = error

    def _empty(self) -> None:
        self.partitions.clear()
        self.offsets = False
        self.error = None
