"""CreateTopics, DeleteTopics, CreatePartitions and DescribeTopicPartitions.

Validation follows Kafka's controller: topic name rules, partition and replication-factor
checks (one broker, so a replication factor above 1 cannot be met), config validation,
duplicate names in one request, and `validate_only`.
"""

from __future__ import annotations

import gc
import logging
import weakref

import trio

from ..cluster.metadata_cache import PartitionView
from ..cluster_metadata import Topic, random_uuid, validate_topic_name
from ..kraft.store import Steps
from ..quota import mutation_quota
from ..quota.controller_mutation import (
    CREATE_PARTITIONS_STRICT_SINCE,
    CREATE_TOPICS_STRICT_SINCE,
    DELETE_TOPICS_STRICT_SINCE,
    MutationQuota,
    ThrottlingQuotaExceeded,
)
from ..security.acl import RT_TOPIC
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class, supported_versions
from .common import TOPIC_OPERATIONS, operations_bits, partition_leader_epoch
from .configs import InvalidConfig, topic_config_entries, validate_topic_configs
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
#: Kafka 4.4's controller refuses a CreateTopics asking for more partitions in total, and a
#: CreatePartitions adding more (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH)
MAX_PARTITIONS_PER_REQUEST = 10_000
#: the most metadata records one request may write (QuorumController.MAX_RECORDS_PER_USER_OP):
#: a topic is one TopicRecord, one ConfigRecord per config and one PartitionRecord per partition
MAX_RECORDS_PER_USER_OP = 10_000

log = logging.getLogger(__name__)
_REGISTER_CHUNK = 25

# One topic change at a time per broker (as Kafka's controller serialises them): a creation
# awaits its file work in a worker thread, and a second request for the same name must not
# pass the "already exists" check meanwhile.
_admin_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# (change, metadata.version) whose records' codecs are compiled (they are process-wide)
_warm_changes: set[tuple[str, int]] = set()


def admin_lock(broker) -> trio.Lock:
    lock = _admin_locks.get(broker)
    if lock is None:
        lock = _admin_locks[broker] = trio.Lock()
    return lock


_FILE_WORKERS = 8


async def _open_logs(broker, topic: Topic, first: int, end: int) -> None:
    """Create the logs of partitions [first, end) of `topic` in worker threads, then register them.

    Directory, segment and index files, partition.metadata and the leader-epoch checkpoint (with
    their fsyncs: ~3-5 ms per partition) are made off the event loop; the logs are registered with
    the log manager afterwards, on the loop, and reach requests only when the caller then makes the
    topic (or its new partition count) visible.
    """
    manager = broker.log_manager
    config = broker.topic_log_config(topic)
    manager.topic_configs[topic.name] = config  # as create_log(config=...) remembers it
    # the dirs the metadata records name for these partitions (computed as the store did)
    dirs = broker._dirs_for_new_logs(topic.name, first, end)
    topic_id = topic.topic_id.bytes
    # the epochs of the PartitionRecords the caller has just persisted (0: new partitions)
    store = getattr(broker, "metadata_store", None)
    cluster = store is not None and store.serves_brokers
    # (epoch -1: a follower's log, whose epochs come from its leader)
    wanted = [(index, d, broker.partition_epoch_in_metadata(topic.name, index)
               if not cluster or broker.leads(topic.name, index) else -1)
              for index, d in zip(range(first, end), dirs, strict=True)
              if manager.get_log(topic.name, index) is None and broker.hosts_replica(topic.name, index)]

    opened: dict[int, object] = {}

    def make(chunk: list) -> None:
        for index, d, epoch in chunk:
            plog = manager.open_new_log(topic.name, index, topic_id, config, d)
            opened[index] = plog
            if epoch >= 0:
                plog.become_leader(epoch)

    # shielded: once the threads run, their logs are registered even if the request is cancelled
    with trio.CancelScope(shield=True):
        # several threads: most of a new log's time is fsyncs waiting for the journal, and
        # concurrent fsyncs share its commits (8 threads make ~4x as many logs a second)
        try:
            async with trio.open_nursery() as nursery:
                for i in range(_FILE_WORKERS):
                    if wanted[i::_FILE_WORKERS]:
                        nursery.start_soon(trio.to_thread.run_sync, make, wanted[i::_FILE_WORKERS])
        except BaseException:
            for plog in opened.values():
                plog.close_handlers()  # type: ignore[attr-defined]
            raise
        made = [opened[index] for index, _, _ in wanted]
        # registering logs a few at a time keeps each step short (a log line each); the topic is
        # not in the metadata yet, so no request can reach a registered log before all are in
        for i, plog in enumerate(made, 1):
            manager.add_log(plog)
            if i % _REGISTER_CHUNK == 0:
                await trio.lowlevel.checkpoint()
        new = {index for index, _, _ in wanted}
        for index in range(first, end):
            if index not in new and broker.hosts_replica(topic.name, index):  # a log that already existed: it gets the id and the epoch
                broker.open_partition_log(topic, index)


