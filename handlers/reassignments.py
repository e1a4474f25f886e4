"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on one node.

Kafka's controller (ReplicationControlManager) answers these; on a single node every partition
has exactly one replica, this node, which leads it whenever the node is up. So a preferred or
unclean election is never needed, the only valid reassignment target is ``[node]`` (no change,
no record), and no reassignment is ever in progress. Error codes and messages are Kafka 4.4's.
"""

from __future__ import annotations

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles

ELECT_LEADERS_KEY = 43
ALTER_PARTITION_REASSIGNMENTS_KEY = 45
LIST_PARTITION_REASSIGNMENTS_KEY = 46

ElectLeadersResponse = response_class(ELECT_LEADERS_KEY)
AlterPartitionReassignmentsResponse = response_class(ALTER_PARTITION_REASSIGNMENTS_KEY)
ListPartitionReassignmentsResponse = response_class(LIST_PARTITION_REASSIGNMENTS_KEY)

# Kafka's ElectionType ids
PREFERRED, UNCLEAN = 0, 1

# Errors.ELECTION_NOT_NEEDED.message(): ApiError(Errors) carries the default message
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def _partition_count(ctx: RequestContext, name: str) -> int | None:
    topic = ctx.broker.metadata.get(name)
    return topic.partitions if topic is not None else None


def _election_result(ctx: RequestContext, topic: str, partition: int,
                     election_type: int = PREFERRED) -> tuple[ErrorCode, str | None]:
    count = _partition_count(ctx, topic)
    if count is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    controller = getattr(ctx.broker, "quorum_controller", None)
    if controller is not None:
        return _cluster_election(controller, topic, partition, election_type)
    # the only replica is this node, and it leads: both election types find nothing to do
    return ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE


def _cluster_election(controller, topic: str, partition: int, election_type: int) -> tuple[ErrorCode, str | None]:
    """ReplicationControlManager.electLeader on the controller of a cluster: the preferred replica
    (the first) when it is in sync and alive, or for an unclean election a partition without a
    leader gets one from its ISR, else any live replica."""
    from ..kraft.records import new_record  # noqa: PLC0415

    store = controller.store
    state = store.image.topic(topic)
    part = state.partitions[partition]
    usable = set(controller.cluster.usable_brokers())
    name = f"{topic}-{partition}"
    if election_type == PREFERRED:
        preferred = part.replicas[0] if part.replicas else -1
        if part.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE
        if preferred not in part.isr or preferred not in usable:
            return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {name} under strategy "
                    "PreferredReplicaPartitionLeaderElectionStrategy")
        store.append_records([("PartitionChangeRecord", new_record(
            "PartitionChangeRecord", partition_id=partition, topic_id=state.topic_id, leader=preferred))])
        return ErrorCode.NONE, None
    if part.leader >= 0 and part.leader in usable:
        return ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE
    # Kafka's PartitionChangeBuilder.electLeader: the ISR, else (ISR empty) the eligible leader
    # replicas, else for an unclean election any live replica
    clean = [b for b in part.isr if b in usable] or ([b for b in part.elr if b in usable] if not part.isr else [])
    candidates = clean or [b for b in part.replicas if b in usable]
    if not candidates:
        return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition {name} under strategy UncleanLeaderElectionStrategy")
    store.append_records([store.partition_change(state, partition, list(part.isr), leader=candidates[0],
                                                 unclean=not clean)])
    return ErrorCode.NONE, None


@handles(ELECT_LEADERS_KEY, 0, supported_versions(ELECT_LEADERS_KEY)[1])
async def handle_elect_leaders(ctx: RequestContext, header, request) -> object:
    R = ElectLeadersResponse
    election_type = request.election_type if header.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):
        # the controller throws InvalidRequestException; ElectLeadersRequest.getErrorResponse
        # repeats the error for every requested partition
        message = f"Unknown election type {election_type}"
        code = int(ErrorCode.INVALID_REQUEST)
        return R(throttle_time_ms=0, error_code=code, replica_election_results=[
            R.ReplicaElectionResult(topic=t.topic, partition_result=[
                R.PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
            for t in request.topic_partitions or []])
    results = []
    if request.topic_partitions is None:
        # every topic; partitions that need no election are left out (all of them on one node)
        for name, topic in ctx.broker.metadata.topics.items():
            done = []
            if getattr(ctx.broker, "quorum_controller", None) is not None:
                for p in range(topic.partitions):
                    code, message = _election_result(ctx, name, p, election_type)
                    if code != ErrorCode.ELECTION_NOT_NEEDED:
                        done.append(R.PartitionResult(partition_id=p, error_code=int(code), error_message=message))
            results.append(R.ReplicaElectionResult(topic=name, partition_result=done))
    else:
        for wanted in request.topic_partitions:
            partitions = []
            for p in wanted.partitions:
                code, message = _election_result(ctx, wanted.topic, p, election_type)
                partitions.append(R.PartitionResult(partition_id=p, error_code=int(code), error_message=message))
            results.append(R.ReplicaElectionResult(topic=wanted.topic, partition_result=partitions))
    return R(throttle_time_ms=0, error_code=0, replica_election_results=results)


def _unknown_partition(ctx: RequestContext, topic: str, partition) -> tuple[ErrorCode, str | None] | None:
    """The first of Kafka's reassignment checks: the topic and partition exist, and a target is
    not an empty list."""
    count = _partition_count(ctx, topic)
    if count is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    index = partition.partition_index
    if not 0 <= index < count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
    if partition.replicas is not None and not partition.replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    return None


def _reassignment_error(ctx: RequestContext, topic: str, partition) -> tuple[ErrorCode, str | None]:
    """Kafka's alterPartitionReassignment checks, in its order, for one partition."""
    found = _unknown_partition(ctx, topic, partition)
    if found is not None:
        return found
    if partition.replicas is None:
        # a cancellation; ApiError.fromThrowable drops a message equal to the error's default
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
    node = ctx.broker.node_id
    previous = None
    for broker_id in sorted(partition.replicas):
        if broker_id != node:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.")
        if broker_id == previous:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {previous} more than once.")
        previous = broker_id
    # the target is [node], the current assignment: nothing to record, the replication factor is
    # unchanged (allow_replication_factor_change=false passes)
    return ErrorCode.NONE, None


