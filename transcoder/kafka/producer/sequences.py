"""Where an idempotent producer's batches are numbered: its producer id and epoch, and each partition's next
sequence number. Pure (the sender's thread and the transaction's epoch bump are its users, one at a time).

Kafka writes a batch once per (producer id, epoch, partition, base sequence): a batch sent again with its own
numbers is never written twice, and a new producer id or epoch starts every partition at 0 again.
"""

from __future__ import annotations

from transcoder.kafka.producer.batches import Partition
from transcoder.pipeline.batching import next_sequence


class ProducerSequences:
    """The producer id, its epoch, and the next base sequence of each partition."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._next: dict[Partition, int] = {}

    def renew(self, producer_id: int, epoch: int) -> None:
        """A new producer id (or epoch): every partition starts at sequence 0 again."""
        self.producer_id, self.epoch = producer_id, epoch
        self._next.clear()

    def peek(self, tp: Partition) -> int:
        """The base sequence `tp`'s next batch would take."""
        return self._next.get(tp, 0)

    def take(self, tp: Partition, records: int) -> int:
        """The base sequence of `tp`'s next batch of `records` records; the one after follows it."""
        base = self._next.get(tp, 0)
        self._next[tp] = next_sequence(base, records)
        return base

    def set_back(self, tp: Partition, base: int) -> None:
        """A batch of `tp` that was not written, based at `base`: the next batch takes its sequences."""
        self._next[tp] = base

    def stamp(self, base: int) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence): what a batch's header carries."""
        return self.producer_id, self.epoch, base
