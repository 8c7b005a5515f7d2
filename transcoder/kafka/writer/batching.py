"""The record-sets path of a sink: fetched record sets re-batched per destination partition (DestinationBatcher,
the native Rebatcher) and sent through each destination's BatchProducer as their batches close or linger ends."""

from __future__ import annotations

import time
from typing import Any, Protocol

from transcoder.kafka.writer.destination_batcher import DestinationBatcher, SectionSink
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target


class BatchSink(SectionSink, Protocol):
    """A destination's producer on this path (BatchProducer): takes sections, and says when it had a report."""

    @property
    def reported_at(self) -> float:
        """When (epoch s) its last batch's report came; 0 before any."""


class Batching:
    """Source topic -> [(producer, destination topic, target)] (`routes`), and the batchers holding records."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.routes: dict[str, list[tuple[BatchSink, str, Target]]] = {}
        #: (destination topic, partition) -> its batcher, for those holding records, in the order their sections opened
        self.batchers: dict[Partition, DestinationBatcher] = {}

    def route(self, producer: BatchSink, target: Target) -> None:
        """`target`'s destinations take their sections from `producer`."""
        for s in target.sources:
            self.routes.setdefault(s, []).append((producer, target.topic_for(s), target))

    def producer_of(self, source: str, dest: str) -> BatchSink:
        return next(p for p, d, _ in self.routes[source] if d == dest)

    def write_stored(self, source: Partition, records: Any, now: float, start: int = 0,
                     stop: int | None = None) -> tuple[int, int]:
        """Hand fetched records `start..stop` (of a transcoder_native StoredRecords, in offset order) of one
        source partition to every destination of its topic: re-batched there, sent as their batches close (size,
        count) or linger ends (`tick`). Returns (records, bytes). No Python per record."""
        stop = len(records) if stop is None else min(stop, len(records))
        n = stop - start
        if n <= 0:
            return 0, 0
        topic, partition = source
        first, last, size = records.span(start, stop)
        now_ms = int(time.time() * 1000)
        routes = self.routes[topic]
        runs = {}
        for _, dest, _ in routes:
            runs[(dest, partition)] = (first, last, n, size)
        self.ledger.sent_runs(runs)
        self.ledger.consumed({source: last})
        batchers = self.batchers
        for producer, dest, target in routes:
            key = (dest, partition)
            b = batchers.get(key)
            if b is None:
                b = batchers[key] = DestinationBatcher(producer, dest, partition, target.destination.batch)
            b.add(records, now_ms, start, stop, now)
            if b.opened is None:  # all sent
                del batchers[key]
        return n, size

    def linger_due(self) -> float | None:
        """When (monotonic s) the first open batch's linger is over; None when no batch is open. The lane's Fetch
        waits no longer, so `tick` sends that batch in time."""
        return min((d for b in self.batchers.values() if (d := b.due_at) is not None), default=None)

    def tick(self, now: float, *, flush: bool = False) -> None:
        """Send the open batches whose linger is over (all of them with `flush`)."""
        batchers = self.batchers
        if not batchers:
            return
        for key, b in list(batchers.items()):
            if flush or b.due(now):
                del batchers[key]
                b.send()
