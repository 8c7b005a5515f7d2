"""The producer's guarantee, chosen once when it is built: what the Produce requests and the sender ask of it.

Idempotent (at least once): every batch may be sent, a batch that cannot be delivered is the caller's to report
failed or send again under a new producer id. Exactly-once, a TransactionSession (transactions.py): a batch is sent
once its partition is in the open transaction, and a batch that cannot be delivered is lost with the transaction
(`abandon`: dropped, the transaction doomed, nothing reported). The parts never ask which one they hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from transcoder.kafka.producer.batches import Batch, Partition
from transcoder.kafka.producer.errors import ProduceError


@dataclass(frozen=True)
class Admission:
    """A round's batches as the guarantee admits them: `lost` (dropped with a failed transaction, none is sent), or
    sent once `holds` their partition; `busy`: the coordinator was busy (the others are asked again soon)."""

    lost: bool = False
    busy: bool = False


class Guarantee(Protocol):
    @property
    def doomed(self) -> bool:
        """Whether what is held can no longer be delivered as promised (the caller aborts the transaction)."""
        ...

    @property
    def produce_fields(self) -> dict[str, str]:
        """What each Produce request carries besides the batches (a transaction's id)."""
        ...

    def admit(self, batches: Mapping[Partition, Batch]) -> Admission:
        """Before a round: whether its batches may go (a transaction adds their partitions first)."""
        ...

    def holds(self, tp: Partition) -> bool:
        """Whether a batch of `tp` may be sent now."""
        ...

    def abandon(self, batches: Sequence[Batch], error: ProduceError) -> bool:
        """Batches that cannot be delivered as they are: True when they are lost with the transaction (dropped, the
        transaction doomed, no report); False: the caller reports them failed or sends them again."""
        ...


class Idempotent:
    """At least once: no transaction admits or takes anything."""

    @property
    def doomed(self) -> bool:
        return False

    @property
    def produce_fields(self) -> dict[str, str]:
        return {}

    def admit(self, batches: Mapping[Partition, Batch]) -> Admission:
        return Admission()

    def holds(self, tp: Partition) -> bool:
        return True

    def abandon(self, batches: Sequence[Batch], error: ProduceError) -> bool:
        return False
