"""A (topic, partition) pair, written one way everywhere, and how it is shown to a user."""

from __future__ import annotations

from collections.abc import Iterable

#: (topic, partition): of a source or of a destination, as the name of the variable says.
Partition = tuple[str, int]


def show(tps: Iterable[Partition]) -> list[str]:
    """topic[partition], as Kafka's tools print them."""
    return [f"{t}[{p}]" for t, p in tps]
