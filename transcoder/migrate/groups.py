"""Consumer groups of a topic: who reads it (members, committed offsets, lag), and moving a stopped group's offsets.

The views are plain data (`GroupView`, `Member`); the functions here ask the cluster through a `GroupAdmin`:
confluent-kafka's AdminClient for topics and the list of groups, kafka-python (migrate.coordinator) for what a
group's coordinator answers, each call tried again through a failover for at most the GroupAdmin's timeout.
Kafka's answers are the truth: a commit is read back, and a group with members is never moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from transcoder.errors import KafkaUnavailableError, MigrationError, TranscoderError
from transcoder.kafka.admin import _failure, describe
from transcoder.kafka.clients import connect_admin, retriable
from transcoder.migrate.coordinator import Description, GroupRequests, error_name
from transcoder.migrate.retry import until_deadline

T = TypeVar("T")

#: Seconds one request may take (lookup of the coordinator, the request, its answer): a try, within a call's
#: timeout (GroupAdmin.timeout_s), which may hold several.
_REQUEST_TIMEOUT_S = 15.0
#: A partition's leader moved since the client looked it up (its metadata is stale).
_STALE_LEADER = frozenset({"FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER",
                           "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"})
#: Errors of a try that got no answer from the broker it asked.
_NO_ANSWER = frozenset({"_TIMED_OUT", "_TRANSPORT"})


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


# ---------------------------------------------------------------- the clients, and one request each, retried
@dataclass
class GroupAdmin:
    """What the group calls ask through: `admin`, confluent-kafka's AdminClient for topics, their offsets and the
    list of groups (no request of these goes to a group coordinator); `requests`, kafka-python's client for what
    does (migrate.coordinator says why). `timeout_s` bounds each call, its retries through a coordinator or
    leader failover included (migration.api_timeout_ms). Close it on the thread that made it."""

    admin: AdminClient
    requests: GroupRequests
    timeout_s: float = 60.0
    #: the cluster's librdkafka properties: a new GroupRequests after a try that got no answer
    librdkafka: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def connect(cls, librdkafka: Mapping[str, Any], *, timeout_s: float = 60.0,
                admin: AdminClient | None = None) -> GroupAdmin:
        """Clients of the cluster `librdkafka` describes (`admin`: an AdminClient of it already made)."""
        if admin is None:
            admin = connect_admin(librdkafka)[0]
        return cls(admin, GroupRequests(librdkafka, timeout_s=min(timeout_s, _REQUEST_TIMEOUT_S)), timeout_s,
                   dict(librdkafka))

    def close(self) -> None:
        self.requests.close()

    def _renew(self) -> None:
        """A fresh GroupRequests (new connections) for the next try: a try that got no answer at all may have left
        the old one's connections half-open to a broker that is gone."""
        old = self.requests
        self.requests = GroupRequests(self.librdkafka, timeout_s=min(self.timeout_s, _REQUEST_TIMEOUT_S))
        old.close()

    def retried(self, call: Callable[[], T], what: str, **fields: Any) -> T:
        """`call()`, tried again through a failover for at most `timeout_s` (migrate.retry.until_deadline); a try
        without an answer (_TIMED_OUT, _TRANSPORT) is followed by one on fresh connections. `call` reaches the
        coordinator through `self.requests` when it runs, not before."""
        def attempt() -> T:
            try:
                return call()
            except TranscoderError as exc:
                if self.librdkafka and exc.kafka_error in _NO_ANSWER:
                    self._renew()
                raise

        return until_deadline(attempt, what=what, timeout_s=self.timeout_s, fields=fields)


def _error(exc: BaseException, what: str, **where: Any) -> TranscoderError:
    """A failed admin future as a transcoder error: unreachable/retriable -> KafkaUnavailableError, else
    MigrationError (an ACL, a bad request), with Kafka's error name and retriable flag."""
    if isinstance(exc, KafkaException):
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        cls = KafkaUnavailableError if err is None or retriable(err) else MigrationError
        return _failure(exc, what, cls, **where)
    return KafkaUnavailableError(f"{what}: {exc}", **where)


def _group_ids(ga: GroupAdmin) -> list[str]:
    def ask() -> list[str]:
        try:
            result = ga.admin.list_consumer_groups(request_timeout=_REQUEST_TIMEOUT_S).result()
        except KafkaException as exc:
            raise _error(exc, "cannot list the consumer groups") from exc
        if result.errors:
            # A broker that did not answer: its groups would be missing, and a plan would miss their readers.
            raise _error(result.errors[0], "cannot list the consumer groups of every broker")
        return sorted({g.group_id for g in result.valid or []})

    return ga.retried(ask, "list the consumer groups")


