"""What the cluster, topics and security pages show, read through the Kafka protocol.

Every function takes a :class:`~odradek.tools.client.KafkaClient` and returns plain data (dicts
and lists) that the web app sends as JSON. Only Kafka APIs are used, so the same calls work
against Odradek and Apache Kafka. Sensitive config values are never returned: DescribeConfigs
already answers them as null, and the console shows them as hidden.
"""

from __future__ import annotations

from typing import Any

from ..tools.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaClient, KafkaError, check
from ..tools.kafka_configs import CONFIG_SOURCES
from ..wire.errors import ErrorCode
from ..wire.protocol import API_NAMES, request_class

API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DESCRIBE_ACLS = 29
DESCRIBE_CONFIGS = 32
DESCRIBE_LOG_DIRS = 35
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_CLIENT_QUOTAS = 48
DESCRIBE_CLUSTER = 60

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1
ACL_ANY = 1  # the ANY value of resource type, pattern type, operation and permission filters

# Kafka's AclResourceType, PatternType, AclOperation and AclPermissionType ids -> names.
ACL_RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}
ACL_PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
ACL_OPERATIONS = {
    2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE",
    9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE",
    13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT",
}
ACL_PERMISSIONS = {2: "DENY", 3: "ALLOW"}


def controller(client: KafkaClient) -> int | None:
    """The node admin requests go to: the controller Metadata names (any broker forwards them)."""
    client.metadata([])
    return client.controller_id if client.controller_id in client.brokers else None


# ---------------------------------------------------------------------------------------- cluster

