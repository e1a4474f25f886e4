"""Online migration of a consumer group between the classic and the consumer (KIP-848) protocols.

As Kafka 4.4 does it (``group.consumer.migration.policy``: bidirectional, upgrade, downgrade or
disabled; bidirectional by default):

* Upgrade: the first ConsumerGroupHeartbeat (epoch 0) to a non-empty classic group of the consumer
  protocol type turns it into a consumer group. Parked JoinGroup/SyncGroup calls hear
  REBALANCE_IN_PROGRESS; every classic member becomes a consumer group member at the
  generation as its epoch, holding the partitions of its last assignment (also its target).
  The log gets the GroupMetadata tombstone and the new group's records in the same batch as
  the joining member's.
* Classic members inside a consumer group: JoinGroup updates the member and reconciles it at once
  (the answer names no leader, the generation is the member epoch); SyncGroup hands out the
  member's current assignment; Heartbeat says REBALANCE_IN_PROGRESS when the member must rejoin
  to catch up; LeaveGroup removes it. Join and sync timeouts fence members that do not follow.
* Downgrade: when the last consumer-protocol member is fenced or leaves (epoch -1) and classic
  members remain, the group becomes a classic group (Stable, generation = group epoch, each
  member's target assignment as its assignment) and a rebalance starts; the log gets the
  consumer group's tombstones and a GroupMetadata record in one batch.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from ..wire.schema import codec, message_class
from . import consumer as cg
from . import records as rec
from .classic import (
    ClassicGroup,
    ClassicMember,
    GroupError,
    GroupState,
    JoinResult,
    SyncResult,
    parse_assignment,
)

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)

POLICY_KEY = "group.consumer.migration.policy"
POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
DEFAULT_POLICY = "bidirectional"
CONSUMER_PROTOCOL_TYPE = "consumer"


def policy(coordinator: GroupCoordinator) -> str:
    """The configured migration policy (case-insensitive, as Kafka parses it)."""
    raw = getattr(coordinator.config, "raw", {}) if coordinator.config is not None else {}
    value = str(raw.get(POLICY_KEY, DEFAULT_POLICY)).strip().lower()
    if value not in POLICIES:
        raise ValueError(f"{POLICY_KEY} must be one of {', '.join(POLICIES)}, not {value!r}")
    return value


def upgrade_enabled(coordinator: GroupCoordinator) -> bool:
    return policy(coordinator) in ("bidirectional", "upgrade")


def downgrade_enabled(coordinator: GroupCoordinator) -> bool:
    return policy(coordinator) in ("bidirectional", "downgrade")


# ---------------------------------------------------------------------------------- embedded protocol


def _subscription(metadata: bytes) -> Any:
    view = memoryview(metadata)
    version = min(max(int.from_bytes(view[0:2], "big", signed=True), 0), 3)
    sub, _ = codec("ConsumerProtocolSubscription", version).decode(view, 2)
    return sub


def _subscription_version(metadata: bytes) -> int:
    return int.from_bytes(metadata[0:2], "big", signed=True) if len(metadata) >= 2 else 0


def serialize_assignment(partitions: cg.TopicPartitions, version: int) -> bytes:
    """A ConsumerProtocolAssignment at the member's subscription version (capped at 3, as
    Kafka's ConsumerProtocol.serializeAssignment does)."""
    version = min(max(version, 0), 3)
    cls = message_class("ConsumerProtocolAssignment")
    topics = [cls.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(partitions.items()) if ps]
    return version.to_bytes(2, "big") + codec("ConsumerProtocolAssignment", version).encode_bytes(
        cls(assigned_partitions=topics, user_data=None))


def owned_partitions(metadata: bytes) -> cg.TopicPartitions:
    """The owned partitions a JoinGroup subscription (v1+) names."""
    sub = _subscription(metadata)
    out: cg.TopicPartitions = {}
    for tp in getattr(sub, "owned_partitions", None) or []:
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return out


# ---------------------------------------------------------------------------------- upgrade


def can_upgrade(coordinator: GroupCoordinator, group: ClassicGroup) -> bool:
    """Kafka's validateOnlineUpgrade."""
    if not upgrade_enabled(coordinator):
        log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.",
                 group.group_id)
        return False
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        log.info("Cannot upgrade classic group %s to consumer group because the group does not use the "
                 "consumer embedded protocol.", group.group_id)
        return False
    if len(group.members) > coordinator.cfg("group.consumer.max.size"):
        log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the "
                 "consumer group maximum size.", group.group_id)
        return False
    return True


