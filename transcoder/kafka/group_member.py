"""Which member of which generation of a consumer group a transaction commits offsets for (KIP-447).

confluent-kafka hands the consumer's group metadata to a transactional producer as librdkafka serialises it
(`Consumer.consumer_group_metadata()`: the bytes of `rd_kafka_consumer_group_metadata_write`, the form librdkafka
exports "for client binding use"), and its own producer's send_offsets_to_transaction reads them back. transcoder's
batch producer sends TxnOffsetCommit itself, so it reads them here: group id, generation id, member id and group
instance id, which the group coordinator checks against the group's current generation, refusing a zombie (a member
of an older generation: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). The form (librdkafka 2.x, read off
a real consumer): b"CGMDv2:", the generation as a native-endian int32, the group id and the member id each ended by a
NUL byte, a byte that is 1 when there is no group instance id, else 0 and the instance id ended by a NUL byte.

Anything else is refused (GroupMetadataError) rather than read as "no generation": commits without the generation are
exactly the ones a zombie can make.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from transcoder.errors import TranscoderError

_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")  # native byte order, as librdkafka writes it

#: TxnOffsetCommit's answers that say this member is not the group's member of the current generation
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID = 22, 25, 82
GROUP_FENCED_CODES = frozenset({ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID})


class GroupMetadataError(TranscoderError):
    """The consumer's group metadata is not in a form transcoder reads (another librdkafka)."""


@dataclass(frozen=True)
class GroupMember:
    """A consumer group member as a transaction commits offsets for it; generation -1 and no member id: no member
    (a consumer that is not in the group: the broker then checks nothing)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @property
    def is_member(self) -> bool:
        return self.generation_id >= 0 or bool(self.member_id) or self.group_instance_id is not None

    @property
    def fenceable(self) -> bool:
        """Whether offsets committed for this member are checked by the group coordinator against the group's
        current generation: a generation and a member id both known. librdkafka resets them when the group drops the
        consumer (generation -1 on ILLEGAL_GENERATION, member id "" on UNKNOWN_MEMBER_ID), in its own thread, before
        the application's next poll learns the partitions were lost; and a TxnOffsetCommit with neither is checked
        against nothing (Kafka's ClassicGroup.validateOffsetCommit: "only validated if any of them is provided")."""
        return self.generation_id >= 0 and bool(self.member_id)

    def describe(self) -> str:
        instance = f", group.instance.id {self.group_instance_id}" if self.group_instance_id is not None else ""
        return f"group {self.group_id} generation {self.generation_id} member {self.member_id or '-'}{instance}"


def group_member(metadata: Any) -> GroupMember:
    """The member in `metadata`: librdkafka's serialised group metadata (bytes), or a GroupMember as it is.
    GroupMetadataError for anything else."""
    if isinstance(metadata, GroupMember):
        return metadata
    if not isinstance(metadata, bytes | bytearray):
        raise GroupMetadataError(f"consumer group metadata of type {type(metadata).__name__} is not librdkafka's")
    raw = bytes(metadata)
    if not raw.startswith(_MAGIC) or len(raw) < len(_MAGIC) + _GENERATION.size:
        raise GroupMetadataError(f"consumer group metadata {raw[:16]!r}... is not librdkafka's CGMDv2 form")
    (generation,) = _GENERATION.unpack_from(raw, len(_MAGIC))
    rest = raw[len(_MAGIC) + _GENERATION.size:]
    try:
        group_id, rest = _string(rest)
        member_id, rest = _string(rest)
        if rest[:1] == b"\x01":
            instance, rest = None, rest[1:]
        elif rest[:1] == b"\x00":
            instance, rest = _string(rest[1:])
        else:
            raise ValueError("no group instance id flag")
    except ValueError as exc:
        raise GroupMetadataError(f"consumer group metadata is not librdkafka's CGMDv2 form: {exc}") from None
    if rest:
        raise GroupMetadataError(f"consumer group metadata has {len(rest)} unread bytes after the group instance id")
    return GroupMember(group_id, generation, member_id, instance)


def _string(raw: bytes) -> tuple[str, bytes]:
    end = raw.find(b"\x00")
    if end < 0:
        raise ValueError("a string without its NUL end")
    return raw[:end].decode("utf-8"), raw[end + 1:]


def unfenced(metadata: Any) -> str | None:
    """Why offsets committed in a transaction for the consumer whose group metadata is `metadata` would not be
    fenced (its generation or member id unknown: the group dropped it), else None. GroupMetadataError when it is not
    librdkafka's."""
    member = group_member(metadata)
    if member.fenceable:
        return None
    return (f"the consumer is no member of a generation of group {member.group_id} any more ({member.describe()}: "
            "the group dropped it; its partitions are another member's now), and offsets committed without a "
            "generation and member id are checked against nothing")
