"""Health, readiness and the /status document, built from snapshots: lane statuses, each lane's own
tallies and the broker figures. Nothing here reads the Prometheus registry back."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from transcoder.metrics.broker_figures import BrokerFigures
from transcoder.metrics.registry import LaneMetrics, SettingScore
from transcoder.pipeline.partitions import Partition, show
from transcoder.report.tables import candidate_sentence


@dataclass
class LaneStatus:
    """A snapshot of one lane for health checks and /status; written by the lane's thread, read by others."""

    name: str
    group_id: str
    #: destination topic -> (source topic, codec label)
    destinations: dict[str, tuple[str, str]]
    state: str = "starting"  # starting | running | caught-up | stopped | failed
    error: str | None = None
    assigned: list[Partition] = field(default_factory=list)
    committed: dict[Partition, int] = field(default_factory=dict)
    records: int = 0
    dead_lettered: int = 0
    loop_cpu_seconds: float = 0.0  # CPU of the lane's own (Python) thread; librdkafka threads excluded
    acked: dict[str, int] = field(default_factory=dict)  # destination topic -> records acknowledged
    source_bytes: int = 0  # key + value + headers of the records consumed
    lag: dict[Partition, tuple[int, float]] = field(default_factory=dict)  # -> (records, seconds)
    last_loop: float = field(default_factory=time.monotonic)
    #: Why the lane cannot copy now (no acknowledgement while records wait, or Kafka unreachable); None: it can.
    unreachable: str | None = None


@dataclass(frozen=True)
class CandidateScores:
    """Live scoring of one destination's latest sample: where the sample came from and each setting's figures."""

    source: str
    partition: int
    first_offset: int
    last_offset: int
    records: int
    record_bytes: int
    batches: int  # the sample cut into the destination's batches (batch.max_bytes, batch.max_records)
    scored_at: float  # epoch seconds
    current: SettingScore  # the destination's own codec and level
    candidates: tuple[SettingScore, ...]


@dataclass(frozen=True)
class CandidateStatus:
    """A destination's live scoring: the latest figures (None before the first sample) and its tallies."""

    latest: CandidateScores | None = None
    samples: int = 0
    sampled_records: int = 0
    errors: int = 0
    last_error: str | None = None


def _setting_doc(s: SettingScore) -> dict[str, Any]:
    return {"codec": s.codec, "level": s.level, "label": s.label, "ratio": s.ratio,
            "compress_cpu_s_per_1m": s.compress_cpu_s_per_1m, "decompress_cpu_s_per_1m": s.decompress_cpu_s_per_1m}


def candidates_document(st: CandidateStatus) -> dict[str, Any]:
    """The `candidates` section of a destination in /status: the sample, the current setting, each candidate
    with its sentence ('zstd-9 would store this topic 1.18× smaller for 2.1× the CPU'), and the tallies."""
    doc: dict[str, Any] = {"samples": st.samples, "sampled_records": st.sampled_records, "errors": st.errors,
                           "last_error": st.last_error, "sample": None, "current": None, "candidates": []}
    s = st.latest
    if s is None:
        return doc
    doc["sample"] = {"source": s.source, "partition": s.partition, "first_offset": s.first_offset,
                     "last_offset": s.last_offset, "records": s.records, "record_bytes": s.record_bytes,
                     "batches": s.batches, "scored_at": s.scored_at}
    doc["current"] = _setting_doc(s.current)
    doc["candidates"] = [{**_setting_doc(c), "sentence": candidate_sentence(
        c.label, c.ratio, c.compress_cpu_s_per_1m, s.current.codec, s.current.ratio, s.current.compress_cpu_s_per_1m)}
        for c in s.candidates]
    return doc


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus-style quantile from cumulative (upper bound, count) buckets, +Inf last.

    Linear within the bucket that holds the q-th value; the lower edge of the first bucket is 0.
    None when there are no observations; the highest finite bound when q falls in +Inf.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def stuck_after(shutdown_timeout_s: float, commit_interval_ms: int) -> float:
    """A running lane whose loop has not turned for this long is stuck (revoke drains take <= shutdown_timeout_s)."""
    return max(60.0, 2 * shutdown_timeout_s, 10 * commit_interval_ms / 1000)


#: A running lane whose loop has not turned for this long gets its thread's stack logged (once per stall): waits
#: this long are legitimate only in a rebalance (committed offsets of a dead member's open transaction, a drain),
#: and a loop blocked for good otherwise says nothing at all.
LOOP_STALL_LOG_S = 30.0


def stalled(lanes: Sequence[LaneStatus], now: float, after_s: float = LOOP_STALL_LOG_S) -> dict[str, float]:
    """Running lanes whose loop has not turned for `after_s`: name -> seconds since it last turned."""
    return {st.name: now - st.last_loop for st in lanes if st.state == "running" and now - st.last_loop >= after_s}


