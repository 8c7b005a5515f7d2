"""A transaction request the coordinator keeps failing (no answer, or a retriable error other than "busy") is asked
again after Kafka's back-off (KIP-580): retry.backoff.ms doubling to retry.backoff.max.ms, +-20%; "busy" stays at
20 ms. Without a broker: the client is a fake and the pauses are noted, not slept."""

from __future__ import annotations

import time
import types

import pytest

from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.producer import transaction_requests
from transcoder.kafka.producer.transaction_requests import TXN_RETRY_BACKOFF_S, TransactionRequests, Transactions
from transcoder.pipeline.batching import CONCURRENT_TRANSACTIONS

NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15


class _Coordinator:
    def __init__(self, codes: list[int]) -> None:
        self.codes = codes

    def find_coordinator(self, key: str, key_type: int) -> int:
        return 1

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, *, coordinator: int) -> int:
        return self.codes.pop(0)


def test_a_coordinator_failing_is_asked_again_after_a_doubling_back_off(monkeypatch: pytest.MonkeyPatch):
    slept: list[float] = []
    monkeypatch.setattr(transaction_requests, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=slept.append))
    client = _Coordinator([COORDINATOR_NOT_AVAILABLE] * 6 + [CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, 0])
    requests = TransactionRequests(Transactions("tid-1", "g1"), "c1", FailureLog("c1"), 0.1)
    requests.end(client, 7, 0, True, time.monotonic() + 60)
    assert client.codes == []
    assert slept[6] == TXN_RETRY_BACKOFF_S  # busy: 20 ms, as the Java producer
    failures = slept[:6] + slept[7:]
    terms = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]  # was 0.1 every time
    assert all(0.8 * t - 1e-9 <= s <= min(1.0, 1.2 * t) + 1e-9 for s, t in zip(failures, terms, strict=True)), slept
