"""Topic admin: look topics up, create them, read their configs and offsets; retried while Kafka says retriable."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, OffsetSpec
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from transcoder.errors import KafkaUnavailableError, TopicError, TranscoderError
from transcoder.kafka.clients import retriable


@dataclass(frozen=True)
class TopicShape:
    name: str
    partitions: int


#: Kafka's answers about a topic created a moment ago, before each of its partitions has a leader that every broker
#: knows: waited out (bounded by SETTLE_S, or the caller's timeout), never reported as an unreachable cluster.
#: UNKNOWN_LEADER_EPOCH: the leader asked is behind the metadata the client has (seen from ListOffsets on a new
#: offset-map topic in a test_migrate.py run: "Leader epoch is newer than broker epoch").
SETTLING_ERRORS = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                             KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_LEADER_EPOCH,
                             # librdkafka's admin asking its own metadata cache for a new partition's leader before
                             # it holds one: "Failed to query partition leaders: No leaders found"
                             KafkaError._NOENT})
#: How long a new topic's partitions may take to get their leaders (a busy 2-core machine: seconds).
SETTLE_S = 30.0

T = TypeVar("T")


def settling(exc: BaseException) -> bool:
    """Whether `exc` is one of SETTLING_ERRORS: a KafkaException carrying it, or a transcoder error naming it."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code() in SETTLING_ERRORS
    names = {KafkaError(code).name() for code in SETTLING_ERRORS}
    return isinstance(exc, TranscoderError) and exc.kafka_error in names


def wait_settled(attempt: Callable[[], T], *, timeout_s: float = SETTLE_S, clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], None] | None = None, first_wait_s: float = 0.05,
                 max_wait_s: float = 1.0) -> T:
    """`attempt()`'s result, calling it again while it raises a settling error (`settling`: a topic created a moment
    ago), waiting `first_wait_s` doubling up to `max_wait_s` in between, for at most `timeout_s`; then that last
    error. Any other exception is raised at once. For every read of a topic transcoder has just created."""
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    deadline = clock() + timeout_s
    wait = first_wait_s
    while True:
        try:
            return attempt()
        except (KafkaException, TranscoderError) as exc:
            left = deadline - clock()
            if not settling(exc) or left <= 0:
                raise
            sleep(min(wait, left))
            wait = min(wait * 2, max_wait_s)


def leaderless(topic: Any) -> dict[int, str]:
    """Pure: the partitions of a topic's metadata (confluent-kafka's TopicMetadata) that have no leader yet, each
    with Kafka's error name (or "no leader")."""
    return {p.id: (p.error.name() if p.error is not None else "no leader")
            for p in topic.partitions.values() if p.error is not None or p.leader < 0}


def wait_leaders(admin: AdminClient, name: str, *, timeout_s: float = SETTLE_S,
                 clock: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None) -> TopicShape:
    """The shape of a topic just created, once it is in the metadata and every partition has a leader (what a read
    or a write right after CreateTopics needs), waited for at most `timeout_s`; else TopicError naming the topic and
    the partitions without one."""

    def attempt() -> TopicShape:
        try:
            md = admin.list_topics(topic=name, timeout=10.0)
        except KafkaException as exc:
            raise _failure(exc, f"cannot describe topic {name}", KafkaUnavailableError, topic=name) from exc
        t = md.topics.get(name)
        if t is None or (t.error is not None and t.error.code() in SETTLING_ERRORS):
            err = t.error.name() if t is not None and t.error is not None else "UNKNOWN_TOPIC_OR_PART"
            raise TopicError(f"topic {name} was created but is not in the metadata yet ({err})", topic=name,
                             kafka_error=err, retriable=True)
        if t.error is not None:
            raise TopicError(f"topic {name}: {_plain(t.error)}", topic=name, kafka_error=t.error.name(),
                             retriable=retriable(t.error))
        missing = leaderless(t)
        if missing:
            first = min(missing)
            raise TopicError(f"topic {name} was created but partition(s) {', '.join(map(str, sorted(missing)))} "
                             f"have no leader ({missing[first]})", topic=name, partition=first, retriable=True,
                             kafka_error=KafkaError(KafkaError.LEADER_NOT_AVAILABLE).name())
        # a leader in the metadata may not serve its partition yet (NOT_LEADER_FOR_PARTITION for a moment after;
        # KRaft brokers apply the new leadership after publishing it): ask each one, as the next read will
        futures = admin.list_offsets({TopicPartition(name, p): OffsetSpec.latest() for p in t.partitions},
                                     request_timeout=10)
        for tp, fut in sorted(futures.items(), key=lambda kv: kv[0].partition):
            try:
                fut.result()
            except KafkaException as exc:
                raise _failure(exc, f"topic {name} was created but partition {tp.partition} does not answer",
                               KafkaUnavailableError, topic=name, partition=tp.partition) from exc
        return TopicShape(name=name, partitions=len(t.partitions))

    try:
        return wait_settled(attempt, timeout_s=timeout_s, clock=clock, sleep=sleep)
    except TranscoderError as exc:
        if not settling(exc):
            raise
        raise TopicError(f"{exc} after {timeout_s:.0f} s: check the brokers (their logs, and that enough of them "
                         "are up for the replication factor)", topic=name, partition=exc.partition,
                         kafka_error=exc.kafka_error) from exc


def _retriable(exc: BaseException) -> bool:
    return isinstance(exc, TranscoderError) and exc.retriable


