"""Runs the lanes of one config: pre-flight, provisioning, one thread per lane, the broker figures, stop and drain."""

from __future__ import annotations

import gc
import sys
import threading
import time
import traceback
from collections.abc import Callable

import structlog

from transcoder.config import Config
from transcoder.engine import Served
from transcoder.engine.progress import ProgressObserver, lane_progress
from transcoder.errors import ConfigError, TranscoderError
from transcoder.evaluate.live_scoring import Scorer
from transcoder.kafka.admin import end_offsets
from transcoder.kafka.provisioning import Prepared, extend_partitions, prepare
from transcoder.metrics import status as status_doc
from transcoder.metrics.broker_figures import BrokerFigures
from transcoder.metrics.cpu import ThreadLedger
from transcoder.metrics.endpoints import Endpoints
from transcoder.metrics.registry import Metrics, MigrationMetrics
from transcoder.service.assembly import build_lane
from transcoder.service.heap import HeapTrim
from transcoder.service.lane import Lane
from transcoder.service.verifying import ContinuousVerification

log = structlog.get_logger("transcoder.service")

#: CPython's cyclic collector, for a process that copies records. The hot path allocates a few
#: GC-tracked objects per record (consumed messages, delivery reports) and keeps none in cycles; at
#: the default gen-0 threshold (700 allocations) the collector ran every ~200 records and took 12%
#: of a lane thread's CPU (bench/results/2026-11-22-nginx.md). Cycles are still collected, 140x less often.
GC_THRESHOLDS = (100_000, 20, 100)

#: After a stop, the service waits shutdown_timeout_s plus this for its lanes to drain and commit, whatever
#: Kafka does; then it exits (terminationGracePeriodSeconds must be longer).
SHUTDOWN_MARGIN_S = 5.0


