"""transcoder.evaluate.live_scoring: the CPU-share pause, scoring a window with evaluate's measurement, the figures in
the metrics and /status, errors reported and never raised (no broker)."""

from __future__ import annotations

import threading
import time

import pytest
from structlog.testing import capture_logs

from transcoder.config.model import Destination, EvaluateConfig
from transcoder.evaluate import live_scoring as scoring
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.live_scoring import Scorer, cpu_share_wait, score
from transcoder.evaluate.live_windows import SampleTarget, Window
from transcoder.evaluate.measure import fold, measure_partition
from transcoder.metrics.registry import Metrics
from transcoder.metrics.status import candidates_document


@pytest.mark.parametrize(("cpu", "share", "wait"), [
    (1.0, 0.05, 19.0), (0.2, 0.5, 0.2), (0.3, 0.25, 0.9), (2.0, 1.0, 0.0), (0.0, 0.05, 0.0), (-1.0, 0.5, 0.0),
])
def test_cpu_share_wait(cpu, share, wait):
    assert cpu_share_wait(cpu, share) == pytest.approx(wait)


@pytest.mark.parametrize("share", [0.01, 0.05, 0.3, 0.99])
@pytest.mark.parametrize("cpu", [0.001, 0.5, 7.0])
def test_the_wait_keeps_the_share_of_cpu_over_work_and_pause(cpu, share):
    assert cpu / (cpu + cpu_share_wait(cpu, share)) == pytest.approx(share)


def records(n: int = 3000, partition_seed: int = 0) -> list:
    out = []
    for i in range(n):
        line = (f'10.0.{i % 7}.{i % 13} - - [01/Jan/2026:00:00:{i % 60:02d}] "GET /api/v{i % 3}/items/{i * 7919 % 1000}'
                f' HTTP/1.1" {200 if i % 11 else 404} {i * 31 % 5000} "-" "curl/8.{i % 5}"')
        out.append((f"10.0.{i % 7}".encode(), line.encode(), (("trace", f"{i:08x}".encode()),) if i % 2 else (),
                    1_700_000_000_000 + i * 3 + partition_seed))
    return out


DEST = Destination(codec="lz4", batch={"max_bytes": 65536, "max_records": 500})


def test_score_is_evaluates_measurement_of_the_window_at_the_destinations_batching():
    window = records()
    cands = [Setting("zstd", 9), Setting("gzip", None), Setting("lz4", None)]  # lz4: the current one, measured once
    current, got, batches = score(window, DEST, cands)
    cells = [Cell(s, 65536) for s in (Setting("lz4", None), Setting("zstd", 9), Setting("gzip", None))]
    expected = fold(measure_partition(window, cells, repeats=1, max_records=500), cells)
    assert (current.codec, current.level, current.ratio) == ("lz4", None, expected[0].ratio)
    assert [(c.codec, c.level, c.ratio) for c in got] == [("zstd", 9, expected[1].ratio),
                                                          ("gzip", None, expected[2].ratio),
                                                          ("lz4", None, expected[0].ratio)]
    assert batches == expected[0].batches > 1
    assert got[0].ratio > current.ratio > 1
    assert all(c.compress_cpu_s_per_1m > 0 and c.decompress_cpu_s_per_1m > 0 for c in [current, *got])


def test_current_none_scores_a_ratio_of_one_and_no_cpu():
    current, (zstd,), _ = score(records(500), Destination(codec="none"), [Setting("zstd", None)])
    assert (current.ratio, current.compress_cpu_s_per_1m, current.decompress_cpu_s_per_1m) == (1.0, 0.0, 0.0)
    assert zstd.ratio > 1


def make_scorer(**evaluate) -> tuple[Scorer, Metrics]:
    metrics = Metrics()
    conf = EvaluateConfig(candidates=[{"codec": "zstd", "level": 9}, {"codec": "gzip"}], **evaluate)
    return Scorer(conf, metrics, clock=lambda: 1234.5), metrics


