"""Every Prometheus metric transcoder exports, declared once, on a registry passed in; the only
module that imports prometheus_client (the endpoints serve its `exposition`).

Names start with transcoder_, use base units, and counters end in _total. Labels come from a
small set (lane, destination, codec, topic, partition, part, reason, role); never a key or an
offset. Both engines (service and Spark) export this vocabulary.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from transcoder.kafka.retries import KAFKA_ERRORS, KafkaErrors
from transcoder.kafka.statistics import Window
from transcoder.metrics.endpoints import Endpoints

#: Buckets of the produced-batch histograms: bytes (compressed) and records per batch.
BATCH_BYTES_BUCKETS = (1024, 4096, 16384, 65536, 262144, 524288, 1048576, 4194304, 16777216)
BATCH_RECORDS_BUCKETS = (1, 10, 100, 500, 1000, 5000, 10000, 50000, 100000, 1000000)
#: End-to-end latency (delivery time - source record timestamp), seconds: the exported histogram's buckets.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 2.5, 5, 10, 30,
                   60, 300, 900, 3600)
#: ... and the finer ones /status computes its quantiles from: 1 ms to an hour, each bound 10^(1/40) (6%) above the
#: last, so that a quantile interpolated within a bucket is within 6% of the true one.
FINE_LATENCY_BUCKETS = tuple(round(10 ** (k / 40 - 3), 6) for k in range(40 * 7 - 17))


def exposition(registry: CollectorRegistry) -> tuple[str, bytes]:
    """The registry in Prometheus' text format: (content type, body), for /metrics."""
    return CONTENT_TYPE_LATEST, generate_latest(registry)


@dataclass(frozen=True)
class DestinationFigures:
    """What one lane measured for one destination, for /status (read from the lane's own tallies)."""

    record_bytes_out: float
    compressed_bytes: float
    wire_ratio: float | None
    #: cumulative (upper bound, count) of sampled latencies of records newer than the lane's start, +Inf last
    latency_buckets: list[tuple[float, float]]
    #: sampled acknowledgements of records older than the lane's start (backlog): not in the latency
    backlog_samples: float
    #: as latency_buckets, on FINE_LATENCY_BUCKETS: what /status's quantiles are computed from
    latency_fine_buckets: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class SettingScore:
    """One codec and level scored on a live sample (evaluate: in the config): figures of evaluate.measure."""

    codec: str
    level: int | None  # None: the codec's default level
    ratio: float  # framed uncompressed bytes / framed compressed bytes of the sample's batches
    compress_cpu_s_per_1m: float  # CPU seconds (one thread) to compress a million such records
    decompress_cpu_s_per_1m: float

    @property
    def label(self) -> str:
        return self.codec if self.level is None else f"{self.codec}-{self.level}"


class _WindowHistograms(Collector):
    """Histograms fed with librdkafka's per-interval batch windows (not single observations)."""

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...]) -> None:
        self.name, self.doc, self.bounds = name, doc, bounds
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str, str], tuple[list[float], float, float]] = {}

    def add(self, labels: tuple[str, str, str], window: Window) -> None:
        if window.count <= 0:
            return
        counts = window.cumulative_counts(self.bounds)
        with self._lock:
            buckets, total, n = self._series.get(labels, ([0.0] * len(self.bounds), 0.0, 0.0))
            self._series[labels] = ([a + b for a, b in zip(buckets, counts, strict=True)],
                                    total + window.total, n + window.count)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        fam = HistogramMetricFamily(self.name, self.doc, labels=["lane", "destination", "codec"])
        with self._lock:
            for labels, (buckets, total, n) in sorted(self._series.items()):
                fam.add_metric(list(labels), [*((str(b), c) for b, c in zip(self.bounds, buckets, strict=True)),
                                              ("+Inf", n)], total)
        yield fam


