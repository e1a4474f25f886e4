"""KIP-932 share groups on the group coordinator: ShareGroupHeartbeat and server-side assignment.

A share group has no revocation phase: several members may hold the same partition (the
partition leader hands each record to one of them), so a member simply takes its new target
assignment at the group's assignment epoch on its next heartbeat. The group epoch grows when
subscriptions change, a member leaves, the subscribed topics' metadata hash changes (a topic
created, deleted or grown) or initialized partitions wait to be assigned; the target assignment
is then recomputed by the simple assignor (:mod:`.share_assignor`).

As Kafka 4.4 (its ShareGroup is a ModernGroup), a new group starts at group epoch 1 with its
target assignment at epoch 1 and time 0, so its first bump writes epoch 2, and the epoch and
target metadata records are written only by a bump or a computed target.

Records in ``__consumer_offsets`` are Kafka 4.4's share group records (key versions 10-15).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from . import metadata_hash
from . import records as rec
from .classic import GroupError
from .share_assignor import MemberSpec, simple_assign
from .share_hash_order import JavaHashMap, JavaHashSet, TimelineOrder

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)

TopicPartitions = dict[str, set[int]]
#: a target assignment as its record lists it (topic -> partitions, in Kafka's order; may hold
#: a topic with no partitions left, as Kafka's record does)
OrderedAssignment = dict[str, list[int]]

#: Key versions of the share group records (ShareGroup*Key/Value in Kafka 4.4's group coordinator).
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
SCHEMAS = {
    MEMBER_METADATA: ("ShareGroupMemberMetadataKey", "ShareGroupMemberMetadataValue"),
    GROUP_METADATA: ("ShareGroupMetadataKey", "ShareGroupMetadataValue"),
    TARGET_ASSIGNMENT_METADATA: ("ShareGroupTargetAssignmentMetadataKey", "ShareGroupTargetAssignmentMetadataValue"),
    TARGET_ASSIGNMENT_MEMBER: ("ShareGroupTargetAssignmentMemberKey", "ShareGroupTargetAssignmentMemberValue"),
    CURRENT_MEMBER_ASSIGNMENT: ("ShareGroupCurrentMemberAssignmentKey", "ShareGroupCurrentMemberAssignmentValue"),
    STATE_PARTITION_METADATA: ("ShareGroupStatePartitionMetadataKey", "ShareGroupStatePartitionMetadataValue"),
}

#: Kafka's defaults for the share group broker settings.
DEFAULTS = {
    "group.share.session.timeout.ms": 45000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.max.size": 200,
    "group.share.assignment.interval.ms": 1000,
}
ASSIGNOR_NAME = "simple"


_FAMILY = rec.RecordFamily(SCHEMAS)
key = _FAMILY.key
value = _FAMILY.value
value_class = _FAMILY.value_class
decode = _FAMILY.decode
collect = _FAMILY.collect


@dataclass
class ShareMember:
    """A member of a share group."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: TopicPartitions = field(default_factory=dict)
    session_deadline: float = 0.0
    last_sent: TopicPartitions | None = None


@dataclass
class ShareHeartbeatResult:
    """What ShareGroupHeartbeat answers (assignment None = unchanged, not sent)."""

    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


def _copy(tp: TopicPartitions) -> TopicPartitions:
    return {t: set(ps) for t, ps in tp.items() if ps}


