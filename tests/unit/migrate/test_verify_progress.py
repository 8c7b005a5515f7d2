"""A long `migrate verify` says how far it is: the line, how often, and how much it sets out to compare."""

from __future__ import annotations

from transcoder.migrate.verify import ProgressLine, planned
from transcoder.pipeline.offset_runs import PartitionMap, Run


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_ten_seconds_not_every_range() -> None:
    clock, lines = Clock(), []
    p = ProgressLine("verify a -> a.zstd", lines.append, clock=clock)
    p.start(3_500_000)
    emitted = []
    for done in range(10_000, 3_500_001, 10_000):  # 350 ranges, 0.125 s each: 43.75 s
        clock.now += 0.125
        emitted.append(p.update(done))
    assert sum(emitted) == 4  # at 10, 20, 30 and 40 s
    assert lines[0] == "verify a -> a.zstd: 800,000 of 3,500,000 records compared (23%) in 10s, 80,000 records/s"
    assert lines[-1].startswith("verify a -> a.zstd: 3,200,000 of 3,500,000 records compared (91%) in 40s")


def test_every_zero_says_each_range() -> None:
    clock, lines = Clock(), []
    p = ProgressLine("v", lines.append, every_s=0, clock=clock)
    p.start(0)
    assert p.update(5) and p.update(9)
    assert lines == ["v: 5 of 0 records compared in 0s", "v: 9 of 0 records compared in 0s"]


def test_planned_is_the_width_verify_partition_compares() -> None:
    pmap = PartitionMap([Run(100, 0, 900)])  # source 100..999 copied
    assert planned(pmap, None, None, 0, 1000) == 900  # from where the map starts to what it covers
    assert planned(pmap, 400, None, 0, 1000) == 600  # from where the last verification stopped
    assert planned(pmap, None, 700, 0, 1000) == 600  # up to the lane's commit
    assert planned(pmap, None, None, 300, 800) == 500  # within the watermarks
    assert planned(pmap, 1000, None, 0, 1000) == 0  # verified through the end already
    assert planned(None, None, None, 0, 1000) == 0 and planned(PartitionMap([]), None, None, 0, 10) == 0