class _WeightedHistograms(Collector):
    """A histogram whose observations carry a weight: one observation stands for the records of a batch it was
    sampled from (prometheus_client's Histogram observes one at a time)."""

    def __init__(self, name: str, doc: str, labels: list[str], bounds: tuple[float, ...]) -> None:
        self.name, self.doc, self.labels, self.bounds = name, doc, labels, bounds
        self._lock = threading.Lock()
        #: labels -> (per-bucket weights, +Inf last; sum of weighted values)
        self._series: dict[tuple[str, ...], tuple[list[float], list[float]]] = {}

    def observe(self, labels: tuple[str, ...], value: float, weight: float = 1.0) -> None:
        with self._lock:
            counts, total = self._series.setdefault(labels, ([0.0] * (len(self.bounds) + 1), [0.0]))
            counts[bisect.bisect_left(self.bounds, value)] += weight
            total[0] += value * weight

    def collect(self) -> Iterator[HistogramMetricFamily]:
        fam = HistogramMetricFamily(self.name, self.doc, labels=self.labels)
        with self._lock:
            for labels, (counts, total) in sorted(self._series.items()):
                cumulative, n = [], 0.0
                for bound, c in zip([*(str(b) for b in self.bounds), "+Inf"], counts, strict=True):
                    n += c
                    cumulative.append((bound, n))
                fam.add_metric(list(labels), cumulative, total[0])
        yield fam


class _CpuCollector(Collector):
    """CPU per lane and part, read from /proc at scrape time, and CPU per million records."""

    def __init__(self, cpu: Callable[[], dict[tuple[str, str], float]], records: Callable[[], dict[str, int]]) -> None:
        self.cpu, self.records = cpu, records

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        seconds = self.cpu()
        fam = CounterMetricFamily("transcoder_cpu_seconds", "CPU seconds per lane: consume (fetch and "
                                  "decompress), produce (compress and send), loop (the Python thread).",
                                  labels=["lane", "part"])
        per_lane: dict[str, float] = {}
        for (lane, part), s in sorted(seconds.items()):
            fam.add_metric([lane, part], s)
            per_lane[lane] = per_lane.get(lane, 0.0) + s
        yield fam
        per_m = GaugeMetricFamily("transcoder_cpu_seconds_per_million_records",
                                  "Lane CPU seconds (all parts) per million source records.", labels=["lane"])
        for lane, n in sorted(self.records().items()):
            if n:
                per_m.add_metric([lane], per_lane.get(lane, 0.0) / n * 1e6)
        yield per_m


