"""What every generator yields (`Record`) and what every generator is given (`StreamContext`)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from transcoder.dev.datagen.clock import ArrivalClock
from transcoder.dev.datagen.headers import HeaderBuilder


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record, as a producer would send it."""

    key: bytes | None
    value: bytes | None  # None = tombstone
    headers: tuple[tuple[str, bytes], ...]  # () when headers are off; order matters, duplicates allowed
    timestamp_ms: int  # epoch milliseconds


@dataclass(slots=True)
class StreamContext:
    """One generator's independent random streams, its arrival clock and its key and header switches."""

    pool: random.Random  # one-off construction of pools and per-series parameters
    rng: random.Random  # per-record values
    clock: ArrivalClock
    keys: bool
    headers: HeaderBuilder | None  # None: records carry no headers