class Service(Served):
    """`transcoder run` (--engine service): the config's lanes in this process, a thread per lane (the engine
    contract, transcoder.engine.contract.Engine)."""

    def __init__(self, config: Config, *, metrics: Metrics | None = None) -> None:
        if config.guarantee == "exactly-once" and config.destination_cluster is not None:
            raise ConfigError("guarantee exactly-once needs the destinations on the source cluster (no "
                              "destination_cluster): a Kafka transaction commits the group's offsets on the cluster "
                              "it writes to, and the lanes' consumer group is on the source cluster; copy within one "
                              "cluster, or use guarantee: at-least-once")
        self.config = config
        self.metrics = metrics or Metrics()
        self.lanes: list[Lane] = []
        self.stop_event = threading.Event()
        #: how many times stop() was called (a signal, a caller): run() tells a stop asked after the lanes ended
        self.stops_asked = 0
        self.threads = ThreadLedger()
        self.endpoints: Endpoints | None = None
        self.brokers: BrokerFigures | None = None
        #: live scoring of candidate codecs (evaluate: in the config), one thread for every lane; None: off
        self.scorer = Scorer(config.evaluate, self.metrics) if config.evaluate is not None else None
        #: continuous verification (migration.verify_interval_s > 0), made by run(); None: off
        self.verification: ContinuousVerification | None = None
        #: set when stopping outlasted shutdown_timeout_s: lanes were left waiting on Kafka (the CLI exits at once)
        self.abandoned = False
        #: lanes whose stalled loop was logged, until it turns again
        self._stall_logged: set[str] = set()
        self.metrics.cpu_source(self.cpu_by_lane, lambda: {ln.spec.name: ln.status.records for ln in self.lanes})

    def cpu_by_lane(self) -> dict[tuple[str, str], float]:
        """CPU seconds per (lane, part): consume, produce, loop."""
        return {k: v for k, v in self.threads.cpu_by_owner().items() if isinstance(k, tuple)}

    def prepare(self, *, create: bool) -> Prepared:
        """Every pre-flight check; with `create`, also create missing destination topics."""
        return prepare(self.config, create=create)

    def preflight(self, prepared: Prepared) -> list[str]:
        """`validate`: the service has nothing of its own to check beyond `prepare`."""
        return []

    def _side_thread(self, name: str, run: Callable[[threading.Event], None]) -> threading.Thread:
        """A daemon thread beside the lanes, its CPU under `name` (not any lane's); it stops with them."""

        def body() -> None:
            self.threads.claim(name, {threading.get_native_id()})
            run(self.stop_event)

        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        return t

    def start_scoring(self) -> threading.Thread | None:
        """The live-scoring thread (evaluate: in the config)."""
        return None if self.scorer is None else self._side_thread("candidate-scoring", self.scorer.run)

    def start_verification(self, prepared: Prepared) -> threading.Thread | None:
        """The continuous-verification thread (migration.verify_interval_s > 0)."""
        m = self.config.migration
        if m is None or not m.verify_interval_s:
            return None
        self.verification = ContinuousVerification(
            self.config, prepared.plan, MigrationMetrics(self.metrics.registry),
            committed=lambda: {tp: o for ln in self.lanes for tp, o in dict(ln.status.committed).items()})
        return self._side_thread("migration-verify", self.verification.run)

    def _wait(self, threads: dict[Lane, threading.Thread], limit: float,
              progress: Callable[[], None] = lambda: None) -> float | None:
        """Until every lane's thread ends, or `limit` seconds after stopping began (a stop asked, or a lane failed:
        the others drain and stop too), then they are abandoned; `progress` reported on each turn. When stopping
        began (None: it did not)."""
        by_lane = {lane.spec.name: t for lane, t in threads.items()}
        stopping_since: float | None = None
        heap = HeapTrim()
        while any(t.is_alive() for t in threads.values()):
            next(t for t in threads.values() if t.is_alive()).join(0.5)  # short joins: signals are handled
            self._watch_loops(by_lane)
            progress()
            heap.tick()
            if any(lane.status.state == "failed" for lane in threads):
                self.stop_event.set()  # as soon as a lane fails, not once its own stop returned
            if self.stop_event.is_set():
                stopping_since = stopping_since or time.monotonic()
                if time.monotonic() - stopping_since > limit:
                    self._abandon(limit, by_lane)
                    break
        return stopping_since

    def _side_jobs(self, threads: list[threading.Thread | None], deadline: float) -> None:
        """Every lane has ended: the threads beside them (the broker figures' last reading, a scoring job, a
        verification pass under way) may finish until `deadline`, unless a stop is asked meanwhile: a SIGTERM after
        the lanes ended finds nothing left to drain, and the service returns at once (a last reading against a
        broker that does not answer held the process for the whole shutdown_timeout_s + SHUTDOWN_MARGIN_S, the
        signal changing nothing). Those left are daemons: they end with the process."""
        asked = self.stops_asked
        alive = [t for t in threads if t is not None]
        while self.stops_asked == asked:
            alive = [t for t in alive if t.is_alive()]
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                return
            alive[0].join(min(0.2, left))  # short joins: a signal's stop is seen at once
        log.info("side_jobs_left", threads=[t.name for t in alive if t.is_alive()],
                 note="a stop asked after every lane ended: not waited for (they only measure)")

    def _abandon(self, limit: float, threads: dict[str, threading.Thread]) -> None:
        """Stopping took longer than shutdown_timeout_s (Kafka unreachable, a commit hanging): stop waiting.
        The lanes' threads are daemons, left behind as the process exits; what they did not commit is read
        and copied again by the next run."""
        self.abandoned = True
        frames = sys._current_frames()
        for ln in self.lanes:
            thread = threads.get(ln.spec.name)
            if ln.status.state == "failed" and thread is not None and thread.is_alive():
                # its stop after the failure (abort, close) did not return: where it waits, for the report
                stack = "".join(traceback.format_stack(frames[thread.ident])) if thread.ident in frames else ""
                log.error("lane_stop_stuck", lane=ln.spec.name, waited_s=round(limit, 1), error=ln.status.error,
                          stack=stack, note="nothing more is committed: the next run copies from the last commit")
                continue
            if ln.status.state not in ("running", "starting"):
                continue
            uncommitted = {f"{t}[{p}]": max(0, nxt - ln.status.committed.get((t, p), nxt))
                           for (t, p), nxt in dict(ln.ledger.next_offset).items()}
            log.warning("shutdown_timeout_exceeded", lane=ln.spec.name, waited_s=round(limit, 1),
                        records_not_committed=sum(uncommitted.values()), partitions=uncommitted,
                        note="not committed: they are copied again after restart (duplicates, never a loss)")

    def _watch_loops(self, threads: dict[str, threading.Thread]) -> None:
        """A lane loop that stopped turning (status.LOOP_STALL_LOG_S) is logged once, with where its thread waits
        and every other thread's stack: liveness (/healthz) fails later, and a blocked loop logs nothing itself."""
        stalled = status_doc.stalled([ln.status for ln in self.lanes], time.monotonic())
        self._stall_logged &= set(stalled)
        for name in sorted(set(stalled) - self._stall_logged):
            self._stall_logged.add(name)
            frames = sys._current_frames()
            stacks = {t.name: "".join(traceback.format_stack(frames[t.ident])) for t in threading.enumerate()
                      if t.ident in frames}
            lane = threads[name].name
            log.warning("lane_loop_stalled", lane=name, since_s=round(stalled[name], 1), stack=stacks.pop(lane, ""),
                        other_threads=stacks, note="the lane's loop has not turned: where its thread waits")

    def stop(self) -> None:
        """Ask every lane to stop, drain and commit. Safe from a signal handler: it only sets a flag and a count."""
        self.stops_asked += 1
        self.stop_event.set()

    def _progress(self, observer: ProgressObserver | None) -> Callable[[], None]:
        """What `_wait` calls on each turn: every lane's progress (its status, against its start end offsets with
        --until-caught-up) handed to `observer`; nothing without one."""
        if observer is None:
            return lambda: None
        return lambda: observer([lane_progress(ln.status, ln.catch_up.end_offsets if ln.catch_up else None)
                                 for ln in self.lanes])

    def run(self, *, until_caught_up: bool = False, progress: ProgressObserver | None = None) -> Prepared:
        prepared = self.prepare(create=True)
        gc.freeze()  # what start-up built lives as long as the process: never scanned again
        gc.set_threshold(*GC_THRESHOLDS)
        ends = end_offsets(prepared.src_admin, prepared.provision.sources) if until_caught_up else None
        self.lanes = [
            build_lane(spec, self.config, self.metrics.lane(spec.name),
                       end_offsets={tp: v for tp, v in ends.items() if tp[0] in spec.sources}
                       if ends is not None else None,
                       threads=self.threads, scorer=self.scorer,
                       destination_partitions={d.topic: d.partitions for d in prepared.provision.destinations},
                       # destinations transcoder created (this run): extended when partitions are added to their source
                       extend_destination=lambda topic, n: extend_partitions(prepared.dst_admin, topic, n),
                       own_destinations=set(prepared.created))
            for spec in prepared.plan.lanes
        ]
        errors: list[BaseException] = []

        def run_lane(lane: Lane) -> None:
            try:
                lane.run(self.stop_event, until_caught_up=until_caught_up)
            except BaseException as exc:  # noqa: BLE001 - reported by run(); the other lanes drain and stop
                errors.append(exc)
                fields = exc.fields() if isinstance(exc, TranscoderError) else {}
                log.error("lane_failed", lane=lane.spec.name, error=str(exc), **fields)
                self.stop_event.set()

        threads = [threading.Thread(target=run_lane, args=(lane,), name=f"lane-{lane.spec.name}", daemon=True)
                   for lane in self.lanes]
        by_lane = {lane.spec.name: t for lane, t in zip(self.lanes, threads, strict=True)}
        poller = self.start_broker_figures(prepared)
        scoring = self.start_scoring()
        verifying = self.start_verification(prepared)
        for t in threads:
            t.start()
        limit = self.config.shutdown_timeout_s + SHUTDOWN_MARGIN_S
        report = self._progress(progress)
        stopping_since = self._wait(dict(zip(self.lanes, threads, strict=True)), limit, report)
        report()  # where every lane ended
        self.stop_event.set()  # every lane is done (caught up, stopped or failed): the poller takes a last reading
        self._side_jobs([poller, scoring, verifying], (stopping_since or time.monotonic()) + limit)
        # a lane abandoned while it stopped after failing has raised nothing yet: what failed it
        errors += [ln.failure for ln in self.lanes if ln.failure is not None and by_lane[ln.spec.name].is_alive()]
        if errors:
            first = errors[0]
            if isinstance(first, TranscoderError):
                raise first
            raise TranscoderError(f"{type(first).__name__}: {first}") from first
        return prepared
