"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat
and ConsumerGroupDescribe.

These handlers only translate between the wire messages and the group coordinator
(``odradek.group_coordinator``), which owns the state, the waits and the persistence.
"""

from __future__ import annotations

import logging
from typing import Any

from ..group_coordinator import GroupCoordinator
from ..group_coordinator.classic import ClassicGroup, GroupError, GroupState, describe_metadata
from ..group_coordinator.consumer import ConsumerGroup
from ..group_coordinator.records import OFFSETS_TOPIC
from ..logstore.java_hash import hashmap_order, string_hash, topic_partition_hash
from ..security.acl import CLUSTER_NAME as ACL_CLUSTER
from ..security.acl import (
    OP_CLUSTER_ACTION,
    OP_DELETE,
    OP_DESCRIBE,
    OP_READ,
    RT_CLUSTER,
    RT_GROUP,
    RT_TOPIC,
    RT_TRANSACTIONAL_ID,
    permits,
)
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class, supported_versions
from .common import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS, advertised_endpoint, operations_bits
from .registry import RequestContext, handles
from .topics import ensure_internal_topic

log = logging.getLogger(__name__)

OFFSET_COMMIT_KEY = 8
OFFSET_FETCH_KEY = 9
FIND_COORDINATOR_KEY = 10
JOIN_GROUP_KEY = 11
HEARTBEAT_KEY = 12
LEAVE_GROUP_KEY = 13
SYNC_GROUP_KEY = 14
DESCRIBE_GROUPS_KEY = 15
LIST_GROUPS_KEY = 16
DELETE_GROUPS_KEY = 42
OFFSET_DELETE_KEY = 47
CONSUMER_GROUP_HEARTBEAT_KEY = 68
CONSUMER_GROUP_DESCRIBE_KEY = 69

FindCoordinatorResponse = response_class(FIND_COORDINATOR_KEY)
JoinGroupResponse = response_class(JOIN_GROUP_KEY)
SyncGroupResponse = response_class(SYNC_GROUP_KEY)
HeartbeatResponse = response_class(HEARTBEAT_KEY)
LeaveGroupResponse = response_class(LEAVE_GROUP_KEY)
OffsetCommitResponse = response_class(OFFSET_COMMIT_KEY)
OffsetFetchResponse = response_class(OFFSET_FETCH_KEY)
ListGroupsResponse = response_class(LIST_GROUPS_KEY)
DescribeGroupsResponse = response_class(DESCRIBE_GROUPS_KEY)
DeleteGroupsResponse = response_class(DELETE_GROUPS_KEY)
OffsetDeleteResponse = response_class(OFFSET_DELETE_KEY)
ConsumerGroupHeartbeatResponse = response_class(CONSUMER_GROUP_HEARTBEAT_KEY)
ConsumerGroupDescribeResponse = response_class(CONSUMER_GROUP_DESCRIBE_KEY)

# Bits of a group's operations (AclEntry.supportedOperations(GROUP) in Kafka 4.x, which has group
# configs): READ(3) DELETE(6) DESCRIBE(8) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11)
GROUP_ALL_OPERATIONS = sum(1 << op for op in GROUP_OPERATIONS)

# Kafka's Errors.message() of the authorization errors
AUTH_MESSAGES = {
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2  # the share coordinator of a share-partition's state: "group:topicId:partition"


def _coordinator(ctx: RequestContext) -> GroupCoordinator | None:
    coordinator = ctx.broker.coordinators.get("groups")
    return coordinator if coordinator is not None and coordinator.active else None


def _client_host(ctx: RequestContext) -> str:
    # Kafka stores InetAddress.toString(): "/<ip>".
    host = ctx.peer.rsplit(":", 1)[0] if ":" in ctx.peer else ctx.peer
    return "/" + host


def _max(key: int) -> int:
    return supported_versions(key)[1]


def _kafka_order(coordinator: GroupCoordinator | None, group_ids: list[str], hash_set: bool = False) -> list[str]:
    """The order Kafka 4.1 answers a multi-group request in: groups batched per __consumer_offsets
    partition, partitions in the iteration order of Java's HashMap<TopicPartition, ...>; within a
    partition request order, or (DeleteGroups, which goes through a HashSet) HashSet order."""
    if coordinator is None:
        return list(group_ids)
    by_partition: dict[int, list[str]] = {}
    for group_id in group_ids:
        by_partition.setdefault(coordinator.partition_for(group_id), []).append(group_id)
    order = hashmap_order(list(by_partition), lambda p: topic_partition_hash(OFFSETS_TOPIC, p))
    if not hash_set:
        return [g for p in order for g in by_partition[p]]
    out = []
    for p in order:
        unique = list(dict.fromkeys(by_partition[p]))
        # new HashSet<>(list): a table of tableSizeFor(max(n / 0.75 + 1, 16)) buckets
        buckets = 1 << (max(int(len(unique) / 0.75) + 1, 16) - 1).bit_length()
        out += hashmap_order(unique, string_hash, max_size_ever=buckets * 3 // 4)
    return out


# ====================================================================== FindCoordinator


@handles(FIND_COORDINATOR_KEY, 0, _max(FIND_COORDINATOR_KEY))
async def handle_find_coordinator(ctx: RequestContext, header, request) -> object:
    broker = ctx.broker
    version = header.api_version
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    host, port = advertised_endpoint(broker, ctx.listener_name)
    answers = []
    allowed = permits(ctx)
    ready: ErrorCode | None = None  # the internal topic's state, settled once per request like Kafka's cache
    for key in keys:
        code = ErrorCode.NONE
        # DESCRIBE on the group / transactional id, per key (KafkaApis.getCoordinator)
        if key_type == GROUP_KEY_TYPE and not allowed(OP_DESCRIBE, RT_GROUP, key):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif key_type == TRANSACTION_KEY_TYPE and not allowed(OP_DESCRIBE, RT_TRANSACTIONAL_ID, key):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif key_type == SHARE_KEY_TYPE and version < 6:
            code = ErrorCode.INVALID_REQUEST
        elif key_type == SHARE_KEY_TYPE and not allowed(OP_CLUSTER_ACTION, RT_CLUSTER, ACL_CLUSTER):
            # brokers ask for these (their persisters); Kafka checks CLUSTER_ACTION
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif key_type == SHARE_KEY_TYPE and _share_partition_key(key) is None:
            code = ErrorCode.INVALID_REQUEST
        elif key_type == SHARE_KEY_TYPE:
            from .share_fetch import share_coordinator  # noqa: PLC0415 - share handlers import this module

            spec = share_coordinator(broker).state_topic_spec()
            code = await _internal_topic_ready(broker, spec)
        elif key_type == GROUP_KEY_TYPE:
            coordinator = _coordinator(ctx)
            if coordinator is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                if ready is None:
                    ready = await _internal_topic_ready(broker, coordinator.offsets_topic_spec())
                code = ready
        elif key_type == TRANSACTION_KEY_TYPE:
            txn = broker.coordinators.get("transactions")
            if txn is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                if ready is None:
                    spec = getattr(txn, "state_topic_spec", None)
                    ready = await _internal_topic_ready(broker, spec() if spec is not None else None)
                code = ready
        else:
            code = ErrorCode.INVALID_REQUEST
        node = (broker.node_id, host, port)
        if code == ErrorCode.NONE and (broker.broker_role is not None or getattr(broker, "quorum_controller", None)):
            # a broker of a KRaft cluster: the coordinator is the leader of the key's partition
            code, node = _partition_leader_node(ctx, key_type, key)
        answers.append((key, code, node))
    if version >= 4:
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node[0] if code == 0 else -1, host=node[1] if code == 0 else "",
                    # v4+ answers carry no error message (KafkaApis sets only the code), "" on the wire
                    port=node[2] if code == 0 else -1, error_code=int(code), error_message="",
                )
                for key, code, node in answers
            ],
        )
    _, code, node = answers[0]
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=int(code), error_message=_error_message(code),
        node_id=node[0] if code == 0 else -1, host=node[1] if code == 0 else "", port=node[2] if code == 0 else -1,
    )


def _partition_leader_node(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, tuple[int, str, int]]:
    """KafkaApis.getCoordinator in a cluster: the alive leader of the group's (or transactional
    id's) internal partition, else COORDINATOR_NOT_AVAILABLE."""
    broker = ctx.broker
    if key_type == GROUP_KEY_TYPE:
        coordinator = broker.coordinators.get("groups")
        topic, partition = OFFSETS_TOPIC, coordinator.partition_for(key)
    elif key_type == SHARE_KEY_TYPE:
        from ..share_coordinator import records as share_records  # noqa: PLC0415

        topic = share_records.SHARE_STATE_TOPIC
        partition = share_records.partition_for(key, _state_partitions(broker))
    else:
        from ..txn_coordinator.records import TRANSACTION_STATE_TOPIC  # noqa: PLC0415

        txn = broker.coordinators.get("transactions")
        topic, partition = TRANSACTION_STATE_TOPIC, txn.partition_for(key)
    view = broker.metadata_cache.partition(topic, partition, ctx.listener_name)
    if view is None or view.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, (-1, "", -1)
    for node in broker.metadata_cache.alive_brokers(ctx.listener_name):
        if node.node_id == view.leader:
            return ErrorCode.NONE, (node.node_id, node.host, node.port)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, (-1, "", -1)