def _committed(ga: GroupAdmin, group_ids: list[str], topic: str, partitions: int) -> dict[str, dict[int, int]]:
    """Committed offsets of each group on `topic` (stable ones: pending transactional commits are waited for).

    A group the cluster does not know (or no longer) has none.
    """
    return {g: ga.retried(lambda g=g: ga.requests.committed(g, topic, partitions),  # type: ignore[misc]
                          f"read the committed offsets of group {g} on {topic}", group=g,
                          topic=topic) for g in group_ids}


def _describe_groups(ga: GroupAdmin, group_ids: list[str]) -> dict[str, Description | None]:
    """The coordinator's description per group; None for a group the cluster does not know."""
    if not group_ids:
        return {}
    out: dict[str, Description | None] = {}
    for g in group_ids:
        out.update(ga.retried(lambda g=g: ga.requests.describe([g]), f"describe group {g}", group=g))  # type: ignore[misc]
    return out


def _ends(ga: GroupAdmin, topic: str, partitions: int) -> dict[int, int]:
    """The end offsets of `topic` as a read_committed consumer sees them (ListOffsets, latest)."""

    def ask() -> dict[int, int]:
        futures = ga.admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                                        isolation_level=IsolationLevel.READ_COMMITTED,
                                        request_timeout=_REQUEST_TIMEOUT_S)
        out: dict[int, int] = {}
        for tp, fut in sorted(futures.items(), key=lambda kv: kv[0].partition):
            try:
                out[tp.partition] = fut.result().offset
            except KafkaException as exc:
                err = _error(exc, f"cannot list offsets of {topic} [{tp.partition}]", topic=topic,
                             partition=tp.partition)
                if err.kafka_error in _STALE_LEADER:
                    # librdkafka's ListOffsets asks with the leader epoch it cached, and does not look again (it
                    # answered FENCED_LEADER_EPOCH for 60 s after a failover in 1 of 5 runs of tests/cluster): a
                    # metadata request refreshes its cache before the next try
                    try:
                        ga.admin.list_topics(topic=topic, timeout=5)
                    except KafkaException:
                        pass  # the next try says what is wrong
                raise err from exc
        return out

    return ga.retried(ask, f"read the end offsets of {topic}", topic=topic)


def _partitions(ga: GroupAdmin, topic: str) -> int:
    shape = ga.retried(lambda: describe(ga.admin, topic), f"describe topic {topic}", topic=topic)
    if shape is None:
        raise MigrationError(f"topic {topic} does not exist", topic=topic)
    return shape.partitions


def _members(description: Description, topic: str) -> tuple[Member, ...]:
    out = [Member(consumer_id=m.member_id, client_id=m.client_id, host=m.host,
                  partitions=tuple(sorted(m.assignment.get(topic, ())))) for m in description.members]
    return tuple(sorted(out, key=lambda m: (m.client_id, m.host, m.consumer_id)))


def _view(group_id: str, topic: str, description: Description, committed: Mapping[int, int],
          ends: Mapping[int, int]) -> GroupView:
    return GroupView(group_id=group_id, state=description.state or "Unknown", members=_members(description, topic),
                     committed=dict(sorted(committed.items())), ends=dict(ends), simple=description.simple,
                     topic=topic)


def _unknown(group_id: str) -> MigrationError:
    return MigrationError(f"group {group_id} is unknown to the cluster: check its name "
                          "(kafka-consumer-groups --list shows the groups there are)")


def _look(ga: GroupAdmin, group_id: str, topic: str, partitions: int) -> GroupView:
    """The group on `topic` (its committed offsets may be none); MigrationError if the cluster does not know it."""
    description = _describe_groups(ga, [group_id])[group_id]
    if description is None:
        raise _unknown(group_id)
    committed = _committed(ga, [group_id], topic, partitions).get(group_id, {})
    return _view(group_id, topic, description, committed, _ends(ga, topic, partitions))


# ---------------------------------------------------------------- the public calls
def groups_on(ga: GroupAdmin, topic: str, *, exclude: Iterable[str] = ()) -> list[GroupView]:
    """Every consumer group with a committed offset on `topic`, by group id; `exclude`: groups to leave out
    (transcoder's own lanes). Empty groups are included: a stopped application still reads the topic."""
    partitions = _partitions(ga, topic)
    excluded = set(exclude)
    ids = [g for g in _group_ids(ga) if g not in excluded]
    committed = {g: c for g, c in _committed(ga, ids, topic, partitions).items() if c}
    if not committed:
        return []
    descriptions = _describe_groups(ga, sorted(committed))
    ends = _ends(ga, topic, partitions)
    return [_view(g, topic, d, committed[g], ends)
            for g in sorted(committed) if (d := descriptions.get(g)) is not None]


def describe_group(ga: GroupAdmin, group_id: str, topic: str) -> GroupView:
    """One group on `topic`; MigrationError when the cluster does not know the group or it has no committed
    offset on the topic."""
    view = _look(ga, group_id, topic, _partitions(ga, topic))
    if not view.committed:
        raise MigrationError(f"group {group_id} has no committed offsets on topic {topic}: it does not read it "
                             "(or its offsets expired); name a group that does", topic=topic)
    return view


