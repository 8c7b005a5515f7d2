"""A delivered batch that mixes backlog and new records (issue 42, item 5): each record counts as new or backlog by
its own timestamp, never by its batch's newest. Pure logic: kafka.writer.metrics.new_and_backlog."""

from __future__ import annotations

import pytest

from transcoder.kafka.writer.metrics import LATENCY_SAMPLING, first_new, new_and_backlog
from transcoder.metrics.registry import Metrics
from transcoder.metrics.status import histogram_quantile

START = 100_000  # the lane's start (epoch ms)


class _Section:
    def __init__(self, stamps: list[int]) -> None:
        self.stamps = stamps
        self.max_timestamp = max(stamps)
        self.reads = 0

    def __len__(self) -> int:
        return len(self.stamps)

    def record(self, i: int) -> tuple[int, int, bytes, bytes, list]:
        self.reads += 1
        return (i, self.stamps[i], b"k", b"v", [])


def _mixed(backlog: int, new: int) -> _Section:
    """`backlog` records stamped 60 s before the start, then `new` ones stamped 0..new-1 ms after it."""
    return _Section([START - 60_000] * backlog + [START + i for i in range(new)])


def test_a_batch_mixing_backlog_and_new_records_times_the_new_ones_only():
    # The seeded backlog's tail re-batched with the first 50 live records, acknowledged 200 ms after the start:
    # the new records waited 151..200 ms; the backlog's 60 s is its age, not the pipeline's latency.
    section = _mixed(3000, 50)
    samples, backlog = new_and_backlog(section, 3050, START + 200.0, START)
    assert len(samples) == 16  # the 50 new records have their own strata, whatever the 3,000 before them
    assert all(151 <= age <= 200 for age, _ in samples), samples
    assert sum(w for _, w in samples) == pytest.approx(50 / LATENCY_SAMPLING)
    assert backlog == pytest.approx(3000 / LATENCY_SAMPLING)
    m = Metrics().lane("a")
    for age, w in samples:
        m.latency("a.zstd", age / 1000, w)
    m.backfill("a.zstd", backlog)
    f = m.figures("a.zstd")
    assert histogram_quantile(0.99, f.latency_fine_buckets) < 0.25  # was 60 s: the batch timed whole
    assert f.backlog_samples == pytest.approx(3000 / LATENCY_SAMPLING)


@pytest.mark.parametrize("backlog,new", [(0, 1), (0, 1000), (1, 0), (1000, 0), (1, 1), (999, 1), (1, 999),
                                         (17, 17), (5, 3)])
def test_every_record_counts_once_by_its_own_timestamp(backlog, new):
    samples, left_out = new_and_backlog(_mixed(backlog, new), backlog + new, START + 1000.0, START)
    assert sum(w for _, w in samples) == pytest.approx(new / LATENCY_SAMPLING)
    assert left_out == pytest.approx(backlog / LATENCY_SAMPLING)
    assert all(age <= 1000 for age, _ in samples)


def test_a_record_out_of_order_is_classified_on_its_own_timestamp():
    # a producer's clock behind: one record stamped before the start among new ones (and one after it in the backlog)
    stamps = [START - 5] * 10 + [START + 7] + [START - 5] * 5 + [START + 1] * 15 + [START - 9] + [START + 2] * 8
    samples, backlog = new_and_backlog(_Section(stamps), len(stamps), START + 500.0, START)
    assert all(age <= 500 for age, _ in samples)
    assert sum(w for _, w in samples) + backlog == pytest.approx(len(stamps) / LATENCY_SAMPLING)


def test_an_all_backlog_batch_reads_no_record_and_an_all_new_one_reads_only_its_samples():
    old = _Section([START - 1] * 10_000)
    assert new_and_backlog(old, 10_000, START + 1.0, START) == ([], 10_000 / LATENCY_SAMPLING)
    assert old.reads == 0
    new = _Section([START + i for i in range(10_000)])
    samples, backlog = new_and_backlog(new, 10_000, START + 20_000.0, START)
    assert backlog == 0 and len(samples) == 16 and new.reads == 17  # the first record, then the 16 strata


def test_the_boundary_is_found_by_bisection():
    section = _mixed(100_000, 7)
    assert first_new(section, 100_007, START) == 100_000
    assert section.reads <= 18
    assert first_new(_mixed(0, 5), 5, START) == 0 and first_new(_mixed(5, 0), 5, START) == 5