def to_consumer_group(coordinator: GroupCoordinator, classic: ClassicGroup
                      ) -> tuple[cg.ConsumerGroup, list[tuple[bytes, bytes | None]]]:
    """Kafka's convertToConsumerGroup: the consumer group and the records that say so (the
    classic group's tombstone, then the new group's records). The caller registers the group."""
    for member in classic.members.values():
        coordinator._answer_join(member, JoinResult(error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        coordinator._answer_sync(member, SyncResult(error=ErrorCode.REBALANCE_IN_PROGRESS))
    group = cg.ConsumerGroup(classic.group_id)
    coordinator.wire_consumer_group(group)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    group.epoch_written = group.target_meta_written = True
    now = coordinator.monotonic()
    for m in classic.members.values():
        try:
            metadata = m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
            sub = _subscription(metadata)
            assigned = {t: set(ps) for t, ps in parse_assignment(m.assignment).items()
                        if ps and coordinator.topic_partition_count(t) is not None}
        except Exception as exc:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade the classic group {classic.group_id} to consumer group because "
                             "the embedded consumer protocol is malformed.") from exc
        member = cg.ConsumerMember(
            member_id=m.member_id, instance_id=m.group_instance_id, rack_id=getattr(sub, "rack_id", None),
            client_id=m.client_id, client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=sorted(set(sub.topics)), member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id, assigned=assigned,
            epochs={(t, p): classic.generation_id for t, ps in assigned.items() for p in ps},
            classic=cg.ClassicMeta(m.session_timeout_ms, [(n, bytes(b)) for n, b in m.protocols]),
            session_deadline=now + m.session_timeout_ms / 1000,
        )
        group.members[member.member_id] = member
        group.target[member.member_id] = cg._copy(assigned)
    group.subscribed_partitions = group.partition_counts(coordinator.topic_partition_count)
    group.metadata_hash = group.compute_metadata_hash()
    desired = cg.desired_records(group, coordinator._topic_id)
    group.persisted = desired
    records: list[tuple[bytes, bytes | None]] = [(rec.group_metadata_key(classic.group_id), None), *desired.items()]
    log.info("Upgrading classic group %s (generation %d, %d members) to a consumer group",
             classic.group_id, classic.generation_id, len(group.members))
    return group, records


# ---------------------------------------------------------------------------------- downgrade


def can_downgrade(coordinator: GroupCoordinator, group: cg.ConsumerGroup, leaving_member_id: str) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember."""
    if not group.all_classic_except(leaving_member_id):
        return False
    if len(group.members) <= 1:
        return False  # it would be empty: it stays an (empty) consumer group
    if not downgrade_enabled(coordinator):
        log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.",
                 group.group_id)
        return False
    if len(group.members) - 1 > coordinator.cfg("group.max.size"):
        log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than "
                 "classic group max size.", group.group_id)
        return False
    return True


def _tombstones(group: cg.ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords, in its order."""
    gid = group.group_id
    out: list[tuple[bytes, bytes | None]] = []
    for version in (rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
                    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION):
        out.extend((rec.consumer_group_key(version, group_id=gid, member_id=m), None) for m in group.members)
    out.append((rec.consumer_group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION, group_id=gid), None))
    out.extend((rec.consumer_group_key(rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION, group_id=gid, member_id=m), None)
               for m in group.members)
    out.append((rec.consumer_group_key(4, group_id=gid), None))  # the (pre-KIP-1101) subscription metadata
    out.append((rec.consumer_group_key(rec.CONSUMER_GROUP_METADATA_KEY_VERSION, group_id=gid), None))
    return out


def to_classic_group(coordinator: GroupCoordinator, group: cg.ConsumerGroup, leaving_member_id: str) -> ClassicGroup:
    """Kafka's convertToClassicGroup for a fenced or leaving member: writes the consumer group's
    tombstones and the classic group's GroupMetadata in one batch, registers the classic group
    and starts a rebalance. Raises GroupError (the group is left as it was)."""
    classic = ClassicGroup(group.group_id)
    classic.generation_id = group.group_epoch
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    classic.state = GroupState.STABLE
    classic.current_state_timestamp = coordinator.now_ms()
    now = coordinator.monotonic()
    for m in group.members.values():
        if m.member_id == leaving_member_id or m.classic is None:
            continue
        member = ClassicMember(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms, session_timeout_ms=m.classic.session_timeout_ms,
            protocol_type=CONSUMER_PROTOCOL_TYPE, protocols=list(m.classic.protocols),
        )
        member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        classic.add_member(member)
    classic.protocol_name = classic.select_protocol()
    for member in classic.members.values():
        metadata = member.metadata(classic.protocol_name)
        member.assignment = serialize_assignment(group.target.get(member.member_id, {}),
                                                 _subscription_version(metadata))
    value = coordinator.group_metadata_value(classic)
    records = [*_tombstones(group), (rec.group_metadata_key(group.group_id), rec.group_metadata_value(value))]
    coordinator._append(group.group_id, rec.consumer_group_batch(records, coordinator.now_ms()))
    coordinator.groups[group.group_id] = classic
    log.info("Downgraded consumer group %s to a classic group (generation %d, %d members)",
             group.group_id, classic.generation_id, len(classic.members))
    coordinator._prepare_rebalance(classic, f"Downgrade group {group.group_id} from consumer to classic.")
    return classic


