"""Metadata: brokers, cluster id, controller, topics with ids, partitions and leader epochs.

Unknown topics are created when `auto.create.topics.enable` and the request allow it; like
a KRaft Kafka broker, the request that triggers the creation still answers
UNKNOWN_TOPIC_OR_PARTITION for that topic and the client's retry finds it.
"""

from __future__ import annotations

import logging
import weakref

from ..cluster_metadata import Topic, validate_topic_name
from ..security.acl import CLUSTER_NAME as ACL_CLUSTER
from ..security.acl import RT_CLUSTER, RT_TOPIC, authorizer_for
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class, supported_versions
from ..wire.schema import encode_struct
from .common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_OPERATIONS,
    TOPIC_OPERATIONS,
    operations_bits,
)
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

METADATA_KEY = 3
MetadataResponse = response_class(METADATA_KEY)
Broker_ = MetadataResponse.MetadataResponseBroker
TopicMeta = MetadataResponse.MetadataResponseTopic
PartitionMeta = MetadataResponse.MetadataResponsePartition

# Built topic entries, per broker, by everything they show: a Metadata request for every topic
# reuses them (building ~1000 partition entries took ~2 ms of the event loop per request).
# The encoder only reads them, so sharing one object between responses is safe.
_topic_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def topic_metadata(ctx: RequestContext, topic: Topic, include_ops: bool, version: int) -> object:
    """A topic's entry of a Metadata response of `version`. Shared entries come pre-encoded
    (`wire.schema.Encoded`): encoding ~1000 partition entries took ~4 ms of the event loop for
    every request listing them."""
    broker = ctx.broker
    if include_ops and authorizer_for(broker) is not None:
        # what the principal may do on the topic: not an entry to share with other requests
        return _build_topic_metadata(ctx, topic, include_ops)
    # partition leader epochs change only when the broker (re)starts: a new broker, a new cache
    key = (topic.name, topic.topic_id, topic.partitions, topic.is_internal, broker.node_id, include_ops,
           broker.metadata_cache.generation, ctx.listener_name)
    try:
        cache = _topic_cache[broker]
    except (KeyError, TypeError):  # TypeError: a broker stand-in that cannot be weakly referenced
        cache = None
    cached = cache.get(key) if cache is not None else None
    if cached is None:
        entry = _build_topic_metadata(ctx, topic, include_ops)
        try:
            if cache is None:
                cache = _topic_cache[broker] = {}
        except TypeError:
            return entry
        if len(cache) > 2 * len(getattr(broker.metadata, "topics", ())) + 16:
            cache.clear()  # entries of deleted or changed topics
        cached = cache[key] = (entry, {})
    entry, by_version = cached
    encoded = by_version.get(version)
    if encoded is None:
        encoded = by_version[version] = encode_struct("MetadataResponse", version, "MetadataResponseTopic", entry)
    return encoded


def _build_topic_metadata(ctx: RequestContext, topic: Topic, include_ops: bool) -> object:
    broker = ctx.broker
    cache = broker.metadata_cache
    partitions = []
    for index in range(topic.partitions):
        view = cache.partition(topic.name, index, ctx.listener_name)
        if view is None:
            continue
        partitions.append(PartitionMeta(
            error_code=view.error,
            partition_index=index,
            leader_id=view.leader,
            leader_epoch=view.leader_epoch,
            replica_nodes=view.replicas,
            isr_nodes=view.isr,
            offline_replicas=view.offline,
        ))
    return TopicMeta(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=(
            operations_bits(ctx, RT_TOPIC, topic.name, TOPIC_OPERATIONS) if include_ops else AUTHORIZED_OPERATIONS_OMITTED),
    )


def _error_topic(name: str | None, code: ErrorCode, topic_id: Uuid = Uuid.ZERO,
                 ops: int = AUTHORIZED_OPERATIONS_OMITTED) -> object:
    return TopicMeta(error_code=int(code), name=name, topic_id=topic_id, is_internal=False, partitions=[],
                     topic_authorized_operations=ops)


