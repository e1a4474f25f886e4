"""Share groups (KIP-932) on the group coordinator: ShareGroupHeartbeat and ShareGroupDescribe.

The share-partition side (ShareFetch, ShareAcknowledge) is in :mod:`.share_fetch`; the group
state itself in :mod:`odradek.group_coordinator.share`.
"""

from __future__ import annotations

from typing import Any

import trio

from ..group_coordinator import share as share_groups
from ..security.acl import OP_DESCRIBE, OP_READ, RT_GROUP, permits
from ..share_coordinator.coordinator import ShareStateError
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class, supported_versions
from .common import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS, operations_bits
from .groups import _client_host, _coordinator, _kafka_order
from .registry import RequestContext, handles
from .topics import ensure_internal_topic

SHARE_GROUP_HEARTBEAT_KEY = 76
SHARE_GROUP_DESCRIBE_KEY = 77
ShareGroupHeartbeatResponse = response_class(SHARE_GROUP_HEARTBEAT_KEY)
ShareGroupDescribeResponse = response_class(SHARE_GROUP_DESCRIBE_KEY)


def _max(key: int) -> int:
    return supported_versions(key)[1]


@handles(SHARE_GROUP_HEARTBEAT_KEY, 1, _max(SHARE_GROUP_HEARTBEAT_KEY))
async def handle_share_group_heartbeat(ctx: RequestContext, header, request) -> object:
    R = ShareGroupHeartbeatResponse
    if not permits(ctx)(OP_READ, RT_GROUP, request.group_id):
        return R(throttle_time_ms=0, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), member_epoch=0,
                 heartbeat_interval_ms=0)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), member_epoch=0,
                 heartbeat_interval_ms=0)
    await ensure_internal_topic(ctx.broker, coordinator.offsets_topic_spec())
    group = coordinator.groups.get(request.group_id)
    result = share_groups.share_group_heartbeat(
        coordinator, group_id=request.group_id, member_id=request.member_id or "", member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if request.subscribed_topic_names is None else list(request.subscribed_topic_names),
        client_id=header.client_id or "", client_host=_client_host(ctx))
    if result.error != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=int(result.error), error_message=result.error_message,
                 member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    group = coordinator.groups.get(request.group_id)
    if isinstance(group, share_groups.ShareGroup) and group.initializing:
        await _initialize_share_state(ctx, group)
    if result.member_epoch == -1:
        # the member left: its share sessions end and what it holds goes back to the group
        manager = ctx.broker.coordinators.get("share_partitions")
        if manager is not None:
            manager.member_left(request.group_id, result.member_id)
    assignment = None
    if result.assignment is not None:
        meta = ctx.broker.metadata
        tps = []
        for name in sorted(result.assignment):
            topic = meta.get(name) if meta is not None else None
            if topic is not None:
                tps.append(R.TopicPartitions(topic_id=topic.topic_id, partitions=sorted(result.assignment[name])))
        assignment = R.Assignment(topic_partitions=tps)
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=result.member_id,
             member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
             assignment=assignment)


async def _initialize_share_state(ctx: RequestContext, group: share_groups.ShareGroup) -> None:
    """The group coordinator initializes the share state of newly subscribed partitions (Kafka's
    InitializeShareGroupState: start offset -1, the group's epoch as state epoch); they are
    assigned from the next heartbeat on, which bumps the group epoch for them (Kafka's
    initializedAssignmentPending). The partition leader resolves the start offset on its first
    ShareFetch (share.auto.offset.reset)."""
    from .share_fetch import share_coordinator  # noqa: PLC0415 - the two modules import each other's helpers

    state = share_coordinator(ctx.broker)
    if getattr(ctx.broker, "forwarding", None) is None:
        await ensure_internal_topic(ctx.broker, state.state_topic_spec())
    if not state.loaded:
        await trio.to_thread.run_sync(state.load)
    meta = ctx.broker.metadata
    pending, group.initializing = group.initializing, {}
    done = False
    for name, partitions in pending.items():
        topic = meta.get(name) if meta is not None else None
        if topic is None:
            continue
        for index in sorted(partitions):
            if state.read(group.group_id, topic.topic_id, index) is None:
                try:
                    state.initialize(group.group_id, topic.topic_id, index, group.group_epoch, -1)
                except ShareStateError:
                    group.initializing.setdefault(name, set()).add(index)  # tried again next heartbeat
                    continue
            group.mark_initialized(name, {index})
            done = True
    if done:
        # as Kafka 4.4: the end of an initialization is a record of its own, after the heartbeat's
        share_groups.persist(_coordinator(ctx), group)