class ShareGroup:
    """A share group: members, group epoch, target assignment and the partitions whose share
    state has been initialized."""

    group_type = "share"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4.4's ModernGroup: epoch 1, target assignment at epoch 1 / time 0 (nothing in the log)
        self.group_epoch = 1
        self.assignment_epoch = 1
        #: the hash of the subscribed topics' metadata at the last bump (the epoch record's)
        self.metadata_hash = 0
        #: whether the epoch record and the target metadata record exist (a bump or a computed
        #: target writes them; a new group has neither)
        self.epoch_written = False
        self.target_meta_written = False
        self._topic_hashes = metadata_hash.TopicHashes()
        self.members: dict[str, ShareMember] = {}
        #: the order Kafka's member table (a TimelineHashMap) hands the members to the assignor
        self.member_order = TimelineOrder()
        self.target: dict[str, OrderedAssignment] = {}
        #: when the target was last computed (0: never, or reset when the last member left)
        self.assignment_timestamp_ms = 0
        self.subscribed_partitions: dict[str, int] = {}
        #: topic -> partitions whose share-group state exists (ShareGroupStatePartitionMetadata)
        self.initialized: TopicPartitions = {}
        #: subscribed partitions whose state the coordinator is to initialize now (the heartbeat
        #: handler does it right after the heartbeat; they are assigned from the next one on)
        self.initializing: TopicPartitions = {}
        #: partitions being initialized as the log says (the record's initializingTopics): the
        #: heartbeat that asks for them writes them, the end of their initialization moves them
        #: to initialized in a record of its own, as Kafka 4.4 does
        self.initializing_recorded: TopicPartitions = {}
        self.persisted: dict[bytes, bytes] = {}
        #: record keys of removed members to tombstone even if never written (Kafka's fencing
        #: writes all three tombstones, e.g. a target record for a member that never had one)
        self.removed_keys: set[bytes] = set()

    def is_empty(self) -> bool:
        return not self.members

    def state_name(self) -> str:
        """Kafka's ShareGroupState names: Empty or Stable (Dead once deleted)."""
        return "Empty" if not self.members else "Stable"

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def partition_counts(self, topic_partitions: Callable[[str], int | None]) -> dict[str, int]:
        out = {}
        for topic in sorted(self.subscribed_topic_names()):
            n = topic_partitions(topic)
            if n is not None:
                out[topic] = n
        return out

    # ---------------------------------------------------------------- heartbeat

    def heartbeat(self, coordinator: GroupCoordinator, *, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str, client_host: str,
                  topic_partitions: Callable[[str], int | None]) -> ShareHeartbeatResult:
        """One ShareGroupHeartbeat: join (epoch 0), leave (-1) or heartbeat."""
        now = coordinator.monotonic()
        interval = share_cfg(coordinator, "group.share.heartbeat.interval.ms", self.group_id)
        session_ms = share_cfg(coordinator, "group.share.session.timeout.ms", self.group_id)
        if member_epoch == -1:
            if member_id not in self.members:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {self.group_id}.")
            # as Kafka 4.4's fencing: the epoch moves, the target waits for the next heartbeat
            self.remove_member(member_id, "the member left", coordinator)
            return ShareHeartbeatResult(member_id=member_id, member_epoch=-1, heartbeat_interval_ms=0)
        bump = False
        if member_epoch == 0:
            member = self.members.get(member_id)
            if member is None:
                if len(self.members) >= share_cfg(coordinator, "group.share.max.size"):
                    raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The share group has reached its maximum capacity of "
                                     f"{share_cfg(coordinator, 'group.share.max.size')} members.")
                member = ShareMember(member_id=member_id, rack_id=rack_id, client_id=client_id,
                                     client_host=client_host)
                self.members[member_id] = member
                bump = True
            member.last_sent = None
        else:
            member = self.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {self.group_id}.")
            if member_epoch != member.member_epoch and member_epoch != member.previous_member_epoch:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has a smaller member epoch ({member_epoch}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 "all its partitions and rejoin.")
        member.session_deadline = now + session_ms / 1000
        if rack_id is not None and rack_id != member.rack_id:
            member.rack_id = rack_id
        if subscribed_topic_names is not None and sorted(set(subscribed_topic_names)) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(set(subscribed_topic_names))
            bump = True
        self.maybe_assign(topic_partitions, bump, topic_id=getattr(coordinator, "_topic_id", None),
                          now_ms=_now_ms(coordinator),
                          interval_ms=share_cfg(coordinator, "group.share.assignment.interval.ms", self.group_id))
        # a joining member enters the member table after the assignment it triggered
        self.member_order.add(member_id)
        self._reconcile(member)
        result = ShareHeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                                      heartbeat_interval_ms=interval)
        if member.last_sent is None or member.last_sent != member.assigned:
            result.assignment = _copy(member.assigned)
            member.last_sent = _copy(member.assigned)
        return result

    def maybe_assign(self, topic_partitions: Callable[[str], int | None], bump: bool = False, *,
                     topic_id: Callable[[str], Any] | None = None, now_ms: int = 0, interval_ms: int = 0) -> None:
        """Recompute the target assignment when the group epoch moved (`bump`: membership or
        subscriptions changed now), the subscribed topics' partition counts changed or, as
        Kafka 4.4's initializedAssignmentPending, the initialized partitions differ from the
        assigned ones. As Kafka 4.4, a new target is computed at most once per
        ``group.share.assignment.interval.ms``; meanwhile members keep the last one. Only
        partitions whose share state is initialized are assigned; subscribed ones that are not
        are marked for initialization (at this group epoch)."""
        counts = self.partition_counts(topic_partitions)
        self.subscribed_partitions = counts
        if not bump and self.assignment_epoch >= self.group_epoch and self.members:
            bump = self._initialized_assignment_pending()
        # Kafka recomputes the hash when it bumps or its topics' metadata changed; computing it
        # on every heartbeat gives the same epochs (the hash moves only with the metadata)
        new_hash = self.compute_metadata_hash(counts, topic_id)
        if bump or new_hash != self.metadata_hash:
            self.bump_epoch(new_hash)
        due = self.assignment_timestamp_ms == 0 or interval_ms == 0 or now_ms >= self.assignment_timestamp_ms + interval_ms
        if self.group_epoch > self.assignment_epoch and due:
            self._assign(counts, topic_id or _no_topic_ids)
            self.assignment_epoch = self.group_epoch
            self.assignment_timestamp_ms = now_ms
            self.target_meta_written = True
            log.info("Computed the target assignment of share group %s for epoch %d", self.group_id,
                     self.assignment_epoch)
        for topic, n in counts.items():
            missing = set(range(n)) - self.initialized.get(topic, set()) - self.initializing_recorded.get(topic, set())
            if missing:
                self.initializing.setdefault(topic, set()).update(missing)
                self.initializing_recorded.setdefault(topic, set()).update(missing)

    def mark_initialized(self, topic: str, partitions: set[int]) -> None:
        """The share state of `partitions` now exists (Kafka's initializeShareGroupState)."""
        self.initialized.setdefault(topic, set()).update(partitions)
        left = self.initializing_recorded.get(topic, set()) - partitions
        if left:
            self.initializing_recorded[topic] = left
        else:
            self.initializing_recorded.pop(topic, None)

    def compute_metadata_hash(self, counts: dict[str, int], topic_id: Callable[[str], Any] | None) -> int:
        """Kafka's group metadata hash over the subscribed topics that exist (`counts`)."""
        def raw_id(name: str) -> bytes:
            tid = topic_id(name) if topic_id is not None else None
            return tid.bytes if tid is not None else bytes(16)

        return self._topic_hashes.group_hash((name, raw_id(name), n) for name, n in counts.items())

    def bump_epoch(self, new_hash: int) -> None:
        self.group_epoch += 1
        self.metadata_hash = new_hash
        self.epoch_written = True
        log.info("Bumped the epoch of share group %s to %d", self.group_id, self.group_epoch)

    def _initialized_assignment_pending(self) -> bool:
        subscribed = self.subscribed_topic_names()
        assigned: dict[str, set[int]] = {}
        for parts in self.target.values():
            for t, ps in parts.items():
                assigned.setdefault(t, set()).update(ps)
        return any(assigned.get(t) != ps for t, ps in self.initialized.items() if t in subscribed and ps)

    def _assign(self, counts: dict[str, int], topic_id: Callable[[str], Any]) -> None:
        """One run of the simple assignor, with the members and topics in Kafka's order."""
        order = [m for m in self.member_order.keys() if m in self.members]
        order += [m for m in self.members if m not in order]
        names: dict[Any, str] = {}
        for name in counts:
            tid = topic_id(name)
            if tid is not None:
                names[tid] = name
        ids = {name: tid for tid, name in names.items()}
        specs = []
        for member_id in order:
            member = self.members[member_id]
            subscribed = [ids[n] for n in JavaHashSet.of(member.subscribed_topic_names).keys() if n in ids]
            old = JavaHashMap(0)
            if member_id in self.target:
                old = JavaHashMap()
                for name, parts in self.target[member_id].items():
                    if name in ids:
                        old.put(ids[name], JavaHashSet.of(parts))
            specs.append(MemberSpec(member_id, subscribed, old))
        homogeneous = len({frozenset(m.subscribed_topic_names) for m in self.members.values()}) <= 1
        result = simple_assign(specs, lambda tid: counts[names[tid]],
                               lambda tid, p: p in self.initialized.get(names[tid], ()), homogeneous)
        target: dict[str, OrderedAssignment] = {}
        for member_id in order:
            new = result.get(member_id)
            ordered = {names[tid]: list(new[tid].keys()) for tid in new.keys()} if new is not None else {}
            old_target = self.target.get(member_id)
            same = old_target is not None and {t: set(p) for t, p in old_target.items()} == \
                {t: set(p) for t, p in ordered.items()}
            # an unchanged target keeps its old record (and so its order), as in Kafka
            target[member_id] = old_target if same and old_target is not None else ordered
        self.target = target

    def _reconcile(self, member: ShareMember) -> None:
        # no revocation in share groups: the member takes its target at the assignment epoch
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.assigned = _copy(self.target.get(member.member_id, {}))

    def remove_member(self, member_id: str, reason: str, coordinator: Any = None) -> None:
        """Kafka's shareGroupFenceMember: the member's records go, the epoch is bumped with the
        hash of what the others subscribe to, and the target waits for the next heartbeat."""
        if self.members.pop(member_id, None) is None:
            return
        self.target.pop(member_id, None)
        self.member_order.remove(member_id)
        self.removed_keys.update(key(v, group_id=self.group_id, member_id=member_id)
                                 for v in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA))
        new_hash = self.metadata_hash
        if coordinator is not None:
            counts = self.partition_counts(coordinator.topic_partition_count)
            new_hash = self.compute_metadata_hash(counts, getattr(coordinator, "_topic_id", None))
        self.bump_epoch(new_hash)
        if not self.members:
            # Kafka 4.4 closes an emptied group's assignment at the new epoch (timestamp 0)
            self.assignment_epoch = self.group_epoch
            self.assignment_timestamp_ms = 0
            self.target_meta_written = True
        log.info("Member %s left share group %s: %s", member_id, self.group_id, reason)

    def expire_sessions(self, coordinator: GroupCoordinator, now: float) -> list[str]:
        """Remove members whose session timed out; returns their ids."""
        gone = []
        for member in list(self.members.values()):
            if now >= member.session_deadline:
                self.remove_member(member.member_id, "session timeout", coordinator)
                gone.append(member.member_id)
        return gone


