"""``controller_mutation_rate``: partitions created or deleted per second (KIP-599), as Kafka enforces it.

Kafka's ControllerMutationQuotaManager keeps a token bucket per client (the same user/client-id
resolution as the other client quotas): it refills at the quota's rate up to a burst of
``quota.window.num * quota.window.size.seconds * rate`` tokens and starts full. CreateTopics,
CreatePartitions and DeleteTopics take one token per partition they create or delete, topic by topic:

* **strict** (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is below zero; a topic taken with tokens left may take it
  below zero (the first mutation over the quota passes, those after it wait);
* **permissive** (older versions): every topic is taken; a bucket left below zero throttles.

The response's ``throttle_time_ms`` is the time the bucket needs to climb back to zero, and the
connection is muted for it like any throttled response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .client_quota_manager import ClientQuotaManager, ImageEntity

QUOTA_KEY = "controller_mutation_rate"
#: Versions from which each API's quota is strict (Kafka's ControllerApis).
CREATE_TOPICS_STRICT_SINCE = 6
CREATE_PARTITIONS_STRICT_SINCE = 3
DELETE_TOPICS_STRICT_SINCE = 5
THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class TokenBucket:
    """Kafka's ``metrics.stats.TokenBucket`` with its quota: tokens left, refilled at ``bound`` a second."""

    __slots__ = ("samples", "window_ms", "bound", "tokens", "last_update_ms")

    def __init__(self, samples: int, window_ms: int, bound: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.bound = bound
        # empty at time 0: the first refill fills it to the burst
        self.tokens = 0.0
        self.last_update_ms = 0

    @property
    def burst(self) -> float:
        return self.samples * self.window_ms / 1000.0 * self.bound

    def _refill(self, now_ms: int) -> None:
        self.tokens = min(self.burst, self.tokens + self.bound * (now_ms - self.last_update_ms) / 1000.0)
        self.last_update_ms = now_ms

    def measure(self, now_ms: int) -> float:
        self._refill(now_ms)
        return self.tokens

    def record(self, value: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens = min(self.burst, self.tokens - value)

    def throttle_time_ms(self) -> int:
        """Time for the bucket to climb back to zero (ControllerMutationQuotaManager.throttleTimeMs)."""
        return round(-self.tokens / self.bound * 1000) if self.tokens < 0 else 0


class ThrottlingQuotaExceeded(Exception):
    """A strict quota refused a mutation; ``throttle_time_ms`` says how long the client should wait."""

    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__(THROTTLED_MESSAGE)
        self.throttle_time_ms = throttle_time_ms


class ControllerMutationQuotaManager(ClientQuotaManager):
    """Token buckets of clients with a ``controller_mutation_rate`` quota."""

    def __init__(self, samples: int, window_ms: int) -> None:
        super().__init__(QUOTA_KEY, samples, window_ms)
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def update(self, quotas: Mapping[ImageEntity, Mapping[str, float]]) -> None:
        super().update(quotas)
        for tags, bucket in list(self.buckets.items()):
            bound = self.quota_limit(tags)
            if bound is None:
                del self.buckets[tags]
            else:
                bucket.bound = bound  # the tokens stay; the next refill caps them to the new burst

    def bucket(self, user: str, client_id: str) -> TokenBucket | None:
        """The client's bucket, None when no controller_mutation_rate applies to it."""
        if not self.enabled:
            return None
        tags = self.metric_tags(user, client_id)
        bucket = self.buckets.get(tags)
        if bucket is None:
            bound = self.quota_limit(tags)
            if bound is None:
                return None
            bucket = self.buckets[tags] = TokenBucket(self.samples, self.window_ms, bound)
        return bucket


class MutationQuota:
    """One request's view of its client's bucket (Kafka's Strict/PermissiveControllerMutationQuota)."""

    def __init__(self, bucket: TokenBucket | None, strict: bool, clock: Any) -> None:
        self.bucket = bucket
        self.strict = strict
        self.clock = clock
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, partitions: int) -> None:
        """Take `partitions` tokens; raises :class:`ThrottlingQuotaExceeded` when a strict quota refuses."""
        if self.bucket is None:
            return
        now = self.clock()
        if self.strict:
            if self.bucket.measure(now) < 0:
                self._throttled(now)
                raise ThrottlingQuotaExceeded(self._throttle_ms)
            self.bucket.record(partitions, now)
        else:
            self.bucket.record(partitions, now)
            if self.bucket.tokens < 0:
                self._throttled(now)

    def _throttled(self, now_ms: int) -> None:
        self._throttle_ms = self.bucket.throttle_time_ms() if self.bucket is not None else 0
        self._recorded_ms = now_ms

    def throttle_time_ms(self) -> int:
        """The throttle time recorded, less the time gone by since (the response may come later)."""
        if not self._throttle_ms:
            return 0
        return max(0, self._throttle_ms - (self.clock() - self._recorded_ms))
