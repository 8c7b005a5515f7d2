"""Benchmark transcoder side by side with MirrorMaker 2 and kcat, on one machine, in one run.

    python -m bench [--kind nginx | --from-file FILE] [--count N] [--runs 3] [--codecs ...] [-b host:port]

It starts the local Kafka (unless -b), seeds the dataset once (uncompressed), and copies it with
each copier and codec, `--runs` times (interleaved, so the machine's noise falls on all alike).
Per copy: records/s, uncompressed MB/s, copier CPU seconds per 1M records (whole processes) and
the local broker's, on-disk bytes and ratio, p50/p99 end-to-end latency of a live trickle; then the
producer and consumer passes of the 2017 tables. Records/s and CPU are given over the whole copy
(first record in the destination to the last) and over its warmed span, which starts at the later
of the destination holding --warm-fraction of the records and --warm-seconds after its first
record (a JVM's warm-up left out); the targets (ratios to MirrorMaker 2) are judged on the warmed
figures. A copy too short to warm (its warmed span under 3 s or 20% of the records) falls back to
its whole span, with a note: warmed figures need copies lasting --warm-seconds + 3 s or more (the
default 1M records copy in ~5 s: take --count 3000000 or more). Results:
bench/results/<date>-<dataset>.md.
"""

from __future__ import annotations

import shlex
import signal
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import click

from bench import copiers, figures
from bench.run import Dataset, Trickle, bench, report
from bench.spans import WARM, WarmRule
from transcoder import logs
from transcoder.codecs import CODECS
from transcoder.dev.local_kafka import LocalKafka
from transcoder.errors import TranscoderError

ROOT = Path(__file__).resolve().parents[1]


@click.command(help=__doc__)
@click.option("--kind", default="nginx", show_default=True, help="Built-in generator kind.")
@click.option("--from-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Your own data: one record per line (or NDJSON), as `transcoder seed --from-file` reads it.")
@click.option("--key-field", help="With an NDJSON --from-file: the field whose value becomes the record key.")
@click.option("--count", type=int, default=1_000_000, show_default=True, help="Records in the dataset.")
@click.option("--runs", type=int, default=3, show_default=True)
@click.option("--codecs", default=",".join(CODECS), show_default=True)
@click.option("--copiers", "copier_names", default="transcoder,mm2,mm2-default,kcat", show_default=True,
              help=f"Of {', '.join(figures.COPIERS)}; transcoder-records: `hot_path: records`; spark-localN: "
                   "`transcoder run --engine spark` on local[N] with Spark's Kafka source (-own: transcoder's "
                   "reader, the default; -records: with `hot_path: records`); spark-clusterN: on a standalone "
                   "cluster of N 1-core workers; native-floor: bench/native_floor "
                   "(Rust, librdkafka; needs cargo); franz-go: bench/franz_go (Go, franz-go; needs go).")
@click.option("--fetch-partition-bytes", type=click.IntRange(1), default=None,
              help="max.partition.fetch.bytes of transcoder (its cluster config) and franz-go "
                   "(FetchMaxPartitionBytes); unset: 1 MiB, every client's default. The other copiers are refused.")
@click.option("--spark-trigger-ms", type=click.IntRange(0), default=None,
              help="spark.trigger_interval_ms of the spark-* copiers (a micro-batch at most every N ms; unset: the "
                   "config's default, 0: each as soon as the last ends). Their latency is measured at it.")
@click.option("--partitions", type=int, default=1, show_default=True,
              help="Source partitions (MirrorMaker 2 runs one task, transcoder one lane).")
@click.option("--latency-records", type=int, default=5000, show_default=True)
@click.option("--latency-rate", default="2000", show_default=True, callback=lambda _c, _p, v: _rate(v),
              help="Records/s of the live trickle, or N% of each copy's own warmed records/s (its maximum here).")
@click.option("--latency-driver", type=click.Choice(["python", "franz-go"]), default="python", show_default=True,
              help="The trickle's producer and reader: python (confluent-kafka, up to ~50,000 records/s here) or "
                   "franz-go (bench/franz_go/trickle, compiled; needs go).")
@click.option("--warm-fraction", type=click.FloatRange(0.0, 1.0 - WARM.min_fraction), default=WARM.fraction,
              show_default=True,
              help="The warmed span starts once the destination holds this share of the records...")
@click.option("--warm-seconds", type=click.FloatRange(0.0), default=WARM.seconds, show_default=True,
              help="...and no sooner than this long after its first record (records/s and CPU are given over "
                   "the whole copy and over this warmed span; the targets are judged on the warmed figures).")
@click.option("--client-tables/--no-client-tables", default=True, help="The 2017 producer and consumer passes.")
@click.option("--request-log/--no-request-log", default=False,
              help="Log every request at the local broker and count each copier's by API (costs broker CPU: "
                   "a diagnostic run, not one for CPU figures).")
@click.option("-b", "--bootstrap-servers", help="An existing cluster instead of the local Kafka.")
@click.option("--out", type=click.Path(path_type=Path),
              help="Results file (default bench/results/<date>-<dataset>.md).")
