"""Live scoring of candidate codecs (`evaluate:` in the config): one background thread per service instance
scores the windows the lanes capture (evaluate.live_windows) with evaluate's own measurement.

A window is measured as `transcoder evaluate` measures a partition: `measure_partition(records, [the
destination's own setting, each candidate], repeats=1, max_records=batch.max_records)` at the destination's
`batch.max_bytes`: the records cut into the batches the destination's producer would cut, framed as Kafka v2
batches and compressed, compress and decompress timed on the thread's CPU clock. The current setting is
measured on the same batches, so "candidate vs current" compares like with like. Ratios are exact and
deterministic (the same records give the same figure); CPU figures are one run's.

CPU bound: after a job of c thread-CPU seconds the thread waits w = c * (1 - s) / s, s = `max_cpu_share`, so
that c / (c + w) = s: over its work and its pauses the scorer uses at most s of one core (its wall time
while working is at least c, so the share of wall time is lower still). The lanes' capture is bounded apart:
at most one window per destination and interval, and none while the scorer still holds one of it.

A window that cannot be captured or scored is logged (`candidate_scoring_failed`, with destination,
partition and offsets), counted (`transcoder_candidate_errors_total`) and kept in /status (`last_error`);
the lanes never see it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

import structlog

from transcoder.config.model import Destination, EvaluateConfig
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.live_windows import Sampler, SampleTarget, Window
from transcoder.evaluate.measure import fold, measure_partition
from transcoder.metrics.registry import Metrics, SettingScore
from transcoder.metrics.status import CandidateScores, CandidateStatus

log = structlog.get_logger("transcoder.scoring")


def cpu_share_wait(cpu_seconds: float, share: float) -> float:
    """Seconds to wait after a job of `cpu_seconds` thread-CPU seconds, so that cpu / (cpu + wait) <= share."""
    if cpu_seconds <= 0 or share >= 1:
        return 0.0
    return cpu_seconds * (1 - share) / share


def score(records: list, destination: Destination, candidates: list[Setting]) -> tuple[SettingScore,
                                                                                      list[SettingScore], int]:
    """(the destination's own setting, each candidate in order, batches) on one window of one partition."""
    current = Setting(destination.codec, destination.level)
    cells = [Cell(s, destination.batch.max_bytes) for s in dict.fromkeys([current, *candidates])]
    results = fold(measure_partition(records, cells, repeats=1, max_records=destination.batch.max_records), cells)
    by = {Setting(r.codec, r.level): SettingScore(r.codec, r.level, r.ratio,  # type: ignore[arg-type]
                                                  r.compress_cpu_s_per_1m, r.decompress_cpu_s_per_1m)
          for r in results}
    return by[current], [by[c] for c in candidates], results[0].batches


class Scorer:
    """The windows waiting to be scored (the latest per destination), the thread that scores them, the figures."""

    def __init__(self, evaluate: EvaluateConfig, metrics: Metrics, *, clock: Callable[[], float] = time.time) -> None:
        self.evaluate = evaluate
        self.metrics = metrics
        self.clock = clock
        self.candidates = [Setting(c.codec, c.level) for c in evaluate.candidates]
        self._cond = threading.Condition()
        self._pending: dict[str, Window] = {}  # destination topic -> its latest unscored window
        self._destinations: dict[str, Destination] = {}
        self._status: dict[str, CandidateStatus] = {}
        self.cpu_seconds = 0.0  # of the scoring thread, since start

    # ------------------------------------------------------------------ the lanes' side
    def sampler(self, destinations: Mapping[str, tuple[str, Destination]], now: float) -> Sampler:
        """The sampler of one lane: destination topic -> (source topic, destination config)."""
        targets = []
        for dest, (source, d) in destinations.items():
            self._destinations[dest] = d
            self._status.setdefault(dest, CandidateStatus())
            targets.append(SampleTarget(dest, source, self.evaluate.sample_bytes_for(d.batch)))
        return Sampler(targets, self.evaluate.sample_interval_s, submit=self.submit, wanted=self.wants,
                       failed=self.capture_failed, now=now)

    def wants(self, destination: str) -> bool:
        """False while a window of this destination waits to be scored: no new one is captured meanwhile."""
        return destination not in self._pending

    def submit(self, window: Window) -> None:
        with self._cond:
            self._pending.pop(window.target.destination, None)
            self._pending[window.target.destination] = window
            self._cond.notify()

    def capture_failed(self, window: Window, exc: BaseException) -> None:
        self._failed(window, exc, "capture")

    # ------------------------------------------------------------------ the scoring thread
    def run(self, stop: threading.Event) -> None:
        """Score windows as they come until `stop`, waiting after each job to stay within max_cpu_share."""
        log.info("candidate_scoring_started", candidates=[s.label for s in self.candidates],
                 sample_interval_s=self.evaluate.sample_interval_s, max_cpu_share=self.evaluate.max_cpu_share)
        while True:
            with self._cond:
                while not self._pending and not stop.is_set():
                    self._cond.wait(1.0)
                if stop.is_set():
                    return
                window = self._pending.pop(next(iter(self._pending)))
            t0 = time.thread_time()
            self.score_window(window)
            cpu = time.thread_time() - t0
            self.cpu_seconds += cpu
            self.metrics.candidate_cpu_spent(cpu)
            stop.wait(cpu_share_wait(cpu, self.evaluate.max_cpu_share))

    def score_window(self, window: Window) -> CandidateScores | None:
        """Score one window now (on the calling thread): figures into the metrics and /status; None on an error."""
        dest = window.target.destination
        try:
            current, candidates, batches = score(window.records, self._destinations[dest], self.candidates)
        except Exception as exc:  # noqa: BLE001 - logged, counted and shown in /status; the thread goes on
            self._failed(window, exc, "scoring")
            return None
        assert window.partition is not None
        scores = CandidateScores(source=window.target.source, partition=window.partition,
                                 first_offset=window.first_offset, last_offset=window.last_offset,
                                 records=len(window.records), record_bytes=window.nbytes, batches=batches,
                                 scored_at=self.clock(), current=current, candidates=tuple(candidates))
        self.metrics.candidate_scored(dest, current, candidates, len(window.records))
        with self._cond:
            st = self._status.get(dest, CandidateStatus())
            self._status[dest] = CandidateStatus(latest=scores, samples=st.samples + 1,
                                                 sampled_records=st.sampled_records + len(window.records),
                                                 errors=st.errors, last_error=st.last_error)
        return scores

    def _failed(self, window: Window, exc: BaseException, stage: str) -> None:
        dest = window.target.destination
        error = f"{type(exc).__name__}: {exc}"
        log.error("candidate_scoring_failed", stage=stage, **window.where, error=error, exc_info=exc)
        self.metrics.candidate_error(dest)
        with self._cond:
            st = self._status.get(dest, CandidateStatus())
            where = f"{window.target.source} [{window.partition}] offsets {window.first_offset}-{window.last_offset}"
            self._status[dest] = CandidateStatus(latest=st.latest, samples=st.samples,
                                                 sampled_records=st.sampled_records, errors=st.errors + 1,
                                                 last_error=f"{stage} of {where}: {error}")

    def snapshot(self) -> dict[str, CandidateStatus]:
        """destination topic -> its live scoring, for /status (any thread)."""
        with self._cond:
            return dict(self._status)
