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
