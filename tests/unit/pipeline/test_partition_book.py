"""transcoder.pipeline.partition_book: one owner of where each partition stands, written through its methods."""

from __future__ import annotations

from transcoder.pipeline.partition_book import PartitionBook

A0, A1 = ("src", 0), ("src", 1)


def test_positions_are_pushed_and_the_commit_stands_in_where_nothing_was_read():
    book = PartitionBook()
    book.assign([A0, A1])
    book.found(A1, 7)
    book.read_to(A0, 12)
    assert book.read_positions([A0, A1]) == {A0: 12, A1: None}  # what a checkpoint commits from
    assert (book.position(A0), book.position(A1)) == (12, 7)  # where the lane is: its commit where nothing read
    book.read_to(A0, -1001)  # a logical offset (OFFSET_INVALID): no position
    assert book.read_positions([A0]) == {A0: None}


def test_a_commit_is_recorded_with_when_its_last_record_was_acknowledged_and_kept_as_known_after_release():
    book = PartitionBook(first_reads=True)
    book.assign([A0, A1])
    book.read_from(A0, 3)
    book.committed_at({A0: 10, A1: 4}, {A0: 1234, A1: None})
    assert book.committed == {A0: 10, A1: 4} and book.committed_ts == {A0: 1234}
    assert book.first_read == {}  # committed: an abort reads it again from the commit
    book.release([A0])
    assert A0 not in book.assigned and A0 not in book.committed and book.known[A0] == 10


def test_first_reads_are_noted_once_per_partition_never_committed_and_only_when_asked_for():
    book = PartitionBook(first_reads=True)
    book.assign([A0, A1])
    book.found(A1, 5)
    assert book.first_reads_due and book.unstarted(A0) and not book.unstarted(A1)
    book.read_from(A0, 4)
    book.read_from(A0, 9)
    assert book.first_read == {A0: 4} and not book.first_reads_due
    assert (book.rewind_offset(A0), book.rewind_offset(A1)) == (4, 5)
    book.begin()  # a new assignment: noted again
    assert book.unstarted(A0)
    at_least_once = PartitionBook()
    at_least_once.assign([A0])
    at_least_once.read_from(A0, 4)
    assert not at_least_once.first_reads_due and at_least_once.rewind_offset(A0) is None


def test_release_keeps_where_the_lane_was_for_a_recreation_found_later():
    book = PartitionBook()
    book.assign([A0])
    book.saw_end(A0, 150)
    book.saw_end(A0, 120)
    book.read_to(A0, 100)
    book.abandon([A0])
    book.release([A0])
    assert book.abandoned == set() and book.read_positions([A0]) == {A0: None}
    assert book.take_last_seen(A0) == (150, 100)
    assert book.take_last_seen(A0) == (-1, None)  # taken once


def test_withheld_and_restarted_partitions():
    book = PartitionBook(first_reads=True)
    book.assign([A0])
    book.found(A0, 8)
    book.withhold(A0)
    book.restart(A0)  # a recreated topic: its old commit is no offset of the new one
    assert A0 in book.withheld and A0 not in book.committed and A0 not in book.known and book.unstarted(A0)
    book.hold_all(True)
    assert book.paused
