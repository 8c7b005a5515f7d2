"""Service.run hands a progress observer each lane's progress while the lanes copy, and once more at the end: the
lane's own counters and committed offsets against the end offsets seen at start. The lanes are fakes that copy as a
lane does (records counted, offsets committed); the orchestration is Service.run's own."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from transcoder import config as cfg
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.catch_up import CatchUp
from transcoder.pipeline.progress import LaneProgress
from transcoder.service import runner
from transcoder.service.runner import Service

ENDS = {("s", 0): (0, 3000), ("s", 1): (0, 1000)}


class _Lane:
    """Copies 100 records of each partition every 50 ms, committing as it goes, until the start ends are reached."""

    def __init__(self, spec, config, metrics, *, end_offsets=None, **_kw) -> None:
        self.spec = spec
        self.status = LaneStatus(name=spec.name, group_id="g", destinations={})
        self.catch_up = CatchUp(end_offsets) if end_offsets is not None else None
        self.failure = None

    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> None:
        assert self.catch_up is not None
        self.status.state = "running"
        committed: dict[tuple[str, int], int] = {}
        while not stop.is_set():
            self.status.last_loop = time.monotonic()
            if self.catch_up.done(committed, lambda _tp, _end: False):
                self.status.state = "caught-up"
                return
            for tp, (_, high) in self.catch_up.end_offsets.items():
                step = min(100, high - committed.get(tp, 0))
                committed[tp] = committed.get(tp, 0) + step
                self.status.records += step
                self.status.source_bytes += 10 * step
            self.status.committed = dict(committed)
            time.sleep(0.05)


@pytest.fixture
def service(monkeypatch) -> Iterator[Service]:
    config = cfg.parse({"cluster": {"bootstrap_servers": "localhost:1"}, "group_id": "g",
                        "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    s = Service(config)
    monkeypatch.setattr(runner, "build_lane", _Lane)
    monkeypatch.setattr(runner, "end_offsets", lambda _admin, _sources: dict(ENDS))
    spec = SimpleNamespace(name="s", sources=["s"])
    s.prepare = lambda *, create: SimpleNamespace(  # type: ignore[method-assign]
        plan=SimpleNamespace(lanes=[spec]), provision=SimpleNamespace(destinations=[], sources={}), created=[],
        dst_admin=None, src_admin=None)
    s.start_broker_figures = lambda _prepared: None  # type: ignore[method-assign]
    thresholds = gc.get_threshold()
    try:
        yield s
    finally:
        gc.unfreeze()  # Service.run froze what start-up built, for the process
        gc.set_threshold(*thresholds)


def test_the_observer_sees_the_offsets_left_fall_to_zero_and_the_last_report_is_the_lanes_end(service):
    seen: list[LaneProgress] = []
    service.run(until_caught_up=True, progress=lambda lanes: seen.extend(lanes))
    assert len(seen) >= 3  # about twice a second while the lane copied 1.5 s, and once at the end
    assert all(p.lane == "s" for p in seen)
    left = [p.remaining for p in seen]
    assert left == sorted(left, reverse=True)  # never grows
    for p in seen:  # each report consistent: what was copied and what is left make the whole
        if p.state == "running" and p.remaining:
            assert p.records + p.remaining >= 4000 - 200  # at most one step read but not yet committed
    last = seen[-1]
    assert (last.state, last.records, last.source_bytes, last.remaining, last.fraction) == (
        "caught-up", 4000, 40_000, 0, 1.0)


def test_without_an_observer_nothing_is_reported_and_the_run_is_the_same(service):
    service.run(until_caught_up=True)
    assert service.lanes[0].status.state == "caught-up" and service.lanes[0].status.records == 4000