@handles(SHARE_GROUP_DESCRIBE_KEY, 1, _max(SHARE_GROUP_DESCRIBE_KEY))
async def handle_share_group_describe(ctx: RequestContext, header, request) -> object:
    R = ShareGroupDescribeResponse
    coordinator = _coordinator(ctx)
    meta = ctx.broker.metadata
    allowed = permits(ctx)

    def assignment(tps: dict[str, set[int]]) -> Any:
        out = []
        for name in sorted(tps):
            topic = meta.get(name) if meta is not None else None
            out.append(R.TopicPartitions(topic_id=topic.topic_id if topic else Uuid.ZERO, topic_name=name,
                                         partitions=sorted(tps[name])))
        return R.Assignment(topic_partitions=out)

    groups = [R.DescribedGroup(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), group_id=gid, group_state="",
                               group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                               authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
              for gid in request.group_ids if not allowed(OP_DESCRIBE, RT_GROUP, gid)]
    wanted = [g for g in request.group_ids if allowed(OP_DESCRIBE, RT_GROUP, g)]
    for group_id in _kafka_order(coordinator, wanted):
        if coordinator is None:
            groups.append(R.DescribedGroup(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), group_id=group_id,
                                           group_state="", assignor_name="", members=[]))
            continue
        group = coordinator.describe_group(group_id)
        if not isinstance(group, share_groups.ShareGroup):
            message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a share group."
            groups.append(R.DescribedGroup(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message,
                                           group_id=group_id, group_state="", assignor_name="", members=[],
                                           authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        ops = (operations_bits(ctx, RT_GROUP, group_id, GROUP_OPERATIONS) if request.include_authorized_operations
               else AUTHORIZED_OPERATIONS_OMITTED)
        members = [R.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                            client_id=m.client_id, client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names), assignment=assignment(m.assigned))
                   for m in group.members.values()]
        groups.append(R.DescribedGroup(error_code=0, group_id=group_id, group_state=group.state_name(),
                                       group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                                       assignor_name=share_groups.ASSIGNOR_NAME, members=members,
                                       authorized_operations=ops))
    return R(throttle_time_ms=0, groups=groups)


# ====================================================================== share group offsets

DESCRIBE_SHARE_GROUP_OFFSETS_KEY = 90
ALTER_SHARE_GROUP_OFFSETS_KEY = 91
DELETE_SHARE_GROUP_OFFSETS_KEY = 92
DescribeShareGroupOffsetsResponse = response_class(DESCRIBE_SHARE_GROUP_OFFSETS_KEY)
AlterShareGroupOffsetsResponse = response_class(ALTER_SHARE_GROUP_OFFSETS_KEY)
DeleteShareGroupOffsetsResponse = response_class(DELETE_SHARE_GROUP_OFFSETS_KEY)


def _share_state(ctx: RequestContext):
    from .share_fetch import share_coordinator  # noqa: PLC0415 - the two modules import each other's helpers

    coordinator = share_coordinator(ctx.broker)
    if not coordinator.loaded:
        coordinator.load()
    return coordinator


def _lag(ctx: RequestContext, topic: str, partition: int, state) -> int:
    """Records not yet delivered completely: from the start offset to the high watermark, less
    those already done in the in-flight window (Kafka 4.3+'s lag)."""
    plog = ctx.broker.partition_log(topic, partition)
    if plog is None or state is None or state.start_offset < 0:
        return -1
    done = state.delivery_complete_count if state.delivery_complete_count >= 0 else 0
    return max(plog.high_watermark - state.start_offset - done, 0)


