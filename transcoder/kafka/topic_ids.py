"""The topic ids of a lane's sources (KIP-516), asked of the broker: a topic deleted and recreated under the same
name has a new id, and its partitions start again at offset 0. The Fetches of the batched path and librdkafka's
consumer name topics by name, and Kafka deletes a group's committed offsets with the topic, so without the id a
lane would read the new topic from the old one's position, or from where `start` says, and the old topic's
records it never copied would be lost without a word.

Asked without blocking (`ask`, answers taken at the next `answers`) from the lane's loop, and at once (`now`) on
assignment and where a Fetch or the consumer hints that a topic changed. The same answer gives a topic's partition
count now (`partition_count`), asked when a partition added to a running source is assigned: from this client's
own handle, since a rebalance callback must not ask its consumer (confluent-kafka aborts the process when a call
that serves callbacks, such as `list_topics`, is made on a consumer from inside one of its callbacks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicCollection

from transcoder.kafka.clients import OwnedAdmin

log = structlog.get_logger("transcoder.lane")

_TIMEOUT_S = 10.0

#: a topic the broker does not know (deleted, not created again yet)
GONE = ""


def topic_id(admin: Any, topic: str, *, timeout: float = _TIMEOUT_S) -> str | None:
    """`topic`'s id now, asked of `admin` (an AdminClient) and waited for; None: no such topic, or no answer
    (logged)."""
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    try:
        return str(future.result(timeout=timeout + 5).topic_id)
    except (KafkaException, TimeoutError) as exc:
        log.warning("topic_id_unknown", topic=topic, error=str(exc))
        return None


class TopicIds:
    """Topic name -> its id now (GONE: no such topic); one query in flight at a time. Its owner calls `close`."""

    def __init__(self, cluster: Mapping[str, Any], client_id: str,
                 create: Callable[[Callable[[], Any]], Any] = lambda make: make()) -> None:
        self._admin = OwnedAdmin(cluster, client_id, create)
        self._pending: dict[str, Future[Any]] = {}

    def close(self) -> None:
        self._pending = {}
        self._admin.close()

    def ask(self, topics: Iterable[str]) -> None:
        """Ask for the topics' ids unless a query is still in flight."""
        topics = sorted(set(topics))
        if self._pending or not topics:
            return
        self._pending = self._admin.client().describe_topics(TopicCollection(topics), request_timeout=_TIMEOUT_S)

    def answers(self) -> dict[str, str]:
        """The ids the query in flight brought, once all came (else {}); a topic whose answer failed for another
        reason than its absence is left out (asked again next time)."""
        if not self._pending or not all(f.done() for f in self._pending.values()):
            return {}
        pending, self._pending = self._pending, {}
        return self._take(pending)

    def now(self, topics: Iterable[str]) -> dict[str, str]:
        """The topics' ids, asked and waited for (at most 10 s); a topic that does not answer is left out."""
        topics = sorted(set(topics))
        if not topics:
            return {}
        futures = self._admin.client().describe_topics(TopicCollection(topics), request_timeout=_TIMEOUT_S)
        for f in futures.values():
            try:
                f.result(timeout=_TIMEOUT_S + 5)
            except Exception:  # noqa: BLE001 - read (and logged) in _take
                pass
        return self._take(futures)

    def partition_count(self, topic: str) -> int | None:
        """How many partitions `topic` has now, asked and waited for (at most 10 s); None: no answer (logged)."""
        future = self._admin.client().describe_topics(TopicCollection([topic]), request_timeout=_TIMEOUT_S)[topic]
        try:
            return len(future.result(timeout=_TIMEOUT_S + 5).partitions)
        except (KafkaException, TimeoutError) as exc:
            log.warning("partition_count_unknown", topic=topic, error=str(exc))
            return None

    @staticmethod
    def _take(futures: Mapping[str, Future[Any]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for topic, f in futures.items():
            try:
                out[topic] = str(f.result(timeout=0).topic_id)
            except KafkaException as exc:
                err = exc.args[0]
                if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    out[topic] = GONE
                else:  # asked again next time; the lane's readiness reports outages
                    log.debug("topic_id_query_failed", topic=topic, error=str(exc))
            except Exception as exc:  # noqa: BLE001 - a timeout: asked again next time
                log.debug("topic_id_query_failed", topic=topic, error=repr(exc))
        return out
