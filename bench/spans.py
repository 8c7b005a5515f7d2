"""Pure: the spans a copy is measured over, from samples taken while it runs.

While a copier copies, the benchmark samples, every ~0.1 s, the destination's record count (end
offsets) and the CPU seconds of the copier's processes and of the broker. Two spans come out:

- the whole span: from the first sample that sees a record in the destination to the last sample
  (the destination holds every record);
- the warmed span: from the warm boundary to the same last sample. The boundary is the later of
  the moment the destination holds `WarmRule.fraction` of the records (30%) and `WarmRule.seconds`
  (10 s) after the first record. The moment the count crosses 30% lies between two samples and is
  interpolated linearly; the records and CPU at the boundary are interpolated linearly in time
  between the samples around it.

Why the later of both: MirrorMaker 2 is a JVM, and it warms in work (the JIT compiles a method
after enough calls) and in time (the compiler threads need CPU, which on a busy machine they get
late). Sampled on this project's 2-core machine, shared with other work (3M nginx records, lz4 and
zstd, transcoder's batching, 4 copies), MirrorMaker 2 climbed from 17,000-80,000 to 160,000-320,000
records/s, and from 21-49 to 3.5-8 CPU s per 1M records, over the first 5-11 s after its first
record; the destination then held 15-40% of the records. Over the span this rule picks, its CPU
per record was 6-33% lower than over the whole copy and its rate 10-45% higher; transcoder's CPU
per record (Python and librdkafka, nothing to compile) moved by 3%. A record share alone would
start a 5-s copy (the default 1M records) after 1.5 s, inside that ramp; a time alone would, on
long copies, judge copiers on different records (a faster one's boundary further in). On long
copies (30% later than 10 s) every copier's warmed span covers the same records, the last 70%.

Too short: when the warmed span would last under `WarmRule.min_seconds` (3 s, ~30 samples) or hold
under `WarmRule.min_fraction` of the records (20%), its figures would be mostly sampling noise; the
warmed span is then the whole span, with a note saying so.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One look at a running copy: when, how many records the destination held, CPU seconds so far."""

    t: float  # monotonic seconds
    records: float  # records in the destination (sum of high - low watermarks; interpolated by `at`)
    cpu: float  # the copier's processes, utime + stime since they started
    broker_cpu: float | None = None  # the local broker's process; None when not measured


@dataclass(frozen=True)
class Span:
    """What a copy did over part of its run."""

    start: float  # seconds after the first record in the destination
    records: float  # records copied within the span (fractional where a boundary was interpolated)
    seconds: float
    cpu_seconds: float
    broker_cpu_seconds: float | None = None

    @property
    def records_per_s(self) -> float | None:
        return self.records / self.seconds if self.seconds > 0 else None

    @property
    def cpu_per_1m(self) -> float | None:
        return self.cpu_seconds / self.records * 1e6 if self.records > 0 else None

    @property
    def broker_cpu_per_1m(self) -> float | None:
        if self.broker_cpu_seconds is None or self.records <= 0:
            return None
        return self.broker_cpu_seconds / self.records * 1e6


@dataclass(frozen=True)
class WarmRule:
    """Where the warmed span starts, and when a copy is too short to have one."""

    fraction: float = 0.3  # the destination holds at least this share of the records...
    seconds: float = 10.0  # ...and at least this long has passed since its first record
    min_seconds: float = 3.0  # a shorter warmed span falls back to the whole span
    min_fraction: float = 0.2  # so does one holding a smaller share of the records

    def describe(self) -> str:
        return (f"from the later of the moment the destination holds {self.fraction:.0%} of the records and "
                f"{self.seconds:g} s after its first record, to its last record")


#: The rule the benchmark uses unless told otherwise (--warm-fraction, --warm-seconds).
WARM = WarmRule()


def min_copy_seconds(rule: WarmRule = WARM) -> float:
    """The shortest copy, at a steady rate, that has a warmed span under `rule` (inf: none has).

    At a steady rate over D seconds the boundary is at max(fraction * D, seconds), and the span after it
    must last `min_seconds` and hold `min_fraction` of the records.
    """
    if 1 - rule.fraction < rule.min_fraction:
        return float("inf")
    return max(rule.min_seconds / (1 - rule.fraction), rule.seconds + rule.min_seconds,
               rule.seconds / (1 - rule.min_fraction))


