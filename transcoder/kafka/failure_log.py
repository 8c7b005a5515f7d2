"""FailureLog: failures that repeat (every retry while Kafka is unreachable fails alike) or flap (a partition
failing and succeeding by turns) logged with a count, at most one line per key per 30 s, and once when they end.
The batch producer's, the fetcher's and the writer's."""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import structlog

#: A failure that repeats is logged at once, then at most once per this many seconds, with a count.
FAILURE_LOG_INTERVAL_S = 30.0


@dataclass
class _Key:
    """What one key has been through: where its lines stand and what happened since the last one."""

    first: float  # monotonic: the first failure of this episode
    since: str  # ... as ISO 8601, UTC
    last_line: float  # monotonic: this key's last line
    last_failure: float
    failing: bool = True  # the last call was a failure
    said_failing: bool = True  # the last line said it fails (no recovery said since)
    #: no success since the last failure line, which itself followed a quiet spell or an interval of failures only:
    #: a recovery now is said at once
    solid: bool = True
    failures: int = 0  # since the last line
    recoveries: int = 0  # successes right after failures, since the last line
    total: int = 0  # failures this episode
    fields: dict[str, Any] = field(default_factory=dict)  # the last failure's


class FailureLog:
    """Logs failures that repeat, per key (an event, and what the caller adds: a partition and an error name, say):

    - a failure after a quiet spell (none for `interval_s`) is logged at once (`failures=1`);
    - then at most one line per key per `interval_s`, at the first call after it, saying how things stand: still
      failing (`failures` since the last line, `total` this episode, `recoveries` if it flapped), or recovered
      (`kafka_requests_succeed_again`);
    - a success right after failures with no success among them is said at once (`kafka_requests_succeed_again`);
      after flapping (failure, success, failure ...) it waits for the next line's turn, so flapping by the second
      is a line per 30 s, not one per turn.

    Kafka unreachable for a minute is hundreds of failed attempts (a metadata request every retry): one line
    per attempt hid everything else. Time (monotonic seconds) is passed in."""

    def __init__(self, client_id: str, *, interval_s: float = FAILURE_LOG_INTERVAL_S, logger: Any = None) -> None:
        self.client_id, self.interval_s = client_id, interval_s
        #: the client's own logger (the fetcher's, say); the batch producer's by default
        self._logger = logger
        self._keys: dict[tuple[Hashable, ...], _Key] = {}

    def failed(self, event: str, now: float, *, key: tuple[Hashable, ...] = (), **fields: Any) -> None:
        """`event` failed at `now`; `key`: what is counted and limited apart (besides the event); `fields` go in
        the line."""
        k = (event, *key)
        st = self._keys.get(k)
        if st is None or (not st.failing and now - st.last_failure >= self.interval_s):
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._keys[k] = _Key(first=now, since=since, last_line=now, last_failure=now, total=1, fields=fields)
            self._log.warning(event, client_id=self.client_id, failures=1, since=since, **fields)
            return
        st.failing, st.last_failure, st.fields = True, now, fields
        st.failures += 1
        st.total += 1
        if now - st.last_line >= self.interval_s:
            self._say_failing(event, st, now)

    def succeeded(self, event: str, now: float, *, key: tuple[Hashable, ...] = ()) -> None:
        """`event` succeeded at `now`, for every key that starts with `key` (a partition's: whatever its error)."""
        if not self._keys:
            return
        prefix = (event, *key)
        for k in [k for k in self._keys if k[:len(prefix)] == prefix]:
            st = self._keys[k]
            if st.failing:
                st.failing = False
                st.recoveries += 1
                if st.said_failing and (st.solid or now - st.last_line >= self.interval_s):
                    self._say_recovered(event, st, now)
                st.solid = False
            elif st.said_failing and now - st.last_line >= self.interval_s:
                self._say_recovered(event, st, now)
            elif not st.said_failing and now - st.last_line >= self.interval_s and st.failures:
                self._say_recovered(event, st, now)  # it flapped since its recovery was said
            elif not st.said_failing and now - st.last_failure >= self.interval_s:
                del self._keys[k]  # quiet: forgotten (the next failure is a new episode)

    def _say_failing(self, event: str, st: _Key, now: float) -> None:
        extra = {"recoveries": st.recoveries} if st.recoveries else {}
        self._log.warning(event, client_id=self.client_id, failures=st.failures, total=st.total, since=st.since,
                          note=f"retrying; logged at most once per {self.interval_s:.0f} s", **extra, **st.fields)
        st.solid = st.recoveries == 0
        st.said_failing, st.last_line, st.failures, st.recoveries = True, now, 0, 0

    def _say_recovered(self, event: str, st: _Key, now: float) -> None:
        fields = {("last_error" if name == "error" else name): v for name, v in st.fields.items()}
        extra = {"recoveries": st.recoveries} if st.recoveries > 1 else {}
        self._log.info("kafka_requests_succeed_again", client_id=self.client_id, after=event, failures=st.failures,
                       total=st.total, after_s=round(now - st.first, 1), **extra, **fields)
        st.said_failing, st.last_line, st.failures, st.recoveries = False, now, 0, 0

    @property
    def _log(self) -> Any:
        # the batch producer's logger, looked up at use (the configuration of then, as structlog's tests set it)
        return self._logger if self._logger is not None else structlog.get_logger("transcoder.batchproducer")