def _no_topic_ids(name: str) -> None:
    return None


def _now_ms(coordinator: Any) -> int:
    now_ms = getattr(coordinator, "now_ms", None)
    return int(now_ms()) if now_ms is not None else 0


def share_cfg(coordinator: Any, key: str, group_id: str | None = None) -> int:
    """A share group setting: the group's own config (``share.session.timeout.ms``,
    ``share.heartbeat.interval.ms`` on its GROUP resource) when `group_id` has one, else the
    broker's configured value, else Kafka's default."""
    if group_id is not None and key in GROUP_OVERRIDES:
        store = getattr(getattr(coordinator, "broker", None), "metadata_store", None)
        image = getattr(store, "image", None)
        own = image.configs.get((32, group_id), {}).get(GROUP_OVERRIDES[key]) if image is not None else None
        if own is not None:
            return int(own)
    raw = getattr(getattr(coordinator, "config", None), "raw", {}) or {}
    found = raw.get(key)
    return int(found) if found is not None else int(DEFAULTS[key])


#: broker setting -> the group config that overrides it for one group
GROUP_OVERRIDES = {"group.share.session.timeout.ms": "share.session.timeout.ms",
                   "group.share.heartbeat.interval.ms": "share.heartbeat.interval.ms",
                   "group.share.assignment.interval.ms": "share.assignment.interval.ms"}


