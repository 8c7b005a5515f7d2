"""Copy 1M realistic records through one lane per codec; report records/s and CPU per 1M records.

    python -m bench.copy_per_codec [--records 1000000] [--kind nginx] [-b host:port]

Without -b it starts the local Kafka broker (deploy/local/kafka) for the run and stops it after.
Each codec runs alone (one lane, one process-wide CPU reading), then all codecs run together.
Figures: records/s (wall), process CPU seconds per 1M records (Python and librdkafka threads),
and the lane's own Python thread CPU in microseconds per record.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time
from datetime import UTC, datetime
from pathlib import Path

from transcoder import __version__, config, logs
from transcoder.codecs import CODECS
from transcoder.dev import seed
from transcoder.dev.local_kafka import LocalKafka
from transcoder.service.runner import Service


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_lanes(bootstrap: str, source: str, codecs: list[str], group: str) -> tuple[float, float, dict[str, float]]:
    conf = config.parse({
        "cluster": {"bootstrap_servers": bootstrap}, "group_id": group,
        "routes": [{"source": source, "destinations": [{"codec": c, "topic": f"{{source}}.{group}.{c}"}
                                                       for c in codecs]}],
        "metrics": {"port": 0},
    }, source="bench", environ={})
    service = Service(conf)
    cpu0, t0 = _cpu(), time.perf_counter()
    service.run(until_caught_up=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    return wall, cpu, {lane.spec.name.rsplit(".", 1)[-1]: lane.status.loop_cpu_seconds for lane in service.lanes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--kind", default="nginx")
    ap.add_argument("-b", "--bootstrap-servers")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--out", type=Path, help="Also write the Markdown table here.")
    args = ap.parse_args()
    logs.configure("warning")

    local = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        local = LocalKafka(Path("/tmp") / f"transcoder-bench-{int(time.time())}")
        bootstrap = local.up().bootstrap
    try:
        source = f"bench.{args.kind}.{int(time.time())}"
        res = seed.seed(seed.generated(args.kind, seed_value=1, keys=True, headers=False,
                                       start_ms=seed.generator_start_ms(args.records, None, 2000.0,
                                                                        int(time.time() * 1000)),
                                       events_per_second=2000.0),
                        cluster={"bootstrap.servers": bootstrap}, topic=source, count=args.records,
                        partitions=args.partitions)
        n = res.records
        rows = []
        for codec in CODECS:
            wall, cpu, loop = run_lanes(bootstrap, source, [codec], f"alone-{codec}")
            rows.append((codec, 1, n / wall, cpu / n * 1e6, loop[codec] / n * 1e6))
        wall, cpu, loop = run_lanes(bootstrap, source, list(CODECS), "together")
        rows.append(("all 5 together", 5, 5 * n / wall, cpu / (5 * n) * 1e6, sum(loop.values()) / (5 * n) * 1e6))
    finally:
        if local is not None:
            local.down()

    lines = [
        f"# copy per codec — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"transcoder {__version__}, Python {platform.python_version()}, {platform.machine()}, "
        f"{_cpu_model()}, {_cores()} cores; {n:,} {args.kind} records, {res.bytes / n:,.0f} B average, "
        f"{args.partitions} partitions; source uncompressed.",
        "",
        "| lanes | lanes in run | records/s (per lane) | process CPU s per 1M records per lane | "
        "Python loop CPU µs per record per lane |",
        "|---|---|---|---|---|",
    ]
    for name, lanes, rps, cpu_per_m, loop_us in rows:
        per_lane = rps / lanes
        lines.append(f"| {name} | {lanes} | {per_lane:,.0f} | {cpu_per_m:,.2f} | {loop_us:,.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
