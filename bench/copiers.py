"""The copiers the benchmark compares, each started as its own process(es) against the same broker:
transcoder (`transcoder run`), MirrorMaker 2 in dedicated mode (Kafka's connect-mirror from Maven
Central, with transcoder's batching or its own defaults), kcat piping a consumer into a producer, and the
compiled loops bench/native_floor (Rust, librdkafka) and bench/franz_go (Go, franz-go).

Each copier copies one source topic into one fresh destination with one codec; `pids` are what
the benchmark reads CPU from, `stop` ends them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from transcoder.dev.kafka_jars import SLF4J_VERSION, default_cache_dir, resolve_jars
from transcoder.dev.ports import free_port
from transcoder.dev.spark_cluster import StandaloneCluster


@dataclass(frozen=True)
class Batching:
    """Producer batching: librdkafka / Java client batch.size and linger.ms."""

    max_bytes: int = 1_048_576
    linger_ms: int = 500


#: transcoder's defaults (config.Batch): the batching every copier but mm2-default gets.
TRANSCODER_BATCHING = Batching()


@dataclass
class Running:
    destination: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    log: Path | None = None
    finite: bool = False  # the copier exits by itself once done (exit status 0 is success)
    live_destination: str | None = None  # where it copies the live topic (the latency trickle) to
    status_url: str | None = None  # transcoder's metrics endpoint (its /status), None for the other copiers
    tree: bool = False  # its CPU is its processes' and all their descendants' (Spark: the JVM, Python workers)
    #: processes whose CPU (with their descendants') is the copier's too but which `stop` leaves to `cleanup`
    #: (a standalone Spark cluster's master and workers, whose executors do the copying)
    watched: list[subprocess.Popen] = field(default_factory=list)
    cleanup: Callable[[], None] | None = None

    @property
    def pids(self) -> list[int]:
        roots = [p.pid for p in self.procs]
        own = [d for r in roots for d in descendants(r)] if self.tree else roots
        return own + [d for w in self.watched for d in descendants(w.pid)]

    def failed(self) -> str | None:
        """Why a copier process exited early, or None while all run."""
        for p in self.procs:
            code = p.poll()
            if code is not None and not (code == 0 and self.finite):
                tail = self.log.read_text(errors="replace")[-2000:] if self.log and self.log.exists() else ""
                return f"{' '.join(map(str, p.args[:3]))}... exited {p.returncode}: {tail.strip()[-600:]}"
        return None

    def stop(self, timeout: float = 60.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.cleanup is not None:
            self.cleanup()


@contextmanager
def sigterm_held() -> Iterator[None]:
    """SIGTERM noted, not acted on, until the block ends (a copier being started is then known to its caller, whose
    `finally` stops it); raised again at the end, to the handler that was in place."""
    got: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, _frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
    if got:
        signal.raise_signal(signal.SIGTERM)


def descendants(pid: int) -> list[int]:
    """A process and all its live descendants (/proc/<pid>/task/<tid>/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    return out


def process_cpu(pid: int) -> float:
    """utime + stime of a live process, in seconds (0 once it is gone)."""
    got = _stat_cpu(Path(f"/proc/{pid}/stat"))
    return 0.0 if got is None else got


def process_cmdline(pid: int) -> str:
    """A process's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _stat_cpu(path: Path) -> float | None:
    """utime + stime, in seconds, of a /proc stat file (a process's or a thread's); None once it is gone."""
    try:
        stat = path.read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds this machine's cores have been busy since boot, all processes and the kernel (/proc/stat: user,
    nice, system, irq, softirq; not idle, iowait or steal)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """utime + stime of each live thread of a process, in seconds, by thread id (empty once it is gone)."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        got = _stat_cpu(Path(f"/proc/{pid}/task/{tid}/stat"))
        if got is not None:  # else the thread ended
            out[int(tid)] = got
    return out


#: copiers that take a codec's level (`--codecs gzip:5`) and --fetch-partition-bytes; the others copy at their
#: clients' default level and fetch size
LEVELLED_COPIERS = ("transcoder", "transcoder-records", "franz-go")


def codec_level(spec: str) -> tuple[str, int | None]:
    """A `--codecs` entry: `gzip:5` -> ("gzip", 5), `zstd` -> ("zstd", None: the client's default level)."""
    name, _, level = spec.partition(":")
    return name, int(level) if level else None


# ---------------------------------------------------------------- transcoder
def start_transcoder(bootstrap: str, source: str, destination: str, codec: str, batching: Batching,
                     workdir: Path, tag: str, live: str | None = None, spark_master: str | None = None,
                     hot_path: str | None = None, spark_cluster: StandaloneCluster | None = None,
                     spark_read: str | None = None, fetch_partition_bytes: int | None = None,
                     spark_trigger_ms: int | None = None) -> Running:
    """One lane copying `source` (and `live`, into `<live>.copy`, with the same codec and batching); with
    `spark_master`, on the Spark engine (one streaming query, checkpointed under `workdir`), or on `spark_cluster`
    (its master and workers' CPU counted too, the cluster stopped with the copy); `hot_path` as the config's (None:
    its default). `codec` may carry a level (`gzip:5`); `fetch_partition_bytes`: the cluster config's
    max.partition.fetch.bytes (None: the default, 1 MiB); `spark_trigger_ms`: spark.trigger_interval_ms (None: the
    default)."""
    codec, level = codec_level(codec)
    if spark_cluster is not None:
        spark_master = spark_cluster.url
    routes = [(source, destination)] + ([(live, f"{live}.copy")] if live else [])
    conf = {
        "cluster": {"bootstrap_servers": bootstrap, **({"config": {"max.partition.fetch.bytes": fetch_partition_bytes}}
                                                         if fetch_partition_bytes else {})},
        "group_id": f"bench-{tag}",
        "lanes": "shared",  # one consumer, one loop thread, for both topics
        "routes": [{"source": s, "destinations": [{
            "codec": codec, **({"level": level} if level is not None else {}), "topic": d,
            "batch": {"max_bytes": batching.max_bytes, "linger_ms": batching.linger_ms},
        }]} for s, d in routes],
        "metrics": {"port": (port := free_port()), "host": "127.0.0.1"},  # its /status: the live latency it reports
    }
    if hot_path is not None:
        conf["hot_path"] = hot_path
    if spark_master is not None:
        conf["spark"] = {"master": spark_master, "checkpoint_location": str(workdir / f"{tag}.checkpoints"),
                         **({"read": spark_read} if spark_read else {}),
                         **({"trigger_interval_ms": spark_trigger_ms} if spark_trigger_ms is not None else {}),
                         # a cluster's workers on this machine run this interpreter (its venv has transcoder)
                         **({"conf": {"spark.pyspark.python": sys.executable}} if spark_cluster else {})}
    path = workdir / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(conf))
    log = workdir / f"{tag}.log"
    with log.open("wb") as out:
        engine = ["--engine", "spark"] if spark_master is not None else []
        proc = subprocess.Popen([sys.executable, "-m", "transcoder", "--log-level", "warning", "run",
                                 "--config", str(path), *engine], stdout=out, stderr=subprocess.STDOUT,
                                env=spark_cluster.env() if spark_cluster is not None else None)
    return Running(destination, [proc], log, live_destination=f"{live}.copy" if live else None,
                   status_url=f"http://127.0.0.1:{port}" if spark_master is None else None,
                   tree=spark_master is not None,
                   watched=[] if spark_cluster is None else [spark_cluster.master, *spark_cluster.workers],
                   cleanup=spark_cluster.stop if spark_cluster is not None else None)


