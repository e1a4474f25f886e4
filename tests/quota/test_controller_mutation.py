"""controller_mutation_rate: Kafka's token bucket, strict and permissive quotas (KIP-599)."""

from __future__ import annotations

import pytest

from odradek.quota.controller_mutation import (
    ControllerMutationQuotaManager,
    MutationQuota,
    ThrottlingQuotaExceeded,
    TokenBucket,
)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def manager(rate: float = 2.0) -> ControllerMutationQuotaManager:
    m = ControllerMutationQuotaManager(11, 1000)
    m.update({(("client-id", None),): {"controller_mutation_rate": rate}})
    return m


def test_a_bucket_starts_full_and_refills_at_the_rate() -> None:
    bucket = TokenBucket(11, 1000, 2.0)
    assert bucket.measure(100_000) == 22.0  # burst: samples * window * rate
    bucket.record(30, 100_000)
    assert bucket.tokens == -8.0 and bucket.throttle_time_ms() == 4000
    assert bucket.measure(101_000) == -6.0
    assert bucket.measure(160_000) == 22.0


def test_strict_lets_the_first_mutation_over_the_quota_pass_and_refuses_the_next() -> None:
    clock = Clock()
    m = manager()
    quota = MutationQuota(m.bucket("alice", "c1"), strict=True, clock=clock)
    quota.record(20)
    quota.record(10)  # 2 tokens left: taken, the bucket goes to -8
    assert quota.throttle_time_ms() == 0
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        quota.record(1)
    assert refused.value.throttle_time_ms == 4000 and str(refused.value) == "The throttling quota has been exceeded."
    clock.now += 1500
    assert quota.throttle_time_ms() == 2500  # the time gone by since it was recorded is taken off
    # a later request of the same client shares the bucket, and passes once it is back at zero
    clock.now += 2500
    again = MutationQuota(m.bucket("alice", "c1"), strict=True, clock=clock)
    again.record(1)
    assert again.throttle_time_ms() == 0


def test_permissive_takes_every_mutation_and_throttles() -> None:
    clock = Clock()
    m = manager()
    quota = MutationQuota(m.bucket("bob", "c2"), strict=False, clock=clock)
    quota.record(20)
    assert quota.throttle_time_ms() == 0
    quota.record(6)
    assert quota.throttle_time_ms() == 2000


def test_no_quota_no_bucket_and_quota_changes_keep_the_tokens() -> None:
    m = ControllerMutationQuotaManager(11, 1000)
    m.update({(("client-id", None),): {"producer_byte_rate": 10.0}})
    assert m.bucket("alice", "c1") is None
    MutationQuota(None, strict=True, clock=Clock()).record(10**6)  # nothing to enforce
    m = manager()
    bucket = m.bucket("alice", "c1")
    assert bucket is not None
    bucket.record(30, 100_000)
    m.update({(("client-id", None),): {"controller_mutation_rate": 4.0}})
    assert m.bucket("alice", "c1") is bucket and bucket.bound == 4.0 and bucket.tokens == -8.0
    m.update({})
    assert m.bucket("alice", "c1") is None and m.buckets == {}
