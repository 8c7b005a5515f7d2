"""The service's watchdog: a lane loop that stops turning is logged once, with where its thread waits."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import structlog

from transcoder import config as cfg
from transcoder.metrics.status import LaneStatus
from transcoder.service.runner import Service


def _blocked_here(release: threading.Event) -> None:
    release.wait(30)


def test_a_stalled_loop_is_logged_once_with_its_threads_stack():
    config = cfg.parse({"cluster": {"bootstrap_servers": "localhost:1"}, "group_id": "g",
                        "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    service = Service(config)
    release = threading.Event()
    t = threading.Thread(target=_blocked_here, args=(release,), name="lane-s")
    t.start()
    try:
        st = LaneStatus(name="s", group_id="g", destinations={}, state="running", last_loop=time.monotonic() - 45)
        service.lanes = [SimpleNamespace(status=st)]  # type: ignore[list-item]
        with structlog.testing.capture_logs() as logs:
            service._watch_loops({"s": t})
            service._watch_loops({"s": t})  # still stalled: not again
            st.last_loop = time.monotonic()
            service._watch_loops({"s": t})  # turned: forgotten
            st.last_loop = time.monotonic() - 31
            service._watch_loops({"s": t})  # stalled again: logged again
    finally:
        release.set()
        t.join()
    stalls = [e for e in logs if e["event"] == "lane_loop_stalled"]
    assert len(stalls) == 2
    assert stalls[0]["lane"] == "s" and stalls[0]["since_s"] >= 45
    assert "_blocked_here" in stalls[0]["stack"] and "release.wait(30)" in stalls[0]["stack"]
    assert "lane-s" not in stalls[0]["other_threads"] and "MainThread" in stalls[0]["other_threads"]


def _stuck_in_its_stop(release: threading.Event) -> None:
    release.wait(60)


class FakeLane:
    def __init__(self, name: str, state: str, error: str | None = None) -> None:
        self.spec = SimpleNamespace(name=name)
        self.status = LaneStatus(name=name, group_id="g", destinations={}, state=state, error=error,
                                 last_loop=time.monotonic())


def test_a_failed_lane_whose_stop_never_returns_is_abandoned_after_the_limit_with_its_stack():
    # CI: a fenced instance logged its failure, then its lane's stop hung; the process never exited, silent.
    config = cfg.parse({"cluster": {"bootstrap_servers": "localhost:1"}, "group_id": "g",
                        "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    service = Service(config)
    release = threading.Event()
    stuck = threading.Thread(target=_stuck_in_its_stop, args=(release,), name="lane-a", daemon=True)
    failed, running = FakeLane("a", "failed", "fenced"), FakeLane("b", "running")

    def drains_when_asked() -> None:
        service.stop_event.wait(60)
        running.status.state = "stopped"

    other = threading.Thread(target=drains_when_asked, name="lane-b", daemon=True)
    service.lanes = [failed, running]  # type: ignore[list-item]
    stuck.start()
    other.start()
    try:
        with structlog.testing.capture_logs() as logs:
            since = service._wait({failed: stuck, running: other}, limit=1.0)  # type: ignore[dict-item]
        assert since is not None and service.abandoned
        assert service.stop_event.is_set()  # the other lane was asked to stop as soon as one failed
        other.join(5)
        assert not other.is_alive()
        assert stuck.is_alive()
        [event] = [e for e in logs if e["event"] == "lane_stop_stuck"]
        assert event["lane"] == "a" and event["error"] == "fenced"
        assert "_stuck_in_its_stop" in event["stack"]
    finally:
        release.set()
        stuck.join()
