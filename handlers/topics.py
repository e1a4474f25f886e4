"""CreateTopics, DeleteTopics, CreatePartitions and DescribeTopicPartitions.

Validation follows Kafka's controller: topic name rules, partition and replication-factor
checks (one broker, so a replication factor above 1 cannot be met), config validation,
duplicate names in one request, and `validate_only`.
"""

from __future__ import annotations

from ..cluster_metadata import Topic, validate_topic_name
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class, supported_versions
from .configs import InvalidConfig, topic_config_entries, validate_topic_configs
from .metadata import TOPIC_ALL_OPERATIONS
from .registry import RequestContext, handles

CREATE_TOPICS_KEY = 19
DELETE_TOPICS_KEY = 20
CREATE_PARTITIONS_KEY = 37
DESCRIBE_TOPIC_PARTITIONS_KEY = 75

CreateTopicsResponse = response_class(CREATE_TOPICS_KEY)
DeleteTopicsResponse = response_class(DELETE_TOPICS_KEY)
CreatePartitionsResponse = response_class(CREATE_PARTITIONS_KEY)
DescribeTopicPartitionsResponse = response_class(DESCRIBE_TOPIC_PARTITIONS_KEY)

MAX_PARTITIONS_PER_DESCRIBE = 2000


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_replicas(ctx: RequestContext, replication_factor: int, assignments) -> None:
    node = ctx.broker.node_id
    if assignments:
        for assignment in assignments:
            if any(b != node for b in assignment.broker_ids) or not assignment.broker_ids:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker(s) that are not registered: {assignment.broker_ids}")
            if len(set(assignment.broker_ids)) != len(assignment.broker_ids):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes the same broker twice")
        return
    if replication_factor == 0 or replication_factor < -1:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if replication_factor > 1:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
            f"{replication_factor} cannot be reached because only 1 broker(s) are registered.",
        )


def _create_one(ctx: RequestContext, wanted, validate_only: bool):
    """Validate and (unless validate_only) create one topic; returns (topic or None, partitions, configs)."""
    meta = ctx.broker.metadata
    problem = validate_topic_name(wanted.name)
    if problem is not None:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if meta.get(wanted.name) is not None:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{wanted.name}' already exists.")
    if wanted.assignments and (wanted.num_partitions != -1 or wanted.replication_factor != -1):
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         "A manual partition assignment was specified, but numPartitions or replicationFactor "
                         "was not set to -1.")
    partitions = len(wanted.assignments) if wanted.assignments else wanted.num_partitions
    if partitions == -1:
        partitions = int(ctx.broker.config.get("num.partitions"))
    if partitions <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    _check_replicas(ctx, wanted.replication_factor, wanted.assignments)
    try:
        configs = validate_topic_configs({c.name: c.value for c in wanted.configs})
    except InvalidConfig as exc:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    topic = None if validate_only else meta.create_topic(wanted.name, partitions, configs)
    return topic, partitions, configs