def cluster(client: KafkaClient) -> dict[str, Any]:
    """Brokers, controller, features and the API versions each broker serves."""
    client.metadata([])
    conn = client.any_connection()
    brokers: list[dict[str, Any]] = []
    if conn.supports(DESCRIBE_CLUSTER):
        response = client.send(DESCRIBE_CLUSTER, request_class(DESCRIBE_CLUSTER)(
            include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=True))
        check(response.error_code, response.error_message or "DescribeCluster")
        controller_id = response.controller_id
        brokers = [{"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "fenced": bool(getattr(b, "is_fenced", False))} for b in response.brokers]
    else:
        controller_id = client.controller_id
        brokers = [{"id": n, "host": h, "port": p, "rack": None, "fenced": False}
                   for n, (h, p) in client.brokers.items()]
    brokers.sort(key=lambda b: b["id"])
    versions = client.send(API_VERSIONS, request_class(API_VERSIONS)(
        client_software_name="odradek-console", client_software_version="1"))
    features = {
        "finalized": sorted(({"name": f.name, "min": f.min_version_level, "max": f.max_version_level}
                             for f in versions.finalized_features or ()), key=lambda f: f["name"]),
        "supported": sorted(({"name": f.name, "min": f.min_version, "max": f.max_version}
                             for f in versions.supported_features or ()), key=lambda f: f["name"]),
        "epoch": versions.finalized_features_epoch,
    }
    apis = sorted(({"key": k.api_key, "name": API_NAMES.get(k.api_key, f"api {k.api_key}"),
                    "min": k.min_version, "max": k.max_version} for k in versions.api_keys),
                  key=lambda a: a["key"])
    for b in brokers:
        b["log_dirs"] = _log_dirs(client, b["id"]) if not b["fenced"] else []
    return {
        "cluster_id": client.cluster_id,
        "controller_id": controller_id,
        "brokers": brokers,
        "features": features,
        "api_versions": apis,
        "api_versions_of": f"{conn.host}:{conn.port}",
    }


def _log_dirs(client: KafkaClient, node_id: int) -> list[dict[str, Any]]:
    """The broker's log dirs with their sizes (DescribeLogDirs, every topic)."""
    try:
        response = client.send(DESCRIBE_LOG_DIRS, request_class(DESCRIBE_LOG_DIRS)(topics=None), node_id)
    except (KafkaError, OSError):
        return []
    out = []
    for r in response.results:
        size = sum(p.partition_size for t in r.topics for p in t.partitions)
        out.append({"path": r.log_dir, "error": _error_name(r.error_code), "size": size,
                    "total_bytes": getattr(r, "total_bytes", -1), "usable_bytes": getattr(r, "usable_bytes", -1)})
    return out


def _error_name(code: int) -> str | None:
    if not code:
        return None
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"


# ---------------------------------------------------------------------------------------- topics

def partition_sizes(client: KafkaClient) -> dict[tuple[str, int], int]:
    """Bytes on disk per partition (its leader's copy, else the largest one seen)."""
    client.metadata([])
    sizes: dict[tuple[str, int], int] = {}
    for node_id in sorted(client.brokers):
        try:
            response = client.send(DESCRIBE_LOG_DIRS, request_class(DESCRIBE_LOG_DIRS)(topics=None), node_id)
        except (KafkaError, OSError):
            continue
        for r in response.results:
            for t in r.topics:
                for p in t.partitions:
                    if not p.is_future_key:
                        key = (t.name, p.partition_index)
                        sizes[key] = max(sizes.get(key, 0), p.partition_size)
    return sizes


def topics(client: KafkaClient) -> list[dict[str, Any]]:
    """Every topic: partition count, replication, messages (end - start offsets) and size."""
    infos = client.metadata(None)
    sizes = partition_sizes(client)
    out = []
    for name, info in sorted(infos.items()):
        if info.error_code:
            continue
        parts = sorted(info.partitions)
        starts, ends = _offsets(client, info, parts)
        out.append({
            "name": name,
            "internal": info.internal,
            "partitions": len(parts),
            "replication_factor": len(info.partitions[parts[0]].replicas) if parts else 0,
            "messages": sum(max(0, ends.get(p, 0) - starts.get(p, 0)) for p in parts),
            "size": sum(sizes.get((name, p), 0) for p in parts),
        })
    return out


def _offsets(client: KafkaClient, info: Any, parts: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    live = [p for p in parts if info.partitions[p].leader >= 0]
    if not live:
        return {}, {}
    try:
        return (client.list_offsets(info, live, EARLIEST_TIMESTAMP, wait_s=2.0),
                client.list_offsets(info, live, LATEST_TIMESTAMP, wait_s=2.0))
    except KafkaError:
        return {}, {}


def topic(client: KafkaClient, name: str) -> dict[str, Any]:
    """One topic: partitions (leader, replicas, ISR, start/end offsets, size) and every config."""
    info = client.metadata([name]).get(name)
    if info is None or info.error_code:
        raise KafkaError(info.error_code if info else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name}")
    parts = sorted(info.partitions)
    starts, ends = _offsets(client, info, parts)
    sizes = partition_sizes(client)
    partitions = [{
        "partition": p,
        "leader": info.partitions[p].leader,
        "replicas": info.partitions[p].replicas,
        "isr": info.partitions[p].isr,
        "start_offset": starts.get(p),
        "end_offset": ends.get(p),
        "size": sizes.get((name, p), 0),
    } for p in parts]
    return {
        "name": name,
        "topic_id": info.topic_id.to_base64() if info.topic_id is not None else None,
        "internal": info.internal,
        "partitions": partitions,
        "configs": topic_configs(client, name),
    }


def topic_configs(client: KafkaClient, name: str) -> list[dict[str, Any]]:
    cls = request_class(DESCRIBE_CONFIGS)
    response = client.send(DESCRIBE_CONFIGS, cls(
        resources=[cls.DescribeConfigsResource(resource_type=RESOURCE_TOPIC, resource_name=name,
                                               configuration_keys=None)],
        include_synonyms=False, include_documentation=False))
    result = response.results[0]
    check(result.error_code, result.error_message or f"DescribeConfigs {name}")
    return [{
        "name": c.name,
        # A sensitive value never leaves the console, whatever the broker answered.
        "value": None if c.is_sensitive else c.value,
        "sensitive": bool(c.is_sensitive),
        "read_only": bool(c.read_only),
        "source": CONFIG_SOURCES.get(c.config_source, "UNKNOWN"),
    } for c in sorted(result.configs, key=lambda c: c.name)]


def create_topic(client: KafkaClient, name: str, partitions: int | None, replication_factor: int | None,
                 configs: dict[str, str]) -> None:
    cls = request_class(CREATE_TOPICS)
    topic = cls.CreatableTopic(
        name=name,
        num_partitions=partitions if partitions else -1,
        replication_factor=replication_factor if replication_factor else -1,
        assignments=[],
        configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
    )
    response = client.send(CREATE_TOPICS, cls(topics=[topic], timeout_ms=30000, validate_only=False),
                           controller(client))
    result = response.topics[0]
    check(result.error_code, result.error_message or f"creating topic {name}")


def alter_topic_configs(client: KafkaClient, name: str, set_configs: dict[str, str], delete: list[str]) -> None:
    cls = request_class(INCREMENTAL_ALTER_CONFIGS)
    ops = [cls.AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in set_configs.items()]
    ops += [cls.AlterableConfig(name=k, config_operation=OP_DELETE, value=None) for k in delete]
    response = client.send(INCREMENTAL_ALTER_CONFIGS, cls(resources=[cls.AlterConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=name, configs=ops)], validate_only=False), controller(client))
    for r in response.responses:
        check(r.error_code, r.error_message or f"altering configs of {name}")


def delete_topic(client: KafkaClient, name: str) -> None:
    cls = request_class(DELETE_TOPICS)
    response = client.send(DELETE_TOPICS, cls(topic_names=[name], timeout_ms=30000), controller(client))
    result = response.responses[0]
    check(result.error_code, getattr(result, "error_message", None) or f"deleting topic {name}")


# ---------------------------------------------------------------------------------------- security

def acls(client: KafkaClient) -> dict[str, Any]:
    """Every ACL binding, or why there are none to show (no authorizer, not allowed)."""
    response = client.send(DESCRIBE_ACLS, request_class(DESCRIBE_ACLS)(
        resource_type_filter=ACL_ANY, resource_name_filter=None, pattern_type_filter=ACL_ANY,
        principal_filter=None, host_filter=None, operation=ACL_ANY, permission_type=ACL_ANY))
    if response.error_code:
        return {"error": _error_name(response.error_code), "message": response.error_message, "acls": []}
    rows = [{
        "resource_type": ACL_RESOURCE_TYPES.get(r.resource_type, str(r.resource_type)),
        "resource_name": r.resource_name,
        "pattern_type": ACL_PATTERN_TYPES.get(r.pattern_type, str(r.pattern_type)),
        "principal": a.principal,
        "host": a.host,
        "operation": ACL_OPERATIONS.get(a.operation, str(a.operation)),
        "permission": ACL_PERMISSIONS.get(a.permission_type, str(a.permission_type)),
    } for r in response.resources for a in r.acls]
    rows.sort(key=lambda a: (a["resource_type"], a["resource_name"], a["principal"], a["operation"]))
    return {"error": None, "message": None, "acls": rows}


def quotas(client: KafkaClient) -> dict[str, Any]:
    """Every client quota entity with its values (DescribeClientQuotas, no filter)."""
    if not client.any_connection().supports(DESCRIBE_CLIENT_QUOTAS):
        return {"error": "UNSUPPORTED_VERSION", "message": "the broker does not serve DescribeClientQuotas",
                "quotas": []}
    response = client.send(DESCRIBE_CLIENT_QUOTAS, request_class(DESCRIBE_CLIENT_QUOTAS)(
        components=[], strict=False))
    if response.error_code:
        return {"error": _error_name(response.error_code), "message": response.error_message, "quotas": []}
    rows = []
    for entry in response.entries or ():
        entity = {e.entity_type: ("<default>" if e.entity_name is None else e.entity_name) for e in entry.entity}
        rows.append({"entity": entity, "values": {v.key: v.value for v in entry.values}})
    rows.sort(key=lambda r: sorted(r["entity"].items()))
    return {"error": None, "message": None, "quotas": rows}
