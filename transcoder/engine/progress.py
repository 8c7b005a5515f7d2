"""What an engine reports while it copies to the end offsets seen at start (`run --until-caught-up`): each lane's
progress, read from its status, handed to an observer the caller passes in (the CLI draws bars or logs lines; an
engine draws nothing itself)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.progress import LaneProgress, remaining, span

#: Called by the engine's own thread (the one that runs `run`) about twice a second while the lanes copy, and once
#: more when every lane has ended, with every lane's progress. It must return promptly.
ProgressObserver = Callable[[Sequence[LaneProgress]], None]


def lane_progress(status: LaneStatus, ends: Mapping[Partition, tuple[int, int]] | None) -> LaneProgress:
    """A lane's progress from its status: records and bytes copied (its counters), the offsets left below `ends`
    (source partition -> (low, high) watermarks when the run started; None: no end to reach) from its committed
    offsets, of the offsets `ends` span. A lane caught up has none left, whatever its partitions' last offsets are
    (transaction markers, records compacted away)."""
    left = None if ends is None else 0 if status.state == "caught-up" else remaining(ends, status.committed)
    return LaneProgress(lane=status.name, state=status.state, records=status.records,
                        source_bytes=status.source_bytes, remaining=left, total=None if ends is None else span(ends))