async def _persist(broker, change: str, topic: Topic) -> None:
    """ClusterMetadata._persist without long event-loop steps (hold admin_lock).

    The records are built a chunk at a time between checkpoints (those of 1000 partitions are
    20-40 ms of Python) and the fsync runs in a worker thread (it waits for the journal: measured
    up to 280 ms while other files were being created). The change is applied to the image only
    once it is on disk; shielded, so a cancelled request does not leave it appended but unapplied.
    """
    store = getattr(broker, "metadata_store", None)
    if store is None:
        return
    if (change, store.metadata_version) not in _warm_changes:
        # the first change of a kind after start-up compiles its records' codecs (~5 ms of CPU)
        await trio.to_thread.run_sync(store.warm_codecs, change)
        _warm_changes.add((change, store.metadata_version))
    steps = Steps(store.build(change, topic))
    for _ in steps:
        await trio.lowlevel.checkpoint()
    built = steps.value
    await trio.lowlevel.checkpoint()  # the last chunk and the batch were one step
    with trio.CancelScope(shield=True):
        store.append_built(built, flush=False)
        await trio.to_thread.run_sync(store.flush)
        store.apply(built)
        await trio.lowlevel.checkpoint()  # the caller's next piece of work is a step of its own


async def create_topic(broker, name: str, partitions: int, configs: dict[str, str]) -> Topic:
    """ClusterMetadata.create_topic with the log files made off the event loop (hold admin_lock).

    The change is persisted first (as ClusterMetadata does); the topic appears in the metadata
    only when all of its logs exist, so no request sees a topic with missing partitions.
    """
    meta = broker.metadata
    topic = Topic(name, random_uuid(), partitions, dict(configs))
    creating = broker.topics_being_created
    creating.add(name)
    try:
        await _persist(broker, "create", topic)
        await _open_logs(broker, topic, 0, partitions)
        meta._add(topic)
    finally:
        creating.discard(name)
    if (publish := getattr(broker, "publish_metadata", None)) is not None:
        publish()  # a cluster's combined node leads what it just made
    log.info("Created topic %s with %d partitions, id %s", name, partitions, topic.topic_id.to_base64())
    # The new logs (~40 tracked objects per partition) live as long as the topic: keep them out
    # of the collector's full collections, as server.run_broker does with the start-up heap (they
    # hold no reference cycles, so deleting the topic still frees them by reference counting).
    gc.freeze()
    return topic


async def ensure_internal_topic(broker, spec: tuple[str, int, dict[str, str]] | None) -> None:
    """Create an internal topic (``__consumer_offsets``, ``__transaction_state``) on first use with
    its log files made off the event loop: 50 partitions' files cost 100-300 ms of loop time."""
    if spec is None:
        return
    name, partitions, configs = spec
    async with admin_lock(broker):
        if broker.metadata.get(name) is None:
            await create_topic(broker, name, partitions, configs)


