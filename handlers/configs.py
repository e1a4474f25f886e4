"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics (and broker reads).

Topic configs are stored as text overrides in the cluster metadata, like Kafka's
ConfigRecords; their effective values come from the log store's LogConfig on top of the
broker's defaults. Every answer carries each config's source, as Kafka's does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import BROKER_CONFIGS, format_config_value
from ..config import parse_bool as _bool
from ..config import parse_long as _long
from ..logstore.config import BROKER_CONFIG_NAMES, TOPIC_CONFIG_NAMES
from ..security.acl import (
    CLUSTER_NAME,
    OP_ALTER_CONFIGS,
    OP_DESCRIBE_CONFIGS,
    RT_CLUSTER,
    RT_GROUP,
    RT_TOPIC,
    permits,
)
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .dynamic_broker_configs import DYNAMIC_BROKER_CONFIGS, alter_broker_configs, dynamic_broker_configs
from .registry import RequestContext, handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..cluster_metadata import Topic

DESCRIBE_CONFIGS_KEY = 32
ALTER_CONFIGS_KEY = 33
INCREMENTAL_ALTER_CONFIGS_KEY = 44

DescribeConfigsResponse = response_class(DESCRIBE_CONFIGS_KEY)
AlterConfigsResponse = response_class(ALTER_CONFIGS_KEY)
IncrementalAlterConfigsResponse = response_class(INCREMENTAL_ALTER_CONFIGS_KEY)

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16  # KIP-714 subscriptions: odradek.client_telemetry
RESOURCE_GROUP = 32  # group configs (KIP-848/KIP-932): odradek.group_coordinator.share_group_configs

# DescribeConfigsResponse.ConfigSource
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# ConfigDef.Type ids used by DescribeConfigs v3+
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST, TYPE_CLASS, TYPE_PASSWORD = (
    1, 2, 3, 4, 5, 6, 7, 8, 9)
_TYPE_IDS = {"BOOLEAN": TYPE_BOOLEAN, "STRING": TYPE_STRING, "INT": TYPE_INT, "SHORT": TYPE_SHORT, "LONG": TYPE_LONG,
             "DOUBLE": TYPE_DOUBLE, "LIST": TYPE_LIST, "CLASS": TYPE_CLASS, "PASSWORD": TYPE_PASSWORD}

