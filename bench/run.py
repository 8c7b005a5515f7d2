"""One benchmark run: seed once, copy with every copier and codec `runs` times (interleaved), the
producer and consumer passes, and the Markdown report."""

from __future__ import annotations

import itertools
import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import click
import confluent_kafka
from confluent_kafka.admin import NewTopic

from bench import copiers, figures, measure, requests, spans
from bench.spans import WARM, WarmRule
from transcoder import __version__
from transcoder.dev import seed
from transcoder.dev.datagen import Record
from transcoder.dev.kafka_jars import DEFAULT_VERSION
from transcoder.dev.spark_cluster import StandaloneCluster
from transcoder.kafka.clients import connect_admin
from transcoder.kafka.protocol import RawClient

# kcat does not carry timestamps
LATENCY_COPIERS = {"transcoder", "transcoder-records", "mm2", "mm2-default", "spark-local1", "spark-local2",
                   "spark-cluster1", "spark-cluster2", "spark-local1-own", "spark-local2-own", "spark-cluster1-own",
                   "spark-cluster2-own"}


@dataclass(frozen=True)
class Trickle:
    """The live trickle after each copy: `records` timed records at `rate` records/s, or, with `share`, at that
    share of the copy's own warmed records/s (its maximum on this machine); sent and read by `driver`: `python`
    (confluent-kafka, up to ~50,000 records/s here) or `franz-go` (bench/franz_go/trickle, compiled)."""

    records: int
    rate: float = 2000.0
    share: float | None = None
    driver: str = "python"

    def rate_for(self, r: figures.CopyRun) -> float:
        if self.share is None:
            return self.rate
        top = r.warm.records_per_s if r.warm is not None else None
        return self.share * (top or r.records / r.seconds)

    def describe(self) -> str:
        at = f"{self.share:.0%} of the copy's warmed records/s" if self.share is not None else f"{self.rate:,.0f}/s"
        return f"{self.records:,} timed records at {at}, driven by {self.driver}"


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str | None
    from_file: Path | None
    count: int
    key_field: str | None = None  # NDJSON field that becomes the key, as `transcoder seed --key-field`

    def records(self) -> Iterable[Record]:
        if self.from_file is not None:
            return seed.FileSource(self.from_file, key_field=self.key_field)
        assert self.kind is not None
        start = seed.generator_start_ms(self.count, None, 2000.0, int(time.time() * 1000))
        return seed.generated(self.kind, seed_value=1, keys=True, headers=False, start_ms=start,
                              events_per_second=2000.0)


@dataclass
class Results:
    seeded: seed.SeedResult
    copies: list[figures.CopyRun]
    produced: list[figures.ClientRun]
    consumed: list[figures.ClientRun]


