"""Topic admin: look topics up, create them with the partitions and configs asked for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from transcoder.errors import TopicError


@dataclass(frozen=True)
class TopicShape:
    name: str
    partitions: int


def _retriable(exc: BaseException) -> bool:
    return isinstance(exc, KafkaException) and bool(exc.args) and exc.args[0].retriable()


_admin_retry = retry(
    retry=retry_if_exception(_retriable), stop=stop_after_attempt(5),
    wait=wait_exponential(multiplier=0.2, max=5), reraise=True,
)


@_admin_retry
def describe(admin: AdminClient, name: str, *, timeout: float = 10.0) -> TopicShape | None:
    """The topic's partition count, or None if it does not exist."""
    md = admin.list_topics(topic=name, timeout=timeout)
    t = md.topics.get(name)
    if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    if t.error is not None:
        raise TopicError(f"topic {name}: {t.error.str()}")
    return TopicShape(name=name, partitions=len(t.partitions))


@_admin_retry
def _create(admin: AdminClient, topic: NewTopic, timeout: float) -> None:
    fut = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[topic.topic]
    try:
        fut.result()
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        if err.retriable():
            raise
        raise TopicError(f"cannot create topic {topic.topic}: {err.str()}") from exc


def ensure(admin: AdminClient, name: str, *, partitions: int | None, replication_factor: int = -1,
           config: Mapping[str, str] | None = None, timeout: float = 30.0) -> tuple[TopicShape, bool]:
    """Create `name` if missing; return its shape and whether it was created.

    An existing topic is used as it is; asking for a different partition count is an error,
    because records would not land where the caller expects.
    """
    existing = describe(admin, name)
    if existing is not None:
        if partitions is not None and existing.partitions != partitions:
            raise TopicError(
                f"topic {name} exists with {existing.partitions} partitions, not the {partitions} asked for; "
                "drop --partitions to use it as it is, or choose another topic"
            )
        return existing, False
    _create(admin, NewTopic(name, num_partitions=partitions or 1, replication_factor=replication_factor,
                            config=dict(config or {})), timeout)
    shape = describe(admin, name)
    if shape is None:
        raise TopicError(f"topic {name} was created but is not visible in metadata yet; try again")
    return shape, True
