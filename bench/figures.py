"""Pure: benchmark figures per run, their medians and ranges over repeated runs, ratios to MirrorMaker 2,
and the Markdown tables of the results file (the copiers' table, Cloudflare's codec table, the 2017
benchmark's producer and consumer tables)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

#: Copier names, in the order of the results tables. mm2 uses transcoder's batching; mm2-default its own.
COPIERS = ("transcoder", "mm2", "mm2-default", "kcat", "spark")
BASELINE = "mm2"  # every figure is also given as a ratio to MirrorMaker 2 at the same codec and batching


@dataclass(frozen=True)
class CopyRun:
    """One copy of the whole dataset by one copier with one codec."""

    copier: str
    codec: str
    records: int
    uncompressed_bytes: int  # key + value + headers of the records copied
    seconds: float  # from the first record in the destination to the last
    cpu_seconds: float  # the copier's processes over the same span (JVM or Python included)
    startup_seconds: float  # launch to the first record in the destination
    disk_bytes: int  # destination on disk after the copy (DescribeLogDirs)
    latency_p50: float | None = None  # seconds, source timestamp -> readable in the destination
    latency_p99: float | None = None
    broker_cpu_seconds: float | None = None  # the broker's process over the same span (a local broker only)


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        vals = list(values)
        if not vals:
            return None
        return cls(statistics.median(vals), min(vals), max(vals))


#: figure name -> (how it is computed from one run, unit, higher is better)
FIGURES: dict[str, tuple[Callable[[CopyRun], float | None], str, bool]] = {
    "records_per_s": (lambda r: r.records / r.seconds if r.seconds > 0 else None, "records/s", True),
    "mb_per_s": (lambda r: r.uncompressed_bytes / 1e6 / r.seconds if r.seconds > 0 else None, "MB/s", True),
    "cpu_per_1m": (lambda r: r.cpu_seconds / r.records * 1e6 if r.records else None, "CPU s / 1M", False),
    "broker_cpu_per_1m": (lambda r: r.broker_cpu_seconds / r.records * 1e6
                          if r.records and r.broker_cpu_seconds is not None else None, "CPU s / 1M", False),
    "disk_bytes": (lambda r: float(r.disk_bytes), "bytes", False),
    "ratio": (lambda r: r.uncompressed_bytes / r.disk_bytes if r.disk_bytes else None, "x", True),
    "latency_p50": (lambda r: r.latency_p50, "s", False),
    "latency_p99": (lambda r: r.latency_p99, "s", False),
    "startup": (lambda r: r.startup_seconds, "s", False),
}


def summarise(runs: Iterable[CopyRun]) -> dict[tuple[str, str], dict[str, Spread | None]]:
    """(copier, codec) -> figure -> median and min-max over that pair's runs."""
    groups: dict[tuple[str, str], list[CopyRun]] = {}
    for r in runs:
        groups.setdefault((r.copier, r.codec), []).append(r)
    out = {}
    for key, rs in groups.items():
        out[key] = {name: Spread.of(v for v in (f(r) for r in rs) if v is not None)
                    for name, (f, _, _) in FIGURES.items()}
    return out


def ratio(a: Spread | None, b: Spread | None) -> float | None:
    """Median over median; None when either is missing or the baseline is 0."""
    if a is None or b is None or b.median == 0:
        return None
    return a.median / b.median


@dataclass(frozen=True)
class Target:
    name: str
    figure: str
    against: str  # the copier compared with
    bound: float
    at_least: bool  # True: ratio >= bound; False: ratio <= bound


#: The issue's targets, each a ratio of transcoder's median to a MirrorMaker 2 variant's at the same codec.
TARGETS = (
    Target("CPU per 1M records <= 0.8x MirrorMaker 2 (same codec and batching)", "cpu_per_1m", "mm2", 0.8, False),
    Target("throughput >= 1.2x MirrorMaker 2 (one lane)", "records_per_s", "mm2", 1.2, True),
    Target("on-disk ratio >= 1.5x MirrorMaker 2 with default batching", "ratio", "mm2-default", 1.5, True),
)


def verdicts(summary: dict[tuple[str, str], dict[str, Spread | None]],
             codecs: Sequence[str]) -> list[tuple[Target, str, float | None, bool | None]]:
    """(target, codec, transcoder/other ratio, met?) for every target and codec with both figures."""
    out = []
    for t in TARGETS:
        for c in codecs:
            mine, theirs = summary.get(("transcoder", c)), summary.get((t.against, c))
            r = ratio(mine[t.figure], theirs[t.figure]) if mine and theirs else None
            met = None if r is None else (r >= t.bound if t.at_least else r <= t.bound)
            out.append((t, c, r, met))
    return out


