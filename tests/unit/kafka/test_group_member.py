"""transcoder.kafka.group_member and TxnOffsetCommit's generation (KIP-447), without a broker: librdkafka's serialised
group metadata read back (the bytes below are what confluent-kafka 2.16.1's Consumer.consumer_group_metadata() gave on
a real broker), and the batch producer's transaction requests sending the member with the offsets. The zombie fenced
on a real cluster: tests/cluster/test_zombie_fencing.py."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.group_member import GroupMember, GroupMetadataError, group_member
from transcoder.kafka.producer.errors import ProduceError
from transcoder.kafka.producer.transaction_requests import TransactionRequests, Transactions

NO_INSTANCE = b"CGMDv2:\x01\x00\x00\x00g-cgmd\x00rdkafka-9f254ca3-d48f-4381-adeb-2d3534a4d800\x00\x01"
WITH_INSTANCE = (b"CGMDv2:\x01\x00\x00\x00g-cgmd2\x00inst-0-12b7d40c-bc9f-4219-9314-950d2958dcc0\x00\x00inst-0\x00")


def test_librdkafka_group_metadata_is_read_back():
    assert group_member(NO_INSTANCE) == GroupMember("g-cgmd", 1, "rdkafka-9f254ca3-d48f-4381-adeb-2d3534a4d800", None)
    assert group_member(WITH_INSTANCE) == GroupMember("g-cgmd2", 1, "inst-0-12b7d40c-bc9f-4219-9314-950d2958dcc0",
                                                      "inst-0")
    later = b"CGMDv2:" + struct.pack("=i", 17) + b"g\x00m\x00\x01"
    assert group_member(later).generation_id == 17


def test_a_consumer_outside_the_group_is_no_member():
    # rd_kafka_consumer_group_metadata of a consumer that never joined: generation -1, no member id
    m = group_member(b"CGMDv2:" + struct.pack("=i", -1) + b"g\x00\x00\x01")
    assert m == GroupMember("g") and not m.is_member


@pytest.mark.parametrize("raw", [b"", b"CGMDv1:\x01\x00\x00\x00g\x00m\x00\x01", b"CGMDv2:\x01\x00",
                                 b"CGMDv2:\x01\x00\x00\x00g\x00m", b"CGMDv2:\x01\x00\x00\x00g\x00m\x00\x07",
                                 b"CGMDv2:\x01\x00\x00\x00g\x00m\x00\x01extra", "not bytes"])
def test_anything_else_is_refused_not_read_as_no_generation(raw: Any):
    with pytest.raises(GroupMetadataError, match="consumer group metadata"):
        group_member(raw)


class _Coordinator:
    """The transaction and group coordinators' answers, the TxnOffsetCommit requests written down."""

    def __init__(self, txn_offset_commit_code: int = 0) -> None:
        self.code = txn_offset_commit_code
        self.commits: list[dict[str, Any]] = []

    def find_coordinator(self, key: str, key_type: int) -> int:
        return 2

    def add_offsets_to_txn(self, *args: Any, coordinator: int) -> int:
        return 0

    def txn_offset_commit(self, tid: str, group: str, pid: int, epoch: int, offsets: dict, *, coordinator: int,
                          **member: Any) -> dict:
        self.commits.append({"offsets": offsets, **member})
        return {tp: self.code for tp in offsets}


def _requests() -> TransactionRequests:
    return TransactionRequests(Transactions("tid-1", "g-cgmd"), "c1", FailureLog("lane"), 0.01)


def test_the_offsets_go_with_the_members_generation():
    coordinator = _Coordinator()
    _requests().add_offsets(coordinator, 7, 0, {("src", 0): 40}, 1e12, lambda: None, group_member(NO_INSTANCE))
    assert coordinator.commits == [{"offsets": {("src", 0): 40}, "generation_id": 1,
                                    "member_id": "rdkafka-9f254ca3-d48f-4381-adeb-2d3534a4d800",
                                    "group_instance_id": None}]


def test_no_member_sends_no_generation():
    coordinator = _Coordinator()
    _requests().add_offsets(coordinator, 7, 0, {("src", 0): 40}, 1e12, lambda: None, GroupMember("g-cgmd"))
    _requests().add_offsets(coordinator, 7, 0, {("src", 0): 41}, 1e12, lambda: None)
    assert coordinator.commits == [{"offsets": {("src", 0): 40}}, {"offsets": {("src", 0): 41}}]


@pytest.mark.parametrize("code,name", [(22, "ILLEGAL_GENERATION"), (25, "UNKNOWN_MEMBER_ID"),
                                       (82, "FENCED_INSTANCE_ID")])
def test_a_stale_generation_aborts_the_transaction_naming_the_member(code: int, name: str):
    with pytest.raises(ProduceError) as raised:
        _requests().add_offsets(_Coordinator(code), 7, 0, {("src", 0): 40}, 1e12, lambda: None,
                                group_member(WITH_INSTANCE))
    err = raised.value
    assert err.txn_requires_abort and not err.fatal and not err.retriable
    text = str(err)
    assert err.kafka_error == name and f"({name}: group" in text
    assert "TxnOffsetCommit" in text and "transactional.id tid-1" in text
    assert "group g-cgmd2 generation 1 member inst-0-12b7d40c-bc9f-4219-9314-950d2958dcc0" in text
    assert "group.instance.id inst-0" in text and "another member owns these partitions" in text