class _KafkaErrorsCollector(Collector):
    """transcoder_kafka_errors_total, read at scrape time from the tally the Kafka clients count into."""

    def __init__(self, tally: KafkaErrors) -> None:
        self.tally = tally

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily

        fam = CounterMetricFamily(
            "transcoder_kafka_errors", "Retriable Kafka errors met by transcoder's own Kafka clients (the record "
            "sets' Fetches, its producer's Produce, their metadata requests), each retried after Kafka's "
            "back-off: error is Kafka's name (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, UNKNOWN_BROKER_ID) or, for "
            "a request not answered, the client's (KafkaConnectionError, KafkaTimeoutError); topic and broker (its "
            "node id) empty where there is none.", labels=["error", "topic", "broker"])
        for (error, topic, broker), n in sorted(self.tally.counts().items()):
            fam.add_metric([error, topic, broker], n)
        yield fam


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, kafka_errors: KafkaErrors | None = None) -> None:
        """`kafka_errors`: the tally transcoder_kafka_errors_total is read from (the process's by default, which
        the lanes' Kafka clients count into)."""
        self.registry = registry = registry if registry is not None else CollectorRegistry()
        r = registry
        self.records_in = Counter("transcoder_records_in_total", "Source records consumed by a lane.",
                                  ["lane"], registry=r)
        self.source_bytes = Counter("transcoder_source_bytes_total",
                                    "Uncompressed bytes (key + value + headers) of the source records consumed.",
                                    ["lane"], registry=r)
        self.records_out = Counter("transcoder_records_out_total",
                                   "Records written to a destination topic and acknowledged by its cluster.",
                                   ["lane", "destination", "codec"], registry=r)
        self.record_bytes_out = Counter("transcoder_record_bytes_out_total",
                                        "Uncompressed record bytes sent to the destination (librdkafka txbytes).",
                                        ["lane", "destination", "codec"], registry=r)
        self.compressed_bytes = Counter("transcoder_compressed_bytes_total",
                                        "Bytes of the produced record batches, as compressed on the wire "
                                        "(librdkafka batchsize).", ["lane", "destination", "codec"], registry=r)
        self.wire_ratio = Gauge("transcoder_wire_ratio",
                                "Compression ratio on the wire: uncompressed record bytes / compressed batch bytes "
                                "sent to the destination since the lane started.",
                                ["lane", "destination", "codec"], registry=r)
        self.batch_bytes = _WindowHistograms("transcoder_batch_bytes",
                                             "Compressed bytes per record batch produced to the destination.",
                                             BATCH_BYTES_BUCKETS)
        self.batch_records = _WindowHistograms("transcoder_batch_records",
                                               "Records per record batch produced to the destination (small batches "
                                               "compress worse).", BATCH_RECORDS_BUCKETS)
        r.register(self.batch_bytes)
        r.register(self.batch_records)
        self.latency = _WeightedHistograms(
            "transcoder_end_to_end_latency_seconds",
            "Acknowledgement time minus the source record's timestamp, of records stamped at or after the lane's "
            "start (new records; older ones, backlog, are counted apart, each record by its own timestamp); sampled "
            "1 record in 16, every record with the same chance (a batch's records weighted by their number).",
            ["lane", "destination"], LATENCY_BUCKETS)
        r.register(self.latency)
        self.backlog_samples = Counter("transcoder_backlog_latency_samples_total",
                                       "Latency samples left out of end_to_end_latency_seconds because the record "
                                       "was stamped before the lane's start (backlog: its age, not the "
                                       "pipeline's); 1 sample per 16 records, as that histogram's count.",
                                       ["lane", "destination"], registry=r)
        self.lag_records = Gauge("transcoder_consumer_lag_records",
                                 "Records of a source partition the lane has not copied and committed yet: the "
                                 "partition's end offset minus the lane's committed offset.",
                                 ["lane", "topic", "partition"], registry=r)
        self.lag_seconds = Gauge("transcoder_consumer_lag_seconds",
                                 "How far behind its source partition the lane is, in time: now minus the timestamp "
                                 "of the last committed record (0 when caught up).",
                                 ["lane", "topic", "partition"], registry=r)
        self.disk_bytes = Gauge("transcoder_topic_disk_bytes", "Bytes on disk of a topic, all replicas "
                                "(DescribeLogDirs, read every metrics.disk_interval_s); role: source or destination.",
                                ["topic", "role"], registry=r)
        self.disk_ratio = Gauge("transcoder_disk_ratio", "On-disk ratio: the source topic's bytes on disk / the "
                                "destination topic's (read every metrics.disk_interval_s).",
                                ["lane", "destination", "codec"], registry=r)
        self.recompression = Gauge("transcoder_broker_recompression",
                                   "1 when the broker would recompress (or has recompressed) this destination's "
                                   "batches, 0 otherwise; reason config: the topic's compression.type is neither "
                                   "producer nor the produced codec; reason stored: a sampled stored batch has "
                                   "another codec.", ["lane", "destination", "reason"], registry=r)
        self.lane_up = Gauge("transcoder_lane_running", "1 while the lane copies (running or caught up), 0 once it "
                             "has stopped or failed.", ["lane"], registry=r)
        self.errors = Counter("transcoder_errors_total", "Records that could not be written to their destination, "
                              "by Kafka error name; each is dead-lettered (errors.tolerance: all) or stops the lane.",
                              ["lane", "reason"], registry=r)
        self.dlq_records = Counter("transcoder_dlq_records_total", "Records written to the dead-letter topic because "
                                   "they could not be written to their destination.", ["lane"], registry=r)
        self.source_records_lost = Counter(
            "transcoder_source_records_lost_total", "Source records gone before the lane copied them (retention or "
            "DeleteRecords overtook it, or the topic was recreated): never copied; marked in the offset map.",
            ["lane", "topic", "partition"], registry=r)
        self.backpressure = Counter("transcoder_backpressure_pauses_total",
                                    "Times a lane paused consuming because more than max_in_flight_bytes were in "
                                    "flight (unacknowledged).",
                                    ["lane"], registry=r)
        self.kafka_errors = KAFKA_ERRORS if kafka_errors is None else kafka_errors
        r.register(_KafkaErrorsCollector(self.kafka_errors))

        # Live scoring (evaluate: in the config). Candidate and current setting are separate metrics with the
        # same labels, one current series per destination, so "candidate vs current" is one division:
        #   transcoder_candidate_ratio / on (destination) group_left transcoder_candidate_current_ratio
        # `codec` is the bare codec here and `level` its level ("" for the codec's default).
        self.candidate_ratio = Gauge("transcoder_candidate_ratio",
                                     "A candidate codec's ratio (framed uncompressed / compressed bytes) on the latest "
                                     "live sample of the destination's records, cut into its batches (level: empty "
                                     "for the codec's default).",
                                     ["destination", "codec", "level"], registry=r)
        self.candidate_cpu = Gauge("transcoder_candidate_cpu_seconds_per_million",
                                   "A candidate codec's CPU seconds (one thread) per million records of the latest "
                                   "live sample, to compress or to decompress (direction).",
                                   ["destination", "codec", "level", "direction"], registry=r)
        self.candidate_current_ratio = Gauge("transcoder_candidate_current_ratio",
                                             "The destination's own codec and level, scored on the same live sample "
                                             "as the candidates: its ratio.", ["destination", "codec", "level"],
                                             registry=r)
        self.candidate_current_cpu = Gauge("transcoder_candidate_current_cpu_seconds_per_million",
                                           "The destination's own codec and level, scored on the same live sample as "
                                           "the candidates: CPU seconds per million records.",
                                           ["destination", "codec", "level", "direction"], registry=r)
        self.candidate_samples = Counter("transcoder_candidate_samples_total",
                                         "Live samples of a destination's records scored.", ["destination"],
                                         registry=r)
        self.candidate_sampled_records = Counter("transcoder_candidate_sampled_records_total",
                                                 "Records in the live samples scored.", ["destination"], registry=r)
        self.candidate_errors = Counter("transcoder_candidate_errors_total",
                                        "Live samples that could not be captured or scored (logged with the "
                                        "partition and offsets).", ["destination"], registry=r)
        self.candidate_scoring_cpu = Counter("transcoder_candidate_scoring_cpu_seconds_total",
                                             "CPU seconds of the live-scoring thread (bounded by "
                                             "evaluate.max_cpu_share).", registry=r)

    def candidate_scored(self, destination: str, current: SettingScore, candidates: list[SettingScore],
                         records: int) -> None:
        """One live sample of a destination scored: the current setting's figures and each candidate's."""
        for score, ratio, cpu in ((current, self.candidate_current_ratio, self.candidate_current_cpu),
                                  *((c, self.candidate_ratio, self.candidate_cpu) for c in candidates)):
            labels = {"destination": destination, "codec": score.codec,
                      "level": "" if score.level is None else str(score.level)}
            ratio.labels(**labels).set(score.ratio)
            cpu.labels(**labels, direction="compress").set(score.compress_cpu_s_per_1m)
            cpu.labels(**labels, direction="decompress").set(score.decompress_cpu_s_per_1m)
        self.candidate_samples.labels(destination=destination).inc()
        self.candidate_sampled_records.labels(destination=destination).inc(records)

    def candidate_error(self, destination: str) -> None:
        self.candidate_errors.labels(destination=destination).inc()

    def candidate_cpu_spent(self, seconds: float) -> None:
        if seconds > 0:
            self.candidate_scoring_cpu.inc(seconds)

    def cpu_source(self, cpu: Callable[[], dict[tuple[str, str], float]],
                   records: Callable[[], dict[str, int]]) -> None:
        """Export CPU per lane and part, and per million records (both read at scrape time)."""
        self.registry.register(_CpuCollector(cpu, records))

    def lane(self, name: str) -> LaneMetrics:
        return LaneMetrics(self, name)


