"""A (topic, partition) pair, written one way everywhere, and how it is shown to a user."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

#: (topic, partition): of a source or of a destination, as the name of the variable says.
Partition = tuple[str, int]


def show(tps: Iterable[Partition]) -> list[str]:
    """topic[partition], as Kafka's tools print them."""
    return [f"{t}[{p}]" for t, p in tps]


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition librdkafka's default partitioner (consistent_random) gives a non-empty key: CRC-32 of the key
    modulo the partition count. A record written by transcoder's own producer lands where librdkafka's would put it
    (a compacted topic keeps one record per key only when every writer agrees)."""
    if not key:
        raise ValueError("a key is needed to choose a partition by key")
    return zlib.crc32(key) % partitions
