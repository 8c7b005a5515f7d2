"""Every Prometheus metric transcoder exports, declared once, on a registry passed in.

Names start with transcoder_, use base units, and counters end in _total. Labels come from a
small set (lane, codec, topic, partition, reason); never a key or an offset.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.records_in = Counter("transcoder_records_in_total", "Source records consumed by a lane.",
                                  ["lane"], registry=registry)
        self.errors = Counter("transcoder_errors_total", "Records that failed, by Kafka error name.",
                              ["lane", "reason"], registry=registry)
        self.dlq_records = Counter("transcoder_dlq_records_total", "Records written to the dead-letter topic.",
                                   ["lane"], registry=registry)
        self.backpressure = Counter("transcoder_backpressure_pauses_total",
                                    "Times a lane paused consuming because too many bytes were in flight.",
                                    ["lane"], registry=registry)

    def lane(self, name: str) -> LaneMetrics:
        return LaneMetrics(self, name)


class LaneMetrics:
    """The metrics of one lane, labels bound once (children are cached, not looked up per record)."""

    def __init__(self, m: Metrics, lane: str) -> None:
        self._records = m.records_in.labels(lane=lane)
        self._dlq = m.dlq_records.labels(lane=lane)
        self._pauses = m.backpressure.labels(lane=lane)
        self._errors = m.errors
        self._lane = lane

    def records(self, n: int) -> None:
        self._records.inc(n)

    def error(self, reason: str) -> None:
        self._errors.labels(lane=self._lane, reason=reason).inc()

    def dead_lettered(self) -> None:
        self._dlq.inc()

    def backpressure(self) -> None:
        self._pauses.inc()
