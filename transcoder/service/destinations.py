"""A lane's destinations' partition counts: a source partition assigned that a destination does not have (partitions
added to a running source) is copied once transcoder extended a destination it created, else stops the lane."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import structlog
from confluent_kafka import Producer

from transcoder.errors import TranscoderError
from transcoder.pipeline.partitions import Partition

log = structlog.get_logger("transcoder.lane")


class PartitionCounts(Protocol):
    """The lane's topic-id client: a source's partition count now."""

    def partition_count(self, topic: str) -> int | None: ...


class Producers(Protocol):
    """The lane's writer: its producers now (librdkafka's learn a destination's new partitions when asked)."""

    @property
    def producers(self) -> Sequence[object]: ...


class DestinationPartitions:
    """Destination topic -> its partition count (pre-flight's); the destinations transcoder created and how to give
    one more partitions."""

    def __init__(self, lane: str, counts: Mapping[str, int], destinations_of: Mapping[str, Sequence[str]],
                 sources: PartitionCounts, writer: Producers,
                 extend: Callable[[str, int], None] | None = None, own: set[str] | None = None) -> None:
        self.lane = lane
        self.counts = dict(counts)
        self.destinations_of = destinations_of
        self.sources = sources
        self.writer = writer
        self._extend = extend
        self._own = set(own or ())

    def check(self, tps: list[Partition]) -> None:
        """A source partition assigned that a destination does not have (partitions added to a running source):
        its records could never land in the same partition of the copy. The lane stops, naming both counts.

        The source's partition count is asked of the topic-id client, never of the consumer: this runs inside the
        consumer's rebalance callback, and a metadata call on the consumer there aborts the process
        (confluent-kafka's CallState_get assertion, once another callback follows in the same poll)."""
        for topic, partition in sorted(tps):
            for dest in self.destinations_of.get(topic, ()):
                have = self.counts.get(dest)
                if have is None or partition < have:
                    continue
                now = max(self.sources.partition_count(topic) or 0, partition + 1)
                if self._extend is not None and dest in self._own:
                    self._grow(topic, dest, have, now)
                    continue
                raise TranscoderError(
                    f"source {topic} has {now} partitions now but its destination {dest} has {have}: partition "
                    f"{partition} was added to the running source and cannot be copied (records of partition p land "
                    f"in p); add partitions to {dest} (kafka-topics --alter --topic {dest} --partitions {now}) and "
                    "run again", topic=topic, partition=partition)

    def _grow(self, topic: str, dest: str, have: int, now: int) -> None:
        assert self._extend is not None
        self._extend(dest, now)
        self.counts[dest] = now
        for producer in self.writer.producers:  # librdkafka's learn the new partitions now, not in 5 min
            if isinstance(producer, Producer):
                producer.list_topics(dest, timeout=10)
        log.warning("source_partitions_added", lane=self.lane, topic=topic, destination=dest,
                    partitions=now, was=have, note=f"{dest} (created by transcoder) extended to match: "
                    "the new partitions are copied")