@handles(ALTER_PARTITION_REASSIGNMENTS_KEY, 0, supported_versions(ALTER_PARTITION_REASSIGNMENTS_KEY)[1])
async def handle_alter_partition_reassignments(ctx: RequestContext, header, request) -> object:
    R = AlterPartitionReassignmentsResponse
    responses = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            controller = getattr(ctx.broker, "quorum_controller", None)
            if controller is not None:
                code, message = _cluster_reassignment(ctx, controller, topic.name, p, header.api_version,
                                                      request)
            else:
                code, message = _reassignment_error(ctx, topic.name, p)
            partitions.append(R.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=int(code),
                                                              error_message=message))
        responses.append(R.ReassignableTopicResponse(name=topic.name, partitions=partitions))
    allow = request.allow_replication_factor_change if header.api_version >= 1 else True
    return R(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=0, error_message=None,
             responses=responses)


def _cluster_reassignment(ctx: RequestContext, controller, topic: str, partition, version: int,
                          request) -> tuple[ErrorCode, str | None]:
    """The controller of a cluster moves the replicas (kraft.replication_control)."""
    found = _unknown_partition(ctx, topic, partition)
    if found is not None:
        return found
    index = partition.partition_index
    target = partition.replicas
    allow = version < 1 or request.allow_replication_factor_change
    return controller.replication.reassign(topic, index, list(target) if target is not None else None,
                                           allow_replication_factor_change=allow)


@handles(LIST_PARTITION_REASSIGNMENTS_KEY, 0, supported_versions(LIST_PARTITION_REASSIGNMENTS_KEY)[1])
async def handle_list_partition_reassignments(ctx: RequestContext, header, request) -> object:
    R = ListPartitionReassignmentsResponse
    controller = getattr(ctx.broker, "quorum_controller", None)
    if controller is None:
        # no reassignment is ever in progress on one node; Kafka skips unknown topics and partitions
        return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
    wanted = None if request.topics is None else {(t.name, p) for t in request.topics for p in t.partition_indexes}
    by_topic: dict[str, list] = {}
    for name, index, replicas, adding, removing in controller.replication.ongoing_reassignments():
        if wanted is None or (name, index) in wanted:
            by_topic.setdefault(name, []).append(R.OngoingPartitionReassignment(
                partition_index=index, replicas=replicas, adding_replicas=adding, removing_replicas=removing))
    return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        R.OngoingTopicReassignment(name=name, partitions=parts) for name, parts in by_topic.items()])