#: Retry an admin call while the error says it is retriable (a leader moving, a topic being created).
admin_retry = retry(
    retry=retry_if_exception(_retriable), stop=stop_after_attempt(8),
    wait=wait_exponential(multiplier=0.2, max=5), reraise=True,
)


def _failure(exc: KafkaException, what: str, cls: type[TranscoderError] = TopicError, *, topic: str,
             partition: int | None = None) -> TranscoderError:
    """A KafkaException as a transcoder error: Kafka's error name, `retriable` from Kafka, the cause kept by
    the caller's `raise ... from exc`."""
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is None:
        return cls(f"{what}: {exc}", topic=topic, partition=partition)
    return cls(f"{what}: {_plain(err)}", kafka_error=err.name(), retriable=retriable(err), topic=topic,
               partition=partition)


@admin_retry
def describe(admin: AdminClient, name: str, *, timeout: float = 10.0) -> TopicShape | None:
    """The topic's partition count, or None if it does not exist."""
    try:
        md = admin.list_topics(topic=name, timeout=timeout)
    except KafkaException as exc:
        raise _failure(exc, f"cannot describe topic {name}", KafkaUnavailableError, topic=name) from exc
    t = md.topics.get(name)
    if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    if t.error is not None:
        raise TopicError(f"topic {name}: {_plain(t.error)}", topic=name, kafka_error=t.error.name(),
                         retriable=retriable(t.error))
    return TopicShape(name=name, partitions=len(t.partitions))


@admin_retry
def create_topic(admin: AdminClient, topic: NewTopic, timeout: float) -> None:
    fut = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[topic.topic]
    try:
        fut.result()
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise _failure(exc, f"cannot create topic {topic.topic}", topic=topic.topic) from exc


def ensure(admin: AdminClient, name: str, *, partitions: int | None, replication_factor: int = -1,
           config: Mapping[str, str] | None = None, timeout: float = 30.0,
           fix: str = "choose another topic") -> tuple[TopicShape, bool]:
    """Create `name` if missing; return its shape and whether it was created.

    An existing topic is used as it is; asking for a different partition count is an error,
    because records would not land where the caller expects. `fix` ends that error: what the caller's user can do
    (only the caller knows which command, options and config keys the user has).
    """
    existing = describe(admin, name)
    if existing is not None:
        if partitions is not None and existing.partitions != partitions:
            raise TopicError(
                f"topic {name} exists with {existing.partitions} partitions, not the {partitions} asked for; {fix}",
                topic=name)
        return existing, False
    create_topic(admin, NewTopic(name, num_partitions=partitions or 1, replication_factor=replication_factor,
                            config=dict(config or {})), timeout)
    # metadata reaches the broker asked a moment later, and each partition's leader after it
    return wait_leaders(admin, name, timeout_s=timeout), True


_AUTH_ERRORS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "not authorized (topic ACL): grant DESCRIBE, DESCRIBE_CONFIGS and "
                                           "READ on sources, CREATE and WRITE on destinations",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "not authorized (cluster ACL)",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "not authorized (consumer group ACL)",
    KafkaError.SASL_AUTHENTICATION_FAILED: "authentication failed: check sasl.* settings",
}


def _plain(err: KafkaError) -> str:
    return _AUTH_ERRORS.get(err.code(), err.str())


@dataclass(frozen=True)
class TopicConfigs:
    effective: dict[str, str]
    explicit: set[str]  # set on the topic itself, not inherited from broker defaults


@admin_retry
def describe_configs(admin: AdminClient, names: list[str], *, timeout: float = 30.0) -> dict[str, TopicConfigs]:
    if not names:
        return {}
    res = {n: ConfigResource(ConfigResource.Type.TOPIC, n) for n in names}
    futures = admin.describe_configs(list(res.values()), request_timeout=timeout)
    out = {}
    for name, r in res.items():
        try:
            entries = futures[r].result()
        except KafkaException as exc:
            raise _failure(exc, f"cannot describe configs of topic {name}", topic=name) from exc
        out[name] = TopicConfigs(
            effective={k: e.value for k, e in entries.items() if e.value is not None},
            explicit={k for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value},
        )
    return out


@admin_retry
def _list_offsets(admin: AdminClient, tps: list[TopicPartition], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets({tp: spec for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED,
                                 request_timeout=30)
    out = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result().offset
        except KafkaException as exc:
            raise _failure(exc, f"cannot list offsets of {tp.topic} [{tp.partition}]", KafkaUnavailableError,
                           topic=tp.topic, partition=tp.partition) from exc
    return out


def end_offsets(admin: AdminClient, shapes: Mapping[str, TopicShape]) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) offsets of every partition, as a read_committed consumer sees them now.

    Retriable errors (a just-created topic without a leader yet) are retried.
    """
    tps = [TopicPartition(t, p) for t, s in shapes.items() for p in range(s.partitions)]
    if not tps:
        return {}
    low = _list_offsets(admin, tps, OffsetSpec.earliest())
    high = _list_offsets(admin, tps, OffsetSpec.latest())
    return {tp: (low[tp], high[tp]) for tp in low}


def delete_topics(admin: AdminClient, names: list[str], *, timeout: float = 60.0) -> dict[str, str]:
    """Delete topics and wait for the broker's answers (a client collected before they come never sends or resolves
    its requests: the topics stay). Returns why each one not deleted was not, a topic already gone left out."""
    if not names:
        return {}
    failed = {}
    for name, future in admin.delete_topics(names, operation_timeout=30).items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                failed[name] = _plain(err)
        except TimeoutError:
            failed[name] = f"no answer within {timeout:.0f} s"
    return failed