def main(kind: str, from_file: Path | None, key_field: str | None, count: int, runs: int, codecs: str,
         copier_names: str, fetch_partition_bytes: int | None, spark_trigger_ms: int | None, partitions: int,
         latency_records: int,
         latency_rate: tuple[float, float | None], latency_driver: str, warm_fraction: float, warm_seconds: float,
         client_tables: bool, request_log: bool, bootstrap_servers: str | None, out: Path | None) -> None:
    logs.configure("warning")
    # SIGTERM (a CI's or a shell's kill) unwinds like Ctrl-C: every copier, the local broker and the topics are
    # stopped and deleted on the way out (Python's default for SIGTERM ends at once and left them running)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    codec_list = [c.strip() for c in codecs.split(",") if c.strip()]
    chosen = [c.strip() for c in copier_names.split(",") if c.strip()]
    bad = [c for c in codec_list if not _known_codec(c)] + [c for c in chosen if c not in figures.COPIERS]
    if bad:
        raise click.UsageError(f"unknown codec or copier: {', '.join(bad)}")
    levelled = [c for c in codec_list if ":" in c]
    if levelled and not set(chosen) <= set(copiers.LEVELLED_COPIERS):
        raise click.UsageError(f"a codec level ({', '.join(levelled)}) is taken by "
                               f"{', '.join(copiers.LEVELLED_COPIERS)} only, not by "
                               f"{', '.join(sorted(set(chosen) - set(copiers.LEVELLED_COPIERS)))}")
    if fetch_partition_bytes is not None and not set(chosen) <= set(copiers.LEVELLED_COPIERS):
        raise click.UsageError(f"--fetch-partition-bytes is taken by {', '.join(copiers.LEVELLED_COPIERS)} only, "
                               f"not by {', '.join(sorted(set(chosen) - set(copiers.LEVELLED_COPIERS)))}")
    if spark_trigger_ms is not None and not any(c.startswith("spark-") for c in chosen):
        raise click.UsageError("--spark-trigger-ms is taken by the spark-* copiers only: none is chosen")
    data = Dataset(name=from_file.stem if from_file else kind, kind=kind, from_file=from_file, count=count,
                   key_field=key_field)
    try:  # the input's own errors (no such file, --key-field without NDJSON, a first line not JSON) before Kafka
        next(iter(data.records()), None)
    except TranscoderError as exc:
        raise click.ClickException(str(exc)) from exc
    rule = WarmRule(fraction=warm_fraction, seconds=warm_seconds)
    trickle = Trickle(records=latency_records, rate=latency_rate[0], share=latency_rate[1], driver=latency_driver)
    work = Path(tempfile.mkdtemp(prefix="transcoder-bench-"))
    local = None
    broker_pid = None
    log_file = None
    bootstrap = bootstrap_servers
    if request_log and bootstrap is not None:
        raise click.UsageError("--request-log needs the local broker (it reads its log): drop -b")
    if bootstrap is None:
        local = LocalKafka(work / "kafka")
        st = local.up(request_log=request_log)
        bootstrap, broker_pid = st.bootstrap, st.pid
        log_file = Path(st.log_file) if request_log else None
    try:
        res = bench(bootstrap, work, data, runs=runs, codecs=codec_list, chosen=chosen, partitions=partitions,
                    trickle=trickle, client_tables=client_tables,
                    broker_pid=broker_pid, rule=rule, request_log=log_file,
                    fetch_partition_bytes=fetch_partition_bytes, spark_trigger_ms=spark_trigger_ms)
    except TranscoderError as exc:  # a bad line further in the input, a record too large: one line
        raise click.ClickException(str(exc)) from exc
    finally:
        if local is not None:
            local.down()
    text = report(res, codecs=codec_list, runs=runs, dataset=data.name, partitions=partitions,
                  command=shlex.join(["python", "-m", "bench", *sys.argv[1:]]), trickle=trickle, rule=rule)
    path = out or ROOT / "bench" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-{data.name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    click.echo(text)
    click.echo(f"\nwritten to {path}", err=True)
    short = [r for r in res.copies if r.warm_note]
    if short:
        click.echo(f"{len(short)} of {len(res.copies)} copies were too short to warm (their warmed figures are "
                   f"their whole copy's): for steady-state figures, --count {figures.count_to_warm(short, rule):,} "
                   "at least (more: a copier speeds up once warm)", err=True)


def _rate(value: str) -> tuple[float, float | None]:
    """`--latency-rate`: (records/s, None), or (0, share) for `N%`."""
    try:
        if value.endswith("%"):
            share = float(value[:-1]) / 100
            if 0 < share <= 1:
                return 0.0, share
        elif (rate := float(value)) > 0:
            return rate, None
    except ValueError:
        pass
    raise click.BadParameter(f"{value!r}: records/s above 0, or a share of the copy's rate from 1% to 100% (50%)")


def _known_codec(spec: str) -> bool:
    """A `--codecs` entry: a codec, with a level or not (`gzip:5`)."""
    try:
        return copiers.codec_level(spec)[0] in CODECS
    except ValueError:
        return False


if __name__ == "__main__":
    main()
