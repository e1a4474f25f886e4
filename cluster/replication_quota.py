"""Replication throttles (Kafka's ReplicationQuotaManager, one for each side of replication).

`kafka-reassign-partitions.sh --throttle` and operators set them with configs: a byte rate per
broker (`leader.replication.throttled.rate`, `follower.replication.throttled.rate`: dynamic
broker configs of that broker, else the cluster-wide default) and, per topic, which replicas it
applies to (`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
``*`` or ``partition:broker`` entries; a broker takes the entries naming it).

As in Kafka, only replicas that are not in sync are held back: a leader answers a throttled
partition's fetch from an out-of-sync follower with no records while the leader-side rate is
over its bound, and a follower leaves its throttled out-of-sync partitions out of its fetches
while the follower-side rate is; the bytes of throttled partitions are counted after each
fetch. The rate is measured as Kafka measures it (replication.quota.window.num windows of
replication.quota.window.size.seconds).
"""

from __future__ import annotations

import time
from typing import Any

from ..kraft.image import RESOURCE_BROKER, RESOURCE_TOPIC
from ..quota.sampled_rate import SampledRate

LEADER = "leader"
FOLLOWER = "follower"
#: Kafka's replication.quota.window.num / replication.quota.window.size.seconds defaults.
WINDOW_NUM = 11
WINDOW_SIZE_S = 1
ALL = "*"


def parse_throttled_replicas(value: str | None, broker_id: int) -> set[int] | str:
    """The partitions a topic's `*.replication.throttled.replicas` value throttles on `broker_id`
    (Kafka's TopicConfigHandler.parseThrottledPartitions): ALL, or a set of partition ids."""
    value = (value or "").strip()
    if value == ALL:
        return ALL
    out: set[int] = set()
    for entry in value.split(","):
        partition, _, broker = entry.strip().partition(":")
        if broker.strip().isdigit() and partition.strip().isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return out


class ReplicationQuotaManager:
    """The throttle of one side of replication on this broker."""

    def __init__(self, side: str, broker_id: int, samples: int = WINDOW_NUM, window_s: int = WINDOW_SIZE_S) -> None:
        self.side = side
        self.broker_id = broker_id
        self.rate = SampledRate(samples, window_s * 1000)
        #: topic -> ALL or the throttled partition ids
        self.throttled: dict[str, set[int] | str] = {}
        #: bytes of throttled partitions counted, and times a throttled partition was held back
        self.recorded_bytes = 0
        self.held_back = 0

    @property
    def bound(self) -> float | None:
        return self.rate.bound

    def update(self, image: Any) -> None:
        """Take the rate and the throttled replicas from the committed metadata."""
        key = f"{self.side}.replication.throttled.rate"
        own = image.configs.get((RESOURCE_BROKER, str(self.broker_id)), {})
        default = image.configs.get((RESOURCE_BROKER, ""), {})
        value = own.get(key, default.get(key))
        self.rate.bound = float(value) if value not in (None, "") else None
        prop = f"{self.side}.replication.throttled.replicas"
        throttled: dict[str, set[int] | str] = {}
        for (rtype, name), configs in image.configs.items():
            if rtype == RESOURCE_TOPIC and configs.get(prop):
                parsed = parse_throttled_replicas(configs[prop], self.broker_id)
                if parsed:
                    throttled[name] = parsed
        self.throttled = throttled

    def is_throttled(self, topic: str, partition: int) -> bool:
        marked = self.throttled.get(topic)
        return marked is not None and (marked == ALL or partition in marked)

    def is_quota_exceeded(self) -> bool:
        """Whether the measured rate is over the bound now (Kafka's sensor.checkQuotas)."""
        if self.rate.bound is None:
            return False
        return self.rate.measure(_now_ms()) > self.rate.bound

    def record(self, size: int) -> None:
        if size:
            self.recorded_bytes += size
            self.rate.record(size, _now_ms(), check=False)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
