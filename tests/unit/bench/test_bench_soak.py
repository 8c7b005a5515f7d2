"""bench.soak's verdict: the RSS slope after warm-up."""

from __future__ import annotations

import pytest

from bench.soak import RssSample, trend


def test_a_flat_rss_after_warm_up_has_no_slope_whatever_the_warm_up_did() -> None:
    samples = [RssSample(0, 50_000_000, 0), RssSample(60, 90_000_000, 1)]
    samples += [RssSample(300 + 10 * i, 100_000_000 + (1_000_000 if i % 2 else 0), i) for i in range(60)]
    t = trend(samples, warmup_s=300)
    assert t.samples == 60
    assert t.warm_rss_mb == 100.0 and t.peak_rss_mb == 101.0
    assert abs(t.slope_mb_per_10min) < 0.1


def test_a_steady_creep_is_given_per_ten_minutes() -> None:
    samples = [RssSample(600 + 10 * i, 100_000_000 + 5_000 * 10 * i, i) for i in range(100)]  # 5 kB/s
    assert trend(samples, warmup_s=600).slope_mb_per_10min == pytest.approx(3.0)


def test_too_few_samples_after_warm_up_say_so() -> None:
    with pytest.raises(ValueError, match="1 samples after 300 s"):
        trend([RssSample(0, 1, 0), RssSample(400, 1, 0)], warmup_s=300)
