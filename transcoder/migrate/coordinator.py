"""Requests to a consumer group's coordinator (DescribeGroups, OffsetFetch, OffsetCommit), sent through kafka-python.

Not through confluent-kafka's AdminClient: librdkafka (2.16.0 here) aborts the whole process when a
coordinator-targeted admin request ends by its own request_timeout while the coordinator request it started still
waits in librdkafka's coordinator state machine (no coordinator up: a failover, a cluster without quorum). When a
coordinator comes up, the state machine sends for the request that timed out and uses its freed enq-once:
`rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0' failed`, SIGABRT. Not a
client shared between threads: one thread and one AdminClient describing a group every second (request_timeout
30 s, as groups.py had) aborted when its coordinator and a second node of the 3-node LocalCluster were SIGKILLed for
40 s; with request_timeout 10 s, killing the coordinator alone for 15 s aborted 3 times in 3. librdkafka issue #4605
and PR #5397 (unreleased) are the same assertion from the request's send-failure path. A timeout librdkafka
completes itself is what triggers it, and an admin request cannot wait for ever, so the group calls leave
librdkafka: kafka-python fails a request with an exception, never the process.

Each request looks its coordinator up afresh (FindCoordinator), so a coordinator that moved is found at the next
try (librdkafka kept asking a paused-and-resumed broker that answered NOT_COORDINATOR for as long as it was asked);
the caller's retry (migrate.retry) waits the failover out. kafka-python is reached through transcoder's RawClient
(kafka.protocol), whose answers are bounded by a deadline of their own; the requests are kafka-python's versioned
protocol classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError

from transcoder.errors import KafkaUnavailableError, MigrationError, TranscoderError
from transcoder.kafka.clients import retriable
from transcoder.kafka.protocol import RawClient

#: FindCoordinator's key type of a consumer group.
_GROUP = 0


def error_name(code: int) -> str:
    """Kafka's name of a protocol error code (NOT_COORDINATOR, ...)."""
    return KafkaError(code).name()


def error_retriable(code: int) -> bool:
    return retriable(KafkaError(code))


def kafka_failure(exc: Exception, what: str, **where: Any) -> TranscoderError:
    """An exception of kafka-python (no answer, a connection lost, a broker error) as a transcoder error: retriable
    unless Kafka says it is not."""
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and errno > 0:
        return _coded(errno, f"{what}: {type(exc).__name__}", **where)
    name = "_TIMED_OUT" if "Timeout" in type(exc).__name__ or "TimedOut" in type(exc).__name__ else "_TRANSPORT"
    flag = getattr(exc, "retriable", True)
    return KafkaUnavailableError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": "), kafka_error=name,
                                 retriable=bool(flag) or name == "_TIMED_OUT", **where)


def _coded(code: int, what: str, **where: Any) -> TranscoderError:
    cls = KafkaUnavailableError if error_retriable(code) else MigrationError
    return cls(f"{what}: {KafkaError(code).str()}", kafka_error=error_name(code), retriable=error_retriable(code),
               **where)


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    #: topic -> partitions the member is assigned (classic consumer protocol)
    assignment: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Description:
    """A group as its coordinator describes it."""

    group_id: str
    state: str  # Kafka's name: Stable, Empty, PreparingRebalance, CompletingRebalance, Dead
    protocol_type: str  # "consumer", or "" for a group that only commits (no member ever joined)
    members: tuple[MemberInfo, ...]

    @property
    def simple(self) -> bool:
        return self.protocol_type == ""


def _assignment(raw: Any) -> dict[str, tuple[int, ...]]:
    if not raw:
        return {}
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    try:
        decoded = ConsumerProtocolAssignment.decode(raw) if isinstance(raw, bytes | bytearray) else raw
    except Exception:  # noqa: BLE001 - not the consumer protocol (Connect, a stream app): no partitions to name
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for tp in getattr(decoded, "assigned_partitions", None) or []:
        out[tp.topic] = tuple(sorted(set(out.get(tp.topic, ())) | set(tp.partitions)))
    return out


