"""Kafka's sampled rate (``metrics.stats.Rate`` over a ``WindowedSum``) with an upper-bound quota.

A rate is kept in ``samples`` windows of ``window_ms`` each (Kafka's quota.window.num and
quota.window.size.seconds), plus one extra window that may overlap the start of the measured span.
The measured rate is the sum of the live windows divided by the elapsed span, which counts as at
least ``samples - 1`` full windows: a client cannot burst at many times its quota just because the
windows are still empty. :meth:`SampledRate.record` returns how far the rate is over the bound so
that the caller can throttle (Kafka's ``Sensor.record`` raising ``QuotaViolationException``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


@dataclass(frozen=True, slots=True)
class QuotaViolation:
    """A recorded value took the rate over its bound (Kafka's QuotaViolationException)."""

    value: float
    bound: float
    window_ms: int

    def throttle_time_ms(self) -> int:
        """How long the client must wait for the rate to come back to the bound (QuotaUtils.throttleTime)."""
        return round((self.value - self.bound) / self.bound * self.window_ms)


class SampledRate:
    """A per-second rate over ``samples`` windows of ``window_ms``, with an optional upper bound."""

    __slots__ = ("samples", "window_ms", "bound", "_samples", "_current", "last_record_ms")

    def __init__(self, samples: int, window_ms: int, bound: float | None = None) -> None:
        self.samples = max(int(samples), 1)
        self.window_ms = max(int(window_ms), 1)
        self.bound = bound
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms = 0

    # -------------------------------------------------------------- SampledStat

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # one extra window beside `samples`: the one overlapping the start of the measured span
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    # -------------------------------------------------------------- Rate

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over (Rate.windowSize): at least samples - 1 full windows."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at `now_ms`."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def record(self, value: float, now_ms: int, check: bool = True) -> QuotaViolation | None:
        """Add `value` at `now_ms`; with `check`, the violation if the rate is now over the bound."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms
        self.last_record_ms = now_ms
        if not check or self.bound is None:
            return None
        rate = self.measure(now_ms)
        if rate <= self.bound:
            return None
        return QuotaViolation(rate, self.bound, self.window_size_ms(now_ms))
