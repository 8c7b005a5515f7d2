"""The broker figures' polling: the reading a run ends with is asked again when the brokers do not answer it."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from structlog.testing import capture_logs

from transcoder.metrics import broker_figures
from transcoder.metrics.broker_figures import FINAL_READ_RETRIES, BrokerFigures


class Client:
    def __init__(self, conf: object) -> None:
        pass

    def close(self) -> None:
        pass


def figures(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> tuple[BrokerFigures, list[int]]:
    """A BrokerFigures whose readings fail or succeed in the order of `answers` (then succeed)."""
    monkeypatch.setattr(broker_figures, "RawClient", Client)
    monkeypatch.setattr(broker_figures.time, "sleep", lambda s: None)
    f = BrokerFigures.__new__(BrokerFigures)
    f.config = SimpleNamespace(metrics=SimpleNamespace(disk_interval_s=60), destination_cluster=None,
                               cluster=SimpleNamespace(librdkafka=dict))
    calls: list[int] = []

    def read(src: object, dst: object) -> None:
        calls.append(1)
        if answers and not answers.pop(0):
            raise KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT, "DescribeLogDirs timed out"))

    f.read = read  # type: ignore[method-assign]
    return f, calls


def test_a_failed_last_reading_is_asked_again_until_it_succeeds(monkeypatch):
    f, calls = figures(monkeypatch, [False, False, True])
    f.run(threading.Event(), lambda: True)
    assert len(calls) == 3  # the last reading, failed twice, then the one the figures end with


def test_a_last_reading_that_keeps_failing_is_said_to_be_stale(monkeypatch):
    f, calls = figures(monkeypatch, [False] * 10)
    with capture_logs() as logs:
        f.run(threading.Event(), lambda: True)
    assert len(calls) == FINAL_READ_RETRIES + 1
    assert [e["event"] for e in logs].count("broker_figures_failed") == FINAL_READ_RETRIES + 1
    assert logs[-1]["event"] == "broker_figures_stale"


def test_the_last_reading_is_taken_after_the_lanes_are_done_not_during_their_last_writes(monkeypatch):
    # The lanes finish while a periodic reading is under way: that reading saw the topics before the last
    # writes, so the figures the run ends with must come from one more reading.
    f, calls = figures(monkeypatch, [])
    done = threading.Event()
    reading = f.read

    def read(src: object, dst: object) -> None:
        reading(src, dst)
        done.set()  # the last lane stops while this reading is under way

    f.read = read  # type: ignore[method-assign]
    stop = threading.Event()
    monkeypatch.setattr(stop, "wait", lambda timeout=None: False)
    f.run(stop, done.is_set)
    assert len(calls) == 2
