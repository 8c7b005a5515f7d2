"""Pure: benchmark figures per run, their medians and ranges over repeated runs, ratios to MirrorMaker 2,
and the Markdown tables of the results file (the copiers' table, Cloudflare's codec table, the 2017
benchmark's producer and consumer tables).

Throughput and CPU per record are given over two spans of each copy (bench.spans): the whole copy,
from the first record in the destination to the last, and the warmed span, which leaves out the
copier's warm-up (a JVM's JIT). The targets are judged on the warmed figures."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from bench.requests import ApiLoad, per_million
from bench.spans import Span, WarmRule, min_copy_seconds

#: Copier names, in the order of the results tables. mm2 uses transcoder's batching; mm2-default its own. franz-go:
#: the consume -> produce loop a Go shop would write (bench/franz_go).
COPIERS = ("transcoder", "transcoder-records", "mm2", "mm2-default", "kcat", "native-floor", "franz-go",
           "batch-floor",
           "spark-local1", "spark-local2", "spark-local1-records", "spark-local2-records", "spark-cluster1",
           "spark-cluster2", "spark-local1-own", "spark-local2-own", "spark-cluster1-own", "spark-cluster2-own")
BASELINE = "mm2"  # every figure is also given as a ratio to MirrorMaker 2 at the same codec and batching


@dataclass(frozen=True)
class LiveLatency:
    """A live trickle through a copier (bench.measure), timed by an independent reader of the destination."""

    rate: float  # records/s asked
    reached: float  # records/s the timed records went at (below `rate`: the driver could not keep up)
    records: int  # timed records read from the destination
    sent: int  # records the trickle sent in all, untimed ones too
    p50: float  # seconds, the record's timestamp (set when produced) -> read from the destination
    p99: float
    driver: str = "python"  # the trickle's producer and reader: python (confluent-kafka) or franz-go (Go)
    produce_p99: float | None = None  # the driver's own share: timestamp -> its producer's acknowledgement
    #: p50/p99 over every record the reader read, the untimed ones before and after the timed too: the records
    #: transcoder's /status counts (franz-go driver only)
    all_p50: float | None = None
    all_p99: float | None = None
    #: the machine's cores busy while the compiled driver ran (the copier, the broker and the driver itself)
    machine_busy: float | None = None
    status_p50: float | None = None  # what transcoder's /status says of the live destination (None: not transcoder)
    status_p99: float | None = None


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
    live: LiveLatency | None = None  # the live trickle's latency after the copy (None: not measured)
    broker_cpu_seconds: float | None = None  # the broker's process over the same span (a local broker only)
    warm: Span | None = None  # the warmed span (bench.spans); the whole span again when the copy was too short
    warm_note: str | None = None  # why the warmed span is the whole span (the copy was too short), else None
    requests: Mapping[str, ApiLoad] | None = None  # the copier's broker requests by API (a request-logging broker)
    #: the copier's busiest thread from the last sample before its first record in the destination to its last
    #: record: CPU s per s (1.0: a core all the time); a copier bound by one thread shows ~1.0 while its whole CPU
    #: may be more
    busiest_thread: float | None = None
    broker_busiest_thread: float | None = None  # the same of the local broker's threads (None with -b)
    #: the machine's cores busy over the same span (all processes and the kernel): near the core count, the copy was
    #: bound by the machine, whoever used it
    machine_busy: float | None = None
    #: a Spark copier's CPU seconds over the whole copy by kind of process (PROCESS_KINDS; None: not a Spark copier)
    cpu_by_process: Mapping[str, float] | None = None

    @property
    def latency_p50(self) -> float | None:
        return None if self.live is None else self.live.p50

    @property
    def latency_p99(self) -> float | None:
        return None if self.live is None else self.live.p99


#: A Spark copy's processes by kind, in the order of the table: (kind, what its CPU is)
PROCESS_KINDS = (
    ("driver Python", "transcoder run: the engine, folding each micro-batch's tallies, metrics"),
    ("driver JVM", "SparkSubmit: planning each micro-batch, scheduling its tasks; on local[N] the executor too"),
    ("executor JVMs", "CoarseGrainedExecutorBackend (a cluster's): task start-up, Python workers' I/O"),
    ("Python workers", "pyspark's daemon and workers: the tasks' reads, re-batching, compression, produce; on the "
                       "driver, spark.read: transcoder's planner"),
    ("cluster daemons", "the standalone master and workers"),
    ("other", "anything else in the copier's process trees"),
)


def process_kind(cmdline: str) -> str:
    """Pure: the kind (PROCESS_KINDS) of a Spark copier's process from its command line (NUL-separated args
    joined by spaces)."""
    java = cmdline.split(" ", 1)[0].endswith("java")
    if java:
        if "CoarseGrainedExecutorBackend" in cmdline:
            return "executor JVMs"
        if "deploy.master.Master" in cmdline or "deploy.worker.Worker" in cmdline:
            return "cluster daemons"
        return "driver JVM"
    if "spark-class" in cmdline or "spark-submit" in cmdline:  # the JVM's launcher scripts
        return "driver JVM"
    if "pyspark" in cmdline:
        return "Python workers"
    if " -m transcoder" in cmdline or "/transcoder " in cmdline:
        return "driver Python"
    return "other"


def process_table(copies: Sequence[CopyRun]) -> str:
    """One row per Spark copy: its CPU per 1M records by kind of process over the whole copy, each kind's share,
    and the copy's micro-batch-independent total."""
    kinds = [k for k, _ in PROCESS_KINDS]
    head = "| codec | copier | run | " + " | ".join(f"{k} (s/1M)" for k in kinds) + " | all (s/1M) |"
    lines = [head, "|" + "---|" * (head.count(" | ") + 1)]
    runs: dict[tuple[str, str], int] = {}
    for r in copies:
        runs[(r.copier, r.codec)] = run = runs.get((r.copier, r.codec), 0) + 1
        if r.cpu_by_process is None:
            continue
        total = sum(r.cpu_by_process.values())
        per_m = 1e6 / r.records
        cells = [f"{v * per_m:.2f} ({v / total:.0%})" if total > 0 else f"{v * per_m:.2f}"
                 for v in (r.cpu_by_process.get(k, 0.0) for k in kinds)]
        lines.append(f"| {r.codec} | {r.copier} | {run} | " + " | ".join(cells) + f" | {total * per_m:.2f} |")
    return "\n".join(lines)


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
    "busiest_thread": (lambda r: r.busiest_thread, "cores", False),
    "broker_busiest_thread": (lambda r: r.broker_busiest_thread, "cores", False),
    "machine_busy": (lambda r: r.machine_busy, "cores", False),
    # over the warmed span: the records after the warm boundary (bench.spans)
    "warm_records_per_s": (lambda r: r.warm.records_per_s if r.warm else None, "records/s", True),
    "warm_cpu_per_1m": (lambda r: r.warm.cpu_per_1m if r.warm else None, "CPU s / 1M", False),
    "warm_broker_cpu_per_1m": (lambda r: r.warm.broker_cpu_per_1m if r.warm else None, "CPU s / 1M", False),
    "warm_start": (lambda r: r.warm.start if r.warm else None, "s", False),  # after the first record
    "warm_share": (lambda r: r.warm.records / r.records if r.warm and r.records else None, "x", True),
}


