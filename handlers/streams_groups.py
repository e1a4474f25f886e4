"""Streams groups (KIP-1071) on the group coordinator: StreamsGroupHeartbeat and StreamsGroupDescribe.

The group state is in :mod:`odradek.group_coordinator.streams`. The heartbeat handler creates
the internal topics (repartition and changelog) the coordinator finds missing, as Kafka's broker
does after the coordinator answers with MISSING_INTERNAL_TOPICS.
"""

from __future__ import annotations

import logging
from typing import Any

from ..group_coordinator import streams as streams_groups
from ..group_coordinator.streams_assignor import ASSIGNOR_NAME
from ..security.acl import OP_DESCRIBE, OP_READ, RT_GROUP, permits
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .common import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS, operations_bits
from .groups import _client_host, _coordinator, _kafka_order
from .registry import RequestContext, handles
from .topics import ensure_internal_topic

log = logging.getLogger(__name__)

STREAMS_GROUP_HEARTBEAT_KEY = 88
STREAMS_GROUP_DESCRIBE_KEY = 89
StreamsGroupHeartbeatResponse = response_class(STREAMS_GROUP_HEARTBEAT_KEY)
StreamsGroupDescribeResponse = response_class(STREAMS_GROUP_DESCRIBE_KEY)


def _max(key: int) -> int:
    return supported_versions(key)[1]