#: Broker configs whose ConfigDef type in Kafka 4.4 is narrower than the parser Odradek reads them
#: with (config.py parses every integer as a long, doubles and secrets as text). DescribeConfigs
#: reports Kafka's type, and PASSWORD configs are sensitive: described without their value.
_KAFKA_BROKER_TYPES: dict[str, str] = {
    **dict.fromkeys((
        "node.id", "broker.id", "broker.heartbeat.interval.ms", "broker.session.timeout.ms", "num.partitions",
        "default.replication.factor", "log.segment.bytes", "log.roll.hours", "log.roll.jitter.hours",
        "log.index.interval.bytes", "log.index.size.max.bytes", "log.retention.minutes", "log.retention.hours",
        "log.cleaner.threads", "log.cleaner.io.buffer.size", "log.flush.offset.checkpoint.interval.ms",
        "log.flush.start.offset.checkpoint.interval.ms", "message.max.bytes", "socket.request.max.bytes",
        "connection.failed.authentication.delay.ms", "max.connections.per.ip", "queued.max.requests",
        "max.connections", "telemetry.max.bytes", "offsets.topic.num.partitions", "offsets.topic.segment.bytes",
        "offsets.retention.minutes", "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
        "group.max.session.timeout.ms", "offset.metadata.max.bytes", "group.max.size",
        "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", "group.consumer.max.size",
        "group.consumer.assignment.interval.ms",
        "transaction.state.log.num.partitions", "transaction.state.log.min.isr",
        "transaction.state.log.segment.bytes", "transaction.max.timeout.ms"), "INT"),
    **dict.fromkeys(("offsets.topic.replication.factor", "transaction.state.log.replication.factor"), "SHORT"),
    **dict.fromkeys(("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                     "log.cleaner.min.cleanable.ratio"), "DOUBLE"),
    # Kafka reads these two maps itself; their ConfigDef type is STRING
    **dict.fromkeys(("listener.security.protocol.map", "max.connections.per.ip.overrides"), "STRING"),
    **dict.fromkeys(("ssl.keystore.password", "ssl.key.password", "ssl.keystore.certificate.chain",
                     "ssl.keystore.key", "ssl.truststore.password", "ssl.truststore.certificates",
                     "sasl.jaas.config", "delegation.token.secret.key"), "PASSWORD"),
}


def broker_config_type(name: str) -> str:
    """Kafka 4.4's ConfigDef type name of the broker config ``name`` (Odradek's own: their parser's)."""
    return _KAFKA_BROKER_TYPES.get(name) or BROKER_CONFIGS[name].kafka_type

LONG_MAX = 2**63 - 1

# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _int(value: str) -> int:
    number = _long(value)
    if not -(2**31) <= number < 2**31:
        raise ValueError("not a 32-bit integer")
    return number


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value.strip() not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value.strip()

    return parse


def _cleanup_policy(value: str) -> str:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("must be a list of delete and/or compact")
    return value


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic-level config: Kafka's name, type, parser, default (when not from LogConfig) and doc."""

    name: str
    config_type: int
    parse: Callable[[str], object]
    doc: str
    default: str | None = None  # used only for configs the log store does not model


def _d(name: str, config_type: int, parse: Callable[[str], object], doc: str, default: str | None = None) -> TopicConfigDef:
    return TopicConfigDef(name, config_type, parse, doc, default)


#: Kafka 4.4's topic configs, by name (the internal ``internal.segment.bytes`` left out).
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _d("cleanup.policy", TYPE_LIST, _cleanup_policy, "delete and/or compact: what happens to old segments."),
        _d("compression.gzip.level", TYPE_INT, _int, "Compression level for gzip.", "-1"),
        _d("compression.lz4.level", TYPE_INT, _int, "Compression level for lz4.", "9"),
        _d("compression.type", TYPE_STRING,
           _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "Final compression of the topic's data."),
        _d("compression.zstd.level", TYPE_INT, _int, "Compression level for zstd.", "3"),
        _d("delete.retention.ms", TYPE_LONG, _long, "How long tombstones are kept on compacted topics."),
        _d("file.delete.delay.ms", TYPE_LONG, _long, "Delay before a deleted segment's files are removed."),
        _d("flush.messages", TYPE_LONG, _long, "Messages written before the log is fsynced."),
        _d("flush.ms", TYPE_LONG, _long, "Maximum time before the log is fsynced."),
        _d("follower.replication.throttled.replicas", TYPE_LIST, str, "Throttled follower replicas.", ""),
        _d("index.interval.bytes", TYPE_INT, _int, "Bytes between two offset index entries."),
        _d("leader.replication.throttled.replicas", TYPE_LIST, str, "Throttled leader replicas.", ""),
        _d("local.retention.bytes", TYPE_LONG, _long, "Local retention size with tiered storage.", "-2"),
        _d("local.retention.ms", TYPE_LONG, _long, "Local retention time with tiered storage.", "-2"),
        _d("max.compaction.lag.ms", TYPE_LONG, _long, "Longest time a record stays uncompacted."),
        _d("max.decompressed.message.bytes", TYPE_INT, _int,
           "Largest decompressed size of a record batch (stored and described, not enforced).", "2147483639"),
        _d("max.message.bytes", TYPE_INT, _int, "Largest record batch the topic accepts."),
        _d("message.timestamp.after.max.ms", TYPE_LONG, _long, "How far in the future a timestamp may be."),
        _d("message.timestamp.before.max.ms", TYPE_LONG, _long, "How far in the past a timestamp may be."),
        _d("message.timestamp.type", TYPE_STRING, _one_of("CreateTime", "LogAppendTime"), "CreateTime or LogAppendTime."),
        _d("min.cleanable.dirty.ratio", TYPE_DOUBLE, float, "Dirty ratio above which the log is cleaned."),
        _d("min.compaction.lag.ms", TYPE_LONG, _long, "Shortest time a record stays uncompacted."),
        _d("min.insync.replicas", TYPE_INT, _int, "Replicas that must acknowledge acks=all writes."),
        _d("preallocate", TYPE_BOOLEAN, _bool, "Preallocate segment files."),
        _d("errors.deadletterqueue.group.enable", TYPE_BOOLEAN, _bool,
           "Whether groups may send records that cannot be delivered to a dead-letter topic (not used yet).", "false"),
        _d("remote.copy.lag.bytes", TYPE_LONG, _long, "Bytes a segment waits before it is copied to tiered storage.", "-1"),
        _d("remote.copy.lag.ms", TYPE_LONG, _long, "Time a segment waits before it is copied to tiered storage.", "0"),
        _d("remote.log.copy.disable", TYPE_BOOLEAN, _bool, "Stop copying to tiered storage.", "false"),
        _d("remote.log.delete.on.disable", TYPE_BOOLEAN, _bool, "Delete tiered data when disabled.", "false"),
        _d("remote.storage.enable", TYPE_BOOLEAN, _bool, "Tiered storage for the topic.", "false"),
        _d("retention.bytes", TYPE_LONG, _long, "Partition size above which old segments are deleted."),
        _d("retention.ms", TYPE_LONG, _long, "Time after which old segments are deleted."),
        _d("segment.bytes", TYPE_INT, _int, "Maximum size of a segment file."),
        _d("segment.index.bytes", TYPE_INT, _int, "Size of the offset index of an active segment."),
        _d("segment.jitter.ms", TYPE_LONG, _long, "Maximum random jitter subtracted from segment.ms."),
        _d("segment.ms", TYPE_LONG, _long, "Time after which a segment is rolled."),
        _d("unclean.leader.election.enable", TYPE_BOOLEAN, _bool, "Allow out-of-sync replicas to lead."),
    )
}

