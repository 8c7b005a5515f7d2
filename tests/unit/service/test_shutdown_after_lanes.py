"""Service.run once every lane has ended (issue 42: a SIGTERM after the lane stopped took the whole 35 s).

What was left to wait for was a thread beside the lanes: the broker figures' last reading (here one the broker never
answers), a scoring job or a verification pass. The lanes are fakes that stop as a lane does; the orchestration is
Service.run's own.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from transcoder import config as cfg
from transcoder.metrics.status import LaneStatus
from transcoder.service import runner
from transcoder.service.runner import SHUTDOWN_MARGIN_S, Service

SHUTDOWN_TIMEOUT_S = 2.0


class _Lane:
    """A lane that copies until stopped, or stops by itself once `end` is set (caught up)."""

    def __init__(self, spec, config, metrics, **_kw) -> None:
        self.spec = spec
        self.status = LaneStatus(name=spec.name, group_id="g", destinations={})
        self.failure = None
        self.end = threading.Event()

    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> None:
        self.status.state = "running"
        while not stop.is_set() and not self.end.is_set():
            self.status.last_loop = time.monotonic()
            time.sleep(0.01)
        self.status.state = "stopped" if stop.is_set() else "caught-up"


@pytest.fixture
def service(monkeypatch) -> Iterator[tuple[Service, threading.Event]]:
    """A Service of one fake lane whose broker figures' last reading never returns (until the test ends)."""
    config = cfg.parse({"cluster": {"bootstrap_servers": "localhost:1"}, "group_id": "g",
                        "shutdown_timeout_s": SHUTDOWN_TIMEOUT_S,
                        "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    s = Service(config)
    monkeypatch.setattr(runner, "build_lane", _Lane)
    spec = SimpleNamespace(name="s", sources=["s"])
    s.prepare = lambda *, create: SimpleNamespace(  # type: ignore[method-assign]
        plan=SimpleNamespace(lanes=[spec]), provision=SimpleNamespace(destinations=[]), created=[], dst_admin=None)
    unanswered = threading.Event()

    def figures(_prepared):
        def reading() -> None:
            s.stop_event.wait()
            unanswered.wait(60)  # the last reading: the broker does not answer

        t = threading.Thread(target=reading, name="broker-figures", daemon=True)
        t.start()
        return t

    s.start_broker_figures = figures  # type: ignore[method-assign]
    thresholds = gc.get_threshold()
    try:
        yield s, unanswered
    finally:
        unanswered.set()
        gc.unfreeze()  # Service.run froze what start-up built, for the process
        gc.set_threshold(*thresholds)


def _start(s: Service) -> tuple[threading.Thread, list[float]]:
    returned: list[float] = []
    t = threading.Thread(target=lambda: (s.run(), returned.append(time.monotonic())), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not (s.lanes and s.lanes[0].status.state == "running"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return t, returned


def _lane_ended(s: Service) -> None:
    deadline = time.monotonic() + 10
    while s.lanes[0].status.state in ("starting", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.3)  # the operator sees the lane stopped, and the process still there


def test_a_sigterm_after_the_lane_stopped_by_itself_returns_at_once(service):
    s, _ = service
    t, returned = _start(s)
    s.lanes[0].end.set()  # caught up: the lane stops by itself; the last reading hangs
    _lane_ended(s)
    asked = time.monotonic()
    s.stop()  # the SIGTERM handler
    t.join(SHUTDOWN_TIMEOUT_S + SHUTDOWN_MARGIN_S + 5)
    assert returned, "run() did not return"
    took = returned[0] - asked
    print(f"SIGTERM after the lane stopped: run() returned after {took:.2f} s")
    assert took < 1.0  # the old code waited for the reading until shutdown_timeout_s + SHUTDOWN_MARGIN_S


def test_a_second_sigterm_while_the_last_reading_hangs_returns_at_once(service):
    s, _ = service
    t, returned = _start(s)
    s.stop()  # the first SIGTERM: the lane drains and stops; the last reading hangs
    _lane_ended(s)
    asked = time.monotonic()
    s.stop()
    t.join(SHUTDOWN_TIMEOUT_S + SHUTDOWN_MARGIN_S + 5)
    assert returned and returned[0] - asked < 1.0


def test_without_a_stop_the_last_reading_is_waited_for_until_the_deadline(service):
    s, unanswered = service
    t, returned = _start(s)
    s.lanes[0].end.set()
    _lane_ended(s)
    threading.Timer(0.5, unanswered.set).start()  # the broker answers: the figures the run ends with
    t.join(SHUTDOWN_TIMEOUT_S + SHUTDOWN_MARGIN_S + 5)
    assert returned and not any(th.name == "broker-figures" and th.is_alive() for th in threading.enumerate())
