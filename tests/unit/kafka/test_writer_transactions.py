"""transcoder.kafka.writer.transactions: beginning transactions while the coordinator cannot be reached."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import DeliveryError
from transcoder.kafka.writer.transactions import WriterTransactions


class _Producer:
    """init_transactions fails with these errors first (librdkafka's: a broker restarting), then succeeds."""

    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)
        self.calls: list[str] = []

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init_transactions")
        if self.errors:
            raise KafkaException(self.errors.pop(0))

    def begin_transaction(self) -> None:
        self.calls.append("begin_transaction")


def _timed_out() -> KafkaError:
    return KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for operation to finish, retry call to resume",
                      retriable=True)


def test_init_transactions_is_asked_again_while_the_coordinator_cannot_be_reached():
    # seen: a broker SIGKILLed for 12 s while a lane replaced its stuck producer; the lane failed on the first timeout
    p = _Producer(_timed_out(), _timed_out())
    txns = WriterTransactions("lane", 60_000)
    txns.begin(p, "tid", 0.01)
    assert p.calls == ["init_transactions"] * 3 + ["begin_transaction"]
    assert txns.transactional_id == "tid"


def test_a_fenced_or_fatal_init_fails_at_once():
    p = _Producer(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    with pytest.raises(DeliveryError, match="could not start transactions"):
        WriterTransactions("lane", 60_000).begin(p, "tid", 0.01)
    assert p.calls == ["init_transactions"]


def test_retrying_ends_once_the_broker_would_have_settled_the_transaction_itself(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("transcoder.kafka.writer.transactions.time.monotonic", lambda: now[0])

    class _Down(_Producer):
        def init_transactions(self, timeout: float) -> None:
            now[0] += timeout
            super().init_transactions(timeout)

    p = _Down(*[_timed_out()] * 1000)
    with pytest.raises(DeliveryError, match="retry call to resume") as info:
        WriterTransactions("lane", 10_000).begin(p, "tid", 5.0)
    assert info.value.retriable
    assert now[0] == pytest.approx(40.0, abs=5.0)  # transaction_timeout_ms (10 s) and 30 s