async def add_partitions(broker, topic: Topic, new_total: int) -> None:
    """ClusterMetadata.add_partitions with the new logs made off the event loop (hold admin_lock)."""
    old = topic.partitions
    creating = broker.topics_being_created
    creating.add(topic.name)
    try:
        await _persist(broker, "partitions", Topic(topic.name, topic.topic_id, new_total, topic.configs))
        await _open_logs(broker, topic, old, new_total)
        topic.partitions = new_total
    finally:
        creating.discard(topic.name)
    if (publish := getattr(broker, "publish_metadata", None)) is not None:
        publish()
    gc.freeze()  # long-lived, like create_topic's logs


async def delete_topic(broker, topic: Topic) -> None:
    """ClusterMetadata.delete_topic with the file work (close, rename, checkpoints) in a worker
    thread; the topic and its logs leave the metadata and the log manager at once, on the loop."""
    meta = broker.metadata
    await _persist(broker, "delete", topic)
    meta.topics.pop(topic.name, None)
    meta.topics_by_id.pop(topic.topic_id, None)
    manager = broker.log_manager
    detached = manager.detach_logs([(topic.name, index) for index in range(topic.partitions)])

    def finish() -> None:
        manager.finish_delete(detached)
        # the last references to the logs: freeing them (~40 objects a partition, ~5 ms for
        # 1000 partitions) happens in this thread rather than on the event loop
        detached.clear()

    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(finish)
    log.info("Deleted topic %s", topic.name)


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message or "")
        self.code = code
        #: None where Kafka's ApiError leaves it out (the error's own default message)
        self.message = message


def _check_replicas(ctx: RequestContext, replication_factor: int, assignments) -> None:
    """Kafka's checks of a manual assignment or a replication factor, against the registered
    brokers: this node alone, or those of the cluster this node is the controller of."""
    controller = getattr(ctx.broker, "quorum_controller", None)
    if controller is not None:
        cluster = controller.cluster
        registered = set(cluster.store.image.brokers) | ({cluster.node_id} if cluster.own_broker else set())
    else:
        registered = {ctx.broker.node_id}
    if assignments:
        for assignment in assignments:
            if any(b not in registered for b in assignment.broker_ids) or not assignment.broker_ids:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker(s) that are not registered: {assignment.broker_ids}")
            if len(set(assignment.broker_ids)) != len(assignment.broker_ids):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes the same broker twice")
        return
    if replication_factor == 0 or replication_factor < -1:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if controller is not None:
        from ..kraft.cluster_control import PlacementError  # noqa: PLC0415

        try:
            controller.cluster.check_replication_factor(max(replication_factor, 1))
        except PlacementError as exc:
            raise TopicError(exc.code, str(exc)) from None
    elif replication_factor > 1:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
            f"{replication_factor} cannot be reached because only 1 broker(s) are registered or some brokers have all "
            "their log directories cordoned.",  # Kafka 4.4's StripedReplicaPlacer
        )


def _take_mutations(quota: MutationQuota, partitions: int) -> None:
    """Take `partitions` from the client's controller_mutation_rate (after every other check, as
    Kafka's controller does; a validate-only request takes them too)."""
    try:
        quota.record(partitions)
    except ThrottlingQuotaExceeded:
        # ApiError.fromThrowable drops a message that is the error's default one
        raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, None) from None


def _mutation_throttle_ms(ctx: RequestContext, quota: MutationQuota) -> int:
    """The response's throttle time from the mutation quota; the connection is muted for it."""
    throttle = quota.throttle_time_ms()
    if throttle > 0:
        ctx.extra["throttle_ms"] = max(throttle, ctx.extra.get("throttle_ms") or 0)
    return throttle