def _task_ids(cls: Any, tasks: dict[str, set[int]]) -> list:
    return [cls(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


async def _create_internal_topics(ctx: RequestContext, topics: dict[str, streams_groups.TopicInfo]) -> None:
    """Create the missing internal topics with the configs the topology gives them."""
    broker = ctx.broker
    if getattr(broker, "forwarding", None) is not None:
        log.warning("Streams internal topics %s not created: cluster brokers forward topic creation",
                    sorted(topics))
        return
    for name in sorted(topics):
        if broker.metadata.get(name) is None:
            info = topics[name]
            await ensure_internal_topic(broker, (name, info.partitions, dict(info.configs)))
            log.info("Created streams internal topic %s with %d partitions", name, info.partitions)


@handles(STREAMS_GROUP_HEARTBEAT_KEY, 0, _max(STREAMS_GROUP_HEARTBEAT_KEY))
async def handle_streams_group_heartbeat(ctx: RequestContext, header, request) -> object:
    R = StreamsGroupHeartbeatResponse

    def error(code: ErrorCode, message: str | None = None) -> object:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, member_id="", member_epoch=0,
                 heartbeat_interval_ms=0, acceptable_recovery_lag_legacy=0, task_offset_interval_ms=0, status=None,
                 endpoint_information_epoch=0)

    if not permits(ctx)(OP_READ, RT_GROUP, request.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    await ensure_internal_topic(ctx.broker, coordinator.offsets_topic_spec())
    result = streams_groups.streams_group_heartbeat(coordinator, request, client_id=header.client_id or "",
                                                    client_host=_client_host(ctx))
    if result.error != ErrorCode.NONE:
        return error(result.error, result.error_message)
    if result.to_create:
        await _create_internal_topics(ctx, result.to_create)
    tasks = result.tasks
    endpoints = None
    if result.partitions_by_endpoint is not None:
        endpoints = [R.EndpointToPartitions(
            user_endpoint=R.Endpoint(host=host, port=port),
            active_partitions=[R.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(active.items())],
            standby_partitions=[R.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(standby.items())])
            for (host, port), active, standby in result.partitions_by_endpoint]
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=result.member_id,
             member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
             # v0 carries the lag as an int32, v1 as an int64 in a field of its own
             acceptable_recovery_lag_legacy=(min(result.acceptable_recovery_lag, 2**31 - 1)
                                             if header.api_version == 0 else 0),
             acceptable_recovery_lag=result.acceptable_recovery_lag if header.api_version >= 1 else -1,
             task_offset_interval_ms=result.task_offset_interval_ms,
             status=[R.Status(status_code=c, status_detail=d) for c, d in result.status],
             active_tasks=None if tasks is None else _task_ids(R.TaskIds, tasks.active),
             standby_tasks=None if tasks is None else _task_ids(R.TaskIds, tasks.standby),
             warmup_tasks=None if tasks is None else _task_ids(R.TaskIds, tasks.warmup),
             endpoint_information_epoch=result.endpoint_information_epoch,
             partitions_by_user_endpoint=endpoints)


@handles(STREAMS_GROUP_DESCRIBE_KEY, 0, _max(STREAMS_GROUP_DESCRIBE_KEY))
async def handle_streams_group_describe(ctx: RequestContext, header, request) -> object:
    R = StreamsGroupDescribeResponse
    coordinator = _coordinator(ctx)
    allowed = permits(ctx)

    def assignment(t: streams_groups.TasksTuple) -> Any:
        return R.Assignment(active_tasks=_task_ids(R.TaskIds, t.active),
                            standby_tasks=_task_ids(R.TaskIds, t.standby),
                            warmup_tasks=_task_ids(R.TaskIds, t.warmup))

    def topic_info(i: streams_groups.TopicInfo, partitions: int) -> Any:
        return R.TopicInfo(name=i.name, partitions=partitions, replication_factor=i.replication_factor,
                           topic_configs=[R.KeyValue(key=k, value=v) for k, v in sorted(i.configs.items())])

    def empty(code: ErrorCode, group_id: str, message: str | None = None) -> Any:
        return R.DescribedGroup(error_code=int(code), error_message=message, group_id=group_id, group_state="",
                                group_epoch=0, assignment_epoch=0, topology=None, members=[],
                                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

    groups = [empty(ErrorCode.GROUP_AUTHORIZATION_FAILED, gid)
              for gid in request.group_ids if not allowed(OP_DESCRIBE, RT_GROUP, gid)]
    wanted = [g for g in request.group_ids if allowed(OP_DESCRIBE, RT_GROUP, g)]
    for group_id in _kafka_order(coordinator, wanted):
        if coordinator is None:
            groups.append(empty(ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id))
            continue
        group = coordinator.describe_group(group_id)
        if not isinstance(group, streams_groups.StreamsGroup):
            message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a streams group."
            groups.append(empty(ErrorCode.GROUP_ID_NOT_FOUND, group_id, message))
            continue
        ops = (operations_bits(ctx, RT_GROUP, group_id, GROUP_OPERATIONS) if request.include_authorized_operations
               else AUTHORIZED_OPERATIONS_OMITTED)
        topology = None
        if group.topology is not None:
            counts = group.configured.to_create if group.configured is not None else {}

            def parts(i: streams_groups.TopicInfo, counts: dict = counts) -> int:
                have = coordinator.topic_partition_count(i.name)
                if have is not None:
                    return have
                return counts[i.name].partitions if i.name in counts else i.partitions

            subs = []
            for s in group.topology.subtopologies.values():
                subs.append(R.Subtopology(
                    subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                    repartition_sink_topics=list(s.repartition_sink_topics),
                    state_changelog_topics=[topic_info(i, parts(i)) for i in s.state_changelog_topics],
                    repartition_source_topics=[topic_info(i, parts(i)) for i in s.repartition_source_topics]))
            topology = R.Topology(epoch=group.topology.epoch, subtopologies=subs)
        members = []
        for m in group.members.values():
            members.append(R.Member(
                member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                process_id=m.process_id,
                user_endpoint=None if m.user_endpoint is None else R.Endpoint(host=m.user_endpoint[0],
                                                                              port=m.user_endpoint[1]),
                client_tags=[R.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
                task_offsets=[R.TaskOffset(subtopology_id=s, partition=p, offset=o)
                              for (s, p), o in sorted(m.task_offsets.items())],
                task_end_offsets=[R.TaskOffset(subtopology_id=s, partition=p, offset=o)
                                  for (s, p), o in sorted(m.task_end_offsets.items())],
                assignment=assignment(m.assigned),
                target_assignment=assignment(group.target.get(m.member_id, streams_groups.TasksTuple())),
                is_classic=False))
        groups.append(R.DescribedGroup(error_code=0, group_id=group_id, group_state=group.state_name(),
                                       group_epoch=group.group_epoch, assignment_epoch=group.target_epoch,
                                       topology=topology, members=members, authorized_operations=ops,
                                       assignor_name=ASSIGNOR_NAME))
    return R(throttle_time_ms=0, groups=groups)
