"""Record headers: content-type, source, trace-id and the occasional duplicated "tag" pair."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

# Share of records that carry two "tag" headers in a row (duplicate names, order kept).
DUP_TAG_SHARE = 0.02

Headers = tuple[tuple[str, bytes], ...]


class HeaderBuilder:
    """Builds header tuples; its own random stream, so headers never shift the values' stream."""

    __slots__ = ("_base", "_bits", "_content_type", "_rnd", "_tags")

    def __init__(self, rng: random.Random, kind: str) -> None:
        self._rnd = rng.random
        self._bits = rng.getrandbits
        self._content_type = b"application/json" if kind in ("json-logs", "entities") else b"text/plain"
        self._tags = (("tag", b"env=prod"), ("tag", f"kind={kind}".encode()))
        self._base: dict[tuple[str, bool], Headers] = {}

    def _plain(self, source: str, content: bool) -> Headers:
        base = self._base.get((source, content))
        if base is None:
            src = (("source", source.encode()),)
            base = ((("content-type", self._content_type),) + src) if content else src
            self._base[(source, content)] = base
        return base

    def picker(self, sources: Sequence[str]) -> Callable[[], Headers]:
        """Headers of a record from one of `sources`, picked uniformly: the fast path for hot loops."""
        variants = [(self._plain(s, True), self._plain(s, True) + self._tags) for s in sources]
        n = float(len(variants))
        rnd = self._rnd

        def pick() -> Headers:
            plain, tagged = variants[int(rnd() * n)]
            return tagged if rnd() < DUP_TAG_SHARE else plain
        return pick

    def choose(self, sources: Sequence[str]) -> str:
        """One of `sources`, uniformly, for a value that does not say where it came from."""
        return sources[int(self._rnd() * len(sources))]

    def make(self, source: str, *, trace: bool = False, content: bool = True) -> Headers:
        """Headers of one record from `source`: content-type unless `content` is off, a fresh trace-id if `trace`."""
        base = self._plain(source, content)
        if trace:
            base = base + (("trace-id", b"%032x" % self._bits(128)),)
        if self._rnd() < DUP_TAG_SHARE:
            base = base + self._tags
        return base