def _ask_placement(broker, name: str, replication_factor: int, assignments) -> None:
    """Tell the controller's placer what CreateTopics/CreatePartitions asked for `name`."""
    controller = getattr(broker, "quorum_controller", None)
    if controller is None:
        return
    if assignments:
        controller.cluster.requested[name] = [list(a.broker_ids) for a in assignments]
    elif replication_factor > 0:
        controller.cluster.requested[name] = replication_factor
    else:
        controller.cluster.requested[name] = int(broker.config.get("default.replication.factor"))


def _validate_one(ctx: RequestContext, wanted) -> tuple[int, dict[str, str]]:
    """Kafka's checks of one topic to create (TopicError if it fails); returns (partitions, configs)."""
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
    return partitions, configs


def _requested_partitions(ctx: RequestContext, wanted) -> int:
    """What Kafka's validateTotalNumberOfPartitions counts for one topic: its assignments, or its
    partition count (-1: num.partitions; invalid counts add nothing)."""
    if wanted.assignments:
        return len(wanted.assignments)
    if wanted.num_partitions == -1:
        return int(ctx.broker.config.get("num.partitions"))
    return max(wanted.num_partitions, 0)


def _too_large(ctx: RequestContext, topics: list) -> str | None:
    """Why Kafka's controller would refuse this whole CreateTopics (POLICY_VIOLATION), or None.
    `topics` are the request's topics without duplicated names (the broker drops those before
    the controller counts). validate_only requests are counted too, as Kafka builds their records."""
    requested = [_requested_partitions(ctx, t) for t in topics]
    if sum(requested) > MAX_PARTITIONS_PER_REQUEST:
        return "Excessively large number of partitions per request."
    if sum(1 + len(t.configs) + n for t, n in zip(topics, requested, strict=True)) <= MAX_RECORDS_PER_USER_OP:
        return None  # under the bound even if every topic passed: no need to validate them twice
    records = 0
    for wanted in topics:
        try:
            partitions, _ = _validate_one(ctx, wanted)
        except TopicError:
            continue  # a refused topic writes no records
        records += 1 + len({c.name for c in wanted.configs if c.value is not None}) + partitions
    if records > MAX_RECORDS_PER_USER_OP:
        return "Unable to perform excessively large batch operation."
    return None


async def _create_one(ctx: RequestContext, wanted, validate_only: bool, quota: MutationQuota):
    """Validate and (unless validate_only) create one topic; returns (topic or None, partitions, configs)."""
    partitions, configs = _validate_one(ctx, wanted)
    _take_mutations(quota, partitions)
    if not validate_only:
        _ask_placement(ctx.broker, wanted.name, wanted.replication_factor, wanted.assignments)
    topic = None if validate_only else await create_topic(ctx.broker, wanted.name, partitions, configs)
    return topic, partitions, configs