# ---------------------------------------------------------------- MirrorMaker 2
MM2_ARTIFACTS = ("org.apache.kafka:connect-mirror:{kafka}", "org.slf4j:slf4j-simple:{slf4j}")


def fetch_mm2(version: str) -> Path:
    libs = default_cache_dir() / "mirror-maker" / version / "libs"
    return resolve_jars(libs, [a.format(kafka=version, slf4j=SLF4J_VERSION) for a in MM2_ARTIFACTS],
                        what=f"MirrorMaker 2 {version}")


def mm2_properties(bootstrap: str, source: str, alias: str, codec: str, batching: Batching | None,
                   live: str | None = None) -> str:
    """Dedicated-mode config copying `source` (and `live`) into `<alias>.<topic>` on the same cluster.

    The data producer is configured through the target alias (`B.producer.*`, the worker's
    producer config); batching None leaves the Java client's defaults (16 KB, linger 5 ms).
    Heartbeats, checkpoints and config/ACL sync are off; offset syncs stay on (MM2's default).
    """
    lines = [
        f"clusters = {alias}, B",
        f"{alias}.bootstrap.servers = {bootstrap}",
        f"B.bootstrap.servers = {bootstrap}",
        "plugin.discovery = service_load",  # no classpath scan: seconds and 400 MB less at start
        "B.plugin.discovery = service_load",
        f"{alias}->B.enabled = true",
        f"{alias}->B.topics = {source}" + (f", {live}" if live else ""),
        f"B.producer.compression.type = {codec}",
        "replication.factor = 1",
        "config.storage.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "offset.storage.partitions = 1",
        "status.storage.partitions = 1",
        "offset-syncs.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "emit.heartbeats.enabled = false",
        "heartbeats.replication.enabled = false",
        "emit.checkpoints.interval.seconds = -1",
        "refresh.groups.enabled = false",
        "sync.group.offsets.enabled = false",
        "sync.topic.configs.enabled = false",
        "sync.topic.acls.enabled = false",
        "tasks.max = 1",
    ]
    if batching is not None:
        lines += [f"B.producer.batch.size = {batching.max_bytes}", f"B.producer.linger.ms = {batching.linger_ms}"]
    return "\n".join(lines) + "\n"


