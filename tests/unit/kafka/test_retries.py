"""transcoder.kafka.retries: Kafka's exponential back-off with jitter (KIP-580) per key, the cluster config's
retry.backoff.ms / retry.backoff.max.ms, Kafka's error names, the errors tally and the in-flight summary."""

from __future__ import annotations

from collections import deque

import kafka.errors
import pytest

from transcoder.errors import KafkaUnavailableError, TranscoderError
from transcoder.kafka.retries import (
    Backoff,
    KafkaErrors,
    delay_ms,
    in_flight_summary,
    kafka_error_name,
    retry_backoff_of,
)


@pytest.mark.parametrize(("rand", "expected"), [
    (0.5, [100, 200, 400, 800, 1000, 1000, 1000]),  # no jitter: 100 ms doubling to 1 s
    (0.0, [80, 160, 320, 640, 800, 800, 800]),  # -20%: the cap's term, 1000, jittered too (as Kafka's)
    (0.999999, [120, 240, 480, 960, 1000, 1000, 1000]),  # +20%, never over the max
])
def test_the_delay_doubles_from_retry_backoff_ms_to_its_max_with_20_percent_jitter(rand: float, expected: list[int]):
    got = [delay_ms(n, 100, 1000, rand=lambda: rand) for n in range(1, 8)]
    assert [round(x) for x in got] == expected


def test_a_max_under_the_base_is_the_base_and_no_failure_no_delay():
    assert delay_ms(5, 300, 100, rand=lambda: 0.0) == 300
    assert delay_ms(0, 100, 1000) == 0


def test_backoff_counts_failures_per_key_and_resets_on_success():
    draws = iter([0.5] * 10)
    b = Backoff(100, 1000, rand=lambda: next(draws))
    assert b.ready("p0", 0.0)
    assert b.failed("p0", 10.0) == pytest.approx(0.1)
    assert b.failed("p0", 10.1) == pytest.approx(0.2)
    assert b.failed("p1", 10.1) == pytest.approx(0.1)  # another key: its own count
    assert not b.ready("p0", 10.2) and b.wait("p0", 10.2) == pytest.approx(0.1)
    assert b.ready("p0", 10.31) and b.failures("p0") == 2
    b.succeeded("p0")
    assert b.failures("p0") == 0 and b.ready("p0", 0.0)
    assert b.failed("p0", 20.0) == pytest.approx(0.1)  # back to the start


def test_jitter_spreads_the_delays_of_keys_failing_together():
    b = Backoff(100, 1000)  # the process's random: each key's delay its own
    delays = {b.failed(k, 0.0) for k in range(50)}
    assert len(delays) > 40 and all(0.08 <= d <= 0.12 for d in delays)


def test_retry_backoff_comes_from_the_cluster_config_with_kafka_s_defaults():
    assert retry_backoff_of({}) == (100, 1000)
    assert retry_backoff_of({"retry.backoff.ms": "250", "retry.backoff.max.ms": 5000}) == (250, 5000)
    with pytest.raises(TranscoderError, match=r"^cluster config retry.backoff.max.ms: '1s' is not a whole number"):
        retry_backoff_of({"retry.backoff.max.ms": "1s"})


def test_kafka_s_error_names():
    assert kafka_error_name(19) == "NOT_ENOUGH_REPLICAS"
    assert kafka_error_name(6) == "NOT_LEADER_OR_FOLLOWER"  # kafka-python and librdkafka call it by its old name
    assert kafka_error_name(kafka.errors.NotEnoughReplicasError()) == "NOT_ENOUGH_REPLICAS"
    assert kafka_error_name(kafka.errors.UnknownBrokerIdError(3)) == "UNKNOWN_BROKER_ID"
    assert kafka_error_name(kafka.errors.KafkaConnectionError("111")) == "KafkaConnectionError"
    wrapped = KafkaUnavailableError("listing offsets")
    wrapped.__cause__ = kafka.errors.KafkaTimeoutError()
    assert kafka_error_name(wrapped) == "KafkaTimeoutError"
    assert kafka_error_name(KafkaUnavailableError("x", kafka_error="FENCED_LEADER_EPOCH")) == "FENCED_LEADER_EPOCH"


def test_errors_are_counted_by_name_topic_and_broker_and_the_last_per_partition_kept():
    errors = KafkaErrors()
    for _ in range(3):
        errors.count("NOT_ENOUGH_REPLICAS", topic="t", broker=3, partitions=[1], now=10.0)
    errors.count("KafkaConnectionError", topic="t", broker=2, partitions=[0, 2], now=11.0)
    errors.count("KafkaConnectionError", now=12.0)  # a metadata request: no topic, no broker
    errors.count("NOT_LEADER_OR_FOLLOWER", topic="t", broker=3, partitions=[1], now=13.0)
    assert errors.counts() == {("NOT_ENOUGH_REPLICAS", "t", "3"): 3, ("KafkaConnectionError", "t", "2"): 1,
                               ("KafkaConnectionError", "", ""): 1, ("NOT_LEADER_OR_FOLLOWER", "t", "3"): 1}
    last = errors.last(["t"])
    assert (last[("t", 1)].error, last[("t", 1)].broker, last[("t", 1)].count) == ("NOT_LEADER_OR_FOLLOWER", 3, 1)
    assert last[("t", 0)].error == "KafkaConnectionError" and last[("t", 0)].broker == 2
    assert set(errors.last(["t"], since=12.5)) == {("t", 1)}
    assert errors.last(["u"]) == {}


def test_the_in_flight_summary_names_each_waiting_partition_and_its_last_error():
    errors = KafkaErrors()
    for _ in range(535):
        errors.count("NOT_ENOUGH_REPLICAS", topic="o.zstd", broker=3, partitions=[1], now=1.0)
    pending = {("o.zstd", 0): deque([(10, 20, 11, 500)]), ("o.zstd", 1): deque([(0, 9, 10, 400), (21, 1)]),
               ("o.zstd", 2): deque()}
    assert in_flight_summary(pending, errors.last()) == (
        "o.zstd [0] 11 records; o.zstd [1] 11 records (NOT_ENOUGH_REPLICAS from broker 3, 535 times)")
    many = {("t", p): deque([(p, 1)] * (p + 1)) for p in range(10)}
    assert in_flight_summary(many, {}, limit=2) == "t [9] 10 records; t [8] 9 records; 8 more partitions"