@handles(CREATE_TOPICS_KEY, 2, supported_versions(CREATE_TOPICS_KEY)[1])
async def handle_create_topics(ctx: RequestContext, header, request) -> object:
    names = [t.name for t in request.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    results = []
    quota = mutation_quota(ctx, header, CREATE_TOPICS_STRICT_SINCE)
    async with admin_lock(ctx.broker):
        refused = _too_large(ctx, [t for t in request.topics if t.name not in duplicates])
        if refused is not None:
            Result = CreateTopicsResponse.CreatableTopicResult
            return CreateTopicsResponse(throttle_time_ms=_mutation_throttle_ms(ctx, quota), topics=[
                Result(name=t.name, error_code=int(ErrorCode.POLICY_VIOLATION), error_message=refused,
                       num_partitions=-1, replication_factor=-1, configs=None) for t in request.topics])
        for wanted in request.topics:
            if wanted.name not in duplicates:
                results.append(await _create_result(ctx, header.api_version, request, wanted, quota))
    # as Kafka 4.4's ControllerApis: a duplicated name is answered once, after the others
    Result = CreateTopicsResponse.CreatableTopicResult
    results += [Result(name=name, error_code=int(ErrorCode.INVALID_REQUEST), error_message="Duplicate topic name.",
                       num_partitions=-1, replication_factor=-1, configs=None)
                for name in dict.fromkeys(n for n in names if n in duplicates)]
    return CreateTopicsResponse(throttle_time_ms=_mutation_throttle_ms(ctx, quota), topics=results)


async def _create_result(ctx: RequestContext, version: int, request, wanted, quota: MutationQuota):
    Result = CreateTopicsResponse.CreatableTopicResult
    ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs
    try:
        topic, partitions, _ = await _create_one(ctx, wanted, request.validate_only, quota)
    except TopicError as exc:
        return Result(name=wanted.name, error_code=int(exc.code), error_message=exc.message,
                      num_partitions=-1, replication_factor=-1, configs=None)
    configs = None
    if version >= 5:
        described = topic or Topic(wanted.name, Uuid.ZERO, partitions, {c.name: c.value for c in wanted.configs})
        configs = [
            ConfigEntry(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
            for name, value, source, _ in topic_config_entries(ctx.broker, described)
        ]
    return Result(
        name=wanted.name, topic_id=topic.topic_id if topic is not None else Uuid.ZERO,
        error_code=0, error_message=None, num_partitions=partitions,
        replication_factor=_replication_factor(ctx.broker, topic, wanted.replication_factor), configs=configs,
    )


def _replication_factor(broker, topic: Topic | None, asked: int) -> int:
    """The replication factor of a created topic (of a validated one: as asked, or the default)."""
    store = getattr(broker, "metadata_store", None)
    state = store.image.topic(topic.name) if store is not None and topic is not None else None
    part = state.partitions.get(0) if state is not None else None
    if part is not None:
        return len(part.replicas)
    if getattr(broker, "quorum_controller", None) is None:
        return 1
    return asked if asked > 0 else int(broker.config.get("default.replication.factor"))


@handles(DELETE_TOPICS_KEY, 1, supported_versions(DELETE_TOPICS_KEY)[1])
async def handle_delete_topics(ctx: RequestContext, header, request) -> object:
    Result = DeleteTopicsResponse.DeletableTopicResult
    meta = ctx.broker.metadata
    version = header.api_version
    wanted = [(t.name, t.topic_id) for t in request.topics] if version >= 6 else [(n, Uuid.ZERO) for n in request.topic_names]
    results = []
    quota = mutation_quota(ctx, header, DELETE_TOPICS_STRICT_SINCE)
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
        async with admin_lock(ctx.broker):
            if meta.get(topic.name) is not topic:  # deleted meanwhile by another request
                results.append(Result(name=name, topic_id=topic_id, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                      error_message="This server does not host this topic-partition."))
                continue
            try:
                _take_mutations(quota, topic.partitions)
            except TopicError as exc:
                results.append(Result(name=name, topic_id=topic_id, error_code=int(exc.code), error_message=exc.message))
                continue
            await delete_topic(ctx.broker, topic)
        groups = ctx.broker.coordinators.get("groups")
        if groups is not None:
            # Kafka drops the committed offsets of a deleted topic (with tombstones).
            groups.on_topics_deleted({topic.name})
        results.append(Result(name=topic.name, topic_id=topic.topic_id, error_code=0, error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=_mutation_throttle_ms(ctx, quota), responses=results)


@handles(CREATE_PARTITIONS_KEY, 0, supported_versions(CREATE_PARTITIONS_KEY)[1])
async def handle_create_partitions(ctx: RequestContext, header, request) -> object:
    names = [t.name for t in request.topics]
    results = []
    quota = mutation_quota(ctx, header, CREATE_PARTITIONS_STRICT_SINCE)
    async with admin_lock(ctx.broker):
        if _additional_partitions(ctx, request.topics, names) > MAX_PARTITIONS_PER_REQUEST:
            # Kafka's controller refuses the whole request
            Result = CreatePartitionsResponse.CreatePartitionsTopicResult
            return CreatePartitionsResponse(throttle_time_ms=_mutation_throttle_ms(ctx, quota), results=[
                Result(name=t.name, error_code=int(ErrorCode.POLICY_VIOLATION),
                       error_message="Excessively large number of additional partitions per request.")
                for t in request.topics])
        for wanted in request.topics:
            results.append(await _create_partitions_result(ctx, request, wanted, names, quota))
    return CreatePartitionsResponse(throttle_time_ms=_mutation_throttle_ms(ctx, quota), results=results)


def _additional_partitions(ctx: RequestContext, topics, names: list[str]) -> int:
    """Partitions a CreatePartitions would add to existing topics (duplicated names not counted),
    as Kafka's controller counts them."""
    meta = ctx.broker.metadata
    total = 0
    for wanted in topics:
        topic = meta.get(wanted.name) if names.count(wanted.name) == 1 else None
        if topic is not None and wanted.count >= 0:
            total += max(wanted.count - topic.partitions, 0)
    return total


async def _create_partitions_result(ctx: RequestContext, request, wanted, names: list[str], quota: MutationQuota):
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    meta = ctx.broker.metadata
    try:
        if names.count(wanted.name) > 1:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
        topic = meta.get(wanted.name)
        if topic is None:
            # Kafka 4.4's controller throws it without a message
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        # Kafka 4.4's controller's words
        if wanted.count == topic.partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partition(s).")
        if wanted.count < topic.partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"The topic {topic.name} currently has {topic.partitions} partition(s); {wanted.count} "
                             "would not be an increase.")
        if wanted.assignments is not None and len(wanted.assignments) != wanted.count - topic.partitions:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {wanted.count - topic.partitions} additional partition(s), but only "
                             f"{len(wanted.assignments)} assignment(s) were specified.")
        _check_replicas(ctx, 1, wanted.assignments or [])
        _take_mutations(quota, wanted.count - topic.partitions)
        if not request.validate_only:
            _ask_placement(ctx.broker, topic.name, -1, wanted.assignments or [])
            if not wanted.assignments and getattr(ctx.broker, "quorum_controller", None) is not None:
                ctx.broker.quorum_controller.cluster.requested.pop(topic.name, None)  # the topic's own factor
            await add_partitions(ctx.broker, topic, wanted.count)
        return Result(name=wanted.name, error_code=0, error_message=None)
    except TopicError as exc:
        return Result(name=wanted.name, error_code=int(exc.code), error_message=exc.message)


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
                is_internal=False, partitions=[],
                # KafkaApis fills in the principal's operations for every topic it answers
                topic_authorized_operations=operations_bits(ctx, RT_TOPIC, name, TOPIC_OPERATIONS)))
            continue
        start = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        if budget <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=start)
            break
        end = min(topic.partitions, start + budget)
        partitions = []
        for i in range(start, end):
            # as Metadata answers it: the whole cluster's view (replicas, ISR, ELR) on a cluster node
            view = broker.metadata_cache.partition(name, i, ctx.listener_name)
            if view is None:
                view = PartitionView(node, partition_leader_epoch(broker, name, i), [node], [node], [])
            partitions.append(R.DescribeTopicPartitionsResponsePartition(
                error_code=view.error, partition_index=i, leader_id=view.leader, leader_epoch=view.leader_epoch,
                replica_nodes=view.replicas, isr_nodes=view.isr, eligible_leader_replicas=view.elr,
                last_known_elr=view.last_known_elr, offline_replicas=view.offline))
        budget -= end - start
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
            partitions=partitions,
            topic_authorized_operations=operations_bits(ctx, RT_TOPIC, name, TOPIC_OPERATIONS)))
        if end < topic.partitions:
            next_cursor = R.Cursor(topic_name=name, partition_index=end)
            break
    return R(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