class LaneMetrics:
    """The metrics of one lane, labels bound once (children are cached, not looked up per record)."""

    def __init__(self, m: Metrics, lane: str) -> None:
        self.m = m
        self.lane = lane
        self._records = m.records_in.labels(lane=lane)
        self._bytes = m.source_bytes.labels(lane=lane)
        self._dlq = m.dlq_records.labels(lane=lane)
        self._pauses = m.backpressure.labels(lane=lane)
        #: destination topic -> cumulative (record bytes, compressed bytes) for the wire ratio
        self._wire: dict[str, list[float]] = {}
        self._latency: dict[str, Any] = {}  # destination topic -> its latency histogram's labels
        #: destination topic -> sampled latencies per LATENCY_BUCKETS bucket (+Inf last), for /status
        self._latency_counts: dict[str, list[float]] = {}
        #: ... and per FINE_LATENCY_BUCKETS bucket (+Inf last)
        self._latency_fine: dict[str, list[float]] = {}
        self._backlog: dict[str, float] = {}

    def records(self, n: int, nbytes: int) -> None:
        self._records.inc(n)
        self._bytes.inc(nbytes)

    def acked(self, destination: str, codec: str, n: int) -> None:
        self.m.records_out.labels(lane=self.lane, destination=destination, codec=codec).inc(n)

    def produced(self, destination: str, codec: str, batch_bytes: Window, batch_records: Window,
                 record_bytes_total: int) -> None:
        """One statistics emission of a destination producer."""
        labels = {"lane": self.lane, "destination": destination, "codec": codec}
        self.m.compressed_bytes.labels(**labels).inc(batch_bytes.total)
        self.m.batch_bytes.add((self.lane, destination, codec), batch_bytes)
        self.m.batch_records.add((self.lane, destination, codec), batch_records)
        wire = self._wire.setdefault(destination, [0.0, 0.0])
        child = self.m.record_bytes_out.labels(**labels)
        if record_bytes_total > wire[0]:  # cumulative in librdkafka: export the increase
            child.inc(record_bytes_total - wire[0])
            wire[0] = record_bytes_total
        wire[1] += batch_bytes.total
        if wire[1] > 0:
            self.m.wire_ratio.labels(**labels).set(wire[0] / wire[1])

    def latency(self, destination: str, seconds: float, weight: float = 1.0) -> None:
        """A sampled record's latency; `weight`: how many samples it stands for (of a batch's records)."""
        labels = self._latency.get(destination)
        if labels is None:
            labels = self._latency[destination] = (self.lane, destination)
            self._latency_counts[destination] = [0.0] * (len(LATENCY_BUCKETS) + 1)
            self._latency_fine[destination] = [0.0] * (len(FINE_LATENCY_BUCKETS) + 1)
        self.m.latency.observe(labels, seconds, weight)
        self._latency_counts[destination][bisect.bisect_left(LATENCY_BUCKETS, seconds)] += weight
        self._latency_fine[destination][bisect.bisect_left(FINE_LATENCY_BUCKETS, seconds)] += weight

    def backfill(self, destination: str, weight: float = 1.0) -> None:
        """Sampled acknowledgements of records older than the lane's start: counted, not timed; `weight`: how many
        samples (1 in LATENCY_SAMPLING records) they stand for, as `latency`'s."""
        self._backlog[destination] = self._backlog.get(destination, 0.0) + weight
        self.m.backlog_samples.labels(lane=self.lane, destination=destination).inc(weight)

    def figures(self, destination: str) -> DestinationFigures:
        record_bytes, compressed = self._wire.get(destination, [0.0, 0.0])
        return DestinationFigures(record_bytes_out=record_bytes, compressed_bytes=compressed,
                                  wire_ratio=record_bytes / compressed if compressed else None,
                                  latency_buckets=_cumulative(LATENCY_BUCKETS, self._latency_counts.get(destination)),
                                  backlog_samples=self._backlog.get(destination, 0.0),
                                  latency_fine_buckets=_cumulative(FINE_LATENCY_BUCKETS,
                                                                   self._latency_fine.get(destination)))

    def lag(self, topic: str, partition: int, records: int, seconds: float) -> None:
        p = str(partition)
        self.m.lag_records.labels(lane=self.lane, topic=topic, partition=p).set(records)
        self.m.lag_seconds.labels(lane=self.lane, topic=topic, partition=p).set(seconds)

    def running(self, up: bool) -> None:
        self.m.lane_up.labels(lane=self.lane).set(1 if up else 0)

    def error(self, reason: str) -> None:
        self.m.errors.labels(lane=self.lane, reason=reason).inc()

    def dead_lettered(self) -> None:
        self._dlq.inc()

    def source_records_lost(self, topic: str, partition: int, n: int) -> None:
        """Records of a source partition gone before they were copied (the lane's position overtaken)."""
        self.m.source_records_lost.labels(lane=self.lane, topic=topic, partition=str(partition)).inc(n)

    def backpressure(self) -> None:
        self._pauses.inc()


