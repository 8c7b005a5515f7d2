"""The Spark engine's driver: the service's pre-flight and provisioning, one streaming query per lane
(Spark's Kafka source, checkpointed), the project's writer in the executors, and the service's
metrics vocabulary, health and /status fed from the tasks' tallies and the queries' progress.

Delivery is at-least-once: a micro-batch is committed to its lane's checkpoint only after every task
returned with each record acknowledged by every destination (or dead-lettered). A driver killed at
any point resumes from the last committed micro-batch: no gap; the records of the micro-batch it
was writing may be written twice.
"""

from __future__ import annotations

import json
import pickle
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog

from transcoder import errors
from transcoder.config import Config
from transcoder.engine import Served
from transcoder.engine.progress import ProgressObserver, lane_progress
from transcoder.engine.source_loss import report_loss
from transcoder.errors import ConfigError, TranscoderError
from transcoder.evaluate.live_scoring import Scorer
from transcoder.evaluate.live_windows import Sampler
from transcoder.kafka.admin import end_offsets
from transcoder.kafka.provisioning import Prepared, prepare
from transcoder.metrics.broker_figures import BrokerFigures
from transcoder.metrics.endpoints import Endpoints
from transcoder.metrics.registry import LaneMetrics, Metrics
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import LaneSpec
from transcoder.spark import checkpoints, exactly_once, executors, ranges, session, sink
from transcoder.spark.source import read_options

log = structlog.get_logger("transcoder.spark")
#: times a lane's query is started again after a failure to start Spark's Python worker in time, and the wait
#: before the n-th start (n times this)
QUERY_RESTARTS = 3
QUERY_RESTART_WAIT_S = 5.0
#: how long `run` waits for a lane's query to have its source up before it starts another lane's
SOURCES_UP_S = 30.0
#: lanes' queries bringing their sources up at once (each a Python process on the driver with 10 s to start)
STARTS_AT_ONCE = 3