def committed_on(ga: GroupAdmin, group_id: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on `topic` (partition -> offset); {} when it has none or the cluster does not
    know the group."""
    return dict(sorted(_committed(ga, [group_id], topic, _partitions(ga, topic)).get(group_id, {}).items()))


def assigned_on(ga: GroupAdmin, topic: str, *, exclude: Iterable[str] = ()) -> list[GroupView]:
    """Every consumer group with a live member assigned a partition of `topic`, committed or not, by group id
    (their views carry no committed offsets); `exclude`: groups to leave out (transcoder's own lanes)."""
    excluded = set(exclude)
    ids = [g for g in _group_ids(ga) if g not in excluded]
    out = []
    for g, description in sorted(_describe_groups(ga, ids).items()):
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


def commit_offsets(ga: GroupAdmin, group_id: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Set the group's committed offsets on `topic` to exactly `offsets` (partition -> offset) and read them back.

    Refused while the group has members: a running consumer would overwrite them with its next commit
    (the broker refuses too, with UNKNOWN_MEMBER_ID, should one join in between). A group the cluster
    does not know yet is created by the commit. A commit whose answer was lost in a failover is sent again:
    committing the same offsets twice is the same commit.
    """
    if not offsets:
        raise MigrationError(f"no offsets given to commit for group {group_id} on {topic}", topic=topic)
    partitions = _partitions(ga, topic)
    bad = sorted(p for p, off in offsets.items() if not 0 <= p < partitions or off < 0)
    if bad:
        p = bad[0]
        raise MigrationError(f"cannot commit offset {offsets[p]} on {topic} [{p}] for group {group_id}: "
                             f"{topic} has partitions 0..{partitions - 1} and offsets are >= 0",
                             topic=topic, partition=p)
    description = _describe_groups(ga, [group_id])[group_id]
    if description is not None:
        view = _view(group_id, topic, description, {}, {})
        if view.active:
            raise _refuse_active(view, topic, f"its offsets on {topic} cannot be moved")
    ga.retried(lambda: _alter(ga, group_id, topic, offsets), f"commit offsets of group {group_id} on {topic}",
               group=group_id, topic=topic)
    back = _committed(ga, [group_id], topic, partitions).get(group_id, {})
    wrong = sorted(p for p, off in offsets.items() if back.get(p) != off)
    if wrong:
        p = wrong[0]
        raise MigrationError(f"group {group_id}'s committed offset on {topic} [{p}] reads back as "
                             f"{back.get(p, 'none')}, not {offsets[p]}: did a consumer of the group commit in "
                             "between? Stop it and try again", topic=topic, partition=p)


#: Kafka's answers to a commit without a member while the group has members.
_ACTIVE = frozenset({KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION})


def _alter(ga: GroupAdmin, group_id: str, topic: str, offsets: Mapping[int, int]) -> None:
    for p, code in sorted(ga.requests.commit(group_id, topic, offsets).items()):
        if not code:
            continue
        if code in _ACTIVE:
            # The group is not empty: a member joined since it was described.
            description = _describe_groups(ga, [group_id])[group_id]
            view = _view(group_id, topic, description, {}, {}) if description is not None else None
            who = f" ({view.who()})" if view is not None and view.active else ""
            raise MigrationError(f"group {group_id} has active members{who}, so the broker refused to move its "
                                 f"offsets on {topic}: stop its consumers first", topic=topic,
                                 partition=p, kafka_error=error_name(code))
        err = KafkaError(code)
        raise (KafkaUnavailableError if retriable(err) else MigrationError)(
            f"cannot commit offset {offsets.get(p)} of group {group_id} on {topic} [{p}]: {err.str()}", topic=topic,
            partition=p, kafka_error=err.name(), retriable=retriable(err))


def wait_empty(ga: GroupAdmin, group_id: str, topic: str, *, timeout_s: float,
               poll_s: float = 1.0) -> GroupView:
    """Wait until the group has no member; its view on `topic` then (committed offsets as they are after the
    members left). MigrationError naming who is still there after `timeout_s`, or if the group is unknown.
    A coordinator failover meanwhile is waited out (each description within the client's `timeout_s`)."""
    partitions = _partitions(ga, topic)
    deadline = time.monotonic() + timeout_s
    while True:
        description = _describe_groups(ga, [group_id])[group_id]
        if description is None:
            raise _unknown(group_id)
        view = _view(group_id, topic, description, {}, {})
        if not view.active:
            # The members' last commits are in: read the offsets now, not before they left.
            return _look(ga, group_id, topic, partitions)
        if time.monotonic() >= deadline:
            raise MigrationError(
                f"group {group_id} still has {len(view.members)} active member(s) after {timeout_s:g} s: "
                f"{view.who()}: stop them (or wait longer)", topic=topic)
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