def healthy(lanes: Sequence[LaneStatus], stuck_after_s: float) -> tuple[bool, str]:
    """Liveness: the process answers and no lane loop is stuck."""
    now = time.monotonic()
    for st in lanes:
        idle = now - st.last_loop
        if st.state == "running" and idle > stuck_after_s:
            return False, f"lane {st.name}: loop has not turned for {idle:.0f}s"
    return True, "ok"


def ready(lanes: Sequence[LaneStatus]) -> tuple[bool, str]:
    """Readiness: every lane copies (partitions assigned, producing, no fatal error) or is caught up."""
    if not lanes:
        return False, "starting: pre-flight checks and topic provisioning"
    for st in lanes:
        if st.state == "failed":
            return False, f"lane {st.name} failed: {st.error}"
        if st.state in ("starting", "stopped"):
            return False, f"lane {st.name} is {st.state}"
        if st.state == "running" and not st.assigned:
            return False, f"lane {st.name} has no partitions assigned"
        if st.state == "running" and st.unreachable:
            return False, f"lane {st.name} cannot copy: {st.unreachable}"
    return True, "ok"


def document(*, group_id: str, lanes_mode: str, lanes: Sequence[tuple[LaneStatus, LaneMetrics]],
             cpu: Mapping[tuple[str, str], float], brokers: BrokerFigures | None,
             health: Callable[[], tuple[bool, str]], readiness: Callable[[], tuple[bool, str]],
             candidates: Mapping[str, CandidateStatus] | None = None) -> dict[str, Any]:
    """The Kafka Connect-style status document: lanes, assignments, offsets, lag, per-destination figures.

    Latency is of new records, those stamped at or after the lane's start (each record by its own timestamp, a
    batch mixing backlog and new records too): a record's acknowledgement by the destination minus its source
    timestamp, every record with the same chance of being sampled (1 in 16; a batch's records by their number), p50
    and p99 from buckets 6% apart; `backlog_latency_samples` counts the samples of older records, in the same unit
    (a backfill's age is not the pipeline's latency). `topic_records` is the offsets a destination's log spans;
    `compacted` says its log holds fewer records than that (cleanup.policy compact). With live scoring on
    (`candidates`: destination topic -> its scoring), each destination has a `candidates` section (see
    `candidates_document`); without, `candidates` is null.
    """
    docs = []
    for st, metrics in lanes:
        lane_cpu = {part: s for (ln, part), s in cpu.items() if ln == st.name}
        dests = []
        for dest, (source, codec) in st.destinations.items():
            f = metrics.figures(dest)
            dests.append({
                "topic": dest, "source": source, "codec": codec,
                "records_out": st.acked.get(dest, 0),
                "record_bytes_out": f.record_bytes_out, "compressed_bytes": f.compressed_bytes,
                "wire_ratio": f.wire_ratio,
                "disk_bytes": brokers.disk.get(dest) if brokers else None,
                "source_disk_bytes": brokers.disk.get(source) if brokers else None,
                "topic_records": brokers.topic_records.get(dest) if brokers else None,
                "compacted": brokers.compacted.get(dest) if brokers else None,
                "latency_p50_seconds": histogram_quantile(0.5, f.latency_fine_buckets or f.latency_buckets),
                "latency_p99_seconds": histogram_quantile(0.99, f.latency_fine_buckets or f.latency_buckets),
                "latency_samples": round(f.latency_buckets[-1][1]),
                "backlog_latency_samples": round(f.backlog_samples),
                "broker_recompression": brokers.recompression.get(dest) if brokers else None,
                "candidates": candidates_document(candidates.get(dest, CandidateStatus()))
                if candidates is not None else None,
            })
        docs.append({
            "name": st.name, "group_id": st.group_id, "state": st.state, "error": st.error,
            "records": st.records, "source_bytes": st.source_bytes, "dead_lettered": st.dead_lettered,
            "assigned": show(st.assigned),
            "committed": {f"{t}[{p}]": o for (t, p), o in sorted(st.committed.items())},
            "lag_records": {f"{t}[{p}]": r for (t, p), (r, _) in sorted(st.lag.items())},
            "lag_seconds": {f"{t}[{p}]": s for (t, p), (_, s) in sorted(st.lag.items())},
            "cpu_seconds": lane_cpu,
            "cpu_seconds_per_million_records": sum(lane_cpu.values()) / st.records * 1e6 if st.records else None,
            "destinations": dests,
        })
    is_healthy, _ = health()
    is_ready, why = readiness()
    return {"group_id": group_id, "lanes_mode": lanes_mode, "healthy": is_healthy, "ready": is_ready,
            "reason": why, "lanes": docs}
