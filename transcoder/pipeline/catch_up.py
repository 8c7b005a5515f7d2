"""`--until-caught-up`: the end offsets of a lane's source partitions when the run started, and whether the lane
has reached them. Pure: the lane hands in where it stands."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from transcoder.pipeline.partitions import Partition


class CatchUp:
    """A lane's start end offsets: `done` once each partition's commit reached its end (or the lane began past it
    with nothing to read: `nothing_to_copy`); `read_to_the_end` as soon as each was read and every record
    acknowledged, so the lane commits then instead of at its next commit interval."""

    def __init__(self, end_offsets: Mapping[Partition, tuple[int, int]]) -> None:
        #: source partition -> (low, high) watermarks when the run started
        self.end_offsets = dict(end_offsets)
        self._ended_at = -1  # records acknowledged when `read_to_the_end` last said so

    def done(self, committed: Mapping[Partition, int], nothing_to_copy: Callable[[Partition, int], bool]) -> bool:
        return bool(self.end_offsets) and all(
            high <= low or committed.get(tp, -1) >= high or nothing_to_copy(tp, high)
            for tp, (low, high) in self.end_offsets.items())

    def read_to_the_end(self, next_offset: Mapping[Partition, int], committed: Mapping[Partition, int],
                        in_flight_bytes: int, acknowledged: int,
                        nothing_to_copy: Callable[[Partition, int], bool]) -> bool:
        """Every record below the end offsets read (`next_offset`, the ledger's) and none in flight, with records
        acknowledged since the last time this was true. A partition whose last offsets are not records (transaction
        markers, compacted away) is not read to its end: the lane waits for its commit interval."""
        if not self.end_offsets or in_flight_bytes or acknowledged == self._ended_at:
            return False
        if not all(high <= low or next_offset.get(tp, low) >= high or committed.get(tp, -1) >= high
                   or nothing_to_copy(tp, high) for tp, (low, high) in self.end_offsets.items()):
            return False
        self._ended_at = acknowledged
        return True
