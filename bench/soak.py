"""Memory over a long run: the service copies a live, steady stream; its RSS is sampled every few seconds.

    python -m bench.soak [--minutes 30] [--rate 2000] [--codecs zstd,lz4] [--partitions 3] [-b host:port]
                         [--out bench/results/<date>-soak.md]

Without -b it starts a local Kafka broker (deploy/local/kafka's) for the run and stops it after. A `transcoder seed
--rate` process writes nginx records at the steady rate for the whole run; a `transcoder run` process copies them
into one lane per codec (isolated lanes, the default hot path). Every `--interval` seconds the copier's RSS
(/proc/<pid>/status VmRSS) and the records in the copies are read. At the end the seeder has stopped, the copier is
given time to catch up, the counts are compared and the copier is stopped with SIGTERM.

The verdict is the slope of RSS after warm-up (the first `--warmup` minutes are left out): a least-squares line
through the samples, in MB per 10 minutes, with the RSS at warm-up's end and at the end beside it.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from transcoder import __version__
from transcoder.dev.local_kafka import LocalKafka


@dataclass(frozen=True)
class RssSample:
    seconds: float  # since the copier started
    rss_bytes: int
    copied: int  # records in the copies (all lanes)


@dataclass(frozen=True)
class Trend:
    warm_rss_mb: float  # the first sample after warm-up
    end_rss_mb: float
    peak_rss_mb: float
    slope_mb_per_10min: float  # least-squares, samples after warm-up
    samples: int


def trend(samples: Sequence[RssSample], warmup_s: float) -> Trend:
    """RSS after warm-up: where it stood, where it ended, and its least-squares slope."""
    warm = [s for s in samples if s.seconds >= warmup_s]
    if len(warm) < 2:
        raise ValueError(f"{len(warm)} samples after {warmup_s:.0f} s of warm-up: run longer or warm up less")
    xs = [s.seconds for s in warm]
    ys = [s.rss_bytes / 1e6 for s in warm]
    slope, _ = statistics.linear_regression(xs, ys)
    return Trend(warm_rss_mb=ys[0], end_rss_mb=ys[-1], peak_rss_mb=max(ys), slope_mb_per_10min=slope * 600,
                 samples=len(warm))


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def records_in(consumer: Consumer, topics: Sequence[str], partitions: int) -> int:
    total = 0
    for topic in topics:
        for p in range(partitions):
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:  # the copier has not created it yet
                    raise
                continue
            total += high - low
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=2000.0, help="records/s written to the source")
    ap.add_argument("--codecs", default="zstd,lz4")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=5.0, help="minutes left out of the slope")
    ap.add_argument("-b", "--bootstrap-servers")
    ap.add_argument("--out", type=Path, help="Also write the Markdown report here.")
    args = ap.parse_args()
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]

    work = Path("/tmp") / f"transcoder-soak-{int(time.time())}"
    work.mkdir(parents=True)
    local = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        local = LocalKafka(work / "kafka")
        bootstrap = local.up().bootstrap
    source = f"soak.{int(time.time())}"
    count = int(args.rate * args.minutes * 60)
    samples: list[RssSample] = []
    try:
        seeder = subprocess.Popen(
            [sys.executable, "-m", "transcoder", "--log-level", "warning", "seed", "--kind", "nginx",
             "--count", str(count), "--rate", str(args.rate), "--partitions", str(args.partitions),
             "--topic", source, "-b", bootstrap],
            stdout=(work / "seed.log").open("wb"), stderr=subprocess.STDOUT)
        time.sleep(3)  # the source topic exists before the copier starts
        dests = [f"{source}.{c}" for c in codecs]
        conf = {"cluster": {"bootstrap_servers": bootstrap}, "group_id": f"soak-{source}",
                "routes": [{"source": source, "destinations": [{"codec": c} for c in codecs]}],
                "metrics": {"port": 0}}
        (work / "soak.yaml").write_text(yaml.safe_dump(conf))
        copier = subprocess.Popen(
            [sys.executable, "-m", "transcoder", "--log-level", "warning", "run", "--config",
             str(work / "soak.yaml")], stdout=(work / "run.log").open("wb"), stderr=subprocess.STDOUT)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-observer"})
        t0 = time.monotonic()
        while seeder.poll() is None or time.monotonic() - t0 < 5:
            if copier.poll() is not None:
                raise SystemExit(f"the copier exited with {copier.returncode}; see {work / 'run.log'}")
            samples.append(RssSample(time.monotonic() - t0, rss_bytes(copier.pid),
                                     records_in(consumer, dests, args.partitions)))
            print(f"{samples[-1].seconds:7.0f} s  RSS {samples[-1].rss_bytes / 1e6:7.1f} MB  "
                  f"copied {samples[-1].copied:,}", flush=True)
            time.sleep(args.interval)
        if seeder.returncode != 0:
            raise SystemExit(f"the seeder exited with {seeder.returncode}; see {work / 'seed.log'}")
        deadline = time.monotonic() + 120
        while (copied := records_in(consumer, dests, args.partitions)) < count * len(codecs):
            if time.monotonic() > deadline:
                break
            time.sleep(2)
        samples.append(RssSample(time.monotonic() - t0, rss_bytes(copier.pid), copied))
        consumer.close()
        copier.send_signal(signal.SIGTERM)
        exit_code = copier.wait(60)
    finally:
        if local is not None:
            local.down()

    t = trend(samples, args.warmup * 60)
    expected = count * len(codecs)
    lines = [
        f"# Memory soak — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Command: `python -m bench.soak {' '.join(sys.argv[1:])}`. transcoder {__version__}, Python "
        f"{platform.python_version()}, {platform.machine()}, {len(os.sched_getaffinity(0))} cores; "
        f"{count:,} nginx records at {args.rate:,.0f}/s into {args.partitions} partitions over "
        f"{args.minutes:g} min, copied by one `transcoder run` process with one lane per codec "
        f"({', '.join(codecs)}); the broker on the same machine.",
        "",
        f"Copied {samples[-1].copied:,} of {expected:,} records; the copier exited {exit_code} on SIGTERM.",
        "",
        f"RSS after {args.warmup:g} min of warm-up: {t.warm_rss_mb:.1f} MB; at the end {t.end_rss_mb:.1f} MB; peak "
        f"{t.peak_rss_mb:.1f} MB; least-squares slope over {t.samples} samples: "
        f"**{t.slope_mb_per_10min:+.2f} MB per 10 min**.",
        "",
        "| minute | RSS MB | records copied |",
        "|---|---|---|",
    ]
    step = max(1, len(samples) // 30)
    for s in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        lines.append(f"| {s.seconds / 60:.1f} | {s.rss_bytes / 1e6:.1f} | {s.copied:,} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
