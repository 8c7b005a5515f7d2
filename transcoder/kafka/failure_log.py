"""FailureLog: failures that repeat (every retry while Kafka is unreachable fails alike) logged with back-off and a
count, and once when the same request succeeds again. The batch producer's, the fetcher's and the writer's."""

from __future__ import annotations

import time
from typing import Any

import structlog

#: A failure that repeats is logged at once, then at most once per this many seconds, with a count.
FAILURE_LOG_INTERVAL_S = 30.0


class FailureLog:
    """Logs failures that repeat with back-off and a count: the first at once, then at most one line per
    `interval_s` (failures=N since=<first failure>), and one line when the same request succeeds again.

    Kafka unreachable for a minute is hundreds of failed attempts (a metadata request every retry): one line
    per attempt hid everything else. Time (monotonic seconds) is passed in."""

    def __init__(self, client_id: str, *, interval_s: float = FAILURE_LOG_INTERVAL_S, logger: Any = None) -> None:
        self.client_id, self.interval_s = client_id, interval_s
        #: the client's own logger (the fetcher's, say); the batch producer's by default
        self._logger = logger
        #: event -> [failures, first (monotonic), last logged (monotonic), first (ISO, UTC)]
        self._open: dict[str, list[Any]] = {}

    def failed(self, event: str, now: float, **fields: Any) -> None:
        st = self._open.get(event)
        if st is None:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._open[event] = [1, now, now, since]
            self._log.warning(event, client_id=self.client_id, failures=1, since=since, **fields)
            return
        st[0] += 1
        if now - st[2] >= self.interval_s:
            st[2] = now
            self._log.warning(event, client_id=self.client_id, failures=st[0], since=st[3],
                        note=f"retrying; logged at most once per {self.interval_s:.0f} s", **fields)

    @property
    def _log(self) -> Any:
        # the batch producer's logger, looked up at use (the configuration of then, as structlog's tests set it)
        return self._logger if self._logger is not None else structlog.get_logger("transcoder.batchproducer")

    def succeeded(self, event: str, now: float) -> None:
        st = self._open.pop(event, None)
        if st is not None:
            self._log.info("kafka_requests_succeed_again", client_id=self.client_id, after=event, failures=st[0],
                     after_s=round(now - st[1], 1))
