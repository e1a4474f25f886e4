"""Replication throttles (cluster.replication_quota): which replicas, what rate, when held back."""

from __future__ import annotations

from odradek.cluster.replication_quota import (
    ALL,
    FOLLOWER,
    LEADER,
    ReplicationQuotaManager,
    parse_throttled_replicas,
)
from odradek.kraft.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage


def test_a_broker_takes_the_entries_that_name_it() -> None:
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == {0, 2}
    assert parse_throttled_replicas("0:1,1:2", 3) == set()
    assert parse_throttled_replicas(" * ", 7) == ALL
    assert parse_throttled_replicas("", 1) == set()
    assert parse_throttled_replicas("x:1,0:y,3:1", 1) == {3}


def _image(**configs: dict[str, str]) -> MetadataImage:
    image = MetadataImage()
    for key, values in configs.items():
        rtype, _, name = key.partition("_")
        image.configs[(RESOURCE_BROKER if rtype == "broker" else RESOURCE_TOPIC, name)] = values
    return image


def test_rate_of_the_broker_else_the_cluster_default() -> None:
    quota = ReplicationQuotaManager(LEADER, 2)
    quota.update(_image(**{"broker_": {"leader.replication.throttled.rate": "1000"}}))
    assert quota.bound == 1000
    quota.update(_image(**{"broker_": {"leader.replication.throttled.rate": "1000"},
                           "broker_2": {"leader.replication.throttled.rate": "50"}}))
    assert quota.bound == 50
    quota.update(_image(**{"broker_3": {"leader.replication.throttled.rate": "50"}}))
    assert quota.bound is None and not quota.is_quota_exceeded()


def test_only_throttled_partitions_count_and_the_rate_decides() -> None:
    quota = ReplicationQuotaManager(FOLLOWER, 1, samples=11, window_s=1)
    quota.update(_image(**{"broker_1": {"follower.replication.throttled.rate": "1000"},
                           "topic_t": {"follower.replication.throttled.replicas": "0:1,1:2"},
                           "topic_u": {"leader.replication.throttled.replicas": "*"}}))
    assert quota.is_throttled("t", 0) and not quota.is_throttled("t", 1) and not quota.is_throttled("u", 0)
    assert not quota.is_quota_exceeded()
    # ten windows' worth of the bound at once is over it (the rate spans at least ten windows)
    quota.record(10_000 + 1)
    assert quota.is_quota_exceeded() and quota.recorded_bytes == 10_001
