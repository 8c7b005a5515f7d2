"""Where the batch producer's sender puts what it learnt: the delivery reports waiting for the caller's `poll`, and
the statistics of the batches acknowledged (produce statistics: SentBatches). The sender adds, the caller takes,
under the producer's lock; a transaction that fails wakes the caller waiting for reports (`wake`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from transcoder.kafka.producer.batches import Batch, Report
from transcoder.kafka.producer.statistics import SentBatches
from transcoder.kafka.statistics import TopicProduce


class DeliveryReports:
    """The reports sink: what the sender settled, until the caller's `poll` serves it."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._delivered = threading.Condition(lock)  # poll waits on it for delivery reports
        self._done: list[Report] = []
        self._stats = SentBatches()

    def finish(self, done: Sequence[Report]) -> None:
        """Reports to serve: each batch is marked reported (never reported again) and when its answer came."""
        if done:
            now = time.time()
            with self._lock:
                for _, b, _ in done:
                    b.reported = True
                    b.acked_at = now
                self._done.extend(done)
                self._delivered.notify_all()

    def take(self, timeout: float = 0) -> list[Report]:
        """The reports queued, waiting up to `timeout` seconds for the first one."""
        with self._lock:
            if not self._done and timeout > 0:
                self._delivered.wait(timeout)
            done, self._done = self._done, []
        return done

    def clear_holding_lock(self) -> None:
        """An abort: the reports not yet served go with the transaction. The caller holds the producer's lock
        (RecordAccumulator.purge_holding_lock)."""
        self._done = []

    def wake(self) -> None:
        """The caller waiting for reports looks again (the transaction failed)."""
        with self._lock:
            self._delivered.notify_all()

    def sent(self, b: Batch) -> None:
        """A batch acknowledged: counted in the statistics."""
        with self._lock:
            self._stats.sent(b.tp[0], len(b.payload), b.count, b.size)

    def statistics(self) -> dict[str, TopicProduce]:
        """The batches acknowledged since the last call, per topic (their windows start again)."""
        with self._lock:
            return self._stats.emit()