def count_to_warm(runs: Iterable[CopyRun], rule: WarmRule) -> int | None:
    """A --count whose copies would last long enough to warm, at the fastest too-short copy's whole rate
    (rounded up to 100,000; a copier speeds up once warm, so take more); None if no copy was too short."""
    rates = [r.records / r.seconds for r in runs if r.warm_note is not None and r.seconds > 0]
    if not rates:
        return None
    need = max(rates) * min_copy_seconds(rule)
    return None if need == float("inf") else int(-(-need // 100_000) * 100_000)


def too_short(runs: Iterable[CopyRun]) -> dict[tuple[str, str], tuple[int, int]]:
    """(copier, codec) -> (runs whose warmed span fell back to the whole span, runs)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for r in runs:
        short, n = out.get((r.copier, r.codec), (0, 0))
        out[(r.copier, r.codec)] = (short + (r.warm_note is not None), n + 1)
    return out


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
    figure: str  # the figure judged
    against: str  # the copier compared with
    bound: float
    at_least: bool  # True: ratio >= bound; False: ratio <= bound
    whole: str | None = None  # the same figure over the whole copy, shown beside the judged one
    copier: str = "transcoder"  # whose figure is judged
    #: the ratio is against's figure over copier's (CPU per record -> records per core)
    inverse: bool = False
    optional: bool = False  # left out (not n/a) when either copier did not run


#: The issue's targets, each a ratio of transcoder's median to a MirrorMaker 2 variant's at the same codec.
#: Throughput and CPU are judged over the warmed span (a JVM's warm-up left out); the whole copy's ratio
#: is shown beside. The on-disk ratio is the whole destination's.
TARGETS = (
    Target("CPU per 1M records <= 0.8x MirrorMaker 2 (same codec and batching)", "warm_cpu_per_1m", "mm2", 0.8,
           False, whole="cpu_per_1m"),
    Target("throughput >= 1.2x MirrorMaker 2 (one lane)", "warm_records_per_s", "mm2", 1.2, True,
           whole="records_per_s"),
    Target("on-disk ratio >= 1.5x MirrorMaker 2 with default batching", "ratio", "mm2-default", 1.5, True),
    # The compiled hot path (issue 15), one lane.
    Target("CPU per 1M records <= 0.5x MirrorMaker 2 (compiled hot path)", "warm_cpu_per_1m", "mm2", 0.5, False,
           whole="cpu_per_1m"),
    Target("throughput >= 1.5x MirrorMaker 2 (compiled hot path)", "warm_records_per_s", "mm2", 1.5, True,
           whole="records_per_s"),
    # The Spark engine (issue 11): records/s per core is 1 / CPU per record.
    Target("Spark engine local[1] records/s per core >= 0.5x the service lane's", "warm_cpu_per_1m", "transcoder",
           0.5, True, whole="cpu_per_1m", copier="spark-local1", inverse=True, optional=True),
    Target("Spark engine local[2] records/s >= 1.6x local[1]", "warm_records_per_s", "spark-local1", 1.6, True,
           whole="records_per_s", copier="spark-local2", optional=True),
    Target("Spark engine, standalone cluster: two 1-core workers' records/s >= 1.6x one's", "warm_records_per_s",
           "spark-cluster1", 1.6, True, whole="records_per_s", copier="spark-cluster2", optional=True),
    Target("Spark engine CPU per 1M records <= 2x the service lane's (standalone, one worker)", "warm_cpu_per_1m",
           "transcoder", 2.0, False, whole="cpu_per_1m", copier="spark-cluster1", optional=True),
    Target("Spark engine, own reader (the default): CPU per 1M records <= 1.5x the service lane's (standalone, one "
           "worker)", "warm_cpu_per_1m", "transcoder", 1.5, False, whole="cpu_per_1m", copier="spark-cluster1-own",
           optional=True),
    Target("Spark engine, own reader: two 1-core workers' records/s >= 1.6x one's", "warm_records_per_s",
           "spark-cluster1-own", 1.6, True, whole="records_per_s", copier="spark-cluster2-own", optional=True),
    Target("Spark engine, own reader: local[2] records/s >= 1.6x local[1]", "warm_records_per_s",
           "spark-local1-own", 1.6, True, whole="records_per_s", copier="spark-local2-own", optional=True),
)


@dataclass(frozen=True)
class Verdict:
    target: Target
    codec: str
    ratio: float | None  # transcoder's median over the other copier's, of the judged figure
    met: bool | None  # None when either figure is missing
    whole_ratio: float | None = None  # the same over the whole copy (targets with `whole`)


def verdicts(summary: dict[tuple[str, str], dict[str, Spread | None]], codecs: Sequence[str]) -> list[Verdict]:
    """Every target at every codec: the ratio of the judged figure (and of the whole copy's), met or not."""
    out = []
    for t in TARGETS:
        for c in codecs:
            mine, theirs = summary.get((t.copier, c)), summary.get((t.against, c))
            if t.optional and not (mine and theirs):
                continue
            if t.inverse:
                mine, theirs = theirs, mine
            r = ratio(mine[t.figure], theirs[t.figure]) if mine and theirs else None
            whole = ratio(mine[t.whole], theirs[t.whole]) if mine and theirs and t.whole else None
            met = None if r is None else (r >= t.bound if t.at_least else r <= t.bound)
            out.append(Verdict(t, c, r, met, whole))
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


def _times(v: float | None) -> str:
    return "n/a" if v is None else f"{_num(v)}x"


def _x(v: float | None) -> str:
    return "" if v is None else f" · {v:.2f}x"


def _warm_cell(s: dict[str, Spread | None], short: tuple[int, int] | None) -> str:
    """Where the warmed span starts (s after the first record) and its share of the records; too-short runs."""
    start, share = s.get("warm_start"), s.get("warm_share")
    if start is None or share is None:
        return "n/a"
    text = f"from {_spread(start, digits=1)} s, {_spread(share, 100, 0)}% of records"
    if short and short[0]:
        text += f"; {short[0]} of {short[1]} runs too short: whole copy"
    return text


def copiers_table(summary: dict[tuple[str, str], dict[str, Spread | None]], codecs: Sequence[str],
                  short: dict[tuple[str, str], tuple[int, int]] | None = None) -> str:
    """Median (min–max) per copier and codec, each figure also as a ratio to mm2 at that codec.

    Records/s and CPU per 1M are given over the whole copy and over the warmed span; `short` (from
    `too_short`) says how many runs were too short to warm.
    """
    head = ("| codec | copier | records/s | records/s warmed | uncompressed MB/s | CPU s per 1M records | "
            "CPU s per 1M warmed | broker CPU s per 1M records | broker CPU s per 1M warmed | on disk (MB) | "
            "ratio to uncompressed | p50 latency (ms) | p99 latency (ms) | start-up (s) | busiest thread (cores) | "
            "broker's busiest thread (cores) | machine busy (cores) | warmed span |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for c in codecs:
        base = summary.get((BASELINE, c))
        for copier in COPIERS:
            s = summary.get((copier, c))
            if s is None:
                continue

            def cell(name: str, scale: float = 1.0, digits: int = 2, s: dict = s, base: dict | None = base,
                     copier: str = copier) -> str:
                rel = ratio(s[name], base[name]) if base is not None and copier != BASELINE else None
                return _spread(s[name], scale, digits) + _x(rel)

            lines.append(f"| {c} | {copier} | {cell('records_per_s', digits=0)} | "
                         f"{cell('warm_records_per_s', digits=0)} | "
                         f"{cell('mb_per_s', digits=1)} | {cell('cpu_per_1m')} | {cell('warm_cpu_per_1m')} | "
                         f"{cell('broker_cpu_per_1m')} | {cell('warm_broker_cpu_per_1m')} | "
                         f"{cell('disk_bytes', 1e-6, 1)} | {cell('ratio')} | "
                         f"{cell('latency_p50', 1e3, 0)} | {cell('latency_p99', 1e3, 0)} | "
                         f"{cell('startup', digits=1)} | {cell('busiest_thread')} | {cell('broker_busiest_thread')} | "
                         f"{cell('machine_busy')} | "
                         f"{_warm_cell(s, (short or {}).get((copier, c)))} |")
    return "\n".join(lines)


def latency_table(copies: Sequence[CopyRun]) -> str:
    """One row per copy with a live trickle: the rate asked and reached, what the independent reader saw, the
    driver's own share, and what transcoder's /status said of the same destination."""
    head = ("| codec | copier | run | driver | records/s asked | reached | timed records | p50 (ms) | p99 (ms) | "
            "driver's produce p99 (ms) | every record read: p50 (ms) | p99 (ms) | /status p50 (ms) | "
            "/status p99 (ms) | machine busy (cores) |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    runs: dict[tuple[str, str], int] = {}

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v * 1e3:,.0f}"

    for r in copies:
        runs[(r.copier, r.codec)] = run = runs.get((r.copier, r.codec), 0) + 1
        if (v := r.live) is not None:
            lines.append(f"| {r.codec} | {r.copier} | {run} | {v.driver} | {v.rate:,.0f} | {v.reached:,.0f} | "
                         f"{v.records:,} | {ms(v.p50)} | {ms(v.p99)} | {ms(v.produce_p99)} | {ms(v.all_p50)} | "
                         f"{ms(v.all_p99)} | {ms(v.status_p50)} | {ms(v.status_p99)} | "
                         f"{'n/a' if v.machine_busy is None else f'{v.machine_busy:.2f}'} |")
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


def verdict_lines(summary: dict[tuple[str, str], dict[str, Spread | None]], codecs: Sequence[str],
                  short: dict[tuple[str, str], tuple[int, int]] | None = None) -> str:
    """One line per target and codec: the judged ratio (warmed span), the whole copy's beside it.

    A target judged on a warmed figure says so when a run of either copier was too short to warm
    (its warmed figure is then its whole copy's).
    """
    lines = []
    for v in verdicts(summary, codecs):
        state = "n/a" if v.met is None else ("met" if v.met else "missed")
        if v.target.whole is None:
            lines.append(f"- {v.target.name}, {v.codec}: {_times(v.ratio)} — {state}")
            continue
        fell = [f"{copier} {short[(copier, v.codec)][0]} of {short[(copier, v.codec)][1]}"
                for copier in (v.target.copier, v.target.against)
                if short and short.get((copier, v.codec), (0, 0))[0]]
        caveat = f" (too short to warm, whole copy used: {', '.join(fell)} runs)" if fell else ""
        lines.append(f"- {v.target.name}, {v.codec}: {_times(v.ratio)} warmed (whole copy {_times(v.whole_ratio)})"
                     f"{caveat} — {state}")
    return "\n".join(lines)


def requests_table(runs: Iterable[CopyRun], codecs: Sequence[str], *, min_share: float = 0.01) -> str:
    """Requests and broker handler ms per 1M records by codec, copier and API (medians over runs); APIs under
    `min_share` of a copy's handler time are folded into "other"."""
    by: dict[tuple[str, str], list[dict[str, ApiLoad]]] = {}
    for r in runs:
        if r.requests is not None:
            by.setdefault((r.codec, r.copier), []).append(per_million(dict(r.requests), r.records))
    rows = ["| codec | copier | API | requests per 1M | broker handler ms per 1M | total ms per 1M |",
            "|---|---|---|---|---|---|"]
    for codec in codecs:
        for (c, copier), loads in sorted(by.items()):
            if c != codec:
                continue
            apis = sorted({a for lo in loads for a in lo})
            med = {a: tuple(statistics.median(getattr(lo.get(a, ApiLoad(a, 0, 0.0, 0.0)), f) for lo in loads)
                            for f in ("requests", "local_ms", "total_ms")) for a in apis}
            total_local = sum(m[1] for m in med.values()) or 1.0
            other = [0.0, 0.0, 0.0]
            for a, (n, local, total) in sorted(med.items(), key=lambda kv: -kv[1][1]):
                if local / total_local < min_share:
                    other = [other[0] + n, other[1] + local, other[2] + total]
                    continue
                rows.append(f"| {codec} | {copier} | {a} | {n:,.0f} | {local:,.1f} | {total:,.0f} |")
            if other[0]:
                rows.append(f"| {codec} | {copier} | other | {other[0]:,.0f} | {other[1]:,.1f} | {other[2]:,.0f} |")
            rows.append(f"| {codec} | {copier} | **all** | {sum(m[0] for m in med.values()):,.0f} | "
                        f"{sum(m[1] for m in med.values()):,.1f} | {sum(m[2] for m in med.values()):,.0f} |")
    return "\n".join(rows)