def bench(bootstrap: str, work: Path, data: Dataset, *, runs: int, codecs: list[str], chosen: list[str],
          partitions: int, trickle: Trickle, client_tables: bool,
          broker_pid: int | None = None, rule: WarmRule = WARM, request_log: Path | None = None,
          fetch_partition_bytes: int | None = None, spark_trigger_ms: int | None = None) -> Results:
    """Seed once, copy with every copier and codec `runs` times; each copy copies exactly the seeded data.

    `request_log`: the broker's request log (a broker started with request_log=True); each copy's requests
    are counted from it by API (bench.requests), the bench's own clients left out. `fetch_partition_bytes`:
    transcoder's and franz-go's max.partition.fetch.bytes (None: 1 MiB, every client's default).
    `spark_trigger_ms`: the spark-* copiers' spark.trigger_interval_ms (None: the config's default).

    Each copy is measured over its whole span and over its warmed span (`rule`, bench.spans).

    The latency trickle goes to a fresh live topic per copy, which the copier copies besides the
    dataset (one lane, one MM2 task): the dataset and the next copies stay as seeded. The trickle
    replays the dataset's first records with fresh timestamps, so it compresses like the data.
    """
    cluster = {"bootstrap.servers": bootstrap, "client.id": requests.BENCH_CLIENT_ID}
    admin, _ = connect_admin(cluster)
    info = RawClient(cluster)
    stamp = int(time.time())
    source = f"bench.{data.name}.{stamp}"
    seeded = seed.seed(data.records(), cluster=cluster, topic=source, count=data.count, partitions=partitions)
    click.echo(seeded.summary(), err=True)
    # the compiled driver replays up to 10,000 records round and round; the Python one sends each timed record once
    replayed = [(r.key, r.value) for r in itertools.islice(
        data.records(), trickle.records if trickle.driver == "python" else min(trickle.records, 10_000))]
    libs = copiers.fetch_mm2(DEFAULT_VERSION) if any(c.startswith("mm2") for c in chosen) else None
    floor = copiers.build_native_floor() if "native-floor" in chosen else None
    franz_go = copiers.build_franz_go() if "franz-go" in chosen else None
    driver = copiers.build_trickle() if trickle.driver == "franz-go" and replayed else None
    batching = copiers.TRANSCODER_BATCHING
    results: list[figures.CopyRun] = []
    try:
        for run, codec, copier in itertools.product(range(1, runs + 1), codecs, chosen):
            tag = f"{copier}-{codec.replace(':', '-')}-{run}"  # topic names take no ':
            live = None
            if copier in LATENCY_COPIERS and replayed:
                live = f"{source}.live-{tag}"
                admin.create_topics([NewTopic(live, partitions, 1)])[live].result()
            launched = time.monotonic()
            to_delete: list[str] = [live] if live else []
            running: copiers.Running | None = None
            try:
                # SIGTERM held while the copier starts, until it is known here: the `finally` stops it
                with copiers.sigterm_held():
                    if copier.startswith(("transcoder", "spark-local", "spark-cluster")):
                        master = f"local[{copier.split('-')[1].removeprefix('local')}]" \
                            if copier.startswith("spark-local") else None
                        cluster = StandaloneCluster(work / f"{tag}.cluster").start(
                            workers=int(copier.split("-")[1].removeprefix("cluster"))) \
                            if copier.startswith("spark-cluster") else None
                        running = copiers.start_transcoder(bootstrap, source, f"{source}.{tag}", codec, batching, work,
                                                           tag, live=live, spark_master=master, spark_cluster=cluster,
                                                           hot_path="records" if copier.endswith("-records") else None,
                                                           spark_read=None if copier.endswith("-own") else "kafka",
                                                           fetch_partition_bytes=fetch_partition_bytes,
                                                           spark_trigger_ms=spark_trigger_ms)
                    elif copier.startswith("mm2"):
                        assert libs is not None
                        alias = f"m{run}{codec}{'d' if copier == 'mm2-default' else ''}"
                        running = copiers.start_mm2(libs, bootstrap, source, alias, codec,
                                                    None if copier == "mm2-default" else batching, work, tag, live=live)
                        to_delete += copiers.mm2_state_topics(alias)
                    elif copier in ("native-floor", "franz-go"):  # compiled consume -> produce (librdkafka, franz-go)
                        binary, start = ((floor, copiers.start_native_floor) if copier == "native-floor"
                                         else (franz_go, copiers.start_franz_go))
                        assert binary is not None
                        dest = f"{source}.{tag}"
                        admin.create_topics([NewTopic(dest, partitions, 1)])[dest].result()
                        name, level = copiers.codec_level(codec)
                        if copier == "franz-go":
                            running = start(binary, bootstrap, source, dest, name, seeded.records, batching, work, tag,
                                            level=level, fetch_partition_bytes=fetch_partition_bytes)
                        else:
                            running = start(binary, bootstrap, source, dest, name, seeded.records, batching, work, tag)
                    elif copier == "batch-floor":
                        dest = f"{source}.{tag}"
                        admin.create_topics([NewTopic(dest, partitions, 1)])[dest].result()
                        running = copiers.start_batch_floor(bootstrap, source, dest, codec, seeded.records, batching,
                                                            work, tag)
                    else:
                        dest = f"{source}.{tag}"
                        admin.create_topics([NewTopic(dest, partitions, 1)])[dest].result()
                        running = copiers.start_kcat(bootstrap, source, dest, codec, batching, work, tag)
                    to_delete.append(running.destination)
                    if running.live_destination:
                        to_delete.append(running.live_destination)
                    log_start = request_log.stat().st_size if request_log else 0
                r = measure.measure_copy(admin, info, running, copier=copier, codec=codec, records=seeded.records,
                                         uncompressed_bytes=seeded.bytes, launched=launched,
                                         timeout=max(300.0, seeded.records / 1000), broker_pid=broker_pid,
                                         rule=rule)
                if request_log is not None:
                    lines = requests.read_range(request_log, log_start, request_log.stat().st_size)
                    r = replace(r, requests=requests.parse(lines))
                if live and running.live_destination:
                    r = replace(r, live=_live(trickle, r, driver, bootstrap, live, running, replayed, work))
            finally:
                if running is not None:
                    running.stop()
                measure.delete_topics(admin, to_delete)
            results.append(r)
            click.echo(progress(r, run), err=True)

        produced: list[figures.ClientRun] = []
        consumed: list[figures.ClientRun] = []
        if client_tables:
            for run, codec in itertools.product(range(1, runs + 1), codecs):
                topic = f"{source}.client-{codec}-{run}"
                admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
                records = [(r.key, r.value) for r in itertools.islice(data.records(), data.count)]
                produced.append(measure.produce_pass(bootstrap, topic, records, codec, info))
                del records
                consumed.append(measure.consume_pass(bootstrap, topic, produced[-1].records, codec, info))
                measure.delete_topics(admin, [topic])
    finally:
        measure.delete_topics(admin, [source])
        info.close()
    return Results(seeded, results, produced, consumed)


