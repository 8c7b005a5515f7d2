"""transcoder.evaluate.live_windows: live scoring's windows, captured from consumed batches (no broker)."""

from __future__ import annotations

from dataclasses import dataclass

from transcoder.evaluate.live_windows import Sampler, SampleTarget, Window, take


@dataclass
class Msg:
    """The accessors of confluent_kafka.Message the sampler reads."""

    t: str
    p: int
    o: int
    v: bytes | None = b"v" * 10
    k: bytes | None = b"kk"
    h: list | None = None
    ts: tuple[int, int] = (1, 1000)
    err: object = None

    def topic(self): return self.t
    def partition(self): return self.p
    def offset(self): return self.o
    def value(self): return self.v
    def key(self): return self.k
    def headers(self): return self.h
    def timestamp(self): return self.ts
    def error(self): return self.err


def msgs(topic: str, partition: int, offsets) -> list[Msg]:
    return [Msg(topic, partition, o) for o in offsets]


def target(limit: int = 1000, source: str = "src") -> SampleTarget:
    return SampleTarget("src.zstd", source, limit)


def test_a_window_takes_consecutive_records_of_one_partition_as_the_writer_sees_them():
    w = Window(target())
    batch = [Msg("src", 1, 7, v=b"abc", k=None, h=[("h", b"12"), ("n", None)], ts=(1, 5)),
             Msg("src", 0, 3), Msg("other", 1, 8), Msg("src", 1, 8, v=None, ts=(0, -1)), Msg("src", 1, 9, err="EOF")]
    assert not take(w, batch, 0)
    assert w.partition == 1  # the first partition present after the one last sampled (0)
    assert (w.first_offset, w.last_offset) == (7, 8)
    # (key, value, headers, timestamp) as evaluate.measure takes them; no timestamp: 0, as the writer produces it
    assert w.records == [(None, b"abc", (("h", b"12"), ("n", None)), 5), (b"kk", None, (), 0)]
    assert w.nbytes == 3 + 1 + 2 + 1 + 2


def test_a_window_stops_before_the_record_that_would_take_it_past_its_limit():
    w = Window(target(limit=36))  # 12 record bytes each (key 2 + value 10)
    assert not take(w, msgs("src", 0, [0, 1]))
    assert take(w, msgs("src", 0, [2, 3, 4]))  # full at exactly the limit
    assert (w.first_offset, w.last_offset, w.nbytes) == (0, 2, 36)
    w = Window(target(limit=30))
    assert take(w, msgs("src", 0, [0, 1, 2, 3]))
    assert (w.last_offset, w.nbytes) == (1, 24)  # the third would make 36 > 30


def test_a_record_larger_than_the_limit_is_taken_alone():
    w = Window(target(limit=5))
    assert take(w, msgs("src", 0, [4, 5]))
    assert (w.first_offset, w.last_offset, len(w.records)) == (4, 4, 1)


def test_offsets_already_taken_are_skipped_after_a_rebalance():
    w = Window(target())
    take(w, msgs("src", 0, [10, 11, 12]))
    take(w, msgs("src", 0, [11, 12, 13]))  # delivered again from the last commit
    assert [w.first_offset, w.last_offset, len(w.records)] == [10, 13, 4]


def test_binding_rotates_over_the_partitions_present():
    batch = msgs("src", 0, [1]) + msgs("src", 2, [1]) + msgs("src", 3, [1])
    for last, expected in [(-1, 0), (0, 2), (2, 3), (3, 0), (1, 2)]:
        w = Window(target())
        take(w, batch, last)
        assert w.partition == expected, last
    w = Window(target())
    assert not take(w, msgs("other", 0, [1]) + [Msg("src", 0, 1, err="EOF")])
    assert w.partition is None and not w.records  # nothing of its source yet: still unbound


class Collector:
    def __init__(self, busy: set[str] | None = None) -> None:
        self.submitted: list[Window] = []
        self.failures: list[tuple[Window, BaseException]] = []
        self.busy = busy or set()

    def sampler(self, targets, interval=10.0, now=100.0) -> Sampler:
        return Sampler(targets, interval, submit=self.submitted.append, wanted=lambda d: d not in self.busy,
                       failed=lambda w, e: self.failures.append((w, e)), now=now)


def test_sampler_opens_windows_every_interval_and_captures_only_while_one_is_open():
    c = Collector()
    s = c.sampler([target(limit=24)])
    assert s.due == 100.0 and not s.capturing  # the first windows open at the first turn of the loop
    s.tick(100.0)
    assert s.capturing and s.due == 110.0
    s.offer(msgs("src", 0, [0]))
    assert s.capturing and not c.submitted
    s.offer(msgs("src", 0, [1, 2]))
    assert not s.capturing  # full: scored; nothing more is captured until the next interval
    assert [(w.partition, w.first_offset, w.last_offset) for w in c.submitted] == [(0, 0, 1)]
    s.tick(110.0)
    s.offer(msgs("src", 0, [3]) + msgs("src", 1, [0, 1]))
    assert [(w.partition, w.first_offset, w.last_offset) for w in c.submitted][1:] == [(1, 0, 1)]  # rotated


def test_a_window_left_open_is_scored_as_it_is_at_the_next_interval():
    c = Collector()
    s = c.sampler([target(limit=10_000)])
    s.tick(100.0)
    s.offer(msgs("src", 0, [5, 6]))
    s.tick(110.0)
    assert [(w.first_offset, w.last_offset) for w in c.submitted] == [(5, 6)]
    s.tick(120.0)  # the next window saw no record: nothing to score
    assert len(c.submitted) == 1 and s.capturing


def test_no_window_while_the_scorer_still_holds_one_of_the_destination():
    c = Collector(busy={"src.zstd"})
    s = c.sampler([target(), SampleTarget("src.lz4", "src", 1000)])
    s.tick(100.0)
    s.offer(msgs("src", 0, [1]))
    s.tick(110.0)
    assert [w.target.destination for w in c.submitted] == ["src.lz4"]


def test_a_capture_error_is_reported_and_drops_the_window_never_raised():
    c = Collector()
    s = c.sampler([target()])
    s.tick(100.0)
    bad = Msg("src", 0, 1, v=object())  # len() fails
    s.offer([bad])
    assert not s.capturing and not c.submitted
    ((w, exc),) = c.failures
    assert w.target.destination == "src.zstd" and isinstance(exc, TypeError)


def test_a_submit_error_is_reported():
    def submit(w):
        raise RuntimeError("boom")

    failures = []
    s = Sampler([target(limit=1)], 1.0, submit=submit, wanted=lambda d: True,
                failed=lambda w, e: failures.append(str(e)), now=0.0)
    s.tick(0.0)
    s.offer(msgs("src", 0, [1]))
    assert failures == ["boom"] and not s.capturing
