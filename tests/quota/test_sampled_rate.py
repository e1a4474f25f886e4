"""Kafka's sampled rate and the throttle time it gives (metrics.stats.Rate, QuotaUtils.throttleTime)."""

from __future__ import annotations

from odradek.quota.sampled_rate import SampledRate


def test_an_empty_span_counts_as_samples_minus_one_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000, bound=100.0)
    assert rate.record(500, now_ms=0) is None  # 500 bytes over a 10 s span: 50/s
    assert rate.measure(0) == 50.0
    assert rate.window_size_ms(0) == 10_000


def test_a_violation_throttles_until_the_rate_is_back_at_the_bound() -> None:
    rate = SampledRate(samples=11, window_ms=1000, bound=100.0)
    violation = rate.record(3000, now_ms=0)
    assert violation is not None
    assert violation.value == 300.0 and violation.window_ms == 10_000
    # (300 - 100) / 100 * 10 s: the 3000 bytes fit in the quota after 30 s, 20 s from now
    assert violation.throttle_time_ms() == 20_000


def test_windows_roll_over_and_expire() -> None:
    rate = SampledRate(samples=3, window_ms=1000)
    for t in range(0, 3000, 100):
        rate.record(10, now_ms=t)
    # 300 bytes in the 3 windows started at 0, 1000, 2000 (span 2.9 s)
    assert abs(rate.measure(2900) - 300 / 2.9) < 1e-9
    # an idle stretch longer than samples * window drops every sample
    assert rate.measure(10_000) == 0.0


def test_a_negative_record_takes_usage_back() -> None:
    rate = SampledRate(samples=11, window_ms=1000, bound=100.0)
    assert rate.record(3000, now_ms=0) is not None
    rate.record(-3000, now_ms=0, check=False)
    assert rate.record(100, now_ms=1) is None