# ---------------------------------------------------------------------------------- persistence

_KEY_ORDER = (MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_MEMBER, TARGET_ASSIGNMENT_METADATA,
              CURRENT_MEMBER_ASSIGNMENT, STATE_PARTITION_METADATA)


def desired_records(group: ShareGroup, topic_id: Callable[[str], object | None]) -> dict[bytes, bytes]:
    """Every record (key -> value bytes) that describes the group now, in Kafka's write order."""
    out: dict[int, list[tuple[bytes, bytes]]] = {v: [] for v in _KEY_ORDER}
    gid = group.group_id

    def partitions(cls: type, tps: TopicPartitions) -> list:
        items = []
        for name in sorted(tps):
            tid = topic_id(name)
            if tid is not None and tps[name]:
                items.append(cls(topic_id=tid, partitions=sorted(tps[name])))
        return items

    member_cls = value_class(MEMBER_METADATA)
    target_cls = value_class(TARGET_ASSIGNMENT_MEMBER)
    current_cls = value_class(CURRENT_MEMBER_ASSIGNMENT)
    for m in group.members.values():
        out[MEMBER_METADATA].append((key(MEMBER_METADATA, group_id=gid, member_id=m.member_id), value(
            MEMBER_METADATA, member_cls(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                        subscribed_topic_names=list(m.subscribed_topic_names)))))
        if m.member_id in group.target:  # none until a target is computed with the member in it
            target = [target_cls.TopicPartition(topic_id=topic_id(t), partitions=list(ps))
                      for t, ps in group.target[m.member_id].items() if topic_id(t) is not None]
            out[TARGET_ASSIGNMENT_MEMBER].append((key(TARGET_ASSIGNMENT_MEMBER, group_id=gid, member_id=m.member_id),
                                                  value(TARGET_ASSIGNMENT_MEMBER, target_cls(topic_partitions=target))))
        out[CURRENT_MEMBER_ASSIGNMENT].append((key(CURRENT_MEMBER_ASSIGNMENT, group_id=gid, member_id=m.member_id),
                                               value(CURRENT_MEMBER_ASSIGNMENT, current_cls(
                                                   member_epoch=m.member_epoch,
                                                   previous_member_epoch=m.previous_member_epoch, state=0,
                                                   assigned_partitions=partitions(current_cls.TopicPartitions,
                                                                                  m.assigned)))))
    if group.epoch_written:
        out[GROUP_METADATA].append((key(GROUP_METADATA, group_id=gid), value(GROUP_METADATA, value_class(
            GROUP_METADATA)(epoch=group.group_epoch, metadata_hash=group.metadata_hash))))
    if group.target_meta_written:
        out[TARGET_ASSIGNMENT_METADATA].append((key(TARGET_ASSIGNMENT_METADATA, group_id=gid), value(
            TARGET_ASSIGNMENT_METADATA, value_class(TARGET_ASSIGNMENT_METADATA)(
                assignment_epoch=group.assignment_epoch, assignment_timestamp=group.assignment_timestamp_ms))))
    if group.initialized or group.initializing_recorded:
        cls = value_class(STATE_PARTITION_METADATA)

        def infos(tps: TopicPartitions) -> list:
            found = []
            for name in sorted(tps):
                tid = topic_id(name)
                if tid is not None and tps[name]:
                    found.append(cls.TopicPartitionsInfo(topic_id=tid, topic_name=name, partitions=sorted(tps[name])))
            return found

        out[STATE_PARTITION_METADATA].append((key(STATE_PARTITION_METADATA, group_id=gid), value(
            STATE_PARTITION_METADATA, cls(initializing_topics=infos(group.initializing_recorded),
                                          initialized_topics=infos(group.initialized), deleting_topics=[]))))
    return {k: val for version in _KEY_ORDER for k, val in out[version]}


