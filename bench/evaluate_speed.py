"""The throughput of `transcoder evaluate` itself: MB of sample per CPU-second (per core) and per wall-second,
in-process vs Spark local[2], on the same sample, alternating, in one run.

    python -m bench.evaluate_speed [--count 200000] [--partitions 4] [--runs 3] [--out FILE]

CPU is the process tree's (this process, Spark's JVM and its Python workers) over each measurement; the
sample is generated once, in this process, before any timing. "MB" is the sample's record bytes times the
number of cells measured (every cell reads the whole sample).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from itertools import islice
from pathlib import Path

from bench.copiers import descendants, process_cpu
from transcoder.dev import datagen
from transcoder.evaluate.grid import grid, settings
from transcoder.evaluate.measure import measure_sample
from transcoder.evaluate.sample import from_records

CODECS = ["lz4", "zstd:3", "gzip:6"]
SIZES = [65536, 1 << 20]


def tree_cpu() -> float:
    return sum(process_cpu(p) for p in descendants(os.getpid()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    from transcoder.config import SparkConfig
    from transcoder.spark import session
    from transcoder.spark.evaluate import measure_on_spark

    gen = datagen.generate("nginx", headers=True)
    sample = from_records("nginx", [(r.key, r.value, r.headers, r.timestamp_ms) for r in islice(gen, args.count)],
                          args.partitions)
    cells = grid(settings(CODECS), SIZES)
    mb = sample.record_bytes / 1e6 * len(cells)
    spark = session.build(SparkConfig(master="local[2]"), app_name="bench-evaluate")
    measure_on_spark(sample.partitions, cells[:1], repeats=1, spark=spark)  # warm: workers started, JIT done
    rows: dict[str, list[tuple[float, float]]] = {"local": [], "spark local[2]": []}
    for _ in range(args.runs):
        for name in rows:
            c0, t0 = tree_cpu(), time.monotonic()
            if name == "local":
                measure_sample(sample.partitions, cells, repeats=1)
            else:
                measure_on_spark(sample.partitions, cells, repeats=1, spark=spark)
            wall, cpu = time.monotonic() - t0, tree_cpu() - c0
            rows[name].append((mb / cpu, mb / wall))
    spark.stop()
    local_wall = statistics.median(w for _, w in rows["local"])
    lines = [
        "# `transcoder evaluate`: its own throughput, in-process vs Spark local[2]",
        "",
        (f"Machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}. Date: {time.strftime('%Y-%m-%d')}."),
        (f"Command: `python -m bench.evaluate_speed --count {args.count} --partitions {args.partitions} "
        f"--runs {args.runs}`."),
        (f"Sample: {sample.records:,} generated nginx records with headers, {sample.record_bytes / 1e6:.1f} MB, in "
        f"{len(sample.partitions)} partitions; cells: {', '.join(CODECS)} x 64 KiB, 1 MiB ({len(cells)} cells, "
        "1 repeat each). Runs alternate local / Spark; Spark's session is started and warmed before timing."),
        "",
        "| engine | MB/s of sample per core (CPU) | MB/s of sample (wall) | wall vs local |",
        "|---|---|---|---|",
    ]
    for name, figs in rows.items():
        per_core = statistics.median(c for c, _ in figs)
        wall = statistics.median(w for _, w in figs)
        lines.append(f"| {name} | {per_core:.1f} ({', '.join(f'{c:.1f}' for c, _ in figs)}) | "
                     f"{wall:.1f} ({', '.join(f'{w:.1f}' for _, w in figs)}) | {wall / local_wall:.2f}x |")
    lines += ["", ("Medians of the runs, each run in brackets. Per core: the process tree's CPU seconds (Spark: its "
              "JVM and Python workers too). The two engines' sizes are identical (tests/spark/test_evaluate.py).")]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