@handles(METADATA_KEY, 0, supported_versions(METADATA_KEY)[1])
async def handle_metadata(ctx: RequestContext, header, request) -> object:
    broker = ctx.broker
    meta = broker.metadata
    version = header.api_version
    include_ops = bool(request.include_topic_authorized_operations)
    topics: list = []
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if all_topics:
        topics = [topic_metadata(ctx, t, include_ops, version) for t in meta.topics.values()]
    else:
        # v0-v3 always allowed auto-creation; the flag exists from v4.
        allow_create = request.allow_auto_topic_creation if version >= 4 else True
        auto_create = allow_create and broker.config.get("auto.create.topics.enable")
        # KafkaApis' order: unknown topic ids, the topics found, then the ones not found
        unknown_ids: list = []
        missing: list = []
        for wanted in request.topics:
            if wanted.name is None:
                topic = meta.by_id(wanted.topic_id)
                if topic is None:
                    unknown_ids.append(_error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted.topic_id))
                else:
                    topics.append(topic_metadata(ctx, topic, include_ops, version))
                continue
            topic = meta.get(wanted.name)
            if topic is not None:
                topics.append(topic_metadata(ctx, topic, include_ops, version))
                continue
            # KafkaApis fills in the principal's operations for topics it answers by name with an
            # error too (not for unknown topic ids)
            ops = (operations_bits(ctx, RT_TOPIC, wanted.name, TOPIC_OPERATIONS) if include_ops
                   else AUTHORIZED_OPERATIONS_OMITTED)
            problem = validate_topic_name(wanted.name)
            if problem is not None:
                missing.append(_error_topic(wanted.name, ErrorCode.INVALID_TOPIC_EXCEPTION, ops=ops))
            elif auto_create and not wanted.name.startswith("__") and broker.broker_role is not None:
                # a broker of a KRaft cluster asks the controller (Kafka's AutoTopicCreationManager)
                await broker.broker_role.create_topic(wanted.name, int(broker.config.get("num.partitions")), {})
                missing.append(_error_topic(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ops=ops))
            elif auto_create and not wanted.name.startswith("__"):
                from .topics import admin_lock, create_topic  # noqa: PLC0415 - topics imports this module
                async with admin_lock(broker):
                    if meta.get(wanted.name) is None:  # not created by another request meanwhile
                        partitions = int(broker.config.get("num.partitions"))
                        await create_topic(broker, wanted.name, partitions, {})
                missing.append(_error_topic(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ops=ops))
            else:
                missing.append(_error_topic(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ops=ops))
        topics = unknown_ids + topics + missing
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[Broker_(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in broker.metadata_cache.alive_brokers(ctx.listener_name)],
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata_cache.controller_id(),
        topics=topics,
        cluster_authorized_operations=(
            operations_bits(ctx, RT_CLUSTER, ACL_CLUSTER, CLUSTER_OPERATIONS)
            if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        ),
        error_code=0,
    )


DESCRIBE_CLUSTER_KEY = 60
DescribeClusterResponse = response_class(DESCRIBE_CLUSTER_KEY)
# DescribeCluster endpoint types: 1 = brokers, 2 = controllers.
ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS = 1, 2


@handles(DESCRIBE_CLUSTER_KEY, 0, supported_versions(DESCRIBE_CLUSTER_KEY)[1])
async def handle_describe_cluster(ctx: RequestContext, header, request) -> object:
    broker = ctx.broker
    endpoint_type = request.endpoint_type if header.api_version >= 1 else ENDPOINT_BROKERS
    if endpoint_type not in (ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS):
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
            error_message="Unsupported endpoint type", endpoint_type=endpoint_type, cluster_id=broker.cluster_id,
            controller_id=-1, brokers=[], cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    if endpoint_type == ENDPOINT_CONTROLLERS and getattr(broker, "quorum_controller", None) is not None:
        # an admin client bootstrapping from the controllers (--bootstrap-controller): the voters,
        # on the listener asked (ControllerApis.handleDescribeCluster); this node is the only one
        from .quorum import controller_endpoint, quorum_of  # noqa: PLC0415

        _name, host, port = controller_endpoint(ctx, await quorum_of(broker.metadata_store))
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=endpoint_type,
            cluster_id=broker.cluster_id, controller_id=broker.node_id,
            brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port,
                                                                   rack=None, is_fenced=False)],
            cluster_authorized_operations=(
                operations_bits(ctx, RT_CLUSTER, ACL_CLUSTER, CLUSTER_OPERATIONS)
                if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED))
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata_cache.controller_id(),
        # KafkaApis lists the fenced brokers too when the request asks for them (v2+)
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=b.fenced)
            for b in (broker.metadata_cache.all_brokers(ctx.listener_name)
                      if getattr(request, "include_fenced_brokers", False)
                      else broker.metadata_cache.alive_brokers(ctx.listener_name))],
        cluster_authorized_operations=(
            operations_bits(ctx, RT_CLUSTER, ACL_CLUSTER, CLUSTER_OPERATIONS)
            if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
