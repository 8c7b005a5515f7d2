"""The batch producer's sender: its own thread and loop (take, seal, send, and while the broker writes, take and seal
the next), as aiokafka's `producer/sender.py` owns its `_sender_routine`. Its collaborators are handed in: the
accumulator it drains, the encoder that seals, the Produce requests (one round: `start`, then `finish`), the reports
a failed round goes to, and the guarantee (exactly-once: the transaction a failed round dooms).

A round that raises reports what it held failed (in a transaction: the transaction is lost with it) and renews the
producer id, as what the broker got of them is unknown (their sequences are never reused): at least once, never
lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import structlog

from transcoder.kafka.producer.accumulator import Pending, RecordAccumulator
from transcoder.kafka.producer.batches import Batch, Partition, Record
from transcoder.kafka.producer.encoder import BatchEncoder
from transcoder.kafka.producer.errors import FAILED, ProduceError
from transcoder.kafka.producer.guarantee import Guarantee
from transcoder.kafka.producer.reports import DeliveryReports
from transcoder.kafka.producer.requests import ProduceRequests
from transcoder.kafka.producer.transaction_requests import TXN_RETRY_BACKOFF_S


def _log() -> Any:
    return structlog.get_logger("transcoder.batchproducer")  # looked up at use: the configuration of then


class Sender:
    """The sender's thread: drains the accumulator, seals, sends one round at a time and seals the next meanwhile."""

    def __init__(self, *, client_id: str, accumulator: RecordAccumulator, encoder: BatchEncoder,
                 requests: ProduceRequests, reports: DeliveryReports, guarantee: Guarantee,
                 request_timeout_ms: int) -> None:
        self.client_id = client_id
        self._acc, self._encoder, self._requests, self._reports = accumulator, encoder, requests, reports
        self._guarantee = guarantee
        self._request_timeout_s = request_timeout_ms / 1000
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether the thread was started (it is never started twice)."""
        return self._thread is not None

    def start(self) -> None:
        """Start the sender's thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"tc-send:{self.client_id}"[:60], daemon=True)
            self._thread.start()

    def join(self) -> None:
        """Wait for the thread to end after the accumulator closed (its request in flight: the request timeout)."""
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, self._request_timeout_s + 5))

    def _run(self) -> None:
        #: batches to send again; and those sealed while the last round's Produce requests were in flight: sent
        #: next, unless a batch of their partition was not delivered (then they are sealed again, as their
        #: sequence may change)
        pending = Pending(self._acc.purges)
        requests = self._requests
        while (drained := self._acc.next_round(pending, requests.wait)) is not None:
            taken, sections = drained.taken, drained.sections
            held = {tp: b for tp, b in pending.retry.items() if tp not in drained.due}
            batches = {**drained.due, **pending.ahead}
            pending.ahead = {}
            try:
                batches.update(self._encoder.seal(taken, sections))
                taken, sections = {}, {}
                round_ = requests.start(batches)
                # while the broker writes this round, the next is taken and sealed (held: theirs go first)
                taken, sections = self._acc.take_ahead(pending.purges, skip=held.keys())
                pending.ahead = self._encoder.seal(taken, sections)
                taken, sections = {}, {}
                pending.retry = {**held, **requests.finish(round_, pending.ahead)}
            except Exception as exc:  # noqa: BLE001 - reported through delivery reports, never lost
                self._round_failed(exc, [b for b in [*batches.values(), *pending.ahead.values(), *held.values()]
                                         if not b.reported], taken, sections)
                pending.retry, pending.ahead = {}, {}
            if pending.retry and requests.coordinator_busy:
                time.sleep(TXN_RETRY_BACKOFF_S)

    def _round_failed(self, exc: Exception, sealed: list[Batch], taken: Mapping[Partition, list[Record]],
                      sections: Mapping[Partition, Any]) -> None:
        """A round raised: what it held is reported failed (in a transaction: the transaction is lost with it), and
        the producer id renewed, as what the broker got of them is unknown (their sequences are never reused)."""
        _log().error("batch_producer_failed", client_id=self.client_id, error=repr(exc))
        why = f"batch producer {self.client_id}: {exc!r}"
        now = time.monotonic()
        failed = sealed + [Batch(tp, records, -1, b"", now, sum(r[4] for r in records))
                           for tp, records in taken.items()] + [
            Batch(tp, None, -1, b"", now, s.size, section=s) for tp, s in sections.items()]
        if self._guarantee.abandon(failed, ProduceError(FAILED, why, txn_requires_abort=True)):
            return
        self._reports.finish([(ProduceError(FAILED, why), b, -1) for b in failed])
        try:
            self._requests.renew_producer_id(self._request_timeout_s)
        except Exception as renew_exc:  # noqa: BLE001 - the next batches fail and say why
            _log().error("producer_id_renewal_failed", client_id=self.client_id, error=repr(renew_exc))