def _lerp(x0: float, y0: float, x1: float, y1: float, x: float) -> float:
    if x1 == x0:
        return y1
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def at(samples: Sequence[Sample], t: float) -> Sample:
    """The samples linearly interpolated at time `t` (clamped to the first and last sample)."""
    if not samples:
        raise ValueError("no samples")
    times = [s.t for s in samples]
    if t <= times[0]:
        return samples[0]
    if t >= times[-1]:
        return samples[-1]
    i = bisect_left(times, t)
    a, b = samples[i - 1], samples[i]
    broker = (None if a.broker_cpu is None or b.broker_cpu is None
              else _lerp(a.t, a.broker_cpu, b.t, b.broker_cpu, t))
    return Sample(t, _lerp(a.t, a.records, b.t, b.records, t), _lerp(a.t, a.cpu, b.t, b.cpu, t), broker)


def time_at_records(samples: Sequence[Sample], n: float) -> float | None:
    """When the destination first held `n` records, interpolated between the samples around the crossing.

    None if no sample reached `n`; the first sample's time if it already had.
    """
    for i, s in enumerate(samples):
        if s.records >= n:
            if i == 0:
                return s.t
            prev = samples[i - 1]
            return _lerp(prev.records, prev.t, s.records, s.t, n)
    return None


def _first(samples: Sequence[Sample]) -> int:
    i = next((i for i, s in enumerate(samples) if s.records > 0), None)
    if i is None:
        raise ValueError("no sample saw a record in the destination")
    return i


def _between(a: Sample, b: Sample, first_t: float) -> Span:
    broker = None if a.broker_cpu is None or b.broker_cpu is None else b.broker_cpu - a.broker_cpu
    return Span(start=a.t - first_t, records=b.records - a.records, seconds=b.t - a.t,
                cpu_seconds=b.cpu - a.cpu, broker_cpu_seconds=broker)


def whole_span(samples: Sequence[Sample], records: int | None = None) -> Span:
    """From the first sample that saw a record to the last sample.

    `records` (the dataset's count) is the span's records: the first batch to land counts too,
    as the benchmark always counted it.
    """
    first = samples[_first(samples)]
    span = _between(first, samples[-1], first.t)
    return Span(0.0, float(records if records is not None else samples[-1].records), span.seconds,
                span.cpu_seconds, span.broker_cpu_seconds)


def warm_boundary(samples: Sequence[Sample], records: int, rule: WarmRule = WARM) -> float | None:
    """The warmed span's start time: the later of `rule.fraction` of `records` and `rule.seconds`
    after the first record; None if the destination never held that share."""
    first_t = samples[_first(samples)].t
    by_records = time_at_records(samples, rule.fraction * records)
    if by_records is None:
        return None
    return max(by_records, first_t + rule.seconds)


def warmed_span(samples: Sequence[Sample], records: int, rule: WarmRule = WARM) -> tuple[Span, str | None]:
    """(span, note): the warmed span and None, or the whole span and why the copy was too short to warm."""
    whole = whole_span(samples, records)
    first_t = samples[_first(samples)].t
    t = warm_boundary(samples, records, rule)
    last = samples[-1]
    span = None if t is None or t >= last.t else _between(at(samples, t), last, first_t)
    if span is not None and span.seconds >= rule.min_seconds and span.records >= rule.min_fraction * records:
        return span, None
    if span is not None:
        had = f"; from {span.start:.1f} s it would hold {span.records / records:.0%} in {span.seconds:.1f} s"
    elif t is not None:
        had = f"; the boundary, {t - first_t:.1f} s after the first record, comes after the last"
    else:
        had = ""
    return whole, (f"too short to warm ({whole.seconds:.1f} s from the first record to the last{had}; "
                   f"a warmed span needs {rule.min_seconds:g} s and {rule.min_fraction:.0%} of the records "
                   f"after the boundary): whole span used")