def fence_member(coordinator: GroupCoordinator, group: cg.ConsumerGroup, member_id: str, reason: str) -> None:
    """Kafka's consumerGroupFenceMember: downgrade to a classic group if this was the last
    consumer-protocol member, else remove the member and bump the group epoch."""
    if can_downgrade(coordinator, group, member_id):
        try:
            to_classic_group(coordinator, group, member_id)
            return
        except GroupError:
            pass  # the write failed: the group stays as it was, the member is removed below
    group.remove_member(member_id, reason)  # as in Kafka, the next heartbeat or join computes the target
    coordinator._persist_consumer_group(group)


def expire(coordinator: GroupCoordinator, group: cg.ConsumerGroup, now: float) -> None:
    """The consumer group's timers: fence expired members (maybe downgrading the group)."""
    for member_id, reason in group.expired_members(now):
        if coordinator.groups.get(group.group_id) is not group:
            return  # downgraded by an earlier fencing: the classic group's timers take over
        if member_id in group.members:
            fence_member(coordinator, group, member_id, reason)


# ---------------------------------------------------------------------------------- classic members


def _validate(group: cg.ConsumerGroup, member_id: str, instance_id: str | None) -> cg.ConsumerMember:
    """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group.group_id}.")
    else:
        member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member with instance id {instance_id} is not a member of group {group.group_id}.")
        if member.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} is fenced by existing "
                             f"member {member.member_id}.")
    if member.classic is None:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
    return member


def _check_generation(member: cg.ConsumerMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise GroupError(ErrorCode.ILLEGAL_GENERATION,
                         f"The request generation id {generation_id} is not equal to the member epoch "
                         f"{member.member_epoch} of member {member.member_id}.")


def _join_timer(coordinator: GroupCoordinator, member: cg.ConsumerMember) -> None:
    if member.join_deadline is None:
        member.join_deadline = coordinator.monotonic() + member.rebalance_timeout_ms / 1000


def _session(coordinator: GroupCoordinator, member: cg.ConsumerMember) -> None:
    assert member.classic is not None
    member.session_deadline = coordinator.monotonic() + member.classic.session_timeout_ms / 1000


def join(coordinator: GroupCoordinator, group: cg.ConsumerGroup, *, member_id: str, instance_id: str | None,
         client_id: str, client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
         protocol_type: str, protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
    """Kafka's classicGroupJoinToConsumerGroup: answered at once."""
    unknown = not member_id
    if unknown:
        member_id = str(uuid.uuid4())
    if member_id not in group.members and len(group.members) >= coordinator.cfg("group.consumer.max.size"):
        raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The consumer group has reached its maximum capacity of "
                         f"{coordinator.cfg('group.consumer.max.size')} members.")
    if not group.supports_classic_protocols(protocol_type, [n for n, _ in protocols]):
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
    if unknown and instance_id is None and require_known_member_id:
        log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                 "member id %s and requesting the member to rejoin with this id.", group.group_id, member_id)
        return JoinResult(error=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
    if instance_id is not None:
        existing = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if existing is not None and existing.member_id != member_id:
            if not unknown:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} is fenced by existing "
                                 f"member {existing.member_id}.")
            # a static member restarting takes the old incarnation's place
            group.remove_member(existing.member_id, "replaced by a new static member", recompute=False)
            group.target.pop(existing.member_id, None)
    metadata = protocols[0][1]
    try:
        sub = _subscription(metadata)
        owned = owned_partitions(metadata)
    except Exception as exc:
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "Malformed embedded consumer protocol.") from exc
    member = group.members.get(member_id)
    bump = False
    if member is None:
        member = cg.ConsumerMember(member_id=member_id, instance_id=instance_id)
        group.members[member_id] = member
    # as in Kafka 4.4, only a change of subscribed topics bumps the epoch (not joining, not a rack)
    topics = sorted(set(sub.topics))
    if topics != member.subscribed_topic_names:
        member.subscribed_topic_names = topics
        bump = True
    rack = getattr(sub, "rack_id", None)
    if rack is not None and rack != member.rack_id:
        member.rack_id = rack
    member.instance_id = instance_id if instance_id is not None else member.instance_id
    if rebalance_timeout_ms > 0:
        member.rebalance_timeout_ms = rebalance_timeout_ms
    member.server_assignor = None
    member.client_id = client_id
    member.client_host = client_host
    member.classic = cg.ClassicMeta(session_timeout_ms, [(n, bytes(b)) for n, b in protocols])
    group.subscribed_partitions = group.partition_counts(coordinator.topic_partition_count)
    new_hash = group.compute_metadata_hash()
    if bump or new_hash != group.metadata_hash:
        group.bump_epoch(new_hash)
    if group.group_epoch > group.assignment_epoch and group.may_assign(coordinator, coordinator.now_ms()):
        group.compute_target(coordinator.topic_partition_count, coordinator.now_ms())
    now = coordinator.monotonic()
    group.reconcile(member, owned, now)
    coordinator._persist_consumer_group(group)
    log.info("[GroupId %s] Classic member %s joined the consumer group: epoch %d (group epoch %d), %s",
             group.group_id, member_id, member.member_epoch, group.group_epoch, member.state)
    member.join_deadline = None
    member.session_deadline = now + session_timeout_ms / 1000
    member.sync_deadline = now + member.rebalance_timeout_ms / 1000
    return JoinResult(generation_id=member.member_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                      protocol_name=protocols[0][0], leader="", member_id=member_id)


