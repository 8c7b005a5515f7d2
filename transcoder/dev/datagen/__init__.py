"""Built-in, deterministic generators of realistic log/event records for `transcoder seed`.

Compression ratios depend entirely on the data, so the generators aim at the statistical
shape of production traffic rather than at variety: values repeat with skewed (Zipf-like)
frequencies, timestamps only move forward, sizes follow log-normal tails, metrics drift
smoothly, and entity documents change a few fields per update.

Every generator is a pure function of its parameters: the same `seed` gives byte-identical
records on every run and platform.  Nothing reads the clock, the module-level `random`
state, `hash()` of strings or set ordering.  Independent `random.Random` streams (seeded from
strings, which CPython hashes with SHA-512, not with `hash()`) drive the pools, the values,
the arrival times and the headers, so turning keys or headers on or off never changes the
values or timestamps of a stream.

A module per kind: `nginx` (with `nginx_routes`), `nginx_error`, `json_logs` (with
`journal_units`), `dns`, `metrics`, `entities`.  What they share, each named for what it
holds: `stream` (Record, StreamContext), `draws` (weighted distributions), `clock` (arrival
times), `timetext` (times as logs write them), `identifiers`, `headers`, and `shop` (the
example shop both web-server logs describe).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

from transcoder.dev.datagen.clock import ArrivalClock
from transcoder.dev.datagen.dns import generate_dns
from transcoder.dev.datagen.entities import generate_entities
from transcoder.dev.datagen.headers import HeaderBuilder
from transcoder.dev.datagen.json_logs import generate_json_logs
from transcoder.dev.datagen.metrics import generate_metrics
from transcoder.dev.datagen.nginx import generate_nginx
from transcoder.dev.datagen.nginx_error import generate_nginx_error
from transcoder.dev.datagen.stream import Record, StreamContext

__all__ = ["KINDS", "Record", "generate"]

_GENERATORS: dict[str, Callable[[StreamContext], Iterator[Record]]] = {
    "nginx": generate_nginx,
    "nginx-error": generate_nginx_error,
    "json-logs": generate_json_logs,
    "dns": generate_dns,
    "metrics": generate_metrics,
    "entities": generate_entities,
}
KINDS: tuple[str, ...] = tuple(_GENERATORS)


def generate(kind: str, *, seed: int = 0, keys: bool = True, headers: bool = False,
             start_ms: int = 1_767_225_600_000, events_per_second: float = 2000.0) -> Iterator[Record]:
    """Endless, deterministic stream of records of `kind`. Raise ValueError naming the valid kinds for an unknown kind.

    Records arrive as a Poisson process: timestamps start at `start_ms` and advance by
    exponentially distributed gaps averaging 1000/`events_per_second` ms; every time written
    inside a value is derived from its record's timestamp.

    `keys=True` keys each record as its producer would: nginx and dns by client IP,
    nginx-error by server (vhost) name, json-logs and metrics by host name.  `entities`
    records are ALWAYS keyed by entity id, whatever `keys` says, because they are meant for
    compacted topics, where an unkeyed record is rejected and tombstones are meaningless.

    `headers=True` adds content-type and source headers (plus trace-id for json-logs and
    entities); about 2% of records also carry two "tag" headers in a row, so that copies are
    seen to keep duplicate header names and their order.

    Any other bad parameter, a wrong type included, raises ValueError as well.
    """
    factory = _GENERATORS.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise ValueError(f"unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    _check_parameters(seed, start_ms, events_per_second)

    def stream(purpose: str) -> random.Random:
        return random.Random(f"transcoder.datagen/{kind}/{seed}/{purpose}")

    ctx = StreamContext(
        pool=stream("pools"),
        rng=stream("values"),
        clock=ArrivalClock(stream("clock"), start_ms, float(events_per_second)),
        keys=bool(keys),
        headers=HeaderBuilder(stream("headers"), kind) if headers else None,
    )
    return factory(ctx)


def _check_parameters(seed: int, start_ms: int, events_per_second: float) -> None:
    # ValueError, not TypeError, for a wrong type as well: generate() documents one error for every bad parameter.
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, not {seed!r}")
    if isinstance(start_ms, bool) or not isinstance(start_ms, int) or start_ms < 0:
        raise ValueError(f"start_ms must be a non-negative int (epoch milliseconds), not {start_ms!r}")
    if (isinstance(events_per_second, bool) or not isinstance(events_per_second, (int, float))
            or not math.isfinite(events_per_second) or events_per_second <= 0):
        raise ValueError(f"events_per_second must be a positive finite number, not {events_per_second!r}")