class MigrationMetrics:
    """The metrics of a staged migration (`transcoder migrate`) and of an in-place rollout (`migrate watch`), on a
    registry of their own unless one is passed in (the service's, to export them beside the lanes')."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry if registry is not None else CollectorRegistry()
        self.stored_codec_ratio = Gauge("transcoder_stored_codec_ratio",
                                        "Share (0..1) of the sampled records of a topic written since the watch's "
                                        "start time that the broker stores in batches of this codec (`migrate "
                                        "watch`: an in-place rollout).", ["topic", "codec"], registry=r)
        self.verified_offset = Gauge("transcoder_migration_verified_offset",
                                     "Source offset up to which (exclusive) content verification found the "
                                     "destination equal to its source.", ["destination", "partition"], registry=r)
        self.mismatches = Counter("transcoder_migration_mismatches_total",
                                  "Verification ranges whose destination records differ from their source records "
                                  "(cutover is refused while one is recorded).", ["destination"], registry=r)
        self.groups = Gauge("transcoder_migration_groups", "Consumer groups of a migration in each stage (source, "
                            "moving, destination, rolling-back).", ["destination", "stage"], registry=r)
        self.predicted_ratio = Gauge("transcoder_migration_predicted_ratio",
                                     "Record bytes per stored byte the destination's codec, level and batch size were "
                                     "predicted to reach on the source's records (`migrate start`).",
                                     ["destination"], registry=r)
        self.realized_ratio = Gauge("transcoder_migration_realized_ratio",
                                    "Record bytes per stored byte realized: the copier's average record over the "
                                    "copy's bytes on disk per record (DescribeLogDirs).", ["destination"], registry=r)
        self.predicted_bytes_per_record = Gauge("transcoder_migration_predicted_bytes_per_record",
                                                "Bytes one record was predicted to take stored in the destination "
                                                "(one replica, batch framing included).", ["destination"],
                                                registry=r)
        self.realized_bytes_per_record = Gauge("transcoder_migration_realized_bytes_per_record",
                                               "Bytes one record takes stored in the destination: its bytes on disk "
                                               "(DescribeLogDirs) per record and replica.", ["destination"],
                                               registry=r)
        self._codecs: dict[str, set[str]] = {}  # topic -> codecs with a stored_codec_ratio series
        self._stages: dict[str, set[str]] = {}  # destination -> stages with a groups series
        self._endpoints: Endpoints | None = None

    def stored_mix(self, topic: str, shares: dict[str, float] | None) -> None:
        """The latest sample's share of records per stored codec (codecs absent from it: 0); None, an empty
        sample: the topic's series go (there is no share of nothing)."""
        seen = self._codecs.setdefault(topic, set())
        if shares is None:
            for codec in seen:
                self.stored_codec_ratio.remove(topic, codec)
            seen.clear()
            return
        for codec in seen | set(shares):
            self.stored_codec_ratio.labels(topic=topic, codec=codec).set(shares.get(codec, 0.0))
        seen.update(shares)

    def verified(self, destination: str, through: Mapping[int, int], *, mismatches: int = 0) -> None:
        """One verification pass: per partition, the source offset verification reached, and the mismatched
        ranges it found (0 still declares the counter; see `mismatch`)."""
        for partition, offset in through.items():
            self.verified_offset.labels(destination=destination, partition=str(partition)).set(offset)
        self.mismatch(destination, mismatches)

    def mismatch(self, destination: str, ranges: int = 1) -> None:
        """`ranges` more mismatched ranges; 0 declares the series (at 0), so that `increase()` sees the first
        mismatch: a counter series born at 1 has no earlier sample to increase from."""
        self.mismatches.labels(destination=destination).inc(ranges)

    def group_stages(self, destination: str, counts: dict[str, int]) -> None:
        """Groups per stage now; a stage no group is in any more reads 0."""
        seen = self._stages.setdefault(destination, set())
        for stage in seen | set(counts):
            self.groups.labels(destination=destination, stage=stage).set(counts.get(stage, 0))
        seen.update(counts)

    def payoff(self, destination: str, *, predicted_ratio: float | None, realized_ratio: float | None,
               predicted_bytes_per_record: float | None, realized_bytes_per_record: float | None) -> None:
        """A migration's prediction against what is realized (`migrate report`'s figures); None: not known, not set."""
        for gauge, value in ((self.predicted_ratio, predicted_ratio), (self.realized_ratio, realized_ratio),
                             (self.predicted_bytes_per_record, predicted_bytes_per_record),
                             (self.realized_bytes_per_record, realized_bytes_per_record)):
            if value is not None:
                gauge.labels(destination=destination).set(value)

    def exposition(self) -> tuple[str, bytes]:
        """These metrics in Prometheus' text format: (content type, body), for /metrics."""
        return exposition(self.registry)

    def serve(self, port: int, host: str = "0.0.0.0", *, web_config_file: str | Path | None = None,
              auth_probes: bool = False) -> int:
        """Serve these metrics on /metrics (with /healthz, /readyz and an empty /status, as the service's
        endpoints) from a daemon thread until `stop`; return the port (0: any free one). `web_config_file`: TLS
        and basic auth, as the service's metrics.web_config_file."""
        self._endpoints = Endpoints(self.exposition, healthy=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                                    status=dict, web_config_file=web_config_file, auth_probes=auth_probes)
        return self._endpoints.start(host, port)

    def stop(self) -> None:
        if self._endpoints is not None:
            self._endpoints.stop()
            self._endpoints = None


def _cumulative(bounds: tuple[float, ...], counts: list[float] | None) -> list[tuple[float, float]]:
    """Per-bucket counts (+Inf last; None: none yet) as cumulative (upper bound, count), +Inf last."""
    cumulative, total = [], 0.0
    for bound, n in zip([*bounds, float("inf")], counts or [0.0] * (len(bounds) + 1), strict=True):
        total += n
        cumulative.append((float(bound), total))
    return cumulative
