"""Pure: what each cell would cost a topic per month, and which cell to choose, said in plain words.

The cost model, per cell, for a topic receiving `rate` records/s, kept `retention` with `replication_factor`
copies, read by `fanout` consumer groups:

- disk: rate × retention × bytes per record on disk × replication factor (what the cluster holds once
  retention is reached; with unlimited retention, what it grows by per month);
- network per month: producers → leader (rate × bytes per record), leader → followers (× RF − 1),
  brokers → consumers (× fan-out);
- cores: producers compressing (rate × compress CPU per record), the leader validating each batch (one
  decompression per record: Kafka's LogValidator reads compressed batches through), consumers
  decompressing (× fan-out).

The choice: among the cells that fit the CPU budget and reach the minimum ratio, the highest ratio (with
a budget) or the least CPU (with a minimum ratio); with neither, the least CPU among the cells within 5%
of the best ratio of the cells that compress at 50 MB/s per core or more. Cells on the ratio/CPU frontier are
named, so the text can say what the next step up would cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from transcoder.codecs import LIBRDKAFKA_MAX_LEVEL
from transcoder.errors import ConfigError
from transcoder.evaluate.batches import Record, record_size
from transcoder.evaluate.grid import batch_label
from transcoder.evaluate.measure import CellResult

MONTH_S = 30 * 24 * 3600
#: Kafka's defaults a batch and a record must fit unless raised: the broker's message.max.bytes (a topic's
#: max.message.bytes unless set: what the broker accepts as one batch, compressed) and the Java producer's
#: max.request.size (the largest request, and record, it sends; librdkafka's message.max.bytes, 1,000,000 B).
BROKER_MESSAGE_MAX_BYTES = 1_048_588
PRODUCER_MAX_REQUEST_SIZE = 1_048_576
#: With no budget and no minimum ratio: the cheapest cell within this share of the best ratio among the
#: cells that compress at least MIN_MB_S per core (slower codecs make a producer's compression its limit).
NEAR_BEST = 0.95
MIN_MB_S = 50.0


@dataclass(frozen=True)
class Workload:
    rate: float | None  # records/s; None: unknown (costs are then per 1M records)
    retention_ms: int | None  # None: unlimited
    replication_factor: int = 3
    fanout: int = 1  # consumer groups reading the topic
    cpu_budget: float | None = None  # cores for producers + brokers + consumers
    min_ratio: float | None = None

    def check(self) -> None:
        for name, v in (("--rate", self.rate), ("--cpu-budget", self.cpu_budget), ("--min-ratio", self.min_ratio)):
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise ConfigError(f"{name} must be a positive number, not {v}")
        if self.replication_factor < 1:
            raise ConfigError(f"--replication-factor must be at least 1, not {self.replication_factor}")
        if self.fanout < 0:
            raise ConfigError(f"--fanout must be 0 or more, not {self.fanout}")
        if self.cpu_budget is not None and self.rate is None:
            raise ConfigError("--cpu-budget needs the topic's rate: give --rate, or --topic to read it from")


@dataclass(frozen=True)
class Limits:
    """What a batch and a record must fit: the producers' default max.request.size, and the destination's
    max.message.bytes (`max_message_bytes`, when known; else the broker's default message.max.bytes)."""

    max_message_bytes: int | None = None
    largest_record_bytes: int = 0  # the sample's largest record (key, value, headers)
    records_over: int = 0  # records of the sample above `max_batch_bytes`

    @classmethod
    def of(cls, records: Iterable[Record], max_message_bytes: int | None = None) -> Limits:
        """The limits of a destination with `max_message_bytes` (None: unknown), and the sample's records."""
        limits = cls(max_message_bytes)
        sizes = [record_size(r) for r in records]
        return cls(max_message_bytes, max(sizes, default=0), sum(n > limits.max_batch_bytes for n in sizes))

    @property
    def max_batch_bytes(self) -> int:
        """The largest batch.size that needs no default raised."""
        return min(PRODUCER_MAX_REQUEST_SIZE, self.max_message_bytes or BROKER_MESSAGE_MAX_BYTES)

    def _above(self, n: int) -> str:
        over = [f"the producers' default max.request.size ({PRODUCER_MAX_REQUEST_SIZE:,} B)"]
        if self.max_message_bytes is not None:
            if n > self.max_message_bytes:
                over.append(f"the topic's max.message.bytes ({self.max_message_bytes:,} B)")
        elif n > BROKER_MESSAGE_MAX_BYTES:
            over.append(f"the broker's default message.max.bytes ({BROKER_MESSAGE_MAX_BYTES:,} B)")
        return " and ".join(over)

    def warnings(self, batch_sizes: Sequence[int], chosen: int | None = None) -> list[str]:
        """One line per batch size above the limits (marked ⚠ in the table), and one for the sample's records."""
        out = []
        for b in sorted(set(batch_sizes)):
            if b > self.max_batch_bytes:
                which = "the recommended batch size" if b == chosen else "cells marked ⚠"
                out.append(f"⚠ {batch_label(b)} batches ({which}) are above {self._above(b)}: producers need "
                           "max.request.size (librdkafka: message.max.bytes) raised, and the topic a "
                           "max.message.bytes that holds a whole compressed batch.")
        if self.records_over:
            out.append(f"⚠ {self.records_over:,} record(s) of the sample are above "
                       f"{self._above(self.largest_record_bytes)} (the largest: {self.largest_record_bytes:,} B): "
                       "producers refuse them (RecordTooLargeException) unless those limits are raised, whatever the "
                       "codec.")
        return out


@dataclass(frozen=True)
class Costs:
    """One cell's monthly figures for the workload (bytes and cores; per 1M records when the rate is unknown)."""

    disk_bytes: float  # held at steady state (or grown per month with unlimited retention)
    produce_bytes: float  # producers -> brokers, per month
    replication_bytes: float
    consume_bytes: float
    producer_cores: float
    broker_cores: float
    consumer_cores: float

    @property
    def network_bytes(self) -> float:
        return self.produce_bytes + self.replication_bytes + self.consume_bytes

    @property
    def cores(self) -> float:
        return self.producer_cores + self.broker_cores + self.consumer_cores


def costs(cell: CellResult, w: Workload) -> Costs:
    """The cell's costs for the workload. Without a rate, figures are for 1M records (cores: CPU seconds)."""
    per_rec = cell.bytes_per_record
    c_rec = cell.compress_cpu_s / cell.records
    d_rec = cell.decompress_cpu_s / cell.records
    if w.rate is None:  # per 1M records
        n, cpu_n = 1e6, 1e6
        held = n
    else:
        n, cpu_n = w.rate * MONTH_S, w.rate
        held = w.rate * (w.retention_ms / 1000 if w.retention_ms is not None else MONTH_S)
    produce = n * per_rec
    return Costs(disk_bytes=held * per_rec * w.replication_factor, produce_bytes=produce,
                 replication_bytes=produce * (w.replication_factor - 1), consume_bytes=produce * w.fanout,
                 producer_cores=cpu_n * c_rec, broker_cores=cpu_n * d_rec, consumer_cores=cpu_n * d_rec * w.fanout)


def frontier(cells: Sequence[CellResult], w: Workload) -> list[CellResult]:
    """The cells no other cell beats on both ratio and cores, by ascending cores."""
    scored = sorted(cells, key=lambda c: (costs(c, w).cores, -c.ratio))
    out: list[CellResult] = []
    for c in scored:
        if not out or c.ratio > out[-1].ratio:
            out.append(c)
    return out


@dataclass(frozen=True)
class Recommendation:
    chosen: CellResult
    rule: str  # why this cell: the rule that picked it, in words
    current: CellResult | None
    next_up: CellResult | None  # the next cell on the frontier above the chosen one (what more ratio costs)
    frontier: list[CellResult]
    text: str
    limits: Limits = Limits()
    warnings: tuple[str, ...] = ()  # batch sizes and records above Kafka's limits (in `text` too)

    def as_dict(self, w: Workload) -> dict[str, object]:
        def one(c: CellResult | None) -> dict[str, object] | None:
            if c is None:
                return None
            return {"codec": c.codec, "level": c.level, "batch_bytes": c.batch_bytes, "ratio": round(c.ratio, 4),
                    "costs": {k: round(v, 6) for k, v in asdict(costs(c, w)).items()}}

        return {"codec": self.chosen.codec, "level": self.chosen.level, "batch_bytes": self.chosen.batch_bytes,
                "ratio": round(self.chosen.ratio, 4), "rule": self.rule, "text": self.text,
                "workload": asdict(w), "recommended": one(self.chosen), "current": one(self.current),
                "next_up": one(self.next_up),
                "frontier": [f"{c.label}@{c.batch_bytes}" for c in self.frontier],
                "max_batch_bytes": self.limits.max_batch_bytes, "warnings": list(self.warnings)}


def recommend(cells: Sequence[CellResult], w: Workload, *, current: CellResult | None = None,
              limits: Limits | None = None) -> Recommendation:
    """The cell to choose for the workload, and why, with a warning for each batch size and for records above
    Kafka's limits (`limits`; default: Kafka's defaults). ConfigError when no cell meets the constraints."""
    limits = limits or Limits()
    w.check()
    if not cells:
        raise ConfigError("nothing to recommend from: the grid is empty")
    eligible = [c for c in cells
                if (w.cpu_budget is None or costs(c, w).cores <= w.cpu_budget)
                and (w.min_ratio is None or c.ratio >= w.min_ratio)]
    if not eligible:
        best_ratio = max(c.ratio for c in cells)
        cheapest = min(costs(c, w).cores for c in cells)
        raise ConfigError(f"no cell meets --cpu-budget {w.cpu_budget} and --min-ratio {w.min_ratio}: the best ratio "
                          f"measured is {best_ratio:.2f}x, the least CPU {cheapest:.3g} cores")
    front = frontier(eligible, w)
    if w.cpu_budget is not None:
        chosen = front[-1]
        rule = f"the highest ratio within the budget of {w.cpu_budget:g} cores"
        if w.min_ratio is not None:
            rule += f" (and at least {w.min_ratio:g}x)"
    elif w.min_ratio is not None:
        chosen = front[0]
        rule = f"the least CPU for a ratio of at least {w.min_ratio:g}x"
    else:
        fast = [c for c in eligible if c.codec == "none" or (c.compress_mb_s or 0) >= MIN_MB_S] or eligible
        best = max(c.ratio for c in fast)
        chosen = next(c for c in frontier(fast, w) if c.ratio >= NEAR_BEST * best)
        rule = (f"the least CPU among the cells within {100 - NEAR_BEST * 100:.0f}% of the best ratio ({best:.2f}x) "
                f"of those compressing at {MIN_MB_S:g} MB/s per core or more (give --cpu-budget or --min-ratio "
                f"to choose otherwise)")
    whole = frontier(cells, w)
    higher = [c for c in whole if c.ratio > chosen.ratio]
    next_up = higher[0] if higher else None
    warnings = limits.warnings([c.batch_bytes for c in cells], chosen.batch_bytes)
    text = "\n".join([explain(chosen, rule, current, next_up, w), *warnings])
    return Recommendation(chosen=chosen, rule=rule, current=current, next_up=next_up, frontier=whole,
                          text=text, limits=limits, warnings=tuple(warnings))


def _bytes(n: float) -> str:
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def cell_name(c: CellResult) -> str:
    return f"{c.label} in {batch_label(c.batch_bytes)} batches"


def _change(new: float, old: float) -> str:
    if old == 0:
        return "n/a" if new == 0 else "+∞"
    return f"{(new - old) / old * 100:+.0f}%"


def explain(chosen: CellResult, rule: str, current: CellResult | None, next_up: CellResult | None, w: Workload) -> str:
    """The recommendation in plain words: the cell, the rule, the costs and the change against the current codec."""
    c = costs(chosen, w)
    per = "per month" if w.rate is not None else "per 1M records"
    held = ("held" if w.retention_ms is not None else "added per month") if w.rate is not None else "stored"
    cores = "cores" if w.rate is not None else "CPU seconds"
    lines = [(f"Use {cell_name(chosen)}: {chosen.ratio:.2f}x smaller than uncompressed, "
             f"{chosen.bytes_per_record:.1f} B per record on disk. Chosen as {rule}.")]
    lines.append(f"Disk {held}: {_bytes(c.disk_bytes)} (× RF {w.replication_factor}); network {per}: "
                 f"{_bytes(c.network_bytes)} (produce {_bytes(c.produce_bytes)}, replication "
                 f"{_bytes(c.replication_bytes)}, {w.fanout} consumer group(s) {_bytes(c.consume_bytes)}); "
                 f"{c.cores:.3g} {cores} (producers {c.producer_cores:.3g}, brokers {c.broker_cores:.3g}, "
                 f"consumers {c.consumer_cores:.3g}).")
    if current is not None:
        o = costs(current, w)
        lines.append(f"Against the current {cell_name(current)} ({current.ratio:.2f}x): disk "
                     f"{_change(c.disk_bytes, o.disk_bytes)} ({_bytes(c.disk_bytes - o.disk_bytes)}), network "
                     f"{_change(c.network_bytes, o.network_bytes)} ({_bytes(c.network_bytes - o.network_bytes)} "
                     f"{per}), CPU {_change(c.cores, o.cores)} ({c.cores - o.cores:+.3g} {cores}).")
    if chosen.codec == "zstd" and chosen.level is not None and chosen.level > LIBRDKAFKA_MAX_LEVEL:
        lines.append(f"librdkafka clients cap compression.level at {LIBRDKAFKA_MAX_LEVEL}: {chosen.label} batches "
                     "come from Java producers (compression.zstd.level, Kafka 3.8+) or transcoder's own batches.")
    elif chosen.codec == "zstd" and chosen.level is not None and chosen.level < 0:
        lines.append(f"Only Java producers (Kafka 3.8+, compression.zstd.level={chosen.level}) write zstd's fast "
                     "levels; librdkafka clients and transcoder do not.")
    if next_up is not None:
        n = costs(next_up, w)
        lines.append(f"The next step up, {cell_name(next_up)}, would reach {next_up.ratio:.2f}x "
                     f"({_change(n.disk_bytes, c.disk_bytes)} disk) for {n.cores:.3g} {cores} "
                     f"({_change(n.cores, c.cores)} CPU).")
    else:
        lines.append("No cell measured has a higher ratio.")
    if w.rate is None:
        lines.append("The topic's rate is unknown (give --rate): figures are per 1M records.")
    return "\n".join(lines)