def sync(coordinator: GroupCoordinator, group: cg.ConsumerGroup, *, member_id: str, instance_id: str | None,
         generation_id: int, protocol_type: str | None, protocol_name: str | None) -> SyncResult:
    """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment."""
    member = _validate(group, member_id, instance_id)
    _check_generation(member, generation_id)
    assert member.classic is not None
    name, metadata = member.classic.protocols[0]
    if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                         f"The protocol type {protocol_type} from member {member_id} request is not equal to the "
                         f"group protocol type {CONSUMER_PROTOCOL_TYPE}.")
    if protocol_name is not None and protocol_name != name:
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                         f"The protocol name {protocol_name} from member {member_id} request is not equal to the "
                         f"protocol name {name} returned in the join response.")
    if group.group_epoch > member.member_epoch and member.state != cg.UNREVOKED_PARTITIONS:
        _join_timer(coordinator, member)
        raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS,
                         f"A new rebalance is triggered in group {group.group_id} and member {member_id} should "
                         "rejoin to catch up.")
    member.sync_deadline = None
    _session(coordinator, member)
    return SyncResult(protocol_type=protocol_type, protocol_name=protocol_name,
                      assignment=serialize_assignment(member.assigned, _subscription_version(metadata)))


def heartbeat(coordinator: GroupCoordinator, group: cg.ConsumerGroup, *, member_id: str, instance_id: str | None,
              generation_id: int) -> ErrorCode:
    """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS when the member must rejoin."""
    member = _validate(group, member_id, instance_id)
    _check_generation(member, generation_id)
    _session(coordinator, member)
    if (member.member_epoch < group.group_epoch or member.state == cg.UNREVOKED_PARTITIONS
            or (member.state == cg.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))):
        _join_timer(coordinator, member)
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def leave(coordinator: GroupCoordinator, group: cg.ConsumerGroup,
          members: list[tuple[str, str | None]]) -> list[ErrorCode]:
    """Kafka's classicGroupLeaveToConsumerGroup: removes the members (no downgrade on this path)."""
    results = []
    left = False
    for member_id, instance_id in members:
        try:
            if instance_id is None:
                member = group.members.get(member_id)
                if member is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            else:
                member = next((m for m in group.members.values() if m.instance_id == instance_id), None)
                if member is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                if member_id and member_id != member.member_id:
                    raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
            if member.classic is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            log.info("[Group %s] Member %s has left group through explicit `LeaveGroup` request",
                     group.group_id, member.member_id)
            group.remove_member(member.member_id, "the consumer left the group")
            left = True
            results.append(ErrorCode.NONE)
        except GroupError as exc:
            results.append(exc.code)
    if left:
        coordinator._persist_consumer_group(group)
    return results
