"""transcoder.service.assembly.build_lane: the parts chosen once, by guarantee and copy path."""

from __future__ import annotations

import pytest

from tests.unit.service.lane_fakes import lane
from transcoder.service.assembly import NoSampling
from transcoder.service.checkpoint import AtLeastOnce, ExactlyOnce
from transcoder.service.copy_paths import Records
from transcoder.service.group import Cooperative, Eager
from transcoder.service.record_sets import RecordSets
from transcoder.service.transaction_drain import NoDrain, TransactionDrain


@pytest.mark.parametrize(("guarantee", "hot_path", "checkpoint", "path", "drain", "group"), [
    ("at-least-once", "records", AtLeastOnce, Records, None, Cooperative),
    ("at-least-once", "batches", AtLeastOnce, RecordSets, NoDrain, Cooperative),
    ("exactly-once", "records", ExactlyOnce, Records, NoDrain, Eager),
    ("exactly-once", "batches", ExactlyOnce, RecordSets, TransactionDrain, Eager),
])
def test_the_parts_follow_the_guarantee_and_the_copy_path(guarantee, hot_path, checkpoint, path, drain, group):
    the_lane, *_ = lane(guarantee=guarantee, hot_path=hot_path, commit_interval_ms=1000)
    assert type(the_lane.checkpoint) is checkpoint and type(the_lane.path) is path
    assert type(the_lane.path.r.group) is group
    if drain is not None and isinstance(the_lane.checkpoint, ExactlyOnce):
        assert type(the_lane.checkpoint.drain) is drain
    if isinstance(the_lane.path, RecordSets):
        assert type(the_lane.path.flow) is drain
    assert the_lane.checkpoint.book is the_lane.book is the_lane.path.book is the_lane.watch.book
    assert isinstance(the_lane.sampler, NoSampling)  # live scoring off: a no-op, never due


def test_room_under_exactly_once_on_record_sets_is_what_the_transaction_may_hold():
    the_lane, *_ = lane(guarantee="exactly-once", hot_path="batches", max_in_flight_bytes=64 << 20,
                        commit_interval_ms=1000)
    flow = the_lane.path.flow
    assert flow.room() == min(64 << 20, flow.budget) < 64 << 20
    at_least_once, *_ = lane(hot_path="batches", max_in_flight_bytes=64 << 20)
    assert at_least_once.path.flow.room() == 64 << 20
