"""transcoder.pipeline.catch_up: when a --until-caught-up lane is done, and when it may commit without waiting."""

from __future__ import annotations

from transcoder.pipeline.catch_up import CatchUp

A, B, C = ("s", 0), ("s", 1), ("s", 2)


def never(tp: object, high: int) -> bool:
    return False


def test_done_once_every_partition_with_records_is_committed_to_its_end():
    c = CatchUp({A: (0, 10), B: (5, 5), C: (3, 8)})  # B had nothing to copy
    assert not c.done({A: 10, C: 7}, never)
    assert c.done({A: 10, C: 8}, never)
    assert c.done({A: 10}, lambda tp, high: tp == C)  # the lane began past C's end: nothing to read there
    assert not CatchUp({}).done({}, never)


def test_read_to_the_end_once_per_acknowledgement_and_only_with_nothing_in_flight():
    c = CatchUp({A: (0, 10), B: (0, 4)})
    assert not c.read_to_the_end({A: 10, B: 3}, {}, 0, 13, never)  # B not read to its end
    assert not c.read_to_the_end({A: 10, B: 4}, {}, 100, 13, never)  # records in flight
    assert c.read_to_the_end({A: 10, B: 4}, {}, 0, 14, never)
    assert not c.read_to_the_end({A: 10, B: 4}, {}, 0, 14, never)  # said once: the commit interval decides now
    assert c.read_to_the_end({A: 10, B: 4}, {}, 0, 15, never)  # (a record the DLQ acknowledged later, say)


def test_a_partition_committed_to_its_end_before_this_run_needs_no_reading():
    c = CatchUp({A: (0, 10), B: (0, 4)})
    assert c.read_to_the_end({A: 10}, {B: 4}, 0, 10, never)


def test_a_partition_ending_in_transaction_markers_is_left_to_the_commit_interval():
    # offsets 8 and 9 are markers: the last record read is 7, so the ledger's next offset stays 8
    assert not CatchUp({A: (0, 10)}).read_to_the_end({A: 8}, {}, 0, 8, never)