@handles(DESCRIBE_SHARE_GROUP_OFFSETS_KEY, 0, _max(DESCRIBE_SHARE_GROUP_OFFSETS_KEY))
async def handle_describe_share_group_offsets(ctx: RequestContext, header, request) -> object:
    R = DescribeShareGroupOffsetsResponse
    coordinator = _coordinator(ctx)
    allowed = permits(ctx)
    meta = ctx.broker.metadata
    state_store = _share_state(ctx)
    out = []
    for g in request.groups:
        if not allowed(OP_DESCRIBE, RT_GROUP, g.group_id):
            out.append(R.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
            continue
        group = coordinator.describe_group(g.group_id) if coordinator is not None else None
        if coordinator is None:
            out.append(R.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE)))
            continue
        if group is not None and not isinstance(group, share_groups.ShareGroup):
            out.append(R.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                error_message=f"Group {g.group_id} is not a share group."))
            continue
        if g.topics is None:
            # every initialized partition of a topic that still exists
            wanted = {t: sorted(ps) for t, ps in (group.initialized if group is not None else {}).items()
                      if meta is not None and meta.get(t) is not None}
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name in sorted(wanted) if g.topics is None else list(wanted):
            topic = meta.get(name) if meta is not None else None
            parts = []
            for index in wanted[name]:
                if topic is None or not 0 <= index < topic.partitions:
                    parts.append(R.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1,
                        error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        error_message="This server does not host this topic-partition."))
                    continue
                state = state_store.read(g.group_id, topic.topic_id, index)
                initialized = state is not None and state.start_offset >= 0
                parts.append(R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=state.start_offset if initialized else -1,
                    leader_epoch=state.leader_epoch if initialized else -1,
                    lag=_lag(ctx, name, index, state), error_code=0))
            topics.append(R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id if topic is not None else Uuid.ZERO, partitions=parts))
        out.append(R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics, error_code=0))
    return R(throttle_time_ms=0, groups=out)


def _empty_share_group(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, str | None, object]:
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
    group = coordinator.describe_group(group_id)
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
    if not isinstance(group, share_groups.ShareGroup):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
    if not group.is_empty():
        return ErrorCode.NON_EMPTY_GROUP, "The group is not empty.", None
    return ErrorCode.NONE, None, group


def _forget_share_partitions(ctx: RequestContext, group_id: str, topic_id, partitions) -> None:
    manager = ctx.broker.coordinators.get("share_partitions")
    if manager is not None:
        for index in partitions:
            manager.partitions.pop((group_id, topic_id, index), None)


@handles(ALTER_SHARE_GROUP_OFFSETS_KEY, 0, _max(ALTER_SHARE_GROUP_OFFSETS_KEY))
async def handle_alter_share_group_offsets(ctx: RequestContext, header, request) -> object:
    R = AlterShareGroupOffsetsResponse
    if not permits(ctx)(OP_READ, RT_GROUP, request.group_id):
        return R(throttle_time_ms=0, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), responses=[])
    code, message, group = _empty_share_group(ctx, request.group_id)
    if code != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[])
    coordinator = _coordinator(ctx)
    state_store = _share_state(ctx)
    meta = ctx.broker.metadata
    responses = []
    for t in request.topics:
        topic = meta.get(t.topic_name) if meta is not None else None
        parts = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition_index < topic.partitions:
                parts.append(R.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message="This server does not host this topic-partition."))
                continue
            old = state_store.read(request.group_id, topic.topic_id, p.partition_index)
            # a new state epoch: the leader's share-partition starts again from the new offset
            state_store.initialize(request.group_id, topic.topic_id, p.partition_index,
                                   (old.state_epoch + 1) if old is not None else 0, p.start_offset)
            _forget_share_partitions(ctx, request.group_id, topic.topic_id, [p.partition_index])
            group.initialized.setdefault(t.topic_name, set()).add(p.partition_index)
            parts.append(R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=0))
        responses.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else Uuid.ZERO, partitions=parts))
    share_groups.persist(coordinator, group)
    return R(throttle_time_ms=0, error_code=0, responses=responses)


@handles(DELETE_SHARE_GROUP_OFFSETS_KEY, 0, _max(DELETE_SHARE_GROUP_OFFSETS_KEY))
async def handle_delete_share_group_offsets(ctx: RequestContext, header, request) -> object:
    R = DeleteShareGroupOffsetsResponse
    if not permits(ctx)(OP_READ, RT_GROUP, request.group_id):
        return R(throttle_time_ms=0, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), responses=[])
    code, message, group = _empty_share_group(ctx, request.group_id)
    if code != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[])
    coordinator = _coordinator(ctx)
    state_store = _share_state(ctx)
    meta = ctx.broker.metadata
    responses = []
    for t in request.topics:
        topic = meta.get(t.topic_name) if meta is not None else None
        if topic is None:
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=Uuid.ZERO, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                error_message="This server does not host this topic-partition."))
            continue
        partitions = sorted(group.initialized.pop(t.topic_name, set()))
        for index in partitions:
            state_store.delete(request.group_id, topic.topic_id, index)
        _forget_share_partitions(ctx, request.group_id, topic.topic_id, partitions)
        responses.append(R.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=topic.topic_id,
                                                                error_code=0))
    share_groups.persist(coordinator, group)
    return R(throttle_time_ms=0, error_code=0, responses=responses)