def _live(trickle: Trickle, r: figures.CopyRun, driver: Path | None, bootstrap: str, live: str,
          running: copiers.Running, replayed: list[tuple[bytes | None, bytes]], work: Path) -> figures.LiveLatency:
    """The trickle through the running copier, and what its /status says of it (transcoder on the service)."""
    assert running.live_destination is not None
    rate = trickle.rate_for(r)
    if driver is not None:
        got = measure.live_latency_compiled(driver, bootstrap, live, running.live_destination, records=replayed,
                                            timed=trickle.records, rate=rate, workdir=work)
    else:
        got = measure.live_latency(bootstrap, live, running.live_destination, records=replayed, rate=rate)
    if running.status_url is None:
        return got
    p50, p99 = measure.status_latency(running.status_url, running.live_destination, got.sent)
    return replace(got, status_p50=p50, status_p99=p99)


def progress(r: figures.CopyRun, run: int) -> str:
    """One copy's line on stderr: whole copy, then the warmed span (or why there is none)."""
    w = r.warm
    broker = "" if r.broker_cpu_seconds is None else f" (broker {r.broker_cpu_seconds / r.records * 1e6:5.2f})"
    if w is None:
        warmed = ""
    elif r.warm_note:
        warmed = "  warmed: too short, whole copy"
    else:
        wb = "" if w.broker_cpu_per_1m is None else f" (broker {w.broker_cpu_per_1m:5.2f})"
        warmed = (f"  warmed from {w.start:4.1f} s ({w.records / r.records:4.0%}): {w.records_per_s or 0:>10,.0f} "
                  f"records/s {w.cpu_per_1m or 0:7.2f} CPU s/1M{wb}")
    return (f"run {run} {r.codec:6} {r.copier:11} {r.records / r.seconds:>10,.0f} records/s "
            f"{r.cpu_seconds / r.records * 1e6:7.2f} CPU s/1M{broker}{warmed}  "
            f"ratio {r.uncompressed_bytes / r.disk_bytes:5.2f}"
            f"{'' if r.busiest_thread is None else f'  busiest thread {r.busiest_thread:4.2f}'}"
            f"{'' if r.broker_busiest_thread is None else f' (broker {r.broker_busiest_thread:4.2f})'}"
            f"{'' if r.machine_busy is None else f'  machine busy {r.machine_busy:4.2f} of {os.cpu_count()}'}"
            f"  {_live_line(r.live)}")