def mm2_state_topics(alias: str) -> list[str]:
    """What a dedicated MM2 run leaves on the cluster besides its destination (it resumes from them)."""
    return [f"mm2-offsets.{alias}.internal", f"mm2-configs.{alias}.internal", f"mm2-status.{alias}.internal",
            "mm2-offset-syncs.B.internal", f"{alias}.checkpoints.internal", "heartbeats"]


def start_mm2(libs: Path, bootstrap: str, source: str, alias: str, codec: str, batching: Batching | None,
              workdir: Path, tag: str, live: str | None = None, jvm: Sequence[str] = ()) -> Running:
    """`jvm`: more JVM options (a test's LEAN_JVM; the bench's MirrorMaker 2 runs as Kafka ships it)."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH: MirrorMaker 2 needs a JDK (17)")
    props = workdir / f"{tag}.properties"
    props.write_text(mm2_properties(bootstrap, source, alias, codec, batching, live))
    log = workdir / f"{tag}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([java, "-Xmx512m", *jvm, "-cp", os.path.join(str(libs), "*"),
                                 "org.apache.kafka.connect.mirror.MirrorMaker", str(props), "--clusters", "B"],
                                stdout=out, stderr=subprocess.STDOUT)
    return Running(f"{alias}.{source}", [proc], log, live_destination=f"{alias}.{live}" if live else None)


# ---------------------------------------------------------------- kcat
def start_kcat(bootstrap: str, source: str, destination: str, codec: str, batching: Batching,
               workdir: Path, tag: str) -> Running:
    """kcat -C -e | kcat -P: keys kept (tab-delimited), one record per line; exits at the source's end.

    Not a faithful copy: headers, timestamps and partitions are not carried (the producer
    partitions by key), and values must not hold newlines or tabs. It shows what a shell pipe
    costs. It copies what is there and stops (-e): kcat -P reads its input in blocks, so a live
    pipe holds the last records back until more arrive, and latency is not measured.
    """
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise RuntimeError("kcat is not on PATH (Debian package kcat)")
    log = workdir / f"{tag}.log"
    out = log.open("wb")
    consumer = subprocess.Popen([kcat, "-C", "-b", bootstrap, "-t", source, "-o", "beginning", "-e", "-u", "-q",
                                 "-f", "%k\t%s\n"], stdout=subprocess.PIPE, stderr=out)
    producer = subprocess.Popen([kcat, "-P", "-b", bootstrap, "-t", destination, "-K", "\t", "-z", codec,
                                 "-X", f"batch.size={batching.max_bytes}", "-X", f"linger.ms={batching.linger_ms}",
                                 "-X", "queue.buffering.max.messages=1000000"],
                                stdin=consumer.stdout, stderr=out)
    assert consumer.stdout is not None
    consumer.stdout.close()  # the producer owns the pipe now
    return Running(destination, [consumer, producer], log, finite=True)


NATIVE_FLOOR_CRATE = Path(__file__).resolve().parent / "native_floor"


def build_native_floor() -> Path:
    """bench/native_floor built with cargo (crates.io; librdkafka compiled from the rdkafka-sys crate's bundled
    source: a C compiler and make), into ~/.cache/transcoder/native-floor; the binary's path."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise RuntimeError("the native-floor copier needs cargo (Rust) on PATH")
    target = default_cache_dir() / "native-floor"
    built = subprocess.run([cargo, "build", "--release", "--locked", "--quiet", "--manifest-path",
                            str(NATIVE_FLOOR_CRATE / "Cargo.toml"), "--target-dir", str(target)],
                           capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise RuntimeError(f"building bench/native_floor failed: {built.stderr.strip()[-1500:]}")
    return target / "release" / "native_floor"


def start_native_floor(binary: Path, bootstrap: str, source: str, destination: str, codec: str, records: int,
                       batching: Batching, workdir: Path, tag: str) -> Running:
    """bench/native_floor: consume -> produce over librdkafka in compiled code, nothing else (no offsets
    committed, no ledger, no metrics); it copies `records` faithfully (key, value, headers, timestamp,
    partition) with transcoder's batching, and exits once all are acknowledged. The floor a compiled lane
    over librdkafka starts from; no latency (it stops at the dataset's end)."""
    log = workdir / f"{tag}.log"
    proc = subprocess.Popen([str(binary), bootstrap, source, destination, codec, str(records),
                             str(batching.max_bytes), str(batching.linger_ms)],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    return Running(destination, [proc], log, finite=True)


def start_batch_floor(bootstrap: str, source: str, destination: str, codec: str, records: int, batching: Batching,
                      workdir: Path, tag: str) -> Running:
    """bench/batch_floor: raw Fetch -> transcoder_native's decode, re-batch and seal -> raw Produce, in Python
    with no record object per record; the rest as `start_native_floor`."""
    log = workdir / f"{tag}.log"
    proc = subprocess.Popen([sys.executable, "-m", "bench.batch_floor", bootstrap, source, destination, codec,
                             str(records), str(batching.max_bytes), str(batching.linger_ms)],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    return Running(destination, [proc], log, finite=True)


FRANZ_GO_MODULE = Path(__file__).resolve().parent / "franz_go"


def build_franz_go() -> Path:
    """bench/franz_go built with `go build -trimpath` (modules pinned by its go.mod and go.sum, from the Go module
    proxy on first use) into ~/.cache/transcoder/franz-go; the binary's path. Run on every use, as cargo for
    native-floor: Go's build cache makes it take under a second until the sources change."""
    return _go_build(".", "franzgo")


def build_trickle() -> Path:
    """bench/franz_go/trickle, the compiled latency driver (`--latency-driver franz-go`), built as `build_franz_go`."""
    return _go_build("./trickle", "trickle")


def trickle_command(binary: Path, bootstrap: str, source: str, destination: str, replay: Path, *, rate: float,
                    timed: int, timeout: float, warm_seconds: float = 3.0) -> list[str]:
    """The command line of bench/franz_go/trickle: `replay`'s records into `source` at `rate`, `warm_seconds`
    untimed, then `timed` timed records, read back from `destination` (bench.measure.live_latency_compiled)."""
    return [str(binary), "--bootstrap", bootstrap, "--source", source, "--destination", destination,
            "--replay", str(replay), "--rate", repr(round(rate, 3)), "--warm-seconds", f"{warm_seconds:g}",
            "--timed-records", str(timed), "--timeout-seconds", f"{timeout:g}"]


def _go_build(package: str, name: str) -> Path:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(f"bench/franz_go's {name} needs Go (the `go` command, 1.26 or newer) on PATH")
    binary = default_cache_dir() / "franz-go" / name
    built = subprocess.run([go, "build", "-trimpath", "-buildvcs=false", "-mod=readonly", "-o", str(binary), package],
                           cwd=FRANZ_GO_MODULE, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise RuntimeError(f"building bench/franz_go {package} failed: {built.stderr.strip()[-1500:]}")
    return binary


def franz_go_command(binary: Path, bootstrap: str, source: str, destination: str, codec: str, records: int,
                     batching: Batching, level: int | None = None,
                     fetch_partition_bytes: int | None = None) -> list[str]:
    """The command line `start_franz_go` runs (level None: franz-go's default for the codec; fetch_partition_bytes
    None: its default FetchMaxPartitionBytes, 1 MiB)."""
    return [str(binary), "--bootstrap", bootstrap, "--source", source, "--destination", destination,
            "--codec", codec, *([] if level is None else ["--level", str(level)]), "--records", str(records),
            "--batch-max-bytes", str(batching.max_bytes), "--linger-ms", str(batching.linger_ms),
            *([] if fetch_partition_bytes is None else ["--fetch-max-partition-bytes", str(fetch_partition_bytes)])]


def start_franz_go(binary: Path, bootstrap: str, source: str, destination: str, codec: str, records: int,
                   batching: Batching, workdir: Path, tag: str, level: int | None = None,
                   fetch_partition_bytes: int | None = None) -> Running:
    """bench/franz_go: consume -> produce over franz-go in Go, what a Go shop would write (Redpanda Connect's
    kafka_franz data path): a group consumer from the start, an idempotent producer with the manual partitioner,
    the codec (and `level`) and transcoder's batching; it copies `records` faithfully (key, value, headers,
    timestamp, partition) and exits once all are acknowledged. No latency (it stops at the dataset's end)."""
    log = workdir / f"{tag}.log"
    proc = subprocess.Popen(franz_go_command(binary, bootstrap, source, destination, codec, records, batching, level,
                                             fetch_partition_bytes),
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    return Running(destination, [proc], log, finite=True)