_SYNONYMS: dict[str, list[str]] = {}
for _broker_name, _topic_name in BROKER_CONFIG_NAMES.items():
    _SYNONYMS.setdefault(_topic_name, []).append(_broker_name)
_SYNONYMS["max.decompressed.message.bytes"] = ["max.decompressed.message.bytes"]
_SYNONYMS["remote.copy.lag.ms"] = ["log.remote.copy.lag.ms"]
_SYNONYMS["remote.copy.lag.bytes"] = ["log.remote.copy.lag.bytes"]
_SYNONYMS["segment.ms"] = ["log.roll.ms", "log.roll.hours"]
_SYNONYMS["segment.jitter.ms"] = ["log.roll.jitter.ms", "log.roll.jitter.hours"]
_SYNONYMS["retention.ms"] = ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]


#: Kafka 4.4's broker synonyms of topic configs (ServerTopicConfigSynonyms), the first the primary one,
#: each with its broker default (None: no default), for the synonyms DescribeConfigs lists.
_TOPIC_SYNONYMS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "segment.bytes": (("log.segment.bytes", "1073741824"),),
    "segment.ms": (("log.roll.ms", None), ("log.roll.hours", "168"),),
    "segment.jitter.ms": (("log.roll.jitter.ms", None), ("log.roll.jitter.hours", "0"),),
    "segment.index.bytes": (("log.index.size.max.bytes", "10485760"),),
    "flush.messages": (("log.flush.interval.messages", "9223372036854775807"),),
    "flush.ms": (("log.flush.interval.ms", None), ("log.flush.scheduler.interval.ms", "9223372036854775807"),),
    "retention.bytes": (("log.retention.bytes", "-1"),),
    "retention.ms": (("log.retention.ms", None), ("log.retention.minutes", None), ("log.retention.hours", "168"),),
    "max.message.bytes": (("message.max.bytes", "1048588"),),
    "max.decompressed.message.bytes": (("max.decompressed.message.bytes", "2147483639"),),
    "index.interval.bytes": (("log.index.interval.bytes", "4096"),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", "86400000"),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", "0"),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", "9223372036854775807"),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", "60000"),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", "0.5"),),
    "cleanup.policy": (("log.cleanup.policy", "delete"),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", "false"),),
    "min.insync.replicas": (("min.insync.replicas", "1"),),
    "compression.type": (("compression.type", "producer"),),
    "compression.gzip.level": (("compression.gzip.level", "-1"),),
    "compression.lz4.level": (("compression.lz4.level", "9"),),
    "compression.zstd.level": (("compression.zstd.level", "3"),),
    "preallocate": (("log.preallocate", "false"),),
    "message.timestamp.type": (("log.message.timestamp.type", "CreateTime"),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", "9223372036854775807"),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", "3600000"),),
    "local.retention.ms": (("log.local.retention.ms", "-2"),),
    "local.retention.bytes": (("log.local.retention.bytes", "-2"),),
    "remote.copy.lag.ms": (("log.remote.copy.lag.ms", "0"),),
    "remote.copy.lag.bytes": (("log.remote.copy.lag.bytes", "-1"),),
}