def changes(group: ShareGroup, desired: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """Records to append so the log says `desired`: tombstones for what is gone, then what changed."""
    gone = [(k, None) for k in dict.fromkeys([*group.persisted, *group.removed_keys]) if k not in desired]
    gone.sort(key=lambda kv: -int.from_bytes(kv[0][:2], "big"))
    updated = [(k, v) for k, v in desired.items() if group.persisted.get(k) != v]
    return [*gone, *updated]


def group_from_records(group_id: str, found: dict[int, dict[str, Any]], topic_name: Callable[[object], str | None],
                       session_deadline: float) -> ShareGroup:
    """Rebuild a share group from its latest records: found[key version][member id or ""] = value."""
    group = ShareGroup(group_id)
    meta = found.get(GROUP_METADATA, {}).get("")
    if meta is not None:
        group.group_epoch, group.metadata_hash, group.epoch_written = meta.epoch, meta.metadata_hash, True
    target_meta = found.get(TARGET_ASSIGNMENT_METADATA, {}).get("")
    if target_meta is not None:
        group.assignment_epoch = target_meta.assignment_epoch
        group.assignment_timestamp_ms = target_meta.assignment_timestamp
        group.target_meta_written = True

    def names(tps: list) -> TopicPartitions:
        out: TopicPartitions = {}
        for tp in tps:
            name = topic_name(tp.topic_id)
            if name is not None:
                out.setdefault(name, set()).update(tp.partitions)
        return out

    for member_id, v in found.get(MEMBER_METADATA, {}).items():
        group.members[member_id] = ShareMember(
            member_id=member_id, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
            subscribed_topic_names=list(v.subscribed_topic_names), session_deadline=session_deadline)
    for member_id in group.members:
        group.member_order.add(member_id)
    for member_id, v in found.get(TARGET_ASSIGNMENT_MEMBER, {}).items():
        if member_id in group.members:
            ordered: OrderedAssignment = {}
            for tp in v.topic_partitions:
                name = topic_name(tp.topic_id)
                if name is not None:
                    ordered.setdefault(name, []).extend(tp.partitions)
            group.target[member_id] = ordered
    for member_id, v in found.get(CURRENT_MEMBER_ASSIGNMENT, {}).items():
        member = group.members.get(member_id)
        if member is not None:
            member.member_epoch = v.member_epoch
            member.previous_member_epoch = v.previous_member_epoch
            member.assigned = names(v.assigned_partitions)
    state = found.get(STATE_PARTITION_METADATA, {}).get("")
    if state is not None:
        group.initialized = names(state.initialized_topics)
        group.initializing_recorded = names(state.initializing_topics)
        # an initialization the log says was under way is asked again at the next heartbeat
        group.initializing = _copy(group.initializing_recorded)
    return group


# ---------------------------------------------------------------------------------- on the coordinator


def persist(coordinator: GroupCoordinator, group: ShareGroup, deleted: bool = False) -> None:
    """Append what changed in a share group since it was last written (records, tombstones)."""
    if coordinator.broker is None:
        return
    desired = {} if deleted else desired_records(group, coordinator._topic_id)
    records = changes(group, desired)
    group.removed_keys.clear()
    if not records:
        return
    try:
        coordinator._append(group.group_id, rec.consumer_group_batch(records, coordinator.now_ms()))
    except GroupError:
        return  # logged by _append; the next change writes the full difference again
    group.persisted = desired


def share_group_heartbeat(coordinator: GroupCoordinator, *, group_id: str, member_id: str, member_epoch: int,
                          rack_id: str | None, subscribed_topic_names: list[str] | None, client_id: str,
                          client_host: str) -> ShareHeartbeatResult:
    """ShareGroupHeartbeat on the group coordinator (errors are returned, not raised)."""
    try:
        coordinator._check_active(group_id)
        _validate(group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
        group = coordinator.groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if group is None:
            if member_epoch != 0:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
            coordinator.groups[group_id] = group
        try:
            return group.heartbeat(coordinator, member_id=member_id, member_epoch=member_epoch, rack_id=rack_id,
                                   subscribed_topic_names=subscribed_topic_names, client_id=client_id,
                                   client_host=client_host, topic_partitions=coordinator.topic_partition_count)
        finally:
            persist(coordinator, group)
    except GroupError as exc:
        return ShareHeartbeatResult(error=exc.code, error_message=str(exc) if str(exc) != exc.code.name else None)


def _validate(group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
              subscribed_topic_names: list[str] | None) -> None:
    """Kafka's checks of a ShareGroupHeartbeat request, before any state is touched."""

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.INVALID_REQUEST, message)

    if not group_id:
        raise invalid("GroupId can't be empty.")
    if rack_id is not None and not rack_id:
        raise invalid("RackId can't be empty.")
    if not member_id:
        raise invalid("MemberId can't be empty.")
    if member_epoch == 0:
        if not subscribed_topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif member_epoch < -1:
        raise invalid(f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.")


def load(coordinator: GroupCoordinator, found: dict[str, dict[int, dict[str, Any]]],
         raw: dict[str, dict[bytes, bytes]]) -> None:
    """Rebuild the share groups found in ``__consumer_offsets`` at load."""
    now = coordinator.monotonic()
    for group_id, records in found.items():
        if not records.get(GROUP_METADATA):
            continue  # deleted: its epoch record is a tombstone
        own_s = share_cfg(coordinator, "group.share.session.timeout.ms", group_id) / 1000
        group = group_from_records(group_id, records, coordinator._topic_name, now + own_s)
        group.persisted = raw.get(group_id, {})
        group.subscribed_partitions = group.partition_counts(coordinator.topic_partition_count)
        coordinator.groups[group_id] = group


def tick(coordinator: GroupCoordinator, group: ShareGroup, now: float) -> None:
    """Session expiry of a share group's members (from the coordinator's timer)."""
    before = len(group.members), group.group_epoch
    gone = group.expire_sessions(coordinator, now)
    if (len(group.members), group.group_epoch) != before:
        persist(coordinator, group)
    manager = coordinator.broker.coordinators.get("share_partitions") if coordinator.broker is not None else None
    for member_id in gone:
        # its share sessions end and what it holds goes back to the group at once
        if manager is not None:
            manager.member_left(group.group_id, member_id)


def delete_state(coordinator: GroupCoordinator, group: ShareGroup) -> None:
    """DeleteGroups of a share group: its share-partitions' state goes first (Kafka's
    DeleteShareGroupState through the persister), then the group's records."""
    broker = coordinator.broker
    if broker is None:
        return
    state = broker.coordinators.get("share")
    if state is not None:
        if not state.loaded:
            state.load()
        for _gid, topic_id, partition in state.keys_of_group(group.group_id):
            state.delete(group.group_id, topic_id, partition)
    manager = broker.coordinators.get("share_partitions")
    if manager is not None:
        for key in [k for k in manager.partitions if k[0] == group.group_id]:
            del manager.partitions[key]
