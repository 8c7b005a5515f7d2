"""Consumer groups of a topic: who reads it (members, committed offsets, lag), and moving a stopped group's offsets.

The views are plain data (`GroupView`, `Member`); the functions here ask the cluster through an AdminClient.
Kafka's answers are the truth: a commit is read back, and a group with members is never moved.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from transcoder.errors import KafkaUnavailableError, MigrationError, TranscoderError
from transcoder.kafka.admin import _failure, _list_offsets, admin_retry, describe
from transcoder.kafka.clients import retriable

#: Seconds one admin request may take (lookup of the coordinator, the request, its answer).
_REQUEST_TIMEOUT_S = 30.0
#: Offset fetches in flight at once while looking for the groups of a topic (one request per group).
_FETCHES_IN_FLIGHT = 64

#: Kafka's names of the group states (as kafka-consumer-groups prints them).
_STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}


@dataclass(frozen=True)
class Member:
    """One active member of a group: who it is, where it runs, and which partitions of the topic it holds."""

    consumer_id: str
    client_id: str
    host: str
    partitions: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """`client.id@host`: how an operator finds the process."""
        return f"{self.client_id or '<no client.id>'}@{self.host}"


@dataclass(frozen=True)
class GroupView:
    """A consumer group as seen on one topic: its state, its members, its committed offsets and the topic's ends."""

    group_id: str
    state: str  # Kafka's name: Stable, Empty, PreparingRebalance, CompletingRebalance, Dead, Unknown
    members: tuple[Member, ...]
    committed: dict[int, int]  # partition -> committed offset on the topic (partitions without one are absent)
    ends: dict[int, int]  # partition -> high watermark (as a read_committed consumer sees it)
    #: Committed without joining (manual assignment): a consumer of such a group runs without being a member.
    simple: bool = False
    topic: str = field(default="")

    @property
    def lag_by_partition(self) -> dict[int, int]:
        """Records between the committed offset and the end, per partition with a committed offset."""
        return {p: max(0, self.ends.get(p, off) - off) for p, off in sorted(self.committed.items())}

    @property
    def lag(self) -> int:
        """Records behind, summed over the partitions with a committed offset."""
        return sum(self.lag_by_partition.values())

    @property
    def uncommitted(self) -> tuple[int, ...]:
        """Partitions of the topic the group has no committed offset on (it would start per auto.offset.reset)."""
        return tuple(p for p in sorted(self.ends) if p not in self.committed)

    @property
    def active(self) -> bool:
        return bool(self.members)

    def who(self) -> str:
        """The members as one phrase, for messages: `a@/10.0.0.1, b@/10.0.0.2`."""
        return ", ".join(m.label for m in self.members) or "no member"


# ---------------------------------------------------------------- one admin request each, retried while retriable
def _error(exc: BaseException, what: str, **where: Any) -> TranscoderError:
    """A failed admin future as a transcoder error: unreachable/retriable -> KafkaUnavailableError, else
    MigrationError (an ACL, a bad request), with Kafka's error name and retriable flag."""
    if isinstance(exc, KafkaException):
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        cls = KafkaUnavailableError if err is None or retriable(err) else MigrationError
        return _failure(exc, what, cls, **where)
    return KafkaUnavailableError(f"{what}: {exc}", **where)


def _raise_partition_error(err: KafkaError, what: str, topic: str, partition: int) -> None:
    raise (KafkaUnavailableError if retriable(err) else MigrationError)(
        f"{what}: {err.str()}", topic=topic, partition=partition, kafka_error=err.name(), retriable=retriable(err))


@admin_retry
def _group_ids(admin: AdminClient) -> list[str]:
    try:
        result = admin.list_consumer_groups(request_timeout=_REQUEST_TIMEOUT_S).result()
    except KafkaException as exc:
        raise _error(exc, "cannot list the consumer groups") from exc
    if result.errors:
        # A broker that did not answer: its groups would be missing, and a plan would miss their readers.
        raise _error(result.errors[0], "cannot list the consumer groups of every broker")
    return sorted({g.group_id for g in result.valid or []})


@admin_retry
def _committed(admin: AdminClient, group_ids: list[str], topic: str, partitions: int) -> dict[str, dict[int, int]]:
    """Committed offsets of each group on `topic` (stable ones: pending transactional commits are waited for).

    A group that disappeared since it was listed is left out.
    """
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: dict[str, dict[int, int]] = {}
    for i in range(0, len(group_ids), _FETCHES_IN_FLIGHT):
        chunk = group_ids[i:i + _FETCHES_IN_FLIGHT]
        futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g, list(tps))],
                                                        require_stable=True,
                                                        request_timeout=_REQUEST_TIMEOUT_S)[g] for g in chunk}
        for g, fut in futures.items():
            try:
                result = fut.result()
            except KafkaException as exc:
                if exc.args and isinstance(exc.args[0], KafkaError) and \
                        exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                    continue
                raise _error(exc, f"cannot read the committed offsets of group {g} on {topic}", topic=topic) from exc
            offsets: dict[int, int] = {}
            for tp in result.topic_partitions or []:
                if tp.error is not None:
                    _raise_partition_error(tp.error, f"cannot read the committed offset of group {g} on "
                                                     f"{tp.topic} [{tp.partition}]", tp.topic, tp.partition)
                if tp.topic == topic and tp.offset >= 0:
                    offsets[tp.partition] = tp.offset
            out[g] = offsets
    return out