def _describe_synonyms(broker: Broker, name: str, value: str, overridden: bool) -> list[tuple[str, str | None, int]]:
    """A topic config's synonyms as Kafka's ConfigHelper lists them: the topic's override, then the
    broker synonyms set as dynamic configs of this broker, then of the cluster (ConfigRecords), then
    in its static config, then those with a default; all dropped up to the
    primary broker synonym (so a default only under another name, like log.retention.hours for
    retention.ms, is not listed)."""
    found: list[tuple[str, str | None, int]] = [(name, value, SOURCE_DYNAMIC_TOPIC)] if overridden else []
    synonyms = _TOPIC_SYNONYMS.get(name, ())
    if not synonyms:
        return found
    raw = broker.config.raw
    image = getattr(getattr(broker, "metadata_store", None), "image", None) or getattr(
        getattr(broker, "broker_role", None), "image", None)
    listed: list[tuple[str, str | None, int]] = []
    if image is not None:
        for resource_name, source in ((str(broker.node_id), SOURCE_DYNAMIC_BROKER), ("", SOURCE_DYNAMIC_DEFAULT_BROKER)):
            dynamic = image.configs.get((RESOURCE_BROKER, resource_name), {})
            listed += [(n, dynamic[n], source) for n, _d in synonyms if n in dynamic]
    listed += [(n, str(raw[n]), SOURCE_STATIC_BROKER) for n, _d in synonyms if n in raw]
    listed += [(n, default, SOURCE_DEFAULT) for n, default in synonyms if default is not None]
    primary = synonyms[0][0]
    while listed and listed[0][0] != primary:
        listed.pop(0)
    return found + listed


