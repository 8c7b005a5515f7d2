"""A lane's query that fails because Spark gave up on a Python worker slow to start (its fixed 10 s: the streaming
source runner of spark.read: transcoder, on a busy driver) is started again from its checkpoint, at most
QUERY_RESTARTS times; any other failure fails the lane."""

from __future__ import annotations

from types import SimpleNamespace

from transcoder import config as cfg
from transcoder.metrics.registry import Metrics
from transcoder.metrics.status import LaneStatus
from transcoder.spark.engine import QUERY_RESTARTS, SparkEngine, SparkLane
from transcoder.spark.session import starting, transient_start_failure

SLOW = "org.apache.spark.SparkException: Python worker failed to connect back."


class _Ended:
    """A query that ended with `error`."""

    isActive = False

    def __init__(self, error: str) -> None:
        self.error = error

    def exception(self) -> Exception:
        return Exception(self.error)


def _engine_and_lane(error: str) -> tuple[SparkEngine, SparkLane, list[int]]:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "k:9092"},
                      "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    engine = SparkEngine(conf, spark=object())
    m = Metrics()
    lane = SparkLane(spec=SimpleNamespace(name="l"), metrics=m.lane("l"),  # type: ignore[arg-type]
                     status=LaneStatus(name="l", group_id="g", destinations={}), checkpoint="/c/l", query=_Ended(error))
    started: list[int] = []
    lane.restart = lambda: started.append(1)
    return engine, lane, started


def test_a_python_worker_slow_to_start_restarts_the_query_a_bounded_number_of_times(monkeypatch):
    monkeypatch.setattr("transcoder.spark.engine.QUERY_RESTART_WAIT_S", 0.0)
    engine, lane, started = _engine_and_lane(SLOW)
    for _ in range(QUERY_RESTARTS):
        engine._follow(lane, None)
        assert lane.status.state != "failed"
    assert len(started) == QUERY_RESTARTS == lane.restarts
    engine._follow(lane, None)  # once more: the lane fails, saying why
    assert lane.status.state == "failed" and "Python worker failed to connect back" in lane.status.error
    assert len(started) == QUERY_RESTARTS


def test_other_failures_and_a_stop_asked_fail_the_lane_at_once():
    engine, lane, started = _engine_and_lane("org.apache.kafka.common.errors.TimeoutException: boom")
    engine._follow(lane, None)
    assert lane.status.state == "failed" and started == []
    engine, lane, started = _engine_and_lane(SLOW)
    engine._follow(lane, 1.0)
    assert lane.status.state == "failed" and started == []


def test_the_slow_start_is_told_by_sparks_words():
    assert transient_start_failure(f"{SLOW} (cause: SocketTimeoutException: Timed out while waiting for the Python "
                                   "worker to connect back)")
    assert not transient_start_failure("StreamingQueryException: Python worker exited unexpectedly (crashed)")


def test_a_query_is_starting_until_its_sources_gave_their_first_offsets():
    assert starting("Initializing sources")
    assert starting("Getting offsets from transcoder-kafka-l[...]")
    assert not starting("Processing new data") and not starting("Waiting for data to arrive")
    assert not starting("Waiting for next trigger") and not starting("Stopped")


def test_a_sample_of_a_partition_the_micro_batch_did_not_carry_is_empty_not_a_failure():
    # a window bound to partition 1 while the micro-batch carried partition 0 only: nothing to offer, as from the frame
    from transcoder.spark.engine import _fetched_sample
    from transcoder.spark.sink import TaskTally

    engine, lane, _ = _engine_and_lane(SLOW)
    tallies = [TaskTally(records=3, ranges={("s", 0): (0, 2, 1000)})]
    assert _fetched_sample(engine.config, lane.spec, None, tallies, ("s", 1), 10) == []