class GroupRequests(RawClient):
    """Coordinator requests for consumer groups over one kafka-python connection set; `close` when done (on the
    thread that owns it)."""

    def coordinator(self, group_id: str) -> int:
        try:
            return self.find_coordinator(group_id, _GROUP)
        except TranscoderError as exc:
            raise KafkaUnavailableError(f"no coordinator for group {group_id}: {exc}", kafka_error=exc.kafka_error
                                        or "COORDINATOR_NOT_AVAILABLE", retriable=True) from exc
        except Exception as exc:
            raise kafka_failure(exc, f"cannot find the coordinator of group {group_id}") from exc

    def _ask(self, request: Any, node: int, what: str, **where: Any) -> Any:
        try:
            return self._send(request, node)
        except TranscoderError:
            raise
        except Exception as exc:
            raise kafka_failure(exc, what, **where) from exc

    def describe(self, group_ids: Iterable[str]) -> dict[str, Description | None]:
        """Each group's description; None for a group the cluster does not know (Dead, or GROUP_ID_NOT_FOUND).
        A group whose coordinator answers with an error raises it (retriable: a failover)."""
        from kafka.protocol.admin import DescribeGroupsRequest

        out: dict[str, Description | None] = {}
        for g in dict.fromkeys(group_ids):
            node = self.coordinator(g)
            what = f"cannot describe group {g}"
            r = self._ask(DescribeGroupsRequest(groups=[g], include_authorized_operations=False, max_version=5),
                          node, what)
            for d in r.groups:
                if d.error_code == KafkaError.GROUP_ID_NOT_FOUND:
                    out[d.group_id] = None
                    continue
                if d.error_code:
                    raise _coded(d.error_code, what)
                if d.group_state == "Dead":
                    out[d.group_id] = None
                    continue
                members = tuple(MemberInfo(m.member_id, m.client_id or "", (m.client_host or "").lstrip("/"),
                                           _assignment(m.member_assignment)) for m in d.members or [])
                out[d.group_id] = Description(d.group_id, d.group_state, d.protocol_type or "", members)
        return out

    def committed(self, group_id: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offsets on `topic` (partitions without one absent), stable ones: a partition with
        a transactional commit pending answers UNSTABLE_OFFSET_COMMIT (retriable) until it ends."""
        from kafka.protocol.consumer import OffsetFetchRequest

        node = self.coordinator(group_id)
        what = f"cannot read the committed offsets of group {group_id} on {topic}"
        topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(partitions)))]
        r = self._ask(OffsetFetchRequest(group_id=group_id, topics=topics, require_stable=True, min_version=7,
                                         max_version=7), node, what, topic=topic)
        if r.error_code:
            if r.error_code == KafkaError.GROUP_ID_NOT_FOUND:
                return {}
            raise _coded(r.error_code, what, topic=topic)
        out: dict[int, int] = {}
        for t in r.topics or []:
            for p in t.partitions or []:
                if p.error_code:
                    raise _coded(p.error_code, f"{what} [{p.partition_index}]", topic=topic,
                                 partition=p.partition_index)
                if t.name == topic and p.committed_offset >= 0:
                    out[p.partition_index] = p.committed_offset
        return dict(sorted(out.items()))

    def commit(self, group_id: str, topic: str, offsets: Mapping[int, int]) -> dict[int, int]:
        """Commit `offsets` for the group as an administrator would (no member, no generation: the coordinator
        refuses it while the group has members); partition -> Kafka's error code (0: committed)."""
        from kafka.protocol.consumer import OffsetCommitRequest

        node = self.coordinator(group_id)
        part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        request = OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time_ms=-1, max_version=8,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                part(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                for p, o in sorted(offsets.items())])])
        r = self._ask(request, node, f"cannot commit offsets of group {group_id} on {topic}", topic=topic)
        return {p.partition_index: p.error_code for t in r.topics or [] for p in t.partitions or []
                if t.name == topic}