# ---------------------------------------------------------------- formatting
def _num(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def _spread(s: Spread | None, scale: float = 1.0, digits: int = 2) -> str:
    if s is None:
        return "n/a"
    if s.low == s.high:
        return _num(s.median * scale, digits)
    return f"{_num(s.median * scale, digits)} ({_num(s.low * scale, digits)}–{_num(s.high * scale, digits)})"


def _x(v: float | None) -> str:
    return "" if v is None else f" · {v:.2f}x"


def copiers_table(summary: dict[tuple[str, str], dict[str, Spread | None]], codecs: Sequence[str]) -> str:
    """Median (min–max) per copier and codec, each figure also as a ratio to mm2 at that codec."""
    head = ("| codec | copier | records/s | uncompressed MB/s | CPU s per 1M records | broker CPU s per 1M records | "
            "on disk (MB) | ratio to uncompressed | p50 latency (ms) | p99 latency (ms) | start-up (s) |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for c in codecs:
        base = summary.get((BASELINE, c))
        for copier in COPIERS:
            s = summary.get((copier, c))
            if s is None:
                continue

            def cell(name: str, scale: float = 1.0, digits: int = 2) -> str:
                rel = ratio(s[name], base[name]) if base is not None and copier != BASELINE else None
                return _spread(s[name], scale, digits) + _x(rel)

            lines.append(f"| {c} | {copier} | {cell('records_per_s', digits=0)} | {cell('mb_per_s', digits=1)} | "
                         f"{cell('cpu_per_1m')} | {cell('broker_cpu_per_1m')} | {cell('disk_bytes', 1e-6, 1)} | "
                         f"{cell('ratio')} | "
                         f"{cell('latency_p50', 1e3, 0)} | {cell('latency_p99', 1e3, 0)} | {cell('startup', digits=1)} |")
    return "\n".join(lines)


def cloudflare_table(summary: dict[tuple[str, str], dict[str, Spread | None]], codecs: Sequence[str],
                     records: int, copier: str = "transcoder") -> str:
    """codec | CPU seconds | messages | CPU time per 1M | CPU ratio to none | disk | avg message size | ratio.

    Medians of `copier`'s runs; the compression ratio is to the `none` destination's disk, as
    Cloudflare computed it.
    """
    lines = ["| codec | CPU seconds | messages | CPU time per 1M (s) | CPU ratio to none | disk (MB) | "
             "average message size on disk (B) | compression ratio |", "|---|---|---|---|---|---|---|---|"]
    none = summary.get((copier, "none"))
    for c in codecs:
        s = summary.get((copier, c))
        if s is None or s["cpu_per_1m"] is None or s["disk_bytes"] is None:
            continue
        cpu_per_1m = s["cpu_per_1m"].median
        disk = s["disk_bytes"].median
        cpu_ratio = ratio(s["cpu_per_1m"], none["cpu_per_1m"]) if none else None
        comp = ratio(none["disk_bytes"], s["disk_bytes"]) if none else None
        lines.append(f"| {c} | {_num(cpu_per_1m * records / 1e6)} | {records:,} | {_num(cpu_per_1m)} | "
                     f"{_num(cpu_ratio)} | {_num(disk / 1e6, 1)} | {_num(disk / records, 1)} | {_num(comp)} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class ClientRun:
    """One producer (or consumer) pass over the dataset with one codec: the 2017 benchmark's rows."""

    codec: str
    records: int
    uncompressed_bytes: int
    seconds: float
    traffic_bytes: int  # record batches as sent (= as stored, compression.type=producer)


def client_table(runs: Iterable[ClientRun], codecs: Sequence[str]) -> str:
    """codec | time | msg/s | MB/s | traffic: medians (min–max) over the runs."""
    by: dict[str, list[ClientRun]] = {}
    for r in runs:
        by.setdefault(r.codec, []).append(r)
    lines = ["| codec | time (s) | msg/s | MB/s (uncompressed) | traffic (MB) |", "|---|---|---|---|---|"]
    for c in codecs:
        rs = by.get(c)
        if not rs:
            continue
        t = Spread.of(r.seconds for r in rs)
        rate = Spread.of(r.records / r.seconds for r in rs if r.seconds > 0)
        mbs = Spread.of(r.uncompressed_bytes / 1e6 / r.seconds for r in rs if r.seconds > 0)
        traffic = Spread.of(r.traffic_bytes / 1e6 for r in rs)
        lines.append(f"| {c} | {_spread(t)} | {_spread(rate, digits=0)} | {_spread(mbs, digits=1)} | "
                     f"{_spread(traffic, digits=1)} |")
    return "\n".join(lines)


def verdict_lines(summary: dict[tuple[str, str], dict[str, Spread | None]], codecs: Sequence[str]) -> str:
    lines = []
    for t, c, r, met in verdicts(summary, codecs):
        state = "n/a" if met is None else ("met" if met else "missed")
        lines.append(f"- {t.name}, {c}: {_num(r)}x — {state}")
    return "\n".join(lines)

