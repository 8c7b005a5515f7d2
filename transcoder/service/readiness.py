"""A lane's readiness: whether it can copy (records acknowledged, Kafka answering), told to /readyz through its status.

Runs on the lane's thread: the loop checks it each commit interval (`check`); the checkpoint tells it when Kafka
keeps it waiting (`waiting_on_kafka`, `cannot_copy`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

import structlog
from confluent_kafka import KafkaError

from transcoder.kafka.retries import KAFKA_ERRORS, in_flight_summary
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.ledger import Ledger

log = structlog.get_logger("transcoder.lane")

#: Readiness: records in flight without any acknowledgement for this long (or twice the longest linger) mean
#: the lane cannot produce.
STALL_S = 15.0


class Tracker(Protocol):
    """What readiness reads of a client's error tracker (kafka.errors' ErrorTracker)."""

    streak_start: float | None
    last_answer: tuple[float, float] | None
    recovered: tuple[float, float] | None

    def answered(self, now: float, since: float) -> None: ...
    def statistics(self, stats: Mapping[str, Any], now: float | None = None) -> None: ...
    def unreachable(self) -> KafkaError | None: ...


class Acknowledgements(Protocol):
    """What readiness reads of the lane's writer."""

    @property
    def acked_total(self) -> Mapping[str, int]: ...
    @property
    def error_trackers(self) -> Sequence[Tracker]: ...


class Readiness:
    """Readiness answers 503 with a reason while the lane cannot copy: records wait and nothing was acknowledged
    for `stall_s`, or a client's outage is not over."""

    def __init__(self, lane: str, status: LaneStatus, writer: Acknowledgements, ledger: Ledger,
                 consumer_errors: Tracker, one_cluster: bool, stall_s: float,
                 assigned: Callable[[], AbstractSet[tuple[str, int]]]) -> None:
        self.lane = lane
        self.status = status
        self.writer = writer
        self.ledger = ledger
        #: the consumer's error_cb (an ErrorTracker): its outages end on its brokers' answers (the lane's statistics)
        self.consumer_errors = consumer_errors
        self.one_cluster = one_cluster
        self.stall_s = stall_s
        self.assigned = assigned
        #: (records read + acknowledged, when that last changed)
        self.progress = (0, time.monotonic())
        #: records acknowledged at the last check, and when it was: acknowledgements since are the destination's answer
        self._acked_mark = (0, time.monotonic())
        self._down_since = 0.0

    def check(self, now: float) -> None:
        """The lane cannot copy while records wait and nothing was acknowledged for `stall_s`, or while a client's
        outage is not over: an "unreachable" error and no broker answered since (acknowledgements, the consumer's
        statistics). Logged once when it starts and once when it ends, with how long it lasted: from the first
        failure to the first success."""
        trackers = [self.consumer_errors, *self.writer.error_trackers]
        self._answers(trackers, now)
        mark = self.status.records + sum(self.writer.acked_total.values())
        last_mark, since = self.progress
        if mark != last_mark:
            self.progress = (mark, now)
            since = now
        why = None
        if self.ledger.in_flight_bytes > 0 and now - since >= self.stall_s:
            why = (f"no acknowledgement for {now - since:.0f} s with {self.ledger.outstanding(self.assigned())} "
                   f"records in flight: {in_flight_summary(self.ledger.pending, KAFKA_ERRORS.last(since=since))}")
        else:
            down = [(t.streak_start, err) for t in trackers
                    if t.streak_start is not None and (err := t.unreachable()) is not None]
            if down:
                # since the outage's first failure, not since the lane last moved (it may have had nothing to copy
                # for hours)
                since, err = min(down, key=lambda d: d[0])
                why = f"Kafka unreachable: {err.str()}"
        if why is not None:
            self.cannot_copy(why, since)
        elif self.status.unreachable is not None:
            ended = max((t.recovered[1] for t in trackers
                         if t.recovered is not None and t.recovered[1] >= self._down_since), default=now)
            log.info("lane_copying_again", lane=self.lane, after_s=round(ended - self._down_since, 1))
            self.status.unreachable = None

    def _answers(self, trackers: list[Tracker], now: float) -> None:
        """Acknowledgements since the last check are the destination's answer; in one cluster, a broker's answer to
        one client of the lane is the cluster's answer to all."""
        acked = sum(self.writer.acked_total.values())
        last_acked, checked_at = self._acked_mark
        self._acked_mark = (acked, now)
        if acked != last_acked:  # the destination answered since the last check
            for t in trackers if self.one_cluster else self.writer.error_trackers:
                t.answered(now, checked_at)
        if self.one_cluster:
            latest = max((t.last_answer for t in trackers if t.last_answer is not None), default=None)
            if latest is not None:
                for t in trackers:
                    t.answered(latest[1], latest[0])

    def cannot_copy(self, why: str, since: float) -> None:
        """Readiness answers 503 with `why`; logged once when it starts (`since`: when the lane last moved)."""
        if self.status.unreachable is None:
            self._down_since = since
            log.warning("lane_cannot_copy", lane=self.lane, reason=why,
                        note="retrying; /readyz answers 503 until it can copy again")
        self.status.unreachable = why

    def waiting_on_kafka(self, why: str) -> None:
        """A transaction call asked again (the coordinator unreachable: a broker outage): the loop waits in it, not
        stuck. Readiness says why (503) until the lane copies again; liveness sees the loop turn."""
        now = time.monotonic()
        self.status.last_loop = now
        self.cannot_copy(f"Kafka unreachable: {why}", now)
