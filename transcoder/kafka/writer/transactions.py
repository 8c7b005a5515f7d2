"""The exactly-once sink's transactional calls (kafka.writer.transactional holds one `WriterTransactions`):
starting transactions on a new transactional producer, committing with the consumer's offsets, aborting, releasing
the group's pending offsets, each asked again while the coordinator is unreachable, and the one error that says
why a transaction stopped (fenced by another instance, or failed for good).

The producer (librdkafka's, or transcoder's BatchProducer: the same calls) is the sink's: each call is handed it.
What a transaction holds (the records' ledger entries, failures, open batches, the offset map) is the sink's too:
it delivers them before a commit and forgets them after an abort, around these calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from transcoder.errors import DeliveryError, TranscoderError
from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.writer.failures import FENCED, Failure

#: One transaction call (commit, abort) waits at most this long before it is asked again (up to the deadline of
#: the call's whole retry): a lane whose commit waits on an unreachable coordinator says so (readiness 503) within
#: seconds, not after shutdown_timeout_s.
TXN_CALL_TIMEOUT_S = 2.0

#: librdkafka's send_offsets_to_transaction can block long past its timeout once the group coordinator went away
#: (the coordinator request's timeout is never checked: librdkafka issues 5456 and 5511, open); past its timeout
#: and this much more, the producer is given up (TransactionStuck).
STUCK_AFTER_S = 20.0

TransactionalProducer = Producer | BatchProducer


class TransactionStuck(DeliveryError):
    """A transactional call of librdkafka's producer did not return within its timeout and STUCK_AFTER_S: the
    producer cannot be used again (its call is still under way); the sink takes its transactional id over with a
    new one (which fences it, and aborts its open transaction) and the lane reads again from the last commit."""


#: How a transactional call that may block is made: `(call, timeout, what)` runs `call(timeout)`, or raises.
BlockingCall = Callable[[Callable[[float], None], float, str], None]


def bounded(call: Callable[[float], None], timeout: float, what: str) -> None:
    """`call(timeout)` of librdkafka's producer on a thread of its own, given up STUCK_AFTER_S past `timeout`
    (TransactionStuck); what it raises is raised here."""
    done = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call(timeout)
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"transcoder-{what}", daemon=True).start()
    if not done.wait(timeout + STUCK_AFTER_S):
        raise TransactionStuck(f"{what} did not return within {timeout + STUCK_AFTER_S:g} s (its timeout: "
                               f"{timeout:g} s); librdkafka's call waits on a group coordinator it no longer "
                               "looks for", retriable=True)
    if raised:
        raise raised[0]


def direct(call: Callable[[float], None], timeout: float, what: str) -> None:
    """`call(timeout)` on the caller's thread: transcoder's own producer keeps its timeouts."""
    call(timeout)


class WriterTransactions:
    """The transactions of one sink's transactional producer (exactly-once: one destination per lane)."""

    def __init__(self, name: str, transaction_timeout_ms: int, *, logger: Any = None,
                 blocking: BlockingCall = bounded) -> None:
        self.name = name  # the lane's, in the errors
        #: how a call that may block past its timeout is made: `bounded` (librdkafka's producer) or `direct`
        self.blocking = blocking
        self.transaction_timeout_ms = transaction_timeout_ms
        #: the transactional id of the partitions assigned, once `begin` has started its transactions
        self.transactional_id: str | None = None
        self.errors: Any = None  # the transactional producer's error_cb (an ErrorTracker): why it failed
        #: commits and aborts asked again while Kafka is unreachable: logged at once, then once per 30 s with a count
        self.retries = FailureLog(name, logger=logger)

    def begin(self, p: TransactionalProducer, transactional_id: str, timeout: float) -> None:
        """Fence any earlier holder of `transactional_id` (init_transactions aborts what it left open) and begin
        the first transaction of `p`, that new producer. A retriable error (the coordinator unreachable: a broker
        restarting) is asked again, as librdkafka asks ("retry call to resume"), for as long as the broker could
        take to settle the earlier holder's transaction itself (transaction_timeout_ms, and 30 s)."""
        deadline = time.monotonic() + max(timeout, self.transaction_timeout_ms / 1000 + 30)
        while True:
            try:
                p.init_transactions(max(1.0, min(timeout, deadline - time.monotonic())))
                break
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() >= deadline:
                    raise self.error("could not start transactions", err, transactional_id) from None
                self.retries.failed("transactions_init_retried", time.monotonic(), error=err.str(),
                                    transactional_id=transactional_id)
        self.retries.succeeded("transactions_init_retried", time.monotonic())
        try:
            p.begin_transaction()
        except KafkaException as exc:
            raise self.error("could not start transactions", exc.args[0], transactional_id) from None
        self.transactional_id = transactional_id

    def commit(self, p: TransactionalProducer, offsets: list[TopicPartition], group: Any, timeout: float,
               retrying: Callable[[str], None] | None = None) -> None:
        """Add the consumer's `offsets` to the transaction (what it holds is delivered), commit, and begin the next
        transaction. KafkaException when the transaction must be aborted; TranscoderError when this producer is
        fenced or failed. `retrying` is told why each time a call is asked again."""
        # A retriable error (a timeout: the coordinator unreachable): the same call again, as librdkafka and the Java
        # producer ask (a commit whose EndTxn may have been sent cannot be aborted instead), as long as the broker
        # could still settle the transaction itself: it aborts it after transaction_timeout_ms, and the next EndTxn
        # is then refused (fenced: aborted here, and read again from the last commit). Each call waits at most
        # TXN_CALL_TIMEOUT_S, so that the lane says within seconds that it waits on Kafka.
        deadline = time.monotonic() + max(timeout, self.transaction_timeout_ms / 1000 + 30)
        steps: list[Callable[[float], None]] = [
            lambda left: self.blocking(lambda t: p.send_offsets_to_transaction(offsets, group, t), left,
                                       "send_offsets_to_transaction")] if offsets else []
        steps.append(p.commit_transaction)
        for step in steps:
            while True:
                try:
                    step(max(1.0, min(timeout, TXN_CALL_TIMEOUT_S, deadline - time.monotonic())))
                    break
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.txn_requires_abort():
                        raise
                    if not err.retriable() or time.monotonic() >= deadline:
                        raise self.error("could not commit", err, self.transactional_id) from None
                    self.retries.failed("transaction_commit_retried", time.monotonic(), error=err.str())
                    if retrying is not None:
                        retrying(f"committing a transaction: {err.str()}")
        self.retries.succeeded("transaction_commit_retried", time.monotonic())
        p.begin_transaction()

    def abort(self, p: TransactionalProducer, timeout: float, retrying: Callable[[str], None] | None = None) -> None:
        """Abort the open transaction of `p` (the next one is not begun here). `retrying`: as for `commit`."""
        # Kafka unreachable: the abort times out with a retriable error, and the same call resumes it. It is
        # retried as long as the broker could still abort it for us (transaction_timeout_ms), then given up.
        deadline = time.monotonic() + max(timeout, self.transaction_timeout_ms / 1000 + 30)
        while True:
            try:
                p.abort_transaction(max(1.0, min(timeout, TXN_CALL_TIMEOUT_S, deadline - time.monotonic())))
                self.retries.succeeded("transaction_abort_retried", time.monotonic())
                break
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() >= deadline:
                    raise self.error("could not abort", err, self.transactional_id) from None
                self.retries.failed("transaction_abort_retried", time.monotonic(), error=err.str())
                if retrying is not None:
                    retrying(f"aborting a transaction: {err.str()}")

    def release_group_offsets(self, p: TransactionalProducer, partitions: list[TopicPartition], group: Any,
                              timeout: float, abort: Callable[[float], None], replace: Callable[[float], None],
                              known: Mapping[tuple[str, int], int] | None = None) -> str | None:
        """exactly-once: end any offset commit this transactional id's producer left pending on the group.

        A transaction that holds only offsets for the group's `partitions` ends, with its marker on the group's
        partition, every pending offset commit of this producer id there, whatever epoch made it. A broker killed
        at the wrong moment can leave one pending that no transaction owns any more (its marker lost); the
        group's offsets then stay unstable for good, and every read of them (require_stable, KIP-447) times out.
        With `known` (pipeline.commits.release_offsets: the offsets this process last committed, for every
        partition) the transaction holds those and commits: a lost marker's offsets end as they were committed.
        Without, it holds them at 0 and aborts: the group keeps its last stable commit. None when done, else why
        not (Kafka unreachable: ask again later); TranscoderError when this producer is fenced or failed for good.
        `abort(timeout)`: the sink's abort (it forgets what the transaction held, and begins the next one);
        `replace(timeout)`: the sink's new producer for one stuck in a call (TransactionStuck)."""
        try:
            return self._release(p, partitions, group, timeout, abort, known)
        except TransactionStuck as exc:
            replace(timeout)
            return str(exc)

    def _release(self, p: TransactionalProducer, partitions: list[TopicPartition], group: Any, timeout: float,
                 abort: Callable[[float], None], known: Mapping[tuple[str, int], int] | None) -> str | None:
        if known is not None:
            offsets = [TopicPartition(tp.topic, tp.partition, known[(tp.topic, tp.partition)]) for tp in partitions]
            try:
                self.commit(p, offsets, group, timeout)
                return None
            except KafkaException as exc:  # the transaction must be aborted: asked again after the next read
                why = f"committing the group's offsets: {exc.args[0].str()}"
            except TranscoderError as exc:
                if not exc.retriable:  # fenced, or failed for good
                    raise
                return str(exc)
            try:
                abort(timeout)
            except TranscoderError as exc:
                if not exc.retriable:
                    raise
            return why
        not_added = None
        try:
            at_0 = [TopicPartition(tp.topic, tp.partition, 0) for tp in partitions]
            self.blocking(lambda t: p.send_offsets_to_transaction(at_0, group, t), timeout,
                          "send_offsets_to_transaction")
        except KafkaException as exc:  # the group's partition may not be in the transaction: no marker for it
            err = exc.args[0]
            if err.fatal() or err.name() in FENCED:
                raise self.error("could not release the group's offsets in", err, self.transactional_id) from None
            not_added = f"adding the group's offsets to a transaction: {err.str()}"
        try:
            abort(timeout)
        except TranscoderError as exc:
            if not exc.retriable:  # fenced, or failed for good
                raise
            return str(exc)
        return not_added

    def call(self, call: Callable[[float], int], timeout: float, failures: Iterable[Failure]) -> int:
        """flush or poll of the transactional producer. Once it is fenced (or failed otherwise for good),
        confluent-kafka raises from inside its delivery callbacks (KafkaException or SystemError): one error
        that says why instead. `failures`: the sink's failed records."""
        try:
            return call(timeout)
        except (KafkaException, SystemError) as exc:
            raise self.fatal(exc, failures) from None

    def fatal(self, exc: BaseException | None, failures: Iterable[Failure]) -> TranscoderError:
        """Why the transactional producer stopped: what `exc` raised, its error callback's last fatal error, or a
        failed record that says it was fenced."""
        # The error raised from the callback says why itself (a SystemError carries it as its cause); the error
        # callback may not have been served yet.
        cause = exc
        while cause is not None and not isinstance(cause, KafkaException):
            cause = cause.__cause__ or cause.__context__
        raised = cause.args[0] if cause is not None and cause.args else None
        if isinstance(raised, KafkaError) and (raised.fatal() or raised.name() in FENCED):
            return self.error("stopped", raised, self.transactional_id)
        last = self.errors.last if self.errors is not None else None
        if last is not None and last.fatal():
            return self.error("stopped", last, self.transactional_id)
        fenced = next((f for f in failures if f.code in FENCED), None)
        if fenced is not None:
            return self.error("stopped", KafkaError(KafkaError._FENCED, fenced.reason), self.transactional_id)
        return DeliveryError(f"lane {self.name}: the transactional producer failed: {exc}")

    def error(self, what: str, err: KafkaError, transactional_id: str | None) -> TranscoderError:
        fenced = err.name() in FENCED
        why = ("another instance took over transactional.id " + str(transactional_id) +
               " (it was assigned the same partitions): this one stops") if fenced else err.str()
        return DeliveryError(f"lane {self.name}: {what} a transaction: {why}", kafka_error=err.name(),
                             retriable=err.retriable() and not fenced)
