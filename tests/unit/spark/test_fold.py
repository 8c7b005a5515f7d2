"""The driver folds the tasks' tallies into the service's metrics vocabulary, once per micro-batch."""

from __future__ import annotations

from transcoder.kafka.statistics import Window
from transcoder.metrics.registry import Metrics
from transcoder.metrics.status import LaneStatus
from transcoder.spark.engine import SparkLane
from transcoder.spark.sink import TaskTally as Tally


def _lane() -> tuple[SparkLane, Metrics]:
    m = Metrics()
    st = LaneStatus(name="l", group_id="g", destinations={"s.zstd": ("s", "zstd")}, acked={"s.zstd": 0})
    return SparkLane(spec=None, metrics=m.lane("l"), status=st, checkpoint="/c/l"), m  # type: ignore[arg-type]


def _tally(part: int, first: int, last: int, **extra) -> Tally:
    n = last - first + 1
    return Tally(records=n, source_bytes=100 * n, ranges={("s", part): (first, last, 1000 + last)},
                 acked={("s.zstd", "zstd"): n},
                 produced_windows={("s.zstd", "zstd"): [(Window.from_values([25.0 * n]), Window.from_values([n]),
                                                         100 * n)]},
                 latencies={"s.zstd": [(0.2, 1.0)]}, backlog={"s.zstd": 2}, cpu_seconds=0.5, **extra)


def test_task_tallies_become_the_service_metrics_and_status():
    lane, m = _lane()
    lane.spec = type("Spec", (), {"name": "l"})()
    cpu = lane.fold([_tally(0, 0, 99), _tally(1, 0, 49)]) + lane.fold([_tally(0, 100, 199)])
    r = m.registry
    labels = {"lane": "l", "destination": "s.zstd", "codec": "zstd"}
    assert r.get_sample_value("transcoder_records_in_total", {"lane": "l"}) == 250
    assert r.get_sample_value("transcoder_records_out_total", labels) == 250
    assert r.get_sample_value("transcoder_record_bytes_out_total", labels) == 25_000
    assert r.get_sample_value("transcoder_compressed_bytes_total", labels) == 6_250
    assert r.get_sample_value("transcoder_wire_ratio", labels) == 4.0
    assert r.get_sample_value("transcoder_batch_records_sum", labels) == 250
    assert r.get_sample_value("transcoder_end_to_end_latency_seconds_count",
                              {"lane": "l", "destination": "s.zstd"}) == 3
    assert r.get_sample_value("transcoder_backlog_latency_samples_total", {"lane": "l", "destination": "s.zstd"}) == 6
    assert lane.status.records == 250 and lane.status.acked == {"s.zstd": 250}
    assert lane.status.committed == {("s", 0): 200, ("s", 1): 50}
    assert lane.committed_ts == {("s", 0): 1199, ("s", 1): 1049}
    assert cpu == 1.5  # the Python workers' CPU, for the lane's `produce` part


def test_a_failed_micro_batch_commits_nothing():
    lane, _ = _lane()
    lane.spec = type("Spec", (), {"name": "l"})()
    lane.fold([_tally(0, 0, 99), _tally(1, 0, 9, fatal="record s [1] offset 10 ...")])
    assert lane.status.committed == {} and lane.committed_ts == {}
    assert lane.status.records == 110  # what was written is counted: it is in the destination


class _Java:
    """The accessors of a py4j JVM throwable that java_failure reads."""

    def __init__(self, name: str, message: str | None, cause: _Java | None = None) -> None:
        self.name, self.message, self.cause = name, message, cause

    def getMessage(self): return self.message  # noqa: E704, N802
    def getCause(self): return self.cause  # noqa: E704, N802
    def getClass(self): return type("C", (), {"getSimpleName": lambda _s: self.name})()  # noqa: E704, N802


def test_a_jvm_failure_is_one_line_with_its_root_cause():
    from transcoder.spark.session import java_failure

    lost = _Java("KafkaIllegalStateException", "Some data may have been lost because they are not available in "
                 "Kafka any more; either the data was aged out by Kafka\nor the topic was deleted",
                 _Java("OffsetOutOfRangeException", "Fetch position FetchPosition{offset=3843} is out of range for "
                       "partition src-0"))
    err = type("Py4JJavaError", (Exception,), {})("An error occurred while calling o99.collectToPython.\n...")
    err.java_exception = lost
    line = java_failure(err)
    assert line == ("KafkaIllegalStateException: Some data may have been lost because they are not available in "
                    "Kafka any more (cause: OffsetOutOfRangeException: Fetch position FetchPosition{offset=3843} is "
                    "out of range for partition src-0)")
    assert java_failure(ValueError("plain\nsecond line")) == "plain"
