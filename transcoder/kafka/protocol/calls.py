"""A request in flight on kafka-python's I/O thread (`Call`): its answer or its error, waited for until a deadline
of its own, so that a request kafka-python never completes cannot hold the caller."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Call:
    """A coroutine started on kafka-python's I/O thread: its answer, waited for until `deadline` (monotonic)."""

    future: Any
    answered: threading.Event
    deadline: float
    limit_s: float

    def result(self) -> Any:
        """The coroutine's result or its error; KafkaTimeoutError when it has not answered by the deadline."""
        from kafka.errors import KafkaTimeoutError

        if not self.answered.wait(max(0.0, self.deadline - time.monotonic())):
            raise KafkaTimeoutError(f"no answer from Kafka within {self.limit_s:.0f} s")
        if self.future.exception is not None:
            raise self.future.exception
        return self.future.value