@handles(CREATE_TOPICS_KEY, 2, supported_versions(CREATE_TOPICS_KEY)[1])
async def handle_create_topics(ctx: RequestContext, header, request) -> object:
    Result = CreateTopicsResponse.CreatableTopicResult
    ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs
    version = header.api_version
    names = [t.name for t in request.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    results = []
    for wanted in request.topics:
        if wanted.name in duplicates:
            results.append(Result(name=wanted.name, error_code=int(ErrorCode.INVALID_REQUEST),
                                  error_message="Found multiple entries for this topic.",
                                  num_partitions=-1, replication_factor=-1, configs=None))
            continue
        try:
            topic, partitions, _ = _create_one(ctx, wanted, request.validate_only)
        except TopicError as exc:
            results.append(Result(name=wanted.name, error_code=int(exc.code), error_message=str(exc),
                                  num_partitions=-1, replication_factor=-1, configs=None))
            continue
        configs = None
        if version >= 5:
            described = topic or Topic(wanted.name, Uuid.ZERO, partitions, {c.name: c.value for c in wanted.configs})
            configs = [
                ConfigEntry(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                for name, value, source, _ in topic_config_entries(ctx.broker, described)
            ]
        results.append(Result(
            name=wanted.name, topic_id=topic.topic_id if topic is not None else Uuid.ZERO,
            error_code=0, error_message=None, num_partitions=partitions, replication_factor=1, configs=configs,
        ))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


@handles(DELETE_TOPICS_KEY, 1, supported_versions(DELETE_TOPICS_KEY)[1])
async def handle_delete_topics(ctx: RequestContext, header, request) -> object:
    Result = DeleteTopicsResponse.DeletableTopicResult
    meta = ctx.broker.metadata
    version = header.api_version
    wanted = [(t.name, t.topic_id) for t in request.topics] if version >= 6 else [(n, Uuid.ZERO) for n in request.topic_names]
    results = []
    for name, topic_id in wanted:
        topic = meta.get(name) if name is not None else meta.by_id(topic_id)
        if not ctx.broker.config.get("delete.topic.enable"):
            results.append(Result(name=name, topic_id=topic_id, error_code=int(ErrorCode.TOPIC_DELETION_DISABLED),
                                  error_message="Topic deletion is disabled."))
            continue
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
            results.append(Result(name=name, topic_id=topic_id, error_code=int(code),
                                  error_message="This server does not host this topic-partition."
                                  if name is not None else "This server does not host this topic ID."))
            continue
        meta.delete_topic(topic)
        groups = ctx.broker.coordinators.get("groups")
        if groups is not None:
            # Kafka drops the committed offsets of a deleted topic (with tombstones).
            groups.on_topics_deleted({topic.name})
        results.append(Result(name=topic.name, topic_id=topic.topic_id, error_code=0, error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


@handles(CREATE_PARTITIONS_KEY, 0, supported_versions(CREATE_PARTITIONS_KEY)[1])
async def handle_create_partitions(ctx: RequestContext, header, request) -> object:
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    meta = ctx.broker.metadata
    names = [t.name for t in request.topics]
    results = []
    for wanted in request.topics:
        try:
            if names.count(wanted.name) > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            topic = meta.get(wanted.name)
            if topic is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
            if wanted.count < topic.partitions:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {topic.partitions} partitions, which is higher than the "
                                 f"requested {wanted.count}.")
            if wanted.count == topic.partitions:
                raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partitions.")
            if wanted.assignments is not None and len(wanted.assignments) != wanted.count - topic.partitions:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {wanted.count - topic.partitions} additional partition(s), but only "
                                 f"{len(wanted.assignments)} assignment(s) were specified.")
            _check_replicas(ctx, 1, wanted.assignments or [])
            if not request.validate_only:
                meta.add_partitions(topic, wanted.count)
            results.append(Result(name=wanted.name, error_code=0, error_message=None))
        except TopicError as exc:
            results.append(Result(name=wanted.name, error_code=int(exc.code), error_message=str(exc)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


@handles(DESCRIBE_TOPIC_PARTITIONS_KEY, 0, supported_versions(DESCRIBE_TOPIC_PARTITIONS_KEY)[1])
async def handle_describe_topic_partitions(ctx: RequestContext, header, request) -> object:
    R = DescribeTopicPartitionsResponse
    broker = ctx.broker
    meta = broker.metadata
    node = broker.node_id
    limit = max(1, min(request.response_partition_limit, MAX_PARTITIONS_PER_DESCRIBE))
    if request.topics:
        names = sorted({t.name for t in request.topics})
    else:
        names = sorted(meta.topics)
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    topics = []
    budget = limit
    next_cursor = None
    for name in names:
        topic = meta.get(name)
        if topic is None:
            topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name, topic_id=Uuid.ZERO,
                is_internal=False, partitions=[], topic_authorized_operations=TOPIC_ALL_OPERATIONS))
            continue
        start = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        if budget <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=start)
            break
        end = min(topic.partitions, start + budget)
        partitions = [
            R.DescribeTopicPartitionsResponsePartition(
                error_code=0, partition_index=i, leader_id=node, leader_epoch=broker.leader_epoch,
                replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=[])
            for i in range(start, end)
        ]
        budget -= end - start
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
            partitions=partitions, topic_authorized_operations=TOPIC_ALL_OPERATIONS))
        if end < topic.partitions:
            next_cursor = R.Cursor(topic_name=name, partition_index=end)
            break
    return R(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
