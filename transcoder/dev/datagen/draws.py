"""Weighted random draws: categorical distributions, their lookup tables and Zipf-like skews."""

from __future__ import annotations

import itertools
import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Generic, TypeVar

T = TypeVar("T")

# Values are drawn in blocks so the per-record loops mostly index into ready lists.
BLOCK = 1024
# Slots in the lookup tables that replace gauss() and small weighted draws in hot loops.
TABLE_SIZE = 4096


class Distribution(Generic[T]):
    """A weighted categorical distribution with its cumulative weights computed once."""

    __slots__ = ("cum", "hi", "items", "total")

    def __init__(self, items: Sequence[T], weights: Sequence[float]) -> None:
        if not items or len(items) != len(weights):
            raise ValueError("a distribution needs one weight per item, and at least one item")
        self.items: list[T] = list(items)
        self.cum: list[float] = list(itertools.accumulate(weights))
        self.total: float = self.cum[-1]
        self.hi: int = len(self.cum) - 1

    def pick(self, rnd: Callable[[], float]) -> T:
        """One item, drawn with the uniform [0, 1) source `rnd`."""
        # hi bound: random() * total can round up to total itself.
        return self.items[bisect_right(self.cum, rnd() * self.total, 0, self.hi)]

    def block(self, rng: random.Random, k: int = BLOCK) -> list[T]:
        """`k` items drawn at once (cheaper per item than `pick`)."""
        return rng.choices(self.items, cum_weights=self.cum, k=k)


def lookup_table(dist: Distribution[T], size: int = TABLE_SIZE) -> list[T]:
    """`dist` as a lookup table of `size` slots: picking is one index, no search.

    Every item keeps at least one slot, so shares are rounded to 1/size; the hot loops use this
    for small distributions whose weights are far coarser than that anyway.
    """
    weights = [b - a for a, b in pairwise([0.0, *dist.cum])]
    exact = [w * size / dist.total for w in weights]
    counts = [max(1, int(e)) if w > 0 else 0 for e, w in zip(exact, weights, strict=True)]
    # Largest remainders fill the slots left over; ties go to the earlier item.
    by_remainder = sorted(range(len(counts)), key=lambda i: (int(exact[i]) - exact[i], i))
    short = size - sum(counts)
    for i in itertools.islice(itertools.cycle(by_remainder), max(0, short)):
        counts[i] += 1
    while sum(counts) > size:
        counts[max(range(len(counts)), key=lambda i: (counts[i], -i))] -= 1
    return [item for item, c in zip(dist.items, counts, strict=True) for _ in range(c)]


def zipf_weights(n: int, s: float = 1.0) -> list[float]:
    """The weights 1/rank**s of ranks 1..n."""
    return [1.0 / (rank ** s) for rank in range(1, n + 1)]


def zipf(items: Sequence[T], s: float = 1.0) -> Distribution[T]:
    """Rank-frequency skew: the first item is the most popular, the tail is long and thin."""
    return Distribution(items, zipf_weights(len(items), s))


def weighted(pairs: Sequence[tuple[T, float]]) -> Distribution[T]:
    """A distribution from (item, weight) pairs."""
    return Distribution([p[0] for p in pairs], [p[1] for p in pairs])


def skewed_int(rnd: Callable[[], float], n: int) -> int:
    """An int in [1, n) with density ~1/x: a few small ids are hot, a long tail is cold."""
    return int(n ** rnd())


def normal_table(rng: random.Random) -> list[float]:
    """TABLE_SIZE standard normal draws, to be indexed at random in hot loops."""
    # Indexing a table is several times cheaper than gauss() in the hot loops.
    return [rng.gauss(0.0, 1.0) for _ in range(TABLE_SIZE)]