def _share_partition_key(key: str) -> tuple[str, Uuid, int] | None:
    """Kafka's SharePartitionKey.getInstance: "group:topicId:partition", else None."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        topic_id = Uuid.from_base64(parts[1])
        partition = int(parts[2])
    except (ValueError, TypeError):
        return None
    return parts[0], topic_id, partition


def _state_partitions(broker) -> int:
    from .share_fetch import share_coordinator  # noqa: PLC0415

    return share_coordinator(broker).num_partitions()


async def _internal_topic_ready(broker, spec: tuple[str, int, dict[str, str]] | None) -> ErrorCode:
    """NONE when the coordinator's internal topic exists; otherwise create it and answer
    COORDINATOR_NOT_AVAILABLE, as KafkaApis.getCoordinator does on first use: the client retries
    after its backoff, by which time the topic is there (and its metadata requests went first)."""
    if spec is None:
        return ErrorCode.NONE
    try:
        if broker.broker_role is not None:
            # a broker of a KRaft cluster asks the controller (Kafka's AutoTopicCreationManager)
            await broker.broker_role.create_topic(*spec)
        else:
            await ensure_internal_topic(broker, spec)
    except Exception:
        log.exception("Creating the internal topic %s failed", spec[0])
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def _error_message(code: ErrorCode) -> str:
    # Kafka fills FindCoordinator's error message from Errors.message() ("NONE" when fine).
    if code == ErrorCode.NONE:
        return "NONE"
    if code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        return "The coordinator is not available."
    return AUTH_MESSAGES.get(code, code.name)


# ====================================================================== JoinGroup / SyncGroup


@handles(JOIN_GROUP_KEY, 0, _max(JOIN_GROUP_KEY))
async def handle_join_group(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return _join_error(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
    result = await coordinator.join_group(
        group_id=request.group_id, member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=header.client_id or "", client_host=_client_host(ctx),
        session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=rebalance_timeout,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4, reason=request.reason if version >= 8 else None,
        supports_skip_assignment=version >= 9,
    )
    if result.error != ErrorCode.NONE:
        return _join_error(version, result.error, result.member_id)
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=0, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=result.protocol_name or ("" if version < 7 else None),
        leader=result.leader, skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
            for m, i, meta in result.members
        ],
    )


def _join_error(version: int, code: ErrorCode, member_id: str) -> object:
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=int(code), generation_id=-1, protocol_type=None,
        protocol_name="" if version < 7 else None, leader="", member_id=member_id or "", members=[],
    )


@handles(SYNC_GROUP_KEY, 0, _max(SYNC_GROUP_KEY))
async def handle_sync_group(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return SyncGroupResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), assignment=b"")
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        # From v5 both are mandatory (Kafka refuses the request before the coordinator sees it).
        return SyncGroupResponse(throttle_time_ms=0, error_code=int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
                                 assignment=b"")
    result = await coordinator.sync_group(
        group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    if result.error != ErrorCode.NONE:
        return SyncGroupResponse(throttle_time_ms=0, error_code=int(result.error), assignment=b"")
    return SyncGroupResponse(
        throttle_time_ms=0, error_code=0, protocol_type=result.protocol_type,
        protocol_name=result.protocol_name, assignment=result.assignment,
    )


# ====================================================================== Heartbeat / LeaveGroup


@handles(HEARTBEAT_KEY, 0, _max(HEARTBEAT_KEY))
async def handle_heartbeat(ctx: RequestContext, header, request) -> object:
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    code = coordinator.heartbeat(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if header.api_version >= 3 else None,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=int(code))


@handles(LEAVE_GROUP_KEY, 0, _max(LEAVE_GROUP_KEY))
async def handle_leave_group(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    if version >= 3:
        identities = [(m.member_id or "", m.group_instance_id) for m in request.members]
    else:
        identities = [(request.member_id, None)]
    if coordinator is None:
        top, codes = ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    else:
        top, codes = coordinator.leave_group(request.group_id, identities)
    if version < 3:
        code = top if top != ErrorCode.NONE else (codes[0] if codes else ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=int(code))
    members = [] if top != ErrorCode.NONE else [
        LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=int(c))
        for (m, i), c in zip(identities, codes, strict=True)
    ]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=int(top), members=members)


# ====================================================================== OffsetCommit / OffsetFetch


def _topic_by_id(broker: Any, topic_id: Uuid) -> str:
    """The name of a topic id, "" when no topic has it (KafkaApis' marker for UNKNOWN_TOPIC_ID)."""
    found = broker.metadata.by_id(topic_id) if broker.metadata is not None and topic_id != Uuid.ZERO else None
    return found.name if found is not None else ""


@handles(OFFSET_COMMIT_KEY, 0, 10, advertised_min=0)
async def handle_offset_commit(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    use_ids = version >= 10  # topics by id, KIP-848
    broker = ctx.broker
    coordinator = _coordinator(ctx)
    generation = request.generation_id_or_member_epoch if version >= 1 else -1
    member_id = request.member_id if version >= 1 else ""
    instance_id = request.group_instance_id if version >= 7 else None
    now = coordinator.now_ms() if coordinator is not None else 0
    retention_ms = request.retention_time_ms if 2 <= version <= 4 else -1
    max_metadata = coordinator.cfg("offset.metadata.max.bytes") if coordinator is not None else 4096
    # KafkaApis answers refused and unknown topics/partitions first, as it meets them, and then merges
    # in the coordinator's results (appended to a topic already answered, else as new topics after).
    # Topics are keyed by name, or by id from v10 (an unknown id answers UNKNOWN_TOPIC_ID first of all).
    answered: dict[Any, list[tuple[int, ErrorCode]]] = {}
    # what goes to the coordinator, in request order: (key, name, partition); too large metadata
    # is refused per partition, after the group checks
    to_coordinator: list[tuple[Any, str, Any]] = []
    key_of: dict[str, Any] = {}
    allowed = permits(ctx)  # READ on the group is checked before (security.acl.enforce)
    for topic in request.topics:
        name = _topic_by_id(broker, topic.topic_id) if use_ids else topic.name
        key = topic.topic_id if use_ids else name
        if use_ids and not name:
            answered.setdefault(key, []).extend((p.partition_index, ErrorCode.UNKNOWN_TOPIC_ID)
                                                for p in topic.partitions)
            continue
        key_of[name] = key
        meta = broker.metadata.get(name) if broker.metadata is not None else None
        readable = allowed(OP_READ, RT_TOPIC, name)
        for p in topic.partitions:
            index = p.partition_index
            if not readable:
                answered.setdefault(key, []).append((index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif meta is None or not 0 <= index < meta.partitions:
                answered.setdefault(key, []).append((index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                to_coordinator.append((key, name, p))

    def too_large(p: Any) -> bool:
        # Kafka compares String.length() (UTF-16 units), not bytes
        return p.committed_metadata is not None and len(p.committed_metadata.encode("utf-16-le")) // 2 > max_metadata

    group_error: ErrorCode | None = None
    if coordinator is None:
        group_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        # An empty group id is allowed here (Kafka keeps it for old clients: group "").
        try:
            coordinator.validate_offset_commit(
                request.group_id, generation, member_id or "", instance_id, version,
                partitions=[(name, p.partition_index) for _, name, p in to_coordinator if not too_large(p)])
        except GroupError as exc:
            group_error = exc.code
    checked: list[tuple[Any, int, ErrorCode]] = []  # what the coordinator answers, in request order
    commits = []
    for key, name, p in to_coordinator:
        index = p.partition_index
        if group_error is not None:
            checked.append((key, index, group_error))
        elif too_large(p):
            checked.append((key, index, ErrorCode.OFFSET_METADATA_TOO_LARGE))
        else:
            expire = -1
            if retention_ms != -1 and 2 <= version <= 4:
                expire = now + retention_ms
            elif version == 1 and p.commit_timestamp != -1:
                expire = p.commit_timestamp + coordinator.cfg("offsets.retention.minutes") * 60_000
            leader_epoch = p.committed_leader_epoch if version >= 6 else -1
            commits.append((name, index, p.committed_offset, leader_epoch, p.committed_metadata or "", expire))
            checked.append((key, index, ErrorCode.NONE))
    if commits and coordinator is not None:
        try:
            coordinator.commit_offsets(request.group_id, commits)
        except GroupError as exc:
            committed = {(key_of[name], index) for name, index, *_ in commits}
            checked = [(key, index, exc.code if (key, index) in committed else code)
                       for key, index, code in checked]
    for key, index, code in checked:
        answered.setdefault(key, []).append((index, code))
    R = OffsetCommitResponse

    def topic(key: Any, partitions: list) -> Any:
        return R.OffsetCommitResponseTopic(topic_id=key, partitions=partitions) if use_ids else \
            R.OffsetCommitResponseTopic(name=key, partitions=partitions)

    return R(throttle_time_ms=0, topics=[
        topic(key, [R.OffsetCommitResponsePartition(partition_index=index, error_code=int(code))
                    for index, code in parts])
        for key, parts in answered.items()])


def _fetch_by_ids(ctx: RequestContext, coordinator: GroupCoordinator | None, g: Any, require_stable: bool,
                  allowed: Any) -> tuple[ErrorCode, list]:
    """OffsetFetch v10 (topics by id) for one group, as KafkaApis does it: ids resolved to names first;
    the coordinator's answer, then in request order the topics with an unknown id (UNKNOWN_TOPIC_ID)
    or refused (TOPIC_AUTHORIZATION_FAILED); all topics: only those that still exist. Each answer
    entry is (topic id, partitions)."""
    broker = ctx.broker
    resolved = [] if g.topics is None else [(t, _topic_by_id(broker, t.topic_id)) for t in g.topics]
    wanted = None if g.topics is None else [(name, i) for t, name in resolved if name for i in t.partition_indexes]
    code, offsets = _fetch(coordinator, g.group_id, wanted, g.member_id, g.member_epoch, require_stable, allowed)
    if g.topics is None:
        ids = {name: broker.metadata.get(name) for name, _ in offsets} if broker.metadata is not None else {}
        return code, [(ids[name].topic_id, parts) for name, parts in offsets if ids.get(name) is not None]
    denied = set() if allowed is None else {name for _, name in resolved if name
                                            and not allowed(OP_DESCRIBE, RT_TOPIC, name)}
    by_name = dict(offsets)
    out = [(t.topic_id, by_name[name]) for t, name in resolved if name and name not in denied and name in by_name]
    if code == ErrorCode.NONE:
        for t, name in resolved:
            if not name:
                out.append((t.topic_id, [(i, -1, -1, "", ErrorCode.UNKNOWN_TOPIC_ID) for i in t.partition_indexes]))
            elif name in denied:
                out.append((t.topic_id, by_name[name]))
    return code, out


@handles(OFFSET_FETCH_KEY, 0, 10, advertised_min=0)
async def handle_offset_fetch(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    allowed = permits(ctx)
    if version >= 8:
        use_ids = version >= 10  # topics by id, KIP-848
        R = OffsetFetchResponse.OffsetFetchResponseTopics
        groups = []
        for g in request.groups:
            if use_ids:
                code, offsets = _fetch_by_ids(ctx, coordinator, g, request.require_stable, allowed)
            else:
                wanted = None if g.topics is None else [(t.name, i) for t in g.topics for i in t.partition_indexes]
                member_id = g.member_id if version >= 9 else None
                epoch = g.member_epoch if version >= 9 else -1
                code, offsets = _fetch(coordinator, g.group_id, wanted, member_id, epoch, request.require_stable,
                                       allowed)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=int(code),
                topics=[
                    R(**({"topic_id": name} if use_ids else {"name": name}),
                        partitions=[
                            OffsetFetchResponse.OffsetFetchResponsePartitions(
                                partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                metadata=m, error_code=int(err))
                            for i, o, e, m, err in parts
                        ],
                    )
                    for name, parts in offsets
                ],
            ))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    wanted = None if request.topics is None else [(t.name, i) for t in request.topics for i in t.partition_indexes]
    code, offsets = _fetch(coordinator, request.group_id, wanted, None, -1, version >= 7 and request.require_stable,
                           allowed)
    if version < 2 and code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
        offsets = _group_by_topic([(tp, None) for tp in wanted or []])
    if version < 2 and code != ErrorCode.NONE:
        # v0/v1 have no top-level error: every partition carries it.
        offsets = [(name, [(i, -1, -1, "", code) for i, *_ in parts]) for name, parts in offsets]
    return OffsetFetchResponse(
        throttle_time_ms=0, error_code=int(code),
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=m,
                        error_code=int(err))
                    for i, o, e, m, err in parts
                ],
            )
            for name, parts in offsets
        ],
    )


def _fetch(coordinator: GroupCoordinator | None, group_id: str, wanted: list[tuple[str, int]] | None,
           member_id: str | None, member_epoch: int, require_stable: bool = False,
           allowed: Any = None) -> tuple[ErrorCode, list]:
    """(error, [(topic, [(partition, offset, leader epoch, metadata, error)])]) in request (or topic) order.

    With ``require_stable`` a partition an open transaction has an offset for answers
    UNSTABLE_OFFSET_COMMIT (the client retries until the transaction completes). With ACLs
    (`allowed`, KafkaApis' rules): without DESCRIBE on the group, GROUP_AUTHORIZATION_FAILED and no
    topics; requested partitions of topics the principal may not DESCRIBE come last with
    TOPIC_AUTHORIZATION_FAILED; a fetch of all topics leaves those topics out.
    """
    if allowed is None:
        return _fetch_authorized(coordinator, group_id, wanted, member_id, member_epoch, require_stable)
    if not allowed(OP_DESCRIBE, RT_GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    describable: dict[str, bool] = {}

    def may(topic: str) -> bool:
        if topic not in describable:
            describable[topic] = allowed(OP_DESCRIBE, RT_TOPIC, topic)
        return describable[topic]

    denied = [] if wanted is None else [tp for tp in wanted if not may(tp[0])]
    if denied:
        wanted = [tp for tp in wanted if may(tp[0])]
    code, answer = _fetch_authorized(coordinator, group_id, wanted, member_id, member_epoch, require_stable)
    if wanted is None:
        answer = [(topic, parts) for topic, parts in answer if may(topic)]
    out: dict[str, list] = {}
    for topic, partition in denied:
        out.setdefault(topic, []).append((partition, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return code, answer + list(out.items())


def _fetch_authorized(coordinator: GroupCoordinator | None, group_id: str, wanted: list[tuple[str, int]] | None,
                      member_id: str | None, member_epoch: int, require_stable: bool = False) -> tuple[ErrorCode, list]:
    def empty_answer() -> list:
        return _group_by_topic([(tp, None) for tp in wanted or []])

    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, empty_answer()
    try:
        coordinator.validate_offset_fetch(group_id, member_id, member_epoch)
    except GroupError as exc:
        return exc.code, empty_answer()
    found = coordinator.fetch_offsets(group_id, wanted)
    unstable = set()
    if require_stable:
        unstable = {tp for tp in found if coordinator.has_pending_transactional(group_id, tp)}
    return ErrorCode.NONE, _group_by_topic(list(found.items()), unstable)


def _group_by_topic(items: list, unstable: set | frozenset = frozenset()) -> list:
    out: dict[str, list[tuple[int, int, int, str, ErrorCode]]] = {}
    for (topic, partition), value in items:
        if (topic, partition) in unstable:
            out.setdefault(topic, []).append((partition, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
        elif value is None:
            out.setdefault(topic, []).append((partition, -1, -1, "", ErrorCode.NONE))
        else:
            out.setdefault(topic, []).append(
                (partition, value.offset, value.leader_epoch, value.metadata, ErrorCode.NONE))
    return list(out.items())


# ====================================================================== ListGroups / DescribeGroups


@handles(LIST_GROUPS_KEY, 0, _max(LIST_GROUPS_KEY))
async def handle_list_groups(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return ListGroupsResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), groups=[])
    states = {s.lower() for s in request.states_filter} if version >= 4 and request.states_filter else None
    types = {t.lower() for t in request.types_filter} if version >= 5 and request.types_filter else None
    groups = []
    allowed = permits(ctx)
    # all groups with DESCRIBE on the cluster, otherwise those the principal may DESCRIBE (KafkaApis)
    everything = allowed(OP_DESCRIBE, RT_CLUSTER, ACL_CLUSTER)
    for group_id, protocol_type, state, group_type in coordinator.list_groups():
        if not everything and not allowed(OP_DESCRIBE, RT_GROUP, group_id):
            continue
        if states is not None and state.lower() not in states:
            continue
        if types is not None and group_type not in types:
            continue
        groups.append(ListGroupsResponse.ListedGroup(
            group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=group_type))
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)


@handles(DESCRIBE_GROUPS_KEY, 0, _max(DESCRIBE_GROUPS_KEY))
async def handle_describe_groups(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    include_ops = version >= 3 and request.include_authorized_operations
    allowed = permits(ctx)
    # without DESCRIBE on a group: GROUP_AUTHORIZATION_FAILED, answered first (KafkaApis)
    described = [_group_error(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                 for gid in request.groups if not allowed(OP_DESCRIBE, RT_GROUP, gid)]
    for group_id in _kafka_order(coordinator, [g for g in request.groups if allowed(OP_DESCRIBE, RT_GROUP, g)]):
        group = _describe(coordinator, group_id, version, include_ops)
        if include_ops and group.error_code == 0:
            group.authorized_operations = operations_bits(ctx, RT_GROUP, group_id, GROUP_OPERATIONS)
        described.append(group)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def _group_error(group_id: str, code: ErrorCode) -> object:
    # Kafka's DescribeGroupsResponse.groupError: unknown state, protocol and members
    return DescribeGroupsResponse.DescribedGroup(
        error_code=int(code), group_id=group_id, group_state="", protocol_type="", protocol_data="",
        members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _describe(coordinator: GroupCoordinator | None, group_id: str, version: int, include_ops: bool) -> object:
    ops = GROUP_ALL_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED
    Described = DescribeGroupsResponse.DescribedGroup
    if coordinator is None:
        return Described(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), group_id=group_id, group_state="",
                         protocol_type="", protocol_data="", members=[], authorized_operations=ops)
    group = coordinator.describe_group(group_id)
    if group is None or not isinstance(group, ClassicGroup) or group.is_in(GroupState.DEAD):
        if version >= 6:
            message = (f"Group {group_id} not found." if group is None
                       else f"Group {group_id} is not a classic group.")
            return Described(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message,
                             group_id=group_id, group_state="Dead", protocol_type="", protocol_data="",
                             members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        return Described(error_code=0, group_id=group_id, group_state="Dead", protocol_type="",
                         protocol_data="", members=[], authorized_operations=ops)
    assert isinstance(group, ClassicGroup)
    stable = group.is_in(GroupState.STABLE)
    members = [
        DescribeGroupsResponse.DescribedGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host,
            # outside Stable Kafka leaves the metadata out but still shows the current assignment
            member_metadata=describe_metadata(m, group.protocol_name) if stable else b"",
            member_assignment=m.assignment,
        )
        for m in group.members.values()
    ]
    return Described(
        error_code=0, group_id=group_id, group_state=group.state.value, protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "", members=members, authorized_operations=ops,
    )


# ====================================================================== DeleteGroups / OffsetDelete


@handles(DELETE_GROUPS_KEY, 0, 3)  # v3 adds ErrorMessage, set only for streams-group failures
async def handle_delete_groups(ctx: RequestContext, header, request) -> object:
    coordinator = _coordinator(ctx)
    allowed = permits(ctx)
    # DELETE on each group; the refused ones come last with GROUP_AUTHORIZATION_FAILED (KafkaApis)
    unique = list(dict.fromkeys(request.groups_names))
    refused = [g for g in unique if not allowed(OP_DELETE, RT_GROUP, g)]
    names = _kafka_order(coordinator, [g for g in request.groups_names if g not in refused], hash_set=True)
    if coordinator is None:
        results = dict.fromkeys(names, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    elif names:
        results = coordinator.delete_groups(names)
    else:
        results = {}
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[DeleteGroupsResponse.DeletableGroupResult(group_id=n, error_code=int(results[n])) for n in names]
        + [DeleteGroupsResponse.DeletableGroupResult(group_id=n, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
           for n in refused],
    )


@handles(OFFSET_DELETE_KEY, 0, _max(OFFSET_DELETE_KEY))
async def handle_offset_delete(ctx: RequestContext, header, request) -> object:
    broker = ctx.broker
    coordinator = _coordinator(ctx)
    allowed = permits(ctx)
    if not allowed(OP_DELETE, RT_GROUP, request.group_id):  # DELETE on the group, READ on each topic
        return OffsetDeleteResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), throttle_time_ms=0,
                                    topics=[])
    known: list[tuple[str, int]] = []
    codes: dict[tuple[str, int], ErrorCode] = {}
    for topic in request.topics:
        meta = broker.metadata.get(topic.name) if broker.metadata is not None else None
        readable = allowed(OP_READ, RT_TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not readable:
                codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partitions:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    top = ErrorCode.NONE
    if coordinator is None:
        top = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        try:
            codes.update(coordinator.delete_offsets(request.group_id, known))
        except GroupError as exc:
            top = exc.code
    if top != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=int(top), throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(
        error_code=0, throttle_time_ms=0,
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=int(codes[(topic.name, p.partition_index)]))
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


# ====================================================================== KIP-848


def _topic_ids(ctx: RequestContext, assignment: dict[str, set[int]]) -> list[Any]:
    out = []
    meta = ctx.broker.metadata
    for name in sorted(assignment):
        topic = meta.get(name) if meta is not None else None
        if topic is None:
            continue
        out.append(ConsumerGroupHeartbeatResponse.TopicPartitions(
            topic_id=topic.topic_id, partitions=sorted(assignment[name])))
    return out


@handles(CONSUMER_GROUP_HEARTBEAT_KEY, 0, _max(CONSUMER_GROUP_HEARTBEAT_KEY))
async def handle_consumer_group_heartbeat(ctx: RequestContext, header, request) -> object:
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), member_epoch=0,
            heartbeat_interval_ms=0)
    await ensure_internal_topic(ctx.broker, coordinator.offsets_topic_spec())
    owned = None
    meta = ctx.broker.metadata
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            topic = meta.by_id(tp.topic_id) if meta is not None else None
            if topic is not None:
                owned.setdefault(topic.name, set()).update(tp.partitions)
    result = coordinator.consumer_group_heartbeat(
        group_id=request.group_id, api_version=header.api_version, member_id=request.member_id or "",
        member_epoch=request.member_epoch, instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if request.subscribed_topic_names is None else list(request.subscribed_topic_names),
        subscribed_topic_regex=request.subscribed_topic_regex if header.api_version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned, client_id=header.client_id or "",
        client_host=_client_host(ctx),
    )
    if result.error != ErrorCode.NONE:
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=int(result.error), error_message=result.error_message,
            member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if result.assignment is not None:
        assignment = ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=_topic_ids(ctx, result.assignment))
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id=result.member_id,
        member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


@handles(CONSUMER_GROUP_DESCRIBE_KEY, 0, _max(CONSUMER_GROUP_DESCRIBE_KEY))
async def handle_consumer_group_describe(ctx: RequestContext, header, request) -> object:
    coordinator = _coordinator(ctx)
    R = ConsumerGroupDescribeResponse
    include_ops = request.include_authorized_operations
    meta = ctx.broker.metadata

    def assignment(tps: dict[str, set[int]]) -> object:
        out = []
        for name in sorted(tps):
            topic = meta.get(name) if meta is not None else None
            out.append(R.TopicPartitions(topic_id=topic.topic_id if topic else Uuid.ZERO, topic_name=name,
                                         partitions=sorted(tps[name])))
        return R.Assignment(topic_partitions=out)

    allowed = permits(ctx)
    groups = [R.DescribedGroup(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                               error_message=AUTH_MESSAGES[ErrorCode.GROUP_AUTHORIZATION_FAILED], group_id=gid,
                               group_state="", authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, members=[])
              for gid in request.group_ids if not allowed(OP_DESCRIBE, RT_GROUP, gid)]
    for group_id in _kafka_order(coordinator, [g for g in request.group_ids if allowed(OP_DESCRIBE, RT_GROUP, g)]):
        # KafkaApis fills in the operations of the groups described without an error only
        group = coordinator.describe_group(group_id) if coordinator is not None else None
        if coordinator is None:
            groups.append(R.DescribedGroup(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), group_id=group_id,
                                           group_state="", authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                                           members=[]))
            continue
        if not isinstance(group, ConsumerGroup):
            message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a consumer group."
            groups.append(R.DescribedGroup(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message,
                                           group_id=group_id, group_state="",
                                           authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, members=[]))
            continue
        ops = operations_bits(ctx, RT_GROUP, group_id, GROUP_OPERATIONS) if include_ops else AUTHORIZED_OPERATIONS_OMITTED
        members = [
            R.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex, assignment=assignment(m.assigned),
                target_assignment=assignment(group.target.get(m.member_id, {})),
                member_type=0 if m.classic is not None else 1,  # KIP-1099: classic members inside the group
            )
            for m in group.members.values()
        ]
        groups.append(R.DescribedGroup(
            error_code=0, group_id=group_id, group_state=group.state_name(), group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=group.preferred_assignor(), members=members,
            authorized_operations=ops,
        ))
    return R(throttle_time_ms=0, groups=[_hide_undescribable_topics(R, g, allowed) for g in groups])


def _hide_undescribable_topics(R: Any, group: Any, allowed: Any) -> Any:
    """KafkaApis: a client may not see topics it cannot DESCRIBE, so a group whose members are
    assigned (or about to be) such a topic is answered as TOPIC_AUTHORIZATION_FAILED, members and
    all left out."""
    for member in group.members:
        for assignment in (member.assignment, member.target_assignment):
            if any(not allowed(OP_DESCRIBE, RT_TOPIC, tp.topic_name) for tp in assignment.topic_partitions):
                return R.DescribedGroup(
                    error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), group_id=group.group_id, group_state="",
                    error_message="The group has described topic(s) that the client is not authorized to describe.",
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, members=[])
    return group