class InvalidConfig(ValueError):
    """A topic config name or value Kafka would refuse with INVALID_CONFIG."""


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Check names and values; returns the non-null overrides. Raises InvalidConfig like Kafka."""
    result = {}
    for name, value in configs.items():
        spec = TOPIC_CONFIG_DEFS.get(name)
        if spec is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic configs: {name}")
        try:
            spec.parse(value)
        except ValueError as exc:
            raise InvalidConfig(f"Invalid value {value} for configuration {name}: {exc}") from None
        result[name] = value
    return result


def topic_config_entries(broker: Broker, topic: Topic) -> list[tuple[str, str, int, bool]]:
    """(name, value, source, is_default) for every topic config, as Kafka describes them."""
    defaults = broker.default_log_config.to_props()
    raw = broker.config.raw
    entries = []
    for name, spec in TOPIC_CONFIG_DEFS.items():
        if name in topic.configs:
            entries.append((name, topic.configs[name], SOURCE_DYNAMIC_TOPIC, False))
            continue
        static = next((s for s in _SYNONYMS.get(name, ()) if s in raw), None)
        value = defaults.get(name) if name in TOPIC_CONFIG_NAMES else spec.default
        if name == "cleanup.policy" and value is not None:
            value = value.replace(" ", "")
        entries.append((name, value if value is not None else "", SOURCE_STATIC_BROKER if static else SOURCE_DEFAULT, static is None))
    return entries


def _describe_topic(ctx: RequestContext, resource, version: int, include_synonyms: bool, include_docs: bool) -> object:
    Result = DescribeConfigsResponse.DescribeConfigsResult
    Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
    Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
    topic = ctx.broker.metadata.get(resource.resource_name)
    if topic is None:
        return Result(
            error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            error_message=f"Topic {resource.resource_name} does not exist",
            resource_type=RESOURCE_TOPIC, resource_name=resource.resource_name, configs=[],
        )
    wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    configs = []
    for name, value, _source, is_default in topic_config_entries(ctx.broker, topic):
        if wanted is not None and name not in wanted:
            continue
        listed = _describe_synonyms(ctx.broker, name, value, name in topic.configs)
        source = listed[0][2] if listed else SOURCE_DEFAULT
        synonyms = [Synonym(name=n, value=v, source=s) for n, v, s in listed] if include_synonyms else []
        configs.append(
            Entry(
                name=name, value=value, read_only=False, is_default=is_default and version == 0,
                config_source=source if version >= 1 else -1, is_sensitive=False, synonyms=synonyms,
                config_type=TOPIC_CONFIG_DEFS[name].config_type if version >= 3 else 0,
                documentation=TOPIC_CONFIG_DEFS[name].doc if include_docs and version >= 3 else None,
            )
        )
    return Result(error_code=0, error_message="", resource_type=RESOURCE_TOPIC,
                  resource_name=resource.resource_name, configs=configs)



def _describe_broker(ctx: RequestContext, resource, version: int, include_docs: bool) -> object:
    Result = DescribeConfigsResponse.DescribeConfigsResult
    Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
    broker = ctx.broker
    if resource.resource_name not in ("", str(broker.node_id)):
        return Result(error_code=int(ErrorCode.INVALID_REQUEST), error_message="Unexpected broker id",
                      resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[])
    configs = []
    if resource.resource_type == RESOURCE_BROKER:
        wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
        dynamic = dynamic_broker_configs(broker, broker.node_id)
        for name, spec in BROKER_CONFIGS.items():
            if wanted is not None and name not in wanted:
                continue
            is_set = broker.config.is_set(name)
            value = broker.config.get(name)
            source = SOURCE_STATIC_BROKER if is_set else SOURCE_DEFAULT
            if name in dynamic:
                value, source = dynamic[name]
                is_set = True
            kafka_type = broker_config_type(name)
            sensitive = kafka_type == "PASSWORD"  # Kafka's PASSWORD configs: never shown
            configs.append(
                Entry(
                    name=name, value=None if value is None or sensitive else format_config_value(value),
                    read_only=name not in DYNAMIC_BROKER_CONFIGS,
                    is_default=not is_set and version == 0, config_source=source if version >= 1 else -1,
                    is_sensitive=sensitive, synonyms=[],
                    config_type=_TYPE_IDS[kafka_type] if version >= 3 else 0,
                    documentation=spec.doc if include_docs and version >= 3 else None,
                )
            )
    return Result(error_code=0, error_message="", resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=configs)


def _refused(ctx: RequestContext, resource, operation: int) -> tuple[ErrorCode, str] | None:
    """The ACL error of one config resource (Kafka's ConfigHelper / ControllerApis rules): a topic
    needs `operation` on the topic, broker and broker-logger resources need it on the cluster."""
    allowed = permits(ctx)
    if resource.resource_type == RESOURCE_TOPIC:
        if not allowed(operation, RT_TOPIC, resource.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    elif resource.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS):
        if not allowed(operation, RT_CLUSTER, CLUSTER_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    elif resource.resource_type == RESOURCE_GROUP:
        if not allowed(operation, RT_GROUP, resource.resource_name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    return None


@handles(DESCRIBE_CONFIGS_KEY, 0, supported_versions(DESCRIBE_CONFIGS_KEY)[1])
async def handle_describe_configs(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    results = []
    refused = []  # DESCRIBE_CONFIGS refused: answered after the others, as Kafka does
    for resource in request.resources:
        error = _refused(ctx, resource, OP_DESCRIBE_CONFIGS)
        if error is not None:
            refused.append(DescribeConfigsResponse.DescribeConfigsResult(
                error_code=int(error[0]), error_message=error[1], resource_type=resource.resource_type,
                resource_name=resource.resource_name, configs=[]))
        elif resource.resource_type == RESOURCE_TOPIC:
            results.append(_describe_topic(ctx, resource, version, bool(request.include_synonyms),
                                           bool(getattr(request, "include_documentation", False))))
        elif resource.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
            results.append(_describe_broker(ctx, resource, version, bool(getattr(request, "include_documentation", False))))
        elif resource.resource_type == RESOURCE_CLIENT_METRICS:
            from ..client_telemetry import describe_client_metrics  # noqa: PLC0415

            results.append(describe_client_metrics(ctx.broker, resource, version, bool(request.include_synonyms),
                                                   bool(getattr(request, "include_documentation", False)),
                                                   DescribeConfigsResponse))
        elif resource.resource_type == RESOURCE_GROUP:
            from ..group_coordinator.share_group_configs import describe_group_configs  # noqa: PLC0415

            results.append(describe_group_configs(ctx.broker, resource, version, bool(request.include_synonyms),
                                                  bool(getattr(request, "include_documentation", False)),
                                                  DescribeConfigsResponse))
        else:
            results.append(DescribeConfigsResponse.DescribeConfigsResult(
                error_code=int(ErrorCode.INVALID_REQUEST),
                error_message=f"Unsupported resource type {resource.resource_type}",
                resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results + refused)


def _alter(ctx: RequestContext, resource, validate_only: bool, compute: Callable[[dict[str, str]], dict[str, str]]):
    """Apply a config change to one resource; returns (error code, message)."""
    error = _refused(ctx, resource, OP_ALTER_CONFIGS)
    if error is not None:
        return error
    if resource.resource_type == RESOURCE_BROKER:
        # the replication throttles are the broker configs that change at run time here
        try:
            return alter_broker_configs(ctx.broker, resource, validate_only, compute)
        except InvalidConfig as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
    if resource.resource_type == RESOURCE_BROKER_LOGGER:
        return ErrorCode.NONE, None
    if resource.resource_type == RESOURCE_CLIENT_METRICS:
        from ..client_telemetry import alter_client_metrics  # noqa: PLC0415

        return alter_client_metrics(ctx.broker, resource, validate_only, compute)
    if resource.resource_type == RESOURCE_GROUP:
        from ..group_coordinator.share_group_configs import alter_group_configs  # noqa: PLC0415

        return alter_group_configs(ctx.broker, resource, validate_only, compute)
    if resource.resource_type != RESOURCE_TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}"
    meta = ctx.broker.metadata
    topic = meta.get(resource.resource_name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist"
    try:
        new_configs = validate_topic_configs(compute(dict(topic.configs)))
    except InvalidConfig as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if not validate_only:
        meta.set_configs(topic, new_configs)
    return ErrorCode.NONE, None


@handles(ALTER_CONFIGS_KEY, 0, supported_versions(ALTER_CONFIGS_KEY)[1])
async def handle_alter_configs(ctx: RequestContext, header, request) -> object:
    Response = AlterConfigsResponse.AlterConfigsResourceResponse
    responses = []
    for resource in request.resources:
        # AlterConfigs replaces the whole set of overrides.
        replacement = {c.name: c.value for c in resource.configs}
        code, message = _alter(ctx, resource, request.validate_only, lambda _old, new=replacement: new)
        responses.append(Response(error_code=int(code), error_message=message,
                                  resource_type=resource.resource_type, resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _incremental(changes) -> Callable[[dict[str, str]], dict[str, str]]:
    def compute(current: dict[str, str]) -> dict[str, str]:
        result = dict(current)
        for change in changes:
            op = change.config_operation
            if op == OP_SET:
                result[change.name] = change.value
            elif op == OP_DELETE:
                result.pop(change.name, None)
            elif op in (OP_APPEND, OP_SUBTRACT):
                spec = TOPIC_CONFIG_DEFS.get(change.name)
                if spec is None or spec.config_type != TYPE_LIST:
                    raise InvalidConfig(f"Config value append is not allowed for config key: {change.name}")
                items = [v for v in result.get(change.name, "").split(",") if v]
                extra = [v for v in (change.value or "").split(",") if v]
                if op == OP_APPEND:
                    items += [v for v in extra if v not in items]
                else:
                    items = [v for v in items if v not in extra]
                result[change.name] = ",".join(items)
            else:
                raise InvalidConfig(f"Unknown config operation {op}")
        return result

    return compute


@handles(INCREMENTAL_ALTER_CONFIGS_KEY, 0, supported_versions(INCREMENTAL_ALTER_CONFIGS_KEY)[1])
async def handle_incremental_alter_configs(ctx: RequestContext, header, request) -> object:
    Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    responses = []
    for resource in request.resources:
        code, message = _alter(ctx, resource, request.validate_only, _incremental(resource.configs))
        responses.append(Response(error_code=int(code), error_message=message,
                                  resource_type=resource.resource_type, resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
