"""Per-topic log configuration (Kafka's LogConfig) with Kafka's 3.9 defaults.

Build it from Kafka config names: `LogConfig.from_props({"segment.bytes": "65536"})` for topic
configs, `LogConfig.from_broker_props(server_properties)` for the broker-wide `log.*` defaults, and
`base.with_overrides(topic_props)` for a topic on top of broker defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1

# topic config name -> field name
TOPIC_CONFIG_NAMES: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "max.message.bytes": "max_message_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "compression.type": "compression_type",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "preallocate": "preallocate",
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}

# broker (server.properties) name -> topic config name (Kafka's synonyms)
BROKER_CONFIG_NAMES: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "message.max.bytes": "max.message.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "compression.type": "compression.type",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
}
# Lower-precedence broker synonyms (Kafka: log.roll.ms > log.roll.hours, log.retention.ms > .minutes > .hours).
_BROKER_HOURS = {
    "log.roll.hours": ("segment.ms", 3_600_000),
    "log.roll.jitter.hours": ("segment.jitter.ms", 3_600_000),
    "log.retention.hours": ("retention.ms", 3_600_000),
    "log.retention.minutes": ("retention.ms", 60_000),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log. Field defaults are Kafka 3.9's topic defaults."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12  # 1048588, Kafka's message.max.bytes default
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with its own clock (message.timestamp.type=LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Config from topic-level Kafka names (`segment.bytes`, ...) on top of `base` (or the defaults).

        Unknown names are ignored so a whole topic config map can be passed.
        """
        return (base or cls()).with_overrides(props)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """Broker-wide defaults from server.properties names (`log.segment.bytes`, `log.roll.hours`, ...)."""
        topic: dict[str, Any] = {}
        for name, (topic_name, mult) in _BROKER_HOURS.items():
            if name in props and topic_name not in topic:
                topic[topic_name] = int(props[name]) * mult
        # more specific names win (log.roll.ms over log.roll.hours, retention .ms over .minutes over .hours)
        if "log.retention.minutes" in props:
            topic["retention.ms"] = int(props["log.retention.minutes"]) * 60_000
        for name, topic_name in BROKER_CONFIG_NAMES.items():
            if name in props:
                topic[topic_name] = props[name]
        return cls().with_overrides(topic)

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """A copy with topic-level Kafka config names applied (values may be strings, as in Kafka)."""
        changes: dict[str, Any] = {}
        for name, value in props.items():
            field = TOPIC_CONFIG_NAMES.get(name)
            if field is None:
                continue
            changes[field] = _convert(field, value)
        return dataclasses.replace(self, **changes) if changes else self

    def to_props(self) -> dict[str, str]:
        """Topic-level Kafka names and string values (for DescribeConfigs and the like)."""
        out = {}
        for name, field in TOPIC_CONFIG_NAMES.items():
            value = getattr(self, field)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


_BOOL_FIELDS = {"preallocate", "unclean_leader_election_enable"}
_STR_FIELDS = {"message_timestamp_type", "cleanup_policy", "compression_type"}


def _convert(field: str, value: Any) -> Any:
    if field in _BOOL_FIELDS:
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"
    if field in _STR_FIELDS:
        return str(value).strip()
    if field == "min_cleanable_dirty_ratio":
        return float(value)
    return int(value)