@dataclass
class SparkLane:
    """One lane on Spark: a streaming query over its sources, writing every target from each micro-batch."""

    spec: LaneSpec
    metrics: LaneMetrics
    status: LaneStatus
    checkpoint: str
    query: Any = None
    failure: TranscoderError | None = None
    #: the query started again (`_start`'s, set when it starts), and how many times it was (`_follow`)
    restart: Callable[[], None] = field(default=lambda: None)
    restarts: int = 0
    batches: int = 0
    #: destination topic -> cumulative uncompressed record bytes produced (librdkafka txbytes, over executors)
    record_bytes: dict[str, int] = field(default_factory=dict)
    #: source partition -> timestamp (ms) of the last record of the last committed micro-batch
    committed_ts: dict[Partition, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: live scoring's windows of this lane (evaluate: in the config); None: off
    sampler: Sampler | None = None
    #: source topic -> the partition its last window was taken from (samples rotate over the partitions)
    sampled: dict[str, int] = field(default_factory=dict)
    #: live scoring's read of a micro-batch's records of one partition, (frame, tallies, partition, most): the
    #: reader's (`_start`: from the frame of Spark's Kafka source, or fetched again by spark.read: transcoder)
    read_sample: Callable[[Any, list[sink.TaskTally], Partition, int], list[Any]] = field(
        default=lambda df, tallies, tp, most: [])

    def fold(self, tallies: list[sink.TaskTally]) -> float:
        """One micro-batch's task tallies into the lane's metrics and status (the service's vocabulary); return
        the CPU seconds its Python workers spent (the lane's `produce` part)."""
        st, m = self.status, self.metrics
        with self.lock:
            for t in tallies:
                st.records += t.records
                st.source_bytes += t.source_bytes
                m.records(t.records, t.source_bytes)
                for (dest, codec), n in t.acked.items():
                    st.acked[dest] = st.acked.get(dest, 0) + n
                    m.acked(dest, codec, n)
                for (dest, codec), windows in t.produced_windows.items():
                    for batch_bytes, batch_records, record_bytes in windows:
                        total = self.record_bytes[dest] = self.record_bytes.get(dest, 0) + record_bytes
                        m.produced(dest, codec, batch_bytes, batch_records, total)
                for dest, seconds in t.latencies.items():
                    for s, weight in seconds:
                        m.latency(dest, s, weight)
                for dest, weight in t.backlog.items():
                    m.backfill(dest, weight)
                for reason, n in t.errors.items():
                    for _ in range(n):
                        m.error(reason)
                for _ in range(t.dead_lettered_records):
                    m.dead_lettered()
                st.dead_lettered += t.dead_lettered_records
            self.batches += 1
            if not any(t.fatal for t in tallies):
                for t in tallies:
                    for tp, (_, last, ts) in t.ranges.items():
                        st.committed[tp] = max(st.committed.get(tp, 0), last + 1)
                        self.committed_ts[tp] = ts
            st.last_loop = time.monotonic()
        return sum(t.cpu_seconds for t in tallies)


class SparkEngine(Served):
    """`transcoder run --engine spark`: the config's lanes as streaming queries in one SparkSession (the engine
    contract, transcoder.engine.contract.Engine)."""

    #: never set: run() stops every query (and a session it built) before it returns, leaving no lane behind
    abandoned = False

    def __init__(self, config: Config, *, metrics: Metrics | None = None, spark: Any = None) -> None:
        refused = exactly_once.refusal(config)
        if refused is not None:
            raise ConfigError(refused)
        self.config = config
        self.metrics = metrics or Metrics()
        self.spark = spark
        self._owns_session = spark is None
        self.lanes: list[SparkLane] = []
        self.stop_event = threading.Event()
        self.endpoints: Endpoints | None = None
        self.brokers: BrokerFigures | None = None
        #: (lane, part) -> CPU seconds: produce (the executors' Python writers), consume (executor JVM tasks)
        self.cpu: dict[tuple[str, str], float] = {}
        self._stage_cpu: dict[int, tuple[str, float]] = {}  # stage id -> (lane, executor CPU seconds)
        self._cpu_lock = threading.Lock()  # foreachBatch threads and the watch loop write, scrapes read
        self.start_ms = time.time() * 1000
        #: live scoring of candidate codecs (evaluate: in the config) on a driver thread; None: off
        self.scorer = Scorer(config.evaluate, self.metrics) if config.evaluate is not None else None
        self.metrics.cpu_source(self.cpu_by_lane, lambda: {ln.spec.name: ln.status.records for ln in self.lanes})

    # ------------------------------------------------------------------ the service's surface
    def cpu_by_lane(self) -> dict[tuple[str, str], float]:
        with self._cpu_lock:
            return dict(self.cpu)

    def _add_cpu(self, lane: str, part: str, seconds: float, *, total: bool = False) -> None:
        with self._cpu_lock:
            self.cpu[(lane, part)] = seconds if total else self.cpu.get((lane, part), 0.0) + seconds

    def stop(self) -> None:
        """Ask every query to stop after its current micro-batch. Safe from a signal handler: it sets a flag."""
        self.stop_event.set()

    def prepare(self, *, create: bool) -> Prepared:
        return prepare(self.config, create=create)

    def session(self) -> Any:
        """The SparkSession; one this engine builds is first asked whether its executors can run transcoder (a
        ConfigError in one line, and the session stopped, when they cannot)."""
        if self.spark is None:
            spark = session.build(self.config.spark, app_name=f"transcoder-{self.config.group_id}")
            refused = executors.check(spark)
            if refused is not None:
                spark.stop()
                raise ConfigError(refused)
            self.spark = spark
        return self.spark

    def check_checkpoints(self, prepared: Prepared, *, claim: bool) -> dict[str, str]:
        """lane -> checkpoint location; ConfigError if one was written by another config (claimed if `claim`)."""
        store = checkpoints.CheckpointStore(self.session())
        out = {}
        for spec in prepared.plan.lanes:
            location = checkpoints.lane_location(self.config, spec)
            if claim:
                store.claim(location, spec)
            else:
                found = store.read(location)
                problem = found and checkpoints.mismatch(location, found, checkpoints.mark(spec))
                if problem:
                    raise ConfigError(problem)
            out[spec.name] = location
        return out

    def preflight(self, prepared: Prepared) -> list[str]:
        """`validate`: Spark starts (the Kafka connector resolved, the executors able to run transcoder) and each
        lane's checkpoint, if there is one, was written for this config; the session is stopped again."""
        locations = self.check_checkpoints(prepared, claim=False)
        s = self.config.spark
        lines = [f"spark: master {s.master}, trigger "
                 f"{f'every {s.trigger_interval_ms} ms' if s.trigger_interval_ms else 'continuous micro-batches'}, "
                 f"max_offsets_per_trigger {s.max_offsets_per_trigger or 'unbounded'}"]
        lines += [f"checkpoint of lane {lane}: {location}" for lane, location in locations.items()]
        self.session().stop()
        return lines

    # ------------------------------------------------------------------ running
    def run(self, *, until_caught_up: bool = False, progress: ProgressObserver | None = None) -> Prepared:
        prepared = self.prepare(create=True)
        spark = self.session()
        try:
            locations = self.check_checkpoints(prepared, claim=True)
            store = checkpoints.CheckpointStore(spark)
            lows = end_offsets(prepared.src_admin, prepared.provision.sources)
            for spec in prepared.plan.lanes:
                assigned = sorted((s, p) for s in spec.sources for p in range(prepared.provision.sources[s].partitions))
                st = LaneStatus(name=spec.name, group_id=spec.group_id, assigned=assigned,
                                acked={t.topic_for(s): 0 for t in spec.targets for s in t.sources},
                                destinations={t.topic_for(s): (s, t.destination.label)
                                              for t in spec.targets for s in t.sources})
                st.committed = self._resumes_at(store.committed(locations[spec.name]), assigned, lows)
                lane = SparkLane(spec, self.metrics.lane(spec.name), st, locations[spec.name])
                if self.scorer is not None:
                    lane.sampler = self.scorer.sampler({t.topic_for(s): (s, t.destination) for t in spec.targets
                                                        for s in t.sources}, now=time.monotonic())
                self.lanes.append(lane)
            # Lag from where each lane resumes, before any query starts: the queries start one after another (each
            # waiting for its source's Python process) and a first micro-batch can copy the whole backlog.
            self._figures(prepared)
            poller = self.start_broker_figures(prepared)
            if self.scorer is not None:
                threading.Thread(target=self.scorer.run, args=(self.stop_event,), name="candidate-scoring",
                                 daemon=True).start()
            starting: list[SparkLane] = []
            for lane in self.lanes:
                self._start(spark, lane, until_caught_up=until_caught_up)
                starting.append(lane)
                if len(starting) >= STARTS_AT_ONCE:
                    self._sources_up(starting.pop(0))
            for lane in starting:
                self._sources_up(lane)
            self._watch(prepared, self._progress(progress, lows if until_caught_up else None))
            self.stop_event.set()
            if poller is not None:
                poller.join(60)
        finally:
            for lane in self.lanes:
                if lane.query is not None and lane.query.isActive:
                    lane.query.stop()
            if self._owns_session:
                spark.stop()
        failed = [ln for ln in self.lanes if ln.status.state == "failed"]
        if failed:
            first = failed[0]
            raise first.failure or TranscoderError(f"lane {first.spec.name}: {first.status.error}")
        return prepared

    def _resumes_at(self, committed: dict[Partition, int] | None, assigned: list[Partition],
                    ends: dict[Partition, tuple[int, int]]) -> dict[Partition, int]:
        """Where each partition's copy stands before the first micro-batch: the checkpoint's last committed
        offsets; for a new checkpoint, `start` (earliest: the low watermark, latest: the high one)."""
        if committed is not None:
            return {tp: committed[tp] for tp in assigned if tp in committed}
        if self.config.start == "earliest":
            return {tp: ends[tp][0] for tp in assigned if tp in ends}
        if self.config.start == "latest":
            return {tp: ends[tp][1] for tp in assigned if tp in ends}
        return {}  # a start timestamp: known once the first micro-batch is planned

    def _start(self, spark: Any, lane: SparkLane, *, until_caught_up: bool) -> None:
        spec, config = lane.spec, self.config
        fingerprint = json.dumps(checkpoints.mark(spec), sort_keys=True) + config.model_dump_json()
        write = sink.task_function(config, fingerprint, spec, self.start_ms)
        context = spark.sparkContext

        own_reader = config.spark.read == "transcoder"

        def on_batch(df: Any, batch_id: int) -> None:
            context.setJobGroup(f"transcoder-{spec.name}", f"transcoder lane {spec.name} micro-batch {batch_id}")
            try:
                # transcoder's reader copies in its tasks and yields their tallies; Spark's, the writers' tasks do
                rows = df.collect() if own_reader else \
                    df.selectExpr(*sink.COLUMNS).mapInArrow(write, sink.RESULT_SCHEMA).collect()
            except Exception as exc:  # py4j/pyspark errors: a JVM exception chain, kept as one line
                failure = session.java_failure(exc)
                lane.failure = TranscoderError(f"lane {spec.name}: micro-batch {batch_id} failed: {failure}")
                raise lane.failure from exc
            tallies = [pickle.loads(r.tally) for r in rows]
            self._add_cpu(spec.name, "produce", lane.fold(tallies))
            for loss in (loss for t in tallies for loss in t.losses):  # spark.read: transcoder's tasks found them
                report_loss(config, spec.name, loss, lane.metrics,
                            [d.topic_for(loss.topic) for d in spec.targets if loss.topic in d.sources])
            fatal = next((t for t in tallies if t.fatal), None)
            if fatal is not None:
                f = fatal.fatal_fields
                kind = getattr(errors, fatal.fatal_type, TranscoderError)
                kind = kind if isinstance(kind, type) and issubclass(kind, TranscoderError) else TranscoderError
                lane.failure = kind(fatal.fatal or "", topic=f.get("topic"), partition=f.get("partition"),
                                    offset=f.get("offset"), kafka_error=f.get("kafka_error"))
                raise lane.failure  # the micro-batch is not committed: a restart writes it again
            if lane.sampler is not None:
                self._sample(lane, df, tallies)

        if own_reader:
            spark.dataSource.register(ranges.source_class(config, spec, fingerprint, self.start_ms))
            reader = spark.readStream.format(ranges.source_name(spec))
            lane.read_sample = partial(_fetched_sample, config, spec)
        else:
            reader = spark.readStream.format("kafka").options(**read_options(config, list(spec.sources)))
            lane.read_sample = _frame_sample
        writer = (reader.load().writeStream.queryName(f"transcoder-{spec.name}")
                  .option("checkpointLocation", lane.checkpoint).foreachBatch(on_batch))
        if until_caught_up:
            writer = writer.trigger(availableNow=True)
        elif config.spark.trigger_interval_ms:
            writer = writer.trigger(processingTime=f"{config.spark.trigger_interval_ms} milliseconds")
        lane.query = writer.start()
        lane.restart = lambda: self._start(spark, lane, until_caught_up=until_caught_up)
        lane.status.state = "running"
        lane.metrics.running(True)
        log.info("lane_started", lane=spec.name, engine="spark", master=config.spark.master,
                 checkpoint=lane.checkpoint, sources=list(spec.sources),
                 destinations=[f"{t.name} ({t.destination.label})" for t in spec.targets])

    def _sources_up(self, lane: SparkLane) -> None:
        """Wait (at most SOURCES_UP_S) until the lane's query has its source up: with spark.read: transcoder, a
        Python process per query on the driver that Spark gives a fixed 10 s to start; lanes started all at once on a
        busy driver (27 in one test) missed it. At most STARTS_AT_ONCE lanes' sources come up at a time."""
        deadline = time.monotonic() + SOURCES_UP_S
        while lane.query.isActive and time.monotonic() < deadline and not self.stop_event.is_set():
            if not session.starting(str(lane.query.status.get("message", ""))):
                return
            time.sleep(0.1)

    def _sample(self, lane: SparkLane, df: Any, tallies: list[sink.TaskTally]) -> None:
        """Live scoring's capture on the driver, after a micro-batch was written: when the sample interval is due,
        windows open; each open window is offered the records of one partition of this micro-batch (its bound
        partition, else the next after the last one sampled that the micro-batch carried), read again from Kafka
        (the same offsets, at most about the window's bytes). A failure is the scorer's to report, never the lane's."""
        sampler = lane.sampler
        assert sampler is not None
        now = time.monotonic()
        if now >= sampler.due:
            sampler.tick(now)
        if not sampler.capturing:
            return
        carried = sorted({tp for t in tallies for tp in t.ranges})
        records = sum(t.records for t in tallies)
        average = max(1, sum(t.source_bytes for t in tallies) // max(1, records))
        fetched: set[Partition] = set()
        for window in sampler.open_windows():
            source = window.target.source
            if window.partition is not None:
                partition = window.partition
            else:
                parts = [p for s, p in carried if s == source]
                if not parts:
                    continue
                later = [p for p in parts if p > lane.sampled.get(source, -1)]
                partition = min(later) if later else min(parts)
            if (source, partition) in fetched:
                continue
            fetched.add((source, partition))
            try:
                msgs = lane.read_sample(df, tallies, (source, partition), 2 * (window.target.limit // average) + 16)
            except Exception as exc:  # noqa: BLE001 - a sample is not worth a lane: the scorer reports it
                sampler.failed(window, exc)
                continue
            lane.sampled[source] = partition
            sampler.offer(msgs)

    def _progress(self, observer: ProgressObserver | None,
                  ends: dict[Partition, tuple[int, int]] | None) -> Callable[[], None] | None:
        """What `_watch` calls on each turn: every lane's progress handed to `observer` (None: no observer), against
        the start end offsets of its sources (`ends`; None: not a one-shot run)."""
        if observer is None:
            return None
        by_lane = {ln.spec.name: None if ends is None else {tp: v for tp, v in ends.items() if tp[0] in ln.spec.sources}
                   for ln in self.lanes}
        return lambda: observer([lane_progress(ln.status, by_lane[ln.spec.name]) for ln in self.lanes])

    def _watch(self, prepared: Prepared, progress: Callable[[], None] | None = None) -> None:
        """Follow the queries until each ends (caught up, stopped or failed): lag, CPU, health, stop requests;
        `progress` reported on each turn, and once more at the end."""
        interval = self.config.metrics.stats_interval_ms / 1000
        next_figures = 0.0
        stop_asked: float | None = None
        while not self.lanes_done():
            now = time.monotonic()
            if self.stop_event.is_set() and stop_asked is None:
                stop_asked = now
                log.info("spark_stopping", note="each query stops after its current micro-batch")
            for lane in self.lanes:
                self._follow(lane, stop_asked)
            if now >= next_figures:
                self._figures(prepared)
                next_figures = now + interval
            if progress is not None:
                progress()
            time.sleep(0.2)
        self._figures(prepared)  # the last figures, after every query ended
        if progress is not None:
            progress()

    def _follow(self, lane: SparkLane, stop_asked: float | None) -> None:
        st, q = lane.status, lane.query
        if st.state in ("caught-up", "stopped", "failed"):
            return
        if q.isActive:
            st.last_loop = time.monotonic()  # Spark runs the loop; a live query is a turning loop
            if stop_asked is not None:
                busy = q.status.get("isTriggerActive", False)
                if not busy or time.monotonic() - stop_asked > self.config.shutdown_timeout_s:
                    q.stop()
            return
        exc = q.exception()
        lane.metrics.running(False)
        if exc is None:
            st.state = "stopped" if stop_asked is not None else "caught-up"
            log.info("lane_stopped" if stop_asked else "lane_caught_up", lane=lane.spec.name, records=st.records,
                     micro_batches=lane.batches)
            return
        if lane.failure is None:
            failure = session.java_failure(exc)
            if stop_asked is None and lane.restarts < QUERY_RESTARTS and session.transient_start_failure(failure):
                lane.restarts += 1
                log.warning("lane_query_restarted", lane=lane.spec.name, error=failure, restart=lane.restarts,
                            note="Spark could not start a Python worker in time (a busy driver): the query starts "
                                 f"again from its checkpoint in {lane.restarts * QUERY_RESTART_WAIT_S:g} s")
                self.stop_event.wait(lane.restarts * QUERY_RESTART_WAIT_S)
                lane.restart()
                self._sources_up(lane)
                return
            lane.failure = TranscoderError(f"lane {lane.spec.name}: the Spark query failed: {failure}")
        st.state = "failed"
        st.error = str(lane.failure)
        log.error("lane_failed", lane=lane.spec.name, error=st.error, **lane.failure.fields())
        self.stop_event.set()  # the other lanes stop after their micro-batch

    def _figures(self, prepared: Prepared) -> None:
        """Lag from the committed offsets (the last micro-batch's end) and the source's end offsets; executor CPU."""
        for lane in self.lanes:
            q = lane.query
            progress = q.lastProgress if q is not None else None
            if progress:
                with lane.lock:
                    for source in progress.get("sources", []):
                        ends = source.get("endOffset")
                        ends = json.loads(ends) if isinstance(ends, str) else ends
                        for topic, parts in (ends or {}).items():
                            for p, off in parts.items():
                                lane.status.committed[(topic, int(p))] = int(off)
        try:
            highs = end_offsets(prepared.src_admin, prepared.provision.sources)
        except TranscoderError as exc:
            log.warning("lag_unavailable", error=str(exc))
            highs = {}
        now_ms = time.time() * 1000
        for lane in self.lanes:
            for tp in lane.status.assigned:
                committed = lane.status.committed.get(tp)
                if committed is None or tp not in highs:
                    continue
                lag = max(0, highs[tp][1] - committed)
                ts = lane.committed_ts.get(tp)
                seconds = 0.0 if lag == 0 or ts is None else max(0.0, (now_ms - ts) / 1000)
                lane.status.lag[tp] = (lag, seconds)
                lane.metrics.lag(tp[0], tp[1], lag, seconds)
        self._executor_cpu()

    def _executor_cpu(self) -> None:
        """Executor CPU of each lane's tasks (JVM: reading Kafka, Arrow), from Spark's status REST API."""
        context = self.spark.sparkContext if self.spark is not None else None
        url = context.uiWebUrl if context is not None else None
        if context is None or not url:
            return
        api = f"{url}/api/v1/applications/{context.applicationId}"
        try:
            jobs = _get_json(f"{api}/jobs")
            stages = {s["stageId"]: s for s in _get_json(f"{api}/stages?status=complete")}
        except (OSError, ValueError) as exc:
            log.debug("executor_cpu_unavailable", error=str(exc))
            return
        for job in jobs:
            group = job.get("jobGroup") or ""
            if not group.startswith("transcoder-"):
                continue
            for sid in job.get("stageIds", []):
                s = stages.get(sid)
                if s is not None and sid not in self._stage_cpu:
                    self._stage_cpu[sid] = (group.removeprefix("transcoder-"), s.get("executorCpuTime", 0) / 1e9)
        per_lane: dict[str, float] = {}
        for lane_name, seconds in self._stage_cpu.values():
            per_lane[lane_name] = per_lane.get(lane_name, 0.0) + seconds
        for lane_name, seconds in per_lane.items():
            self._add_cpu(lane_name, "consume", seconds, total=True)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:  # the driver's own UI, http on loopback
        return json.loads(resp.read())


def _frame_sample(df: Any, tallies: list[sink.TaskTally], tp: Partition, most: int) -> list[Any]:
    """Spark's Kafka source: at most `most` records of `tp` from the micro-batch's frame, in offset order."""
    from pyspark.sql import functions as F

    rows = (df.where((F.col("topic") == tp[0]) & (F.col("partition") == tp[1]))
            .selectExpr(*sink.COLUMNS).limit(most).toArrow())
    return sorted((m for b in rows.to_batches() for m in sink.arrow_records(b)), key=lambda m: m.offset())


def _fetched_sample(config: Config, spec: LaneSpec, df: Any, tallies: list[sink.TaskTally], tp: Partition,
                    most: int) -> list[Any]:
    """spark.read: transcoder (the frame holds the tasks' tallies only): the range a task copied of `tp`, fetched
    again from its first offset; none when this micro-batch did not carry `tp` (a window bound to a partition), as
    from the frame."""
    span = next((t.ranges[tp] for t in tallies if tp in t.ranges), None)
    if span is None:
        return []
    return ranges.sample_records(config, spec, tp, span[0], span[1] + 1, most)
