"""Dynamic broker configs: the replication throttles that kafka-reassign-partitions.sh --throttle sets.

Kafka keeps a dynamic broker config as a ConfigRecord on a BROKER resource in the metadata log:
named by the broker id for one broker, by "" for the cluster-wide default. Odradek takes the
replication throttle rates this way (`leader.replication.throttled.rate`,
`follower.replication.throttled.rate`, `replica.alter.log.dirs.io.max.bytes.per.second`, all
LONG >= 0 as in Kafka) and refuses to change any other broker config at run time; a change that
leaves the other keys as they are is fine (deleting the throttles, as --verify does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..kraft.image import RESOURCE_BROKER
from ..kraft.records import new_record
from ..wire.errors import ErrorCode

#: The broker configs Odradek changes at run time, all Kafka LONGs at least 0.
DYNAMIC_BROKER_CONFIGS = frozenset({
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
#: Kafka's ConfigSource values for dynamic broker configs in DescribeConfigs.
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3


def dynamic_broker_configs(broker: Any, broker_id: int) -> dict[str, tuple[str, int]]:
    """name -> (value, config source) of the dynamic configs in force for `broker_id`: its own,
    else the cluster-wide default."""
    store = getattr(broker, "metadata_store", None)
    image = getattr(store, "image", None) or getattr(getattr(broker, "broker_role", None), "image", None)
    if image is None:
        return {}
    out = {k: (v, SOURCE_DYNAMIC_DEFAULT_BROKER) for k, v in image.configs.get((RESOURCE_BROKER, ""), {}).items()
           if k in DYNAMIC_BROKER_CONFIGS}
    out.update({k: (v, SOURCE_DYNAMIC_BROKER) for k, v in image.configs.get((RESOURCE_BROKER, str(broker_id)), {}).items()
                if k in DYNAMIC_BROKER_CONFIGS})
    return out


def alter_broker_configs(broker: Any, resource: Any, validate_only: bool,
                         compute: Callable[[dict[str, str]], dict[str, str]]) -> tuple[ErrorCode, str | None]:
    """Apply a change of a BROKER resource's dynamic configs (``compute`` maps the current ones to
    the new ones); returns (error code, message) as Kafka answers."""
    name = resource.resource_name
    if name and not name.isdigit():
        return ErrorCode.INVALID_REQUEST, f"Invalid broker name {name}"
    store = getattr(broker, "metadata_store", None)
    current = dict(store.image.configs.get((RESOURCE_BROKER, name), {})) if store is not None else {}
    new = compute(dict(current))
    changed = {k: new.get(k) for k in set(current) | set(new) if new.get(k) != current.get(k)}
    if not changed:
        return ErrorCode.NONE, None
    fixed = sorted(k for k in changed if k not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {', '.join(fixed)}"
    for key, value in changed.items():
        if value is None:
            continue
        try:
            if int(value.strip()) < 0:
                raise ValueError
        except ValueError:
            return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: Value must be at least 0"
    if store is None:
        return ErrorCode.INVALID_REQUEST, "Dynamic broker configs need the metadata log"
    if not validate_only:
        store.append_records([("ConfigRecord", new_record(
            "ConfigRecord", resource_type=RESOURCE_BROKER, resource_name=name, name=key,
            value=None if value is None else value.strip())) for key, value in sorted(changed.items())])
    return ErrorCode.NONE, None
