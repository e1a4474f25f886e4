"""Streams group records in ``__consumer_offsets``: Kafka 4.4's StreamsGroup*Key/Value (key versions
17-23), written as differences from what the log already says, and read back at load."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import records as rec
from .streams import StreamsGroup, StreamsMember, Subtopology, TasksTuple, TopicInfo, Topology

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23
SCHEMAS = {
    GROUP_METADATA: ("StreamsGroupMetadataKey", "StreamsGroupMetadataValue"),
    MEMBER_METADATA: ("StreamsGroupMemberMetadataKey", "StreamsGroupMemberMetadataValue"),
    TARGET_ASSIGNMENT_METADATA: ("StreamsGroupTargetAssignmentMetadataKey",
                                 "StreamsGroupTargetAssignmentMetadataValue"),
    TARGET_ASSIGNMENT_MEMBER: ("StreamsGroupTargetAssignmentMemberKey", "StreamsGroupTargetAssignmentMemberValue"),
    CURRENT_MEMBER_ASSIGNMENT: ("StreamsGroupCurrentMemberAssignmentKey",
                                "StreamsGroupCurrentMemberAssignmentValue"),
    TOPOLOGY: ("StreamsGroupTopologyKey", "StreamsGroupTopologyValue"),
}
#: The order records of one change are written in (Kafka writes member metadata, the topology and
#: the group epoch before the target assignment, and the current assignment last).
_KEY_ORDER = (MEMBER_METADATA, TOPOLOGY, GROUP_METADATA, TARGET_ASSIGNMENT_MEMBER, TARGET_ASSIGNMENT_METADATA,
              CURRENT_MEMBER_ASSIGNMENT)


_FAMILY = rec.RecordFamily(SCHEMAS)
key = _FAMILY.key
value = _FAMILY.value
value_class = _FAMILY.value_class
decode = _FAMILY.decode
collect = _FAMILY.collect


def _task_ids(cls: type, tasks: dict[str, set[int]], epochs: dict[tuple[str, int], int] | None = None) -> list:
    """TaskIds entries; with `epochs`, each active task's assignment epoch (Kafka 4.4's AssignmentEpochs)."""
    out = []
    for s, ps in sorted(tasks.items()):
        if ps:
            item = cls(subtopology_id=s, partitions=sorted(ps))
            if epochs is not None:
                item.assignment_epochs = [epochs.get((s, p), 0) for p in sorted(ps)]
            out.append(item)
    return out


def _topology_value(topology: Topology) -> Any:
    cls = value_class(TOPOLOGY)

    def info(i: TopicInfo) -> Any:
        return cls.TopicInfo(name=i.name, partitions=i.partitions, replication_factor=i.replication_factor,
                             topic_configs=[cls.TopicConfig(key=k, value=v) for k, v in sorted(i.configs.items())])

    subs = []
    for s in topology.subtopologies.values():
        subs.append(cls.Subtopology(
            subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
            source_topic_regex=list(s.source_topic_regex),
            state_changelog_topics=[info(i) for i in s.state_changelog_topics],
            repartition_sink_topics=list(s.repartition_sink_topics),
            repartition_source_topics=[info(i) for i in s.repartition_source_topics],
            copartition_groups=[cls.CopartitionGroup(source_topics=a, source_topic_regex=b, repartition_source_topics=c)
                                for a, b, c in s.copartition_groups]))
    return cls(epoch=topology.epoch, subtopologies=subs)


def desired_records(group: StreamsGroup) -> dict[bytes, bytes]:
    """Every record (key -> value bytes) that describes the group now, in write order."""
    gid = group.group_id
    out: dict[int, list[tuple[bytes, bytes]]] = {v: [] for v in _KEY_ORDER}
    member_cls = value_class(MEMBER_METADATA)
    target_cls = value_class(TARGET_ASSIGNMENT_MEMBER)
    current_cls = value_class(CURRENT_MEMBER_ASSIGNMENT)
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        out[MEMBER_METADATA].append((key(MEMBER_METADATA, group_id=gid, member_id=m.member_id), value(
            MEMBER_METADATA, member_cls(
                instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms, topology_epoch=m.topology_epoch,
                process_id=m.process_id,
                user_endpoint=None if m.user_endpoint is None else member_cls.Endpoint(
                    host=m.user_endpoint[0], port=m.user_endpoint[1]),
                client_tags=[member_cls.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())]))))
        target = group.target.get(m.member_id, TasksTuple())
        out[TARGET_ASSIGNMENT_MEMBER].append((key(TARGET_ASSIGNMENT_MEMBER, group_id=gid, member_id=m.member_id),
                                              value(TARGET_ASSIGNMENT_MEMBER, target_cls(
                                                  active_tasks=_task_ids(target_cls.TaskIds, target.active),
                                                  standby_tasks=_task_ids(target_cls.TaskIds, target.standby),
                                                  warmup_tasks=_task_ids(target_cls.TaskIds, target.warmup)))))
        t = current_cls.TaskIds
        out[CURRENT_MEMBER_ASSIGNMENT].append((key(CURRENT_MEMBER_ASSIGNMENT, group_id=gid, member_id=m.member_id),
                                               value(CURRENT_MEMBER_ASSIGNMENT, current_cls(
                                                   member_epoch=m.member_epoch,
                                                   previous_member_epoch=m.previous_member_epoch, state=m.state,
                                                   active_tasks=_task_ids(t, m.assigned.active, m.active_epochs),
                                                   standby_tasks=_task_ids(t, m.assigned.standby),
                                                   warmup_tasks=_task_ids(t, m.assigned.warmup),
                                                   active_tasks_pending_revocation=_task_ids(
                                                       t, m.pending_revocation.active, m.active_epochs),
                                                   standby_tasks_pending_revocation=_task_ids(
                                                       t, m.pending_revocation.standby),
                                                   warmup_tasks_pending_revocation=_task_ids(
                                                       t, m.pending_revocation.warmup)))))
    if group.topology is not None:
        out[TOPOLOGY].append((key(TOPOLOGY, group_id=gid), value(TOPOLOGY, _topology_value(group.topology))))
    meta_cls = value_class(GROUP_METADATA)
    out[GROUP_METADATA].append((key(GROUP_METADATA, group_id=gid), value(GROUP_METADATA, meta_cls(
        epoch=group.group_epoch, metadata_hash=group.metadata_hash,
        validated_topology_epoch=group.validated_topology_epoch,
        last_assignment_configs=[meta_cls.LastAssignmentConfig(key=k, value=v)
                                 for k, v in sorted(group.last_assignment_configs.items())]))))
    out[TARGET_ASSIGNMENT_METADATA].append((key(TARGET_ASSIGNMENT_METADATA, group_id=gid), value(
        TARGET_ASSIGNMENT_METADATA, value_class(TARGET_ASSIGNMENT_METADATA)(
            assignment_epoch=group.target_epoch, assignment_timestamp=group.assignment_timestamp_ms))))
    return {k: val for version in _KEY_ORDER for k, val in out[version]}


def changes(group: StreamsGroup, desired: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """Records to append so the log says `desired`: tombstones for what is gone, then what changed."""
    gone = [(k, None) for k in group.persisted if k not in desired]
    gone.sort(key=lambda kv: -int.from_bytes(kv[0][:2], "big"))
    updated = [(k, v) for k, v in desired.items() if group.persisted.get(k) != v]
    return [*gone, *updated]


def _tasks(items: list) -> dict[str, set[int]]:
    return {t.subtopology_id: set(t.partitions) for t in items or [] if t.partitions}


def _epochs(*lists: list) -> dict[tuple[str, int], int]:
    return {(t.subtopology_id, p): e for items in lists for t in items or []
            for p, e in zip(t.partitions, t.assignment_epochs or [], strict=False)}


def group_from_records(group_id: str, found: dict[int, dict[str, Any]], session_deadline: float) -> StreamsGroup:
    """Rebuild a streams group from its latest records: found[key version][member id or ""] = value."""
    group = StreamsGroup(group_id)
    meta = found.get(GROUP_METADATA, {}).get("")
    if meta is not None:
        group.group_epoch = meta.epoch
        group.metadata_hash = meta.metadata_hash
        group.validated_topology_epoch = meta.validated_topology_epoch
        group.last_assignment_configs = {c.key: c.value for c in meta.last_assignment_configs or []}
    target_meta = found.get(TARGET_ASSIGNMENT_METADATA, {}).get("")
    if target_meta is not None:
        group.target_epoch = target_meta.assignment_epoch
        group.assignment_timestamp_ms = target_meta.assignment_timestamp
    topo = found.get(TOPOLOGY, {}).get("")
    if topo is not None:
        subs = {}
        for s in topo.subtopologies:
            def info(i: Any) -> TopicInfo:
                return TopicInfo(i.name, i.partitions, i.replication_factor,
                                 {c.key: c.value for c in i.topic_configs})
            subs[s.subtopology_id] = Subtopology(
                s.subtopology_id, list(s.source_topics), list(s.source_topic_regex),
                [info(i) for i in s.state_changelog_topics], list(s.repartition_sink_topics),
                [info(i) for i in s.repartition_source_topics],
                [(list(g.source_topics), list(g.source_topic_regex), list(g.repartition_source_topics))
                 for g in s.copartition_groups])
        group.topology = Topology(topo.epoch, dict(sorted(subs.items())))
    for member_id, v in found.get(MEMBER_METADATA, {}).items():
        m = StreamsMember(member_id=member_id, process_id=v.process_id, instance_id=v.instance_id, rack_id=v.rack_id,
                          client_id=v.client_id, client_host=v.client_host,
                          rebalance_timeout_ms=v.rebalance_timeout_ms, topology_epoch=v.topology_epoch,
                          user_endpoint=None if v.user_endpoint is None else (v.user_endpoint.host,
                                                                               v.user_endpoint.port),
                          client_tags={kv.key: kv.value for kv in v.client_tags},
                          session_deadline=session_deadline)
        current = found.get(CURRENT_MEMBER_ASSIGNMENT, {}).get(member_id)
        if current is not None:
            m.member_epoch, m.previous_member_epoch, m.state = (current.member_epoch, current.previous_member_epoch,
                                                                current.state)
            m.assigned = TasksTuple(_tasks(current.active_tasks), _tasks(current.standby_tasks),
                                    _tasks(current.warmup_tasks))
            m.active_epochs = _epochs(current.active_tasks, current.active_tasks_pending_revocation)
            m.pending_revocation = TasksTuple(_tasks(current.active_tasks_pending_revocation),
                                              _tasks(current.standby_tasks_pending_revocation),
                                              _tasks(current.warmup_tasks_pending_revocation))
        group.members[member_id] = m
        target = found.get(TARGET_ASSIGNMENT_MEMBER, {}).get(member_id)
        if target is not None:
            group.target[member_id] = TasksTuple(_tasks(target.active_tasks), _tasks(target.standby_tasks),
                                                 _tasks(target.warmup_tasks))
    return group


def load(coordinator: Any, found: dict[str, dict[int, dict[str, Any]]], raw: dict[str, dict[bytes, bytes]],
         session_deadline: float, partitions: Callable[[str], int | None]) -> None:
    """Rebuild the streams groups found in ``__consumer_offsets`` at load."""
    for group_id, records in found.items():
        if not records.get(GROUP_METADATA):
            continue  # deleted: its epoch record is a tombstone
        group = group_from_records(group_id, records, session_deadline)
        group.persisted = raw.get(group_id, {})
        if group.topology is not None:
            from .streams import configure

            group.configured = configure(group.topology, partitions)
        if group.assignment_timestamp_ms:
            # the assignment interval runs from the stored time, as in Kafka, not from the restart
            age_ms = max(0, coordinator.now_ms() - group.assignment_timestamp_ms)
            group.last_assignment = coordinator.monotonic() - age_ms / 1000
        for m in group.members.values():
            m.last_sent = None
        coordinator.groups[group_id] = group
