"""Share groups (KIP-932) on the group coordinator: ShareGroupHeartbeat and ShareGroupDescribe.

The share-partition side (ShareFetch, ShareAcknowledge) is in :mod:`.share_fetch`; the group
state itself in :mod:`odradek.group_coordinator.share`.
"""

from __future__ import annotations

from typing import Any

from ..group_coordinator import share as share_groups
from ..security.acl import OP_DESCRIBE, OP_READ, RT_GROUP, permits
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
    result = share_groups.share_group_heartbeat(
        coordinator, group_id=request.group_id, member_id=request.member_id or "", member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if request.subscribed_topic_names is None else list(request.subscribed_topic_names),
        client_id=header.client_id or "", client_host=_client_host(ctx))
    if result.error != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=int(result.error), error_message=result.error_message,
                 member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)
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
