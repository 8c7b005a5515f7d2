"""The batches of one destination partition on the writer's batched path (`hot_path: batches`).

Fetched record sets are re-batched per (destination topic, partition) by a native Rebatcher: a section closes when
the next record would take it over `batch.max_bytes` (record framing included) or when it holds
`batch.max_records`, and a closed section goes to the destination's BatchProducer at once. The open section waits
at most `batch.linger_ms` from its first record, as librdkafka's linger.ms: then it goes too, however small. The
producer seals each section as one v2 batch in the destination's codec and level, and sends it.
"""

from __future__ import annotations

from typing import Any, Protocol

from transcoder.codecs import Rebatcher
from transcoder.config import Batch


class SectionSink(Protocol):
    """Where a batcher sends its sections: the destination's BatchProducer (`produce_sections`)."""

    def produce_sections(self, topic: str, partition: int, sections: Any) -> None: ...


class DestinationBatcher:
    """The Rebatcher, the linger clock and the producer of one (destination topic, partition).

    `opened` is when (the caller's clock, monotonic seconds) the open section got its first record; None when the
    batcher holds no record. The writer drops a batcher that holds none: an emptied Rebatcher is a new one.
    """

    def __init__(self, producer: SectionSink, topic: str, partition: int, batch: Batch) -> None:
        self.producer = producer
        self.topic = topic
        self.partition = partition
        self.linger_s = batch.linger_ms / 1000
        self.rebatcher = Rebatcher(batch.max_bytes, batch.max_records)
        self.opened: float | None = None

    def add(self, records: Any, now_ms: int, start: int, stop: int, now: float) -> None:
        """Re-batch records `start..stop` of `records` (a transcoder_native StoredRecords; records without a
        timestamp get `now_ms`, epoch ms) and send the sections they closed (size, count) at once. `now`
        (monotonic s) starts the linger of a section they open, and of what is left after the closed ones went:
        those records arrived now."""
        rb = self.rebatcher
        rb.add(records, now_ms, start, stop)
        if rb.ready:
            self.producer.produce_sections(self.topic, self.partition, rb.take())
            self.opened = now if rb.records else None
        elif self.opened is None:
            self.opened = now

    @property
    def due_at(self) -> float | None:
        """When (monotonic s) the open section's linger is over; None when the batcher holds no record."""
        return None if self.opened is None else self.opened + self.linger_s

    def due(self, now: float) -> bool:
        """Whether the open section's linger is over at `now` (monotonic s)."""
        due_at = self.due_at
        return due_at is not None and now >= due_at

    def send(self) -> None:
        """Send every record held, the open section too (its linger is over, or the writer flushes: a drain, a
        transaction's commit); nothing is left."""
        sections = self.rebatcher.take(flush=True)
        self.opened = None
        if sections:
            self.producer.produce_sections(self.topic, self.partition, sections)