def window_of(rs: list, dest: str = "t.lz4", partition: int = 2, first: int = 100) -> Window:
    return Window(SampleTarget(dest, "t", 1 << 20), partition=partition, first_offset=first,
                  last_offset=first + len(rs) - 1, records=rs, nbytes=sum(len(k) + len(v) for k, v, _, _ in rs))


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_scored_window_goes_to_the_metrics_and_status():
    scorer, metrics = make_scorer()
    sampler = scorer.sampler({"t.lz4": ("t", DEST)}, now=0.0)
    assert [(t.destination, t.source, t.limit) for t in sampler.targets] == [("t.lz4", "t", 65536)]
    assert candidates_document(scorer.snapshot()["t.lz4"])["sample"] is None  # known, not yet scored
    rs = records()
    scores = scorer.score_window(window_of(rs))
    assert scores is not None
    assert (scores.source, scores.partition, scores.first_offset, scores.last_offset, scores.records,
            scores.scored_at) == ("t", 2, 100, 100 + len(rs) - 1, len(rs), 1234.5)
    zstd, gzip = scores.candidates
    assert value(metrics, "transcoder_candidate_ratio", destination="t.lz4", codec="zstd", level="9") == zstd.ratio
    assert value(metrics, "transcoder_candidate_ratio", destination="t.lz4", codec="gzip", level="") == gzip.ratio
    assert value(metrics, "transcoder_candidate_current_ratio", destination="t.lz4", codec="lz4",
                 level="") == scores.current.ratio
    for direction, attr in (("compress", "compress_cpu_s_per_1m"), ("decompress", "decompress_cpu_s_per_1m")):
        assert value(metrics, "transcoder_candidate_cpu_seconds_per_million", destination="t.lz4", codec="zstd",
                     level="9", direction=direction) == getattr(zstd, attr)
        assert value(metrics, "transcoder_candidate_current_cpu_seconds_per_million", destination="t.lz4",
                     codec="lz4", level="", direction=direction) == getattr(scores.current, attr)
    assert value(metrics, "transcoder_candidate_samples_total", destination="t.lz4") == 1
    assert value(metrics, "transcoder_candidate_sampled_records_total", destination="t.lz4") == len(rs)
    doc = candidates_document(scorer.snapshot()["t.lz4"])
    assert doc["samples"] == 1 and doc["sampled_records"] == len(rs) and doc["errors"] == 0
    assert doc["sample"]["partition"] == 2 and doc["sample"]["first_offset"] == 100
    assert doc["current"]["label"] == "lz4" and doc["current"]["ratio"] == scores.current.ratio
    assert [c["label"] for c in doc["candidates"]] == ["zstd-9", "gzip"]
    assert doc["candidates"][0]["sentence"].startswith(f"zstd-9 would store this topic "
                                                       f"{zstd.ratio / scores.current.ratio:.2f}× smaller for ")


def test_a_scoring_error_is_logged_with_where_counted_and_shown_never_raised(monkeypatch):
    scorer, metrics = make_scorer()
    scorer.sampler({"t.lz4": ("t", DEST)}, now=0.0)
    scorer.score_window(window_of(records(200)))

    def broken(*a, **kw):
        raise ValueError("bad batch")

    monkeypatch.setattr(scoring, "measure_partition", broken)
    with capture_logs() as logs:
        assert scorer.score_window(window_of(records(200), first=5000)) is None
    (entry,) = [e for e in logs if e["event"] == "candidate_scoring_failed"]
    assert entry["log_level"] == "error"
    assert (entry["destination"], entry["source"], entry["partition"], entry["first_offset"],
            entry["last_offset"]) == ("t.lz4", "t", 2, 5000, 5199)
    assert entry["error"] == "ValueError: bad batch" and entry["stage"] == "scoring"
    assert value(metrics, "transcoder_candidate_errors_total", destination="t.lz4") == 1
    doc = candidates_document(scorer.snapshot()["t.lz4"])
    assert doc["errors"] == 1 and doc["last_error"] == "scoring of t [2] offsets 5000-5199: ValueError: bad batch"
    assert doc["samples"] == 1 and doc["sample"]["first_offset"] == 100  # the last good figures stay


def test_a_capture_error_is_counted_for_its_destination():
    scorer, metrics = make_scorer()
    with capture_logs() as logs:
        scorer.capture_failed(Window(SampleTarget("t.lz4", "t", 10)), TypeError("odd record"))
    assert [e["stage"] for e in logs if e["event"] == "candidate_scoring_failed"] == ["capture"]
    assert value(metrics, "transcoder_candidate_errors_total", destination="t.lz4") == 1


class RecordingStop(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)  # type: ignore[arg-type]
        return super().wait(0)  # do not actually pause the test


def test_the_thread_scores_the_latest_window_per_destination_and_pauses_for_its_cpu_share():
    scorer, metrics = make_scorer(max_cpu_share=0.25)
    scorer.sampler({"t.lz4": ("t", DEST)}, now=0.0)
    scorer.submit(window_of(records(100), first=0))
    assert not scorer.wants("t.lz4")  # one waits: the lane captures no other meanwhile
    scorer.submit(window_of(records(300), first=1000))  # replaces the older one
    stop = RecordingStop()
    t = threading.Thread(target=scorer.run, args=(stop,), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while scorer.snapshot()["t.lz4"].samples < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stop.set()
    with scorer._cond:
        scorer._cond.notify_all()
    t.join(10)
    assert not t.is_alive()
    st = scorer.snapshot()["t.lz4"]
    assert st.samples == 1 and st.latest is not None and st.latest.first_offset == 1000
    assert scorer.wants("t.lz4")
    assert scorer.cpu_seconds > 0
    assert value(metrics, "transcoder_candidate_scoring_cpu_seconds_total") == pytest.approx(scorer.cpu_seconds)
    assert stop.waits[0] == pytest.approx(cpu_share_wait(scorer.cpu_seconds, 0.25))