@admin_retry
def _describe_groups(admin: AdminClient, group_ids: list[str]) -> dict[str, Any]:
    """ConsumerGroupDescription per group; None for a group the cluster does not know."""
    if not group_ids:
        return {}
    futures = admin.describe_consumer_groups(list(group_ids), request_timeout=_REQUEST_TIMEOUT_S)
    out: dict[str, Any] = {}
    for g, fut in futures.items():
        try:
            d = fut.result()
        except KafkaException as exc:
            if exc.args and isinstance(exc.args[0], KafkaError) and \
                    exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                out[g] = None  # newer brokers answer so for an unknown group
                continue
            raise _error(exc, f"cannot describe group {g}") from exc
        # Older brokers describe an unknown group as Dead, with no member.
        out[g] = None if getattr(d, "state", None) == ConsumerGroupState.DEAD else d
    return out


def _ends(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    highs = _list_offsets(admin, [TopicPartition(topic, p) for p in range(partitions)], OffsetSpec.latest())
    return {p: off for (_, p), off in highs.items()}


def _partitions(admin: AdminClient, topic: str) -> int:
    shape = describe(admin, topic)
    if shape is None:
        raise MigrationError(f"topic {topic} does not exist", topic=topic)
    return shape.partitions


def _members(description: Any, topic: str) -> tuple[Member, ...]:
    out = []
    for m in description.members or []:
        tps = m.assignment.topic_partitions if m.assignment is not None else []
        out.append(Member(consumer_id=m.member_id, client_id=m.client_id or "", host=(m.host or "").lstrip("/"),
                          partitions=tuple(sorted(tp.partition for tp in tps or [] if tp.topic == topic))))
    return tuple(sorted(out, key=lambda m: (m.client_id, m.host, m.consumer_id)))


def _view(group_id: str, topic: str, description: Any, committed: Mapping[int, int],
          ends: Mapping[int, int]) -> GroupView:
    state = getattr(description, "state", ConsumerGroupState.UNKNOWN)
    return GroupView(group_id=group_id, state=_STATE_NAMES.get(state, str(getattr(state, "name", state))),
                     members=_members(description, topic), committed=dict(sorted(committed.items())),
                     ends=dict(ends), simple=bool(getattr(description, "is_simple_consumer_group", False)),
                     topic=topic)


def _unknown(group_id: str) -> MigrationError:
    return MigrationError(f"group {group_id} is unknown to the cluster: check its name "
                          "(kafka-consumer-groups --list shows the groups there are)")


def _look(admin: AdminClient, group_id: str, topic: str, partitions: int) -> GroupView:
    """The group on `topic` (its committed offsets may be none); MigrationError if the cluster does not know it."""
    description = _describe_groups(admin, [group_id])[group_id]
    if description is None:
        raise _unknown(group_id)
    committed = _committed(admin, [group_id], topic, partitions).get(group_id, {})
    return _view(group_id, topic, description, committed, _ends(admin, topic, partitions))


# ---------------------------------------------------------------- the public calls
def groups_on(admin: AdminClient, topic: str, *, exclude: Iterable[str] = ()) -> list[GroupView]:
    """Every consumer group with a committed offset on `topic`, by group id; `exclude`: groups to leave out
    (transcoder's own lanes). Empty groups are included: a stopped application still reads the topic."""
    partitions = _partitions(admin, topic)
    excluded = set(exclude)
    ids = [g for g in _group_ids(admin) if g not in excluded]
    committed = {g: c for g, c in _committed(admin, ids, topic, partitions).items() if c}
    if not committed:
        return []
    descriptions = _describe_groups(admin, sorted(committed))
    ends = _ends(admin, topic, partitions)
    return [_view(g, topic, descriptions[g], committed[g], ends)
            for g in sorted(committed) if descriptions.get(g) is not None]


def describe_group(admin: AdminClient, group_id: str, topic: str) -> GroupView:
    """One group on `topic`; MigrationError when the cluster does not know the group or it has no committed
    offset on the topic."""
    view = _look(admin, group_id, topic, _partitions(admin, topic))
    if not view.committed:
        raise MigrationError(f"group {group_id} has no committed offsets on topic {topic}: it does not read it "
                             "(or its offsets expired); name a group that does", topic=topic)
    return view


def committed_on(admin: AdminClient, group_id: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on `topic` (partition -> offset); {} when it has none or the cluster does not
    know the group."""
    return dict(sorted(_committed(admin, [group_id], topic, _partitions(admin, topic)).get(group_id, {}).items()))


def assigned_on(admin: AdminClient, topic: str, *, exclude: Iterable[str] = ()) -> list[GroupView]:
    """Every consumer group with a live member assigned a partition of `topic`, committed or not, by group id
    (their views carry no committed offsets); `exclude`: groups to leave out (transcoder's own lanes)."""
    excluded = set(exclude)
    ids = [g for g in _group_ids(admin) if g not in excluded]
    out = []
    for g, description in sorted(_describe_groups(admin, ids).items()):
        if description is None:
            continue
        view = _view(g, topic, description, {}, {})
        if any(m.partitions for m in view.members):
            out.append(view)
    return out


def _refuse_active(view: GroupView, topic: str, what: str) -> MigrationError:
    return MigrationError(
        f"group {view.group_id} has {len(view.members)} active member(s) ({view.who()}), so {what}: stop its "
        "consumers first (or wait for their session.timeout.ms)", topic=topic)


def commit_offsets(admin: AdminClient, group_id: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Set the group's committed offsets on `topic` to exactly `offsets` (partition -> offset) and read them back.

    Refused while the group has members: a running consumer would overwrite them with its next commit
    (the broker refuses too, with UNKNOWN_MEMBER_ID, should one join in between). A group the cluster
    does not know yet is created by the commit.
    """
    if not offsets:
        raise MigrationError(f"no offsets given to commit for group {group_id} on {topic}", topic=topic)
    partitions = _partitions(admin, topic)
    bad = sorted(p for p, off in offsets.items() if not 0 <= p < partitions or off < 0)
    if bad:
        p = bad[0]
        raise MigrationError(f"cannot commit offset {offsets[p]} on {topic} [{p}] for group {group_id}: "
                             f"{topic} has partitions 0..{partitions - 1} and offsets are >= 0",
                             topic=topic, partition=p)
    description = _describe_groups(admin, [group_id])[group_id]
    if description is not None:
        view = _view(group_id, topic, description, {}, {})
        if view.active:
            raise _refuse_active(view, topic, f"its offsets on {topic} cannot be moved")
    _alter(admin, group_id, topic, offsets)
    back = _committed(admin, [group_id], topic, partitions).get(group_id, {})
    wrong = sorted(p for p, off in offsets.items() if back.get(p) != off)
    if wrong:
        p = wrong[0]
        raise MigrationError(f"group {group_id}'s committed offset on {topic} [{p}] reads back as "
                             f"{back.get(p, 'none')}, not {offsets[p]}: did a consumer of the group commit in "
                             "between? Stop it and try again", topic=topic, partition=p)


@admin_retry
def _alter(admin: AdminClient, group_id: str, topic: str, offsets: Mapping[int, int]) -> None:
    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p, off)
                                                      for p, off in sorted(offsets.items())])
    fut = admin.alter_consumer_group_offsets([request], request_timeout=_REQUEST_TIMEOUT_S)[group_id]
    try:
        result = fut.result()
    except KafkaException as exc:
        raise _error(exc, f"cannot commit offsets of group {group_id} on {topic}", topic=topic) from exc
    for tp in result.topic_partitions or []:
        if tp.error is None:
            continue
        if tp.error.code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS,
                               KafkaError.ILLEGAL_GENERATION):
            # The group is not empty: a member joined since it was described.
            description = _describe_groups(admin, [group_id])[group_id]
            view = _view(group_id, topic, description, {}, {}) if description is not None else None
            who = f" ({view.who()})" if view is not None and view.active else ""
            raise MigrationError(f"group {group_id} has active members{who}, so the broker refused to move its "
                                 f"offsets on {topic}: stop its consumers first", topic=topic,
                                 partition=tp.partition, kafka_error=tp.error.name())
        _raise_partition_error(tp.error, f"cannot commit offset {tp.offset} of group {group_id} on "
                                         f"{tp.topic} [{tp.partition}]", tp.topic, tp.partition)


def wait_empty(admin: AdminClient, group_id: str, topic: str, *, timeout_s: float,
               poll_s: float = 1.0) -> GroupView:
    """Wait until the group has no member; its view on `topic` then (committed offsets as they are after the
    members left). MigrationError naming who is still there after `timeout_s`, or if the group is unknown."""
    partitions = _partitions(admin, topic)
    deadline = time.monotonic() + timeout_s
    while True:
        description = _describe_groups(admin, [group_id])[group_id]
        if description is None:
            raise _unknown(group_id)
        view = _view(group_id, topic, description, {}, {})
        if not view.active:
            # The members' last commits are in: read the offsets now, not before they left.
            return _look(admin, group_id, topic, partitions)
        if time.monotonic() >= deadline:
            raise MigrationError(
                f"group {group_id} still has {len(view.members)} active member(s) after {timeout_s:g} s: "
                f"{view.who()}: stop them (or wait longer)", topic=topic)
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
