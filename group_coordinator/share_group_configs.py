"""Group configs (ConfigResource type GROUP, KIP-848/KIP-932): IncrementalAlterConfigs and
DescribeConfigs of a group's settings, stored as ConfigRecords in the metadata log like Kafka 4.4.

The share-partitions read a group's share.* settings from the metadata image
(:meth:`odradek.share_coordinator.partition_manager.SharePartitionManager.setting`); a group
without a setting takes the broker's (``group.share.*``), else Kafka's default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..wire.errors import ErrorCode

log = logging.getLogger(__name__)

GROUP = 32
SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP_CONFIG = 4, 5, 8  # DescribeConfigs ConfigSource
BOOLEAN, STRING, INT = 1, 2, 3  # DescribeConfigs ConfigType


@dataclass(frozen=True)
class GroupConfigDef:
    """A group config: its type, default (the broker setting it falls back to, else a value)
    and the values it takes."""

    config_type: int
    broker_key: str | None
    default: str
    check: Callable[[str], bool]


def _int_at_least(lo: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return int(value) >= lo
        except ValueError:
            return False
    check.at_least = lo  # type: ignore[attr-defined]
    return check


def _one_of(*choices: str) -> Callable[[str], bool]:
    return lambda value: value.strip().lower() in choices


def _reset(value: str) -> bool:
    v = value.strip().lower()
    return v in ("earliest", "latest") or v.startswith("by_duration:")


def _any_int(value: str) -> bool:
    try:
        int(value)
        return True
    except ValueError:
        return False


#: The group configs Kafka 4.4's GroupConfig knows that Odradek checks and applies or keeps.
CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(INT, "group.consumer.session.timeout.ms", "45000",
                                                  _int_at_least(1)),
    "consumer.heartbeat.interval.ms": GroupConfigDef(INT, "group.consumer.heartbeat.interval.ms", "5000",
                                                     _int_at_least(1)),
    "share.session.timeout.ms": GroupConfigDef(INT, "group.share.session.timeout.ms", "45000",
                                               _int_at_least(1)),
    "share.heartbeat.interval.ms": GroupConfigDef(INT, "group.share.heartbeat.interval.ms", "5000",
                                                  _int_at_least(1)),
    "share.record.lock.duration.ms": GroupConfigDef(INT, "group.share.record.lock.duration.ms", "30000",
                                                    _int_at_least(1000)),
    "share.delivery.count.limit": GroupConfigDef(INT, "group.share.delivery.count.limit", "5", _int_at_least(2)),
    "share.partition.max.record.locks": GroupConfigDef(INT, "group.share.partition.max.record.locks", "2000",
                                                       _int_at_least(100)),
    "share.auto.offset.reset": GroupConfigDef(STRING, None, "latest", _reset),
    "share.isolation.level": GroupConfigDef(STRING, None, "read_uncommitted",
                                            _one_of("read_committed", "read_uncommitted")),
    "share.renew.acknowledge.enable": GroupConfigDef(BOOLEAN, None, "true", _one_of("true", "false")),
    "errors.deadletterqueue.topic.name": GroupConfigDef(STRING, None, "", lambda v: True),
    "errors.deadletterqueue.copy.record.enable": GroupConfigDef(BOOLEAN, None, "false", _one_of("true", "false")),
    "streams.session.timeout.ms": GroupConfigDef(INT, "group.streams.session.timeout.ms", "45000", _any_int),
    "streams.heartbeat.interval.ms": GroupConfigDef(INT, "group.streams.heartbeat.interval.ms", "5000", _any_int),
    "streams.num.standby.replicas": GroupConfigDef(INT, "group.streams.num.standby.replicas", "0", _any_int),
}


#: group config -> (broker setting of its least value, Kafka's default, of its greatest, default):
#: Kafka 4.4's GroupConfig.validateValues keeps a group's value inside the broker's bounds
BOUNDS: dict[str, tuple[str, int, str, int]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms", 5000,
                                       "group.consumer.max.heartbeat.interval.ms", 15000),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", 45000,
                                    "group.consumer.max.session.timeout.ms", 60000),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", 5000,
                                    "group.share.max.heartbeat.interval.ms", 15000),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", 45000,
                                 "group.share.max.session.timeout.ms", 60000),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms", 15000,
                                      "group.share.max.record.lock.duration.ms", 60000),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", 2,
                                   "group.share.max.delivery.count.limit", 10),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks", 100,
                                         "group.share.max.partition.max.record.locks", 4000),
}
#: (session config, heartbeat config): the effective session timeout must exceed the interval
SESSION_AND_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                         ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def validate_values(broker: Any, configs: dict[str, str]) -> str | None:
    """Why a group's (merged) configs are refused, as Kafka 4.4's GroupConfig.validate says it
    (INVALID_CONFIG), or None: first each value's own type and least value, then the broker's
    bounds, then session timeout above heartbeat interval."""
    raw = getattr(getattr(broker, "config", None), "raw", {}) or {}
    for key, value in configs.items():
        spec = CONFIGS.get(key)
        if spec is None:
            return f"Unknown group config name: {key}"
        if spec.check(value):
            continue
        least = getattr(spec.check, "at_least", None)
        if least is not None:
            try:
                int(value)
            except ValueError:
                return f"Invalid value {value} for configuration {key}: Not a number of type INT"
            return f"Invalid value {value} for configuration {key}: Value must be at least {least}"
        return f"Invalid value {value} for configuration {key}"
    for key, (lo_key, lo_default, hi_key, hi_default) in BOUNDS.items():
        if key in configs:
            lo, hi = int(raw.get(lo_key, lo_default)), int(raw.get(hi_key, hi_default))
            if not lo <= int(configs[key]) <= hi:
                return f"{key} must be in the range {lo} to {hi} inclusive."
    for session_key, heartbeat_key in SESSION_AND_HEARTBEAT:
        if session_key in configs or heartbeat_key in configs:
            session = int(configs.get(session_key, _default(broker, session_key, CONFIGS[session_key])[1]))
            heartbeat = int(configs.get(heartbeat_key, _default(broker, heartbeat_key, CONFIGS[heartbeat_key])[1]))
            if session <= heartbeat:
                return f"{session_key} must be greater than {heartbeat_key}"
    return None


def group_configs(broker: Any) -> dict[str, dict[str, str]]:
    """Every group with configs: group id -> its configs (from the metadata image)."""
    store = getattr(broker, "metadata_store", None)
    configs = store.image.configs if store is not None else {}
    return {name: dict(values) for (rtype, name), values in configs.items() if rtype == GROUP}


def _default(broker: Any, key: str, spec: GroupConfigDef) -> tuple[str, str, int]:
    """(synonym name, value, source) a group without the config falls back to: the broker's
    setting if configured (STATIC_BROKER_CONFIG), else Kafka's default under the broker's name
    (or the group config's own name when no broker setting backs it)."""
    raw = getattr(getattr(broker, "config", None), "raw", {}) or {}
    if spec.broker_key is not None and spec.broker_key in raw:
        return spec.broker_key, str(raw[spec.broker_key]), SOURCE_STATIC_BROKER
    return spec.broker_key or key, spec.default, SOURCE_DEFAULT


def alter_group_configs(broker: Any, resource: Any, validate_only: bool,
                        compute: Callable[[dict[str, str]], dict[str, str]]) -> tuple[ErrorCode, str | None]:
    """Apply an (incremental) alteration of one group's configs, written as ConfigRecords."""
    from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only on a change

    name = resource.resource_name
    if not name:
        return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
    current = group_configs(broker).get(name, {})
    try:
        new = {k: v for k, v in compute(dict(current)).items() if v is not None}
    except Exception as exc:  # an invalid APPEND/SUBTRACT: no group config is a list
        return ErrorCode.INVALID_CONFIG, str(exc)
    refused = validate_values(broker, new)
    if refused is not None:
        return ErrorCode.INVALID_CONFIG, refused
    if validate_only:
        return ErrorCode.NONE, None
    records = [("ConfigRecord", new_record("ConfigRecord", resource_type=GROUP, resource_name=name, name=key,
                                           value=new.get(key)))
               for key in sorted(set(current) | set(new)) if current.get(key) != new.get(key)]
    if records:
        store = getattr(broker, "metadata_store", None)
        if store is None or getattr(store, "log", None) is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR, "no metadata log to store group configs in"
        store.append_records(records)
        log.info("Group %s configs: %s", name, new or "removed")
    return ErrorCode.NONE, None


def describe_group_configs(broker: Any, resource: Any, version: int, include_synonyms: bool,
                           include_docs: bool, result_cls: Any) -> Any:
    """The DescribeConfigsResult of one group: every group config, set ones as GROUP_CONFIG."""
    Entry = result_cls.DescribeConfigsResourceResult
    Synonym = result_cls.DescribeConfigsSynonym
    name = resource.resource_name
    values = group_configs(broker).get(name, {})
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    entries = []
    for key in sorted(CONFIGS):
        spec = CONFIGS[key]
        if wanted is not None and key not in wanted:
            continue
        dynamic = key in values
        fallback_name, fallback, fallback_source = _default(broker, key, spec)
        value = values[key] if dynamic else fallback
        source = SOURCE_GROUP_CONFIG if dynamic else fallback_source
        # Kafka lists the group's value, then what it falls back to
        synonyms = [Synonym(name=key, value=value, source=SOURCE_GROUP_CONFIG)] if dynamic else []
        synonyms.append(Synonym(name=fallback_name, value=fallback, source=fallback_source))
        entries.append(Entry(
            name=key, value=value, read_only=False, is_default=not dynamic and version == 0, config_source=source,
            is_sensitive=False, synonyms=synonyms if include_synonyms else [],
            config_type=spec.config_type if version >= 3 else 0, documentation=None))
    return result_cls.DescribeConfigsResult(error_code=0, error_message="", resource_type=GROUP,
                                            resource_name=name, configs=entries)
