"""How long a migration step waits out the cluster: a retriable error is tried again until a deadline, each error
kind logged once, and what is left after the deadline is one KafkaUnavailableError naming what, where and why.

A leader or group-coordinator failover takes a 3-broker cluster 9-25 s; a step gives each of its Kafka calls
`migration.api_timeout_ms` (Kafka's `default.api.timeout.ms`, 60 s by default) before it gives up. The decisions
(`retriable`, `kind`, `RetryLog`) are pure; `until_deadline` runs them with tenacity.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import structlog
from tenacity import Retrying, retry_if_exception, wait_exponential

from transcoder.errors import KafkaUnavailableError, TranscoderError

log = structlog.get_logger("transcoder.migrate")

T = TypeVar("T")

#: Kafka's errors of a failover: the group coordinator or a partition leader moving, a broker not answering. A
#: transcoder error carrying one of these is tried again whatever its `retriable` flag says (librdkafka builds
#: some per-partition errors without it).
FAILOVER_ERRORS = frozenset({
    "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_LEADER_EPOCH",
    "FENCED_LEADER_EPOCH", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION", "UNSTABLE_OFFSET_COMMIT",
    "_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_WAIT_COORD", "_MSG_TIMED_OUT",
})

#: The first wait between tries, and the longest (doubling in between).
FIRST_WAIT_S = 0.2
MAX_WAIT_S = 2.0


def kind(exc: BaseException) -> str:
    """The error's kind, as logged and counted: Kafka's error name where it has one, else its class name."""
    if isinstance(exc, TranscoderError) and exc.kafka_error:
        return exc.kafka_error
    code = getattr(exc, "args", None)
    if code and hasattr(code[0], "name") and callable(code[0].name):  # a KafkaException's KafkaError
        return str(code[0].name())
    return type(exc).__name__


def retriable(exc: BaseException) -> bool:
    """Whether trying again may succeed: a transcoder error flagged retriable or naming a failover error; a bare
    KafkaException whose error is retriable or a failover error. Anything else (a refusal, a bug) is final."""
    if isinstance(exc, TranscoderError):
        return exc.retriable or (exc.kafka_error in FAILOVER_ERRORS)
    args = getattr(exc, "args", None)
    err = args[0] if args else None
    if err is not None and callable(getattr(err, "retriable", None)) and callable(getattr(err, "name", None)):
        return bool(err.retriable()) or err.name() in FAILOVER_ERRORS
    return False


class RetryLog:
    """Logs a retried call once per error kind (not once per try): the first NOT_COORDINATOR, the first
    _TIMED_OUT, ... each with what was asked and where (`fields`: group, topic)."""

    def __init__(self, what: str, fields: Mapping[str, Any] | None = None,
                 emit: Callable[..., None] | None = None) -> None:
        self.what = what
        self.fields = dict(fields or {})
        self.seen: dict[str, int] = {}
        self._emit = emit or log.warning

    def __call__(self, exc: BaseException, waited_s: float) -> bool:
        """Count `exc`; True when this is its kind's first occurrence (and it was logged)."""
        k = kind(exc)
        first = k not in self.seen
        self.seen[k] = self.seen.get(k, 0) + 1
        if first:
            self._emit("migrate_retrying", what=self.what, kafka_error=k, waited_s=round(waited_s, 1),
                       **self.fields)
        return first


def expired(exc: BaseException, what: str, timeout_s: float, fields: Mapping[str, Any]) -> KafkaUnavailableError:
    """The one-line error of a call still failing after `timeout_s`: what (naming the group or topic), Kafka's
    error name and why."""
    msg = str(exc).rstrip(".")
    return KafkaUnavailableError(f"cannot {what} within {timeout_s:g}s ({kind(exc)}: {msg}); check the "
                                 "brokers and run the command again: it resumes where it stopped",
                                 topic=fields.get("topic"), partition=fields.get("partition"),
                                 kafka_error=kind(exc), retriable=True)


def until_deadline(call: Callable[[], T], *, what: str, timeout_s: float, fields: Mapping[str, Any] | None = None,
                   retry_on: Callable[[BaseException], bool] = retriable,
                   sleep: Callable[[float], None] | None = None, clock: Callable[[], float] | None = None,
                   first_wait_s: float = FIRST_WAIT_S, max_wait_s: float = MAX_WAIT_S) -> T:
    """`call()`'s result, trying again while it raises an error `retry_on` accepts (default `retriable`), for at
    most `timeout_s` from now; each error kind logged once (RetryLog). Another error is raised as it is; a retried
    one still there at the deadline becomes `expired`'s KafkaUnavailableError (`what` names the call in it), unless
    the first try already took all the time (its own error says it best)."""
    sleep = sleep or time.sleep
    clock = clock or time.monotonic
    fields = dict(fields or {})
    started = clock()
    deadline = started + timeout_s
    seen = RetryLog(what, fields)

    def before_sleep(state: Any) -> None:
        seen(state.outcome.exception(), clock() - started)

    retrying = Retrying(retry=retry_if_exception(retry_on), stop=lambda _state: clock() >= deadline,
                        wait=wait_exponential(multiplier=first_wait_s, min=first_wait_s, max=max_wait_s),
                        sleep=lambda s: sleep(max(0.0, min(s, deadline - clock()))),
                        before_sleep=before_sleep, reraise=True)
    try:
        result = retrying(call)
    except Exception as exc:
        if retry_on(exc) and clock() >= deadline and seen.seen:  # tried again, in vain: say for how long
            raise expired(exc, what, timeout_s, fields) from exc
        raise
    if seen.seen:
        log.info("migrate_recovered", what=what, waited_s=round(clock() - started, 1),
                 errors={k: n for k, n in seen.seen.items()}, **fields)
    return result