def _live_line(v: figures.LiveLatency | None) -> str:
    if v is None:
        return ""
    status = "" if v.status_p99 is None else f", /status p99 {v.status_p99 * 1000:.0f} ms"
    return f"p99 {v.p99 * 1000:.0f} ms at {v.reached:,.0f} records/s{status}"


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = next((int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")), 0)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    kcat = "kcat not installed"
    if shutil.which("kcat"):
        out = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
        # "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
        found = re.search(r"^Version (\S+).*?librdkafka (\S+)", out, re.MULTILINE)
        kcat = f"kcat {found[1]} (librdkafka {found[2]})" if found else "kcat ?"
    return (f"{len(os.sched_getaffinity(0))} cores ({model}), {mem / 1024 / 1024:.1f} GiB memory; "
            f"Linux {platform.release()}; Python {platform.python_version()}; transcoder {__version__}; "
            f"confluent-kafka {version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]}); "
            f"Kafka broker and MirrorMaker 2 {DEFAULT_VERSION}; {java[0] if java else 'java ?'}; {kcat}")


def _numbered(copies: list[figures.CopyRun]) -> Iterable[tuple[int, figures.CopyRun]]:
    """(run number, copy): the n-th copy of a copier at a codec is its run n."""
    seen: dict[tuple[str, str], int] = {}
    for r in copies:
        seen[(r.copier, r.codec)] = seen.get((r.copier, r.codec), 0) + 1
        yield seen[(r.copier, r.codec)], r


def report(res: Results, *, codecs: list[str], runs: int, dataset: str, partitions: int, command: str,
           trickle: Trickle, rule: WarmRule = WARM) -> str:
    seeded, produced, consumed = res.seeded, res.produced, res.consumed
    summary = figures.summarise(res.copies)
    short = figures.too_short(res.copies)
    notes = [f"- {r.copier}, {r.codec}, run {i}: {r.warm_note}" for i, r in _numbered(res.copies) if r.warm_note]
    b = copiers.TRANSCODER_BATCHING
    parts = [
        f"# transcoder vs MirrorMaker 2 vs kcat — {dataset}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine()}.",
        "",
        f"Dataset: {seeded.records:,} {dataset} records, {seeded.bytes / 1e6:,.1f} MB uncompressed "
        f"(average {seeded.bytes / max(1, seeded.records):,.0f} B), {partitions} partition(s), seeded uncompressed. "
        f"{runs} runs, copiers interleaved within each run; figures are medians (min–max), and "
        "`· N.NNx` is the ratio to MirrorMaker 2 at the same codec and batching (`mm2`).",
        "",
        f"Batching: transcoder, `mm2` and kcat use batch.size {b.max_bytes:,} B and linger.ms {b.linger_ms} "
        "(transcoder's defaults); `mm2-default` keeps the Java producer's (16,384 B, linger.ms 5). Every codec at "
        "its client's default level, the same in librdkafka and Java (gzip 6, lz4 fast, zstd 3; franz-go's gzip "
        "default is klauspost/compress's level 5), or at the level given (`gzip:5`). Note: librdkafka's "
        "batch.size counts uncompressed bytes, the Java producer's counts estimated compressed bytes, so at the "
        "same batch.size a Java batch of compressible data holds more records.",
        "",
        "Throughput and CPU cover the copy only, over two spans (start-up is its own column). The whole copy: "
        "from the first record in the destination to the last. The warmed span leaves out the copier's "
        f"warm-up (MirrorMaker 2 is a JVM, whose JIT compiles its hot code while it copies): {rule.describe()}. "
        "The destination's record count (end offsets) and the CPU are sampled every ~0.1 s during the copy; "
        "the boundary and the CPU at it are interpolated between the samples around it. A copy whose warmed "
        f"span would last under {rule.min_seconds:g} s or hold under {rule.min_fraction:.0%} of the records is "
        "too short to warm: its warmed figures are its whole copy's (listed under Targets; raise --count). "
        "CPU is the copier's whole processes (the JVM for MirrorMaker 2, "
        "both kcat processes); broker CPU is the local broker's process over the same spans, the load each "
        "copier puts on it (n/a with -b). MB/s, disk and the Cloudflare table are the whole copy's. "
        f"Latency: after the copy, a live trickle of {trickle.describe()} (the dataset's first records, stamped "
        "when produced) into a fresh topic the copier copies besides the dataset, from the record's timestamp to a "
        "consumer reading it from the destination, after untimed records have gone the whole way (the trickle's "
        "producer, the copier's first batch to the new topic and the consumer started; kcat carries no "
        "timestamps: n/a); per copy under Latency, with what transcoder's /status said. "
        "Each copy copies exactly the seeded "
        "dataset. spark-localN: `transcoder run --engine spark` on local[N] (CPU: "
        "the driver, its JVM and Python workers; start-up includes the SparkSession). spark-clusterN: the same on a "
        "standalone cluster of N 1-core workers started from pyspark's jars for the copy (CPU: the driver's tree and "
        "the master's and workers' trees, executors and their Python workers included), reading with Spark's Kafka "
        "source (`spark.read: kafka`). -own: `spark.read: transcoder`, the default since 2026-11-29 (each task reads "
        "its offset range with transcoder's fetcher).",
        "",
        "## Copiers",
        "",
        figures.copiers_table(summary, codecs, short),
        "",
        "## Targets",
        "",
        "Throughput and CPU per record are judged on the warmed span (steady state, the JVM's warm-up left "
        "out); the whole copy's ratio is shown beside. The on-disk ratio is the whole destination's.",
        "",
        figures.verdict_lines(summary, codecs, short),
        "",
        *([f"Too short to warm (warmed figures = whole copy; copies need {spans.min_copy_seconds(rule):g} s "
            f"at a steady rate: --count {figures.count_to_warm(res.copies, rule) or 0:,} at least, more as a "
            "copier speeds up once warm):", "", *notes, ""]
          if notes else []),
        *(["## Latency", "", figures.latency_table(res.copies), ""] if any(r.live for r in res.copies) else []),
        *(["## Where a Spark copy's CPU goes", "",
           "Each Spark copy's CPU over the whole copy (first record in the destination to the last; not "
           "interpolated, so the total may differ from the copiers' table by a sample's worth), per 1M records, by "
           "kind of process (its share in brackets): "
           + "; ".join(f"{k}: {what}" for k, what in figures.PROCESS_KINDS) + ".", "",
           figures.process_table(res.copies), ""] if any(r.cpu_by_process for r in res.copies) else []),
        "## Cloudflare-style table (transcoder, one lane per codec)",
        "",
        figures.cloudflare_table(summary, codecs, seeded.records),
        "",
    ]
    if any(r.requests for r in res.copies):
        parts += ["## Broker requests per 1M records (the broker's request log)", "",
                  "Each copy's requests from the copier's clients (the bench's own polls left out), from launch "
                  "to the last record (start-up included), by API: requests and the broker's handler time "
                  "(localTimeMs) per 1M records copied, medians over the runs; the live trickle not included. "
                  "Logging every request costs the broker CPU: take CPU figures from a run without it.", "",
                  figures.requests_table(res.copies, codecs), ""]
    if produced:
        parts += ["## 2017-style producer table (librdkafka producer, linger.ms 5)", "",
                  figures.client_table(produced, codecs), "",
                  "## 2017-style consumer table (librdkafka consumer, from its first record)", "",
                  figures.client_table(consumed, codecs), "",
                  "Traffic: the record batches as produced, which the broker stores unchanged "
                  "(compression.type=producer): the bytes on disk.", ""]
    return "\n".join(parts)

