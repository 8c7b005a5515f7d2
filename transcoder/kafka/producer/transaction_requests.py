"""The transaction requests of the batch producer's transactional id (Kafka's transaction protocol v1), each asked of
its coordinator until it is done: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn.

What an answer means is `pipeline.batching.txn_step`'s (pure); here it is asked again after a back-off while the
coordinator is busy, of the new coordinator when it moved, and refused as a ProduceError otherwise: fatal (fenced
for good, not authorized), txn_requires_abort (this transaction cannot commit), retriable (still busy at the
deadline). The raw client is passed to every call (the coordinators' connection, owned by the batch producer).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.group_member import GROUP_FENCED_CODES, GroupMember
from transcoder.kafka.producer.errors import (
    OPERATION_NOT_ATTEMPTED,
    TRANSPORT,
    NoAnswer,
    ProduceError,
    error_name,
    error_text,
    is_retriable,
)
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.retries import RETRY_BACKOFF_MAX_MS, delay_ms
from transcoder.pipeline import batching
from transcoder.pipeline.batching import TxnStep

Partition = tuple[str, int]

#: The pause between tries of a transaction request the coordinator answered "busy" (CONCURRENT_TRANSACTIONS
#: while the last transaction's markers are written, COORDINATOR_LOAD_IN_PROGRESS).
TXN_RETRY_BACKOFF_S = 0.02
_BUSY = (batching.CONCURRENT_TRANSACTIONS, batching.COORDINATOR_LOAD_IN_PROGRESS)
_GROUP, _TRANSACTION = 0, 1  # FindCoordinator's key types


@dataclass(frozen=True)
class Transactions:
    """exactly-once: the transactional id, its transactions' time-out, and the consumer group whose offsets
    they commit."""

    transactional_id: str
    group_id: str
    timeout_ms: int = 60_000


@dataclass
class AddedPartitions:
    """AddPartitionsToTxn's answer: the partitions added, whether the coordinator was busy (ask again soon), and
    the refusals that doom the transaction (abortable) or stop the producer (fatal)."""

    added: set[Partition] = field(default_factory=set)
    busy: bool = False
    refused: list[ProduceError] = field(default_factory=list)


class TransactionRequests:
    """One transactional id's requests, and where its coordinators (transaction, group) are."""

    def __init__(self, transactions: Transactions, client_id: str, failures: FailureLog, backoff_s: float) -> None:
        self.transactions, self.client_id = transactions, client_id
        self._failures, self._backoff = failures, backoff_s
        #: the coordinators' broker ids by key type, looked up when first needed and when they move
        self._coordinators: dict[int, int] = {}

    def init_producer_id(self, client: RawClient, producer_id: int, epoch: int, deadline: float) -> tuple[int, int]:
        """A new epoch for the transactional id. With this producer's own id and epoch (KIP-588, after an abort)
        PRODUCER_FENCED is final: another instance holds the id now."""
        t = self.transactions
        got: list[tuple[int, int]] = []

        def ask(node: int) -> int:
            code, new_pid, new_epoch = client.init_producer_id(
                transactional_id=t.transactional_id, transaction_timeout_ms=t.timeout_ms, producer_id=producer_id,
                producer_epoch=epoch, coordinator=node)
            got.append((new_pid, new_epoch))
            return code

        self.ask(client, "InitProducerId", ask, deadline, fenced_is_final=True)
        return got[-1]

    def add_offsets(self, client: RawClient, producer_id: int, epoch: int, offsets: Mapping[Partition, int],
                    deadline: float, added: Callable[[], None], member: GroupMember | None = None) -> None:
        """The group's `offsets` into the transaction: AddOffsetsToTxn (then `added` is called), TxnOffsetCommit.

        With the group `member` the offsets are committed for (KIP-447: its generation, member id and group
        instance id), the group coordinator refuses them from a member of an older generation (a zombie: paused
        while the group moved its partitions on): the transaction must abort (ProduceError, txn_requires_abort),
        its records never seen by read_committed readers."""
        t = self.transactions
        self.ask(client, "AddOffsetsToTxn", lambda node: client.add_offsets_to_txn(
            t.transactional_id, producer_id, epoch, t.group_id, coordinator=node), deadline)
        added()

        def commit(node: int) -> int:
            if member is None or not member.is_member:  # no member: the request's defaults (the broker checks none)
                return _first_error(client.txn_offset_commit(t.transactional_id, t.group_id, producer_id, epoch,
                                                             dict(offsets), coordinator=node))
            return _first_error(client.txn_offset_commit(
                t.transactional_id, t.group_id, producer_id, epoch, dict(offsets), coordinator=node,
                generation_id=member.generation_id, member_id=member.member_id,
                group_instance_id=member.group_instance_id))

        self.ask(client, "TxnOffsetCommit", commit, deadline, group=True, member=member)

    def end(self, client: RawClient, producer_id: int, epoch: int, commit: bool, deadline: float) -> None:
        """EndTxn: commit or abort the open transaction."""
        t = self.transactions
        self.ask(client, "EndTxn", lambda node: client.end_txn(t.transactional_id, producer_id, epoch, commit,
                                                      coordinator=node), deadline)

    def ask(self, client: RawClient, what: str, ask: Callable[[int], int], deadline: float, *, group: bool = False,
            fenced_is_final: bool = False, member: GroupMember | None = None) -> None:
        """One request asked of its coordinator until done: again after a back-off while it is busy, of the new
        one when it moved. ProduceError: fatal, txn_requires_abort (fenced-or-timed-out too, which the epoch bump
        after the abort tells apart), or retriable (still failing at the deadline)."""
        key_type = _GROUP if group else _TRANSACTION
        key = self.transactions.group_id if group else self.transactions.transactional_id
        failures = 0  # in a row, busy answers aside: the back-off doubles from retry.backoff.ms (KIP-580)
        while True:
            try:
                node = self._coordinators.get(key_type)
                if node is None:
                    node = self._coordinators[key_type] = client.find_coordinator(key, key_type)
                code = ask(node)
                retriable = is_retriable(code)
            except (NoAnswer, KafkaUnavailableError) as exc:  # no answer: ask again (the coordinator may have moved)
                self._coordinators.pop(key_type, None)
                code, retriable, why = TRANSPORT, True, repr(exc)
            else:
                why = error_text(code) if code else ""
            step = batching.txn_step(code, retriable) if code != TRANSPORT else TxnStep.RETRY
            if step is TxnStep.DONE:
                self._failures.succeeded(f"{what}_failed", time.monotonic())
                return
            where = f"producer {self.client_id}, transactional.id {self.transactions.transactional_id}: {what}: {why}"
            if code in GROUP_FENCED_CODES and member is not None:
                where += (f" ({error_name(code)}: {member.describe()} is not the group's member of its current "
                          "generation: another member owns these partitions now; this transaction aborts)")
            if step is TxnStep.FATAL or (step is TxnStep.FENCED and fenced_is_final):
                raise ProduceError(code, where, fatal=True)
            if step in (TxnStep.FENCED, TxnStep.ABORTABLE):
                raise ProduceError(code, where, txn_requires_abort=True)
            busy = code in _BUSY
            if step is TxnStep.REFIND:
                self._coordinators.pop(key_type, None)
            if not busy:  # busy is expected (the last transaction's markers are being written): not a failure
                self._failures.failed(f"{what}_failed", time.monotonic(), error=why)
            if time.monotonic() >= deadline:
                raise ProduceError(code, where, retriable=True)
            failures += 0 if busy else 1
            time.sleep(TXN_RETRY_BACKOFF_S if busy else
                       delay_ms(failures, self._backoff * 1000, RETRY_BACKOFF_MAX_MS) / 1000)

    def add_partitions(self, client: RawClient, producer_id: int, epoch: int,
                       tps: Collection[Partition]) -> AddedPartitions:
        """The sender's, once a round: add partitions to the open transaction before their first batch. Those not
        added are asked again next round; no answer at all is logged and counted, not raised."""
        t = self.transactions
        out = AddedPartitions()
        try:
            node = self._coordinators.get(_TRANSACTION)
            if node is None:
                node = self._coordinators[_TRANSACTION] = client.find_coordinator(t.transactional_id, _TRANSACTION)
            answers = client.add_partitions_to_txn(t.transactional_id, producer_id, epoch, set(tps), coordinator=node)
        except Exception as exc:  # noqa: BLE001 - no answer: counted and logged; the partitions are asked again
            self._coordinators.pop(_TRANSACTION, None)
            self._failures.failed("AddPartitionsToTxn_failed", time.monotonic(), error=repr(exc))
            return out
        out.added = {tp for tp, code in answers.items() if code == 0}
        for tp, code in answers.items():
            if code == 0 or code == OPERATION_NOT_ATTEMPTED:
                continue
            step = batching.txn_step(code, is_retriable(code))
            if step is TxnStep.REFIND:
                self._coordinators.pop(_TRANSACTION, None)
            if step in (TxnStep.RETRY, TxnStep.REFIND):
                if code in _BUSY:
                    out.busy = True
                else:
                    self._failures.failed("AddPartitionsToTxn_failed", time.monotonic(), error=error_text(code))
                continue
            why = f"{tp[0]} [{tp[1]}]: AddPartitionsToTxn: {error_text(code)}"
            fatal = step is TxnStep.FATAL
            out.refused.append(ProduceError(code, why, fatal=fatal, txn_requires_abort=not fatal))
        if out.added:
            self._failures.succeeded("AddPartitionsToTxn_failed", time.monotonic())
        return out


def _first_error(codes: Mapping[Any, int]) -> int:
    return next((c for c in codes.values() if c), 0)
