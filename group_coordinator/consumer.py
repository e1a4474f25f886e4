"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignment.

The group has an epoch that grows whenever membership or subscriptions change; the target
assignment is recomputed for that epoch by the group's assignor. Each member then
reconciles towards its target, Kafka style: first it revokes what it must give up (keeping
its old member epoch), and only once it has acknowledged the revocation does it move to
the new epoch and receive new partitions — and only partitions nobody else still holds
(until they are released the member is *unreleased*).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..wire.errors import ErrorCode
from . import records as rec
from .assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from .classic import GroupError

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)

TopicPartitions = dict[str, set[int]]

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"
#: MemberState values as ConsumerGroupCurrentMemberAssignmentValue stores them.
STATE_VALUES = {STABLE: 0, UNREVOKED_PARTITIONS: 1, UNRELEASED_PARTITIONS: 2}


@dataclass
class ClassicMeta:
    """What ConsumerGroupMemberMetadataValue's ClassicMemberMetadata holds for a classic member."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass
class ConsumerMember:
    """A member of a consumer group (KIP-848)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: str = STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    session_deadline: float = 0.0
    revocation_deadline: float | None = None
    last_sent: TopicPartitions | None = None
    # (topic, partition) -> the assignment epoch at which the member got each partition it holds
    # or is revoking (Kafka 4.4's AssignmentEpochs): a commit with an older member epoch is
    # still accepted for partitions held since then
    epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # A member that speaks the classic protocol inside this group (online migration): its session
    # timeout and JoinGroup protocols; None for a consumer-protocol member
    classic: ClassicMeta | None = None
    # classic members only: when a member told to rejoin must have joined, and when a joined
    # member must have sent SyncGroup (Kafka's join and sync timeouts)
    join_deadline: float | None = None
    sync_deadline: float | None = None

    def held_since(self, topic: str, partition: int) -> int | None:
        """The assignment epoch of a partition the member holds or is revoking, else None."""
        if partition in self.assigned.get(topic, ()) or partition in self.pending_revocation.get(topic, ()):
            return self.epochs.get((topic, partition), self.member_epoch)
        return None


def _copy(tp: TopicPartitions) -> TopicPartitions:
    return {t: set(ps) for t, ps in tp.items() if ps}


def _minus(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _union(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    out = _copy(a)
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return out


def _empty(tp: TopicPartitions) -> bool:
    return not any(tp.values())


def _keep_epochs(member: ConsumerMember) -> None:
    """Forget the assignment epochs of partitions the member neither holds nor revokes."""
    member.epochs = {tp: e for tp, e in member.epochs.items() if member.held_since(*tp) is not None}


@dataclass
class HeartbeatResult:
    """What ConsumerGroupHeartbeat answers (assignment None = unchanged, not sent)."""

    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


class ConsumerGroup:
    """A consumer group: members, group epoch, target assignment and its epoch."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.assignor_name = DEFAULT_ASSIGNOR
        self.subscribed_partitions: dict[str, int] = {}
        # What __consumer_offsets holds for this group: record key -> value bytes.
        self.persisted: dict[bytes, bytes] = {}
        # Lists the cluster's topics, for regular-expression subscriptions (set by the coordinator).
        self.list_topics: Callable[[], list[str]] = list

    # ---------------------------------------------------------------- queries

    def is_empty(self) -> bool:
        return not self.members

    def state_name(self) -> str:
        """Kafka's ConsumerGroupState names: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        for member in self.members.values():
            if member.state != STABLE or member.member_epoch != self.assignment_epoch:
                return "Reconciling"
        return "Stable"

    def member_topics(self, member: ConsumerMember) -> set[str]:
        """The topics a member subscribes to: its names plus what its regular expression matches
        (full match, internal topics excluded, like Kafka's regex resolution)."""
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            try:
                pattern = re.compile(member.subscribed_topic_regex)
            except re.error:
                return topics
            topics.update(t for t in self.list_topics() if not t.startswith("__") and pattern.fullmatch(t))
        return topics

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in self.member_topics(m)}

    # ---------------------------------------------------------------- validation for offsets

    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int, *,
                               instance_id: str | None = None, transactional: bool = False,
                               partitions: list[tuple[str, int]] | None = None) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit for an OffsetCommit or (`transactional`) a
        TxnOffsetCommit of `partitions` (topic, partition); raises GroupError.

        An older member epoch than the member's is accepted when every partition has been held
        since that epoch or before (Kafka 4.4); without `partitions` it is refused."""
        if member_epoch < 0 and not self.members:
            return  # the admin client or a consumer without group management, to an empty group
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            # TxnOffsetCommit before v3 carries no member: Kafka accepts it whatever the group holds.
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        if not transactional and member.classic is None and api_version < 9:
            # Only plain commits must use OffsetCommit v9+ (member epochs); TxnOffsetCommit v3+
            # carries the member epoch in its generation id field, so Kafka exempts it.
            raise GroupError(ErrorCode.UNSUPPORTED_VERSION,
                             "OffsetCommit version 9 or above must be used by members using the consumer group protocol")
        if member_epoch == member.member_epoch:
            return
        # TxnOffsetCommit before v6 has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION, as it
        # does to a classic member (its generation is the member epoch).
        code = ErrorCode.STALE_MEMBER_EPOCH if not transactional or api_version >= 6 else ErrorCode.ILLEGAL_GENERATION
        if member.classic is not None:
            code = ErrorCode.ILLEGAL_GENERATION
        if member_epoch > member.member_epoch:
            what = "generation id" if member.classic is not None else "member epoch"
            raise GroupError(code, f"Received {what} {member_epoch} is newer than current member epoch "
                                   f"{member.member_epoch}.")
        if partitions is None:
            raise GroupError(code, f"The received member epoch {member_epoch} does not match "
                                   f"the expected member epoch {member.member_epoch}.")
        for topic, partition in partitions:
            since = member.held_since(topic, partition)
            if since is None:
                raise GroupError(code, f"Partition {topic}-{partition} is not assigned or pending revocation "
                                       "for member.")
            if member_epoch < since:
                raise GroupError(code, f"Received member epoch {member_epoch} is older than assignment epoch "
                                       f"{since} for partition {topic}-{partition}.")

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> None:
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)

    # ---------------------------------------------------------------- heartbeat

    def heartbeat(self, coordinator: GroupCoordinator, *, api_version: int, member_id: str, member_epoch: int,
                  instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                  subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                  server_assignor: str | None, owned: TopicPartitions | None, client_id: str,
                  client_host: str, topic_partitions: Callable[[str], int | None]) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat: join (epoch 0), leave (-1/-2) or heartbeat and reconcile."""
        now = coordinator.monotonic()
        interval = coordinator.cfg("group.consumer.heartbeat.interval.ms")
        session_ms = coordinator.cfg("group.consumer.session.timeout.ms")
        if member_epoch in (-1, -2):
            member = self.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            self.remove_member(member_id, "the member left")
            return HeartbeatResult(member_id=member_id, member_epoch=member_epoch, heartbeat_interval_ms=0)
        bump = False
        if member_epoch == 0:
            if not member_id:
                if api_version >= 1:
                    raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
                member_id = str(uuid.uuid4())
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                raise GroupError(ErrorCode.INVALID_REQUEST,
                                 "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
            member = self.members.get(member_id)
            if member is not None:
                # Rejoining with epoch 0 resets the member (it lost its assignment).
                self.remove_member(member_id, "member rejoined with epoch 0", recompute=False)
            if len(self.members) >= coordinator.cfg("group.consumer.max.size"):
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member = ConsumerMember(member_id=member_id, instance_id=instance_id, rack_id=rack_id,
                                    client_id=client_id, client_host=client_host)
            self.members[member_id] = member
            bump = True
        else:
            member = self.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
            if member_epoch != member.member_epoch:
                # A member that missed our last answer may repeat its previous epoch while it
                # owns a subset of what it had.
                owned_ok = owned is not None and _empty(_minus(owned, member.assigned))
                if not (member_epoch == member.previous_member_epoch and owned_ok):
                    raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The member epoch {member_epoch} does not match the expected {member.member_epoch}.")
        member.session_deadline = now + session_ms / 1000
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = sorted(set(subscribed_topic_names))
            bump = True
        if subscribed_topic_regex is not None and subscribed_topic_regex != member.subscribed_topic_regex:
            member.subscribed_topic_regex = subscribed_topic_regex or None
            bump = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            if server_assignor not in ASSIGNORS:
                raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported.")
            member.server_assignor = server_assignor
            bump = True
        # Partition counts of subscribed topics changing (new partitions) also bumps the epoch.
        partitions = self.partition_counts(topic_partitions)
        if partitions != self.subscribed_partitions:
            self.subscribed_partitions = partitions
            bump = True
        if bump:
            self.group_epoch += 1
        if self.group_epoch > self.assignment_epoch:
            self.compute_target(topic_partitions)
        self.reconcile(member, owned, now)
        changed = member.last_sent is None or member.last_sent != member.assigned or owned is not None and owned != member.assigned
        result = HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch, heartbeat_interval_ms=interval)
        if changed or member_epoch == 0:
            result.assignment = _copy(member.assigned)
            member.last_sent = _copy(member.assigned)
        return result

    def partition_counts(self, topic_partitions: Callable[[str], int | None]) -> dict[str, int]:
        """Partition count of every subscribed topic that exists."""
        out = {}
        for topic in sorted(self.subscribed_topic_names()):
            n = topic_partitions(topic)
            if n is not None:
                out[topic] = n
        return out

    def compute_target(self, topic_partitions: Callable[[str], int | None]) -> None:
        """Recompute the target assignment for the current group epoch."""
        names = {m.server_assignor for m in self.members.values() if m.server_assignor}
        self.assignor_name = sorted(names)[0] if names else DEFAULT_ASSIGNOR
        assignor = ASSIGNORS[self.assignor_name]
        self.subscribed_partitions = self.partition_counts(topic_partitions)
        subs = {m.member_id: self.member_topics(m) for m in self.members.values()}
        self.target = assignor(subs, self.subscribed_partitions, self.target)
        self.assignment_epoch = self.group_epoch
        log.info("Computed the target assignment of consumer group %s for epoch %d with the %s assignor",
                 self.group_id, self.assignment_epoch, self.assignor_name)

    def reconcile(self, member: ConsumerMember, owned: TopicPartitions | None, now: float) -> None:
        """Move a member towards its target assignment (Kafka's CurrentAssignmentBuilder)."""
        if member.state == UNREVOKED_PARTITIONS and member.pending_revocation:
            if owned is None or any(owned.get(t, set()) & ps for t, ps in member.pending_revocation.items()):
                return  # still waiting for the member to give the partitions up
            member.pending_revocation = {}
            member.revocation_deadline = None
            _keep_epochs(member)
        target = self.target.get(member.member_id, {})
        revoke = _minus(member.assigned, target)
        if revoke and owned is not None and not any(owned.get(t, set()) & ps for t, ps in revoke.items()):
            # the member no longer owns what it must give up (an eager classic member revoked
            # everything before rejoining): Kafka's ownsRevokedPartitions, straight to the new epoch
            member.assigned = _minus(member.assigned, revoke)
            revoke = {}
        if revoke:
            member.assigned = _minus(member.assigned, revoke)
            member.pending_revocation = revoke
            member.state = UNREVOKED_PARTITIONS
            member.revocation_deadline = now + member.rebalance_timeout_ms / 1000
            return
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        held: TopicPartitions = {}
        for other in self.members.values():
            if other is not member:
                held = _union(held, _union(other.assigned, other.pending_revocation))
        wanted = _minus(target, member.assigned)
        free = _minus(wanted, held)
        member.assigned = _union(member.assigned, free)
        for topic, partitions in free.items():
            for partition in partitions:
                member.epochs[(topic, partition)] = self.assignment_epoch
        _keep_epochs(member)
        member.state = STABLE if _empty(_minus(target, member.assigned)) else UNRELEASED_PARTITIONS

    def remove_member(self, member_id: str, reason: str, recompute: bool = True) -> None:
        if self.members.pop(member_id, None) is None:
            return
        self.target.pop(member_id, None)
        log.info("Member %s left consumer group %s: %s", member_id, self.group_id, reason)
        if recompute:
            self.group_epoch += 1

    def expired_members(self, now: float) -> list[tuple[str, str]]:
        """(member id, reason) of the members to fence now: session timed out, partitions not
        revoked within the rebalance timeout, or (classic members) no rejoin or sync in time."""
        out = []
        for member in self.members.values():
            if now >= member.session_deadline:
                out.append((member.member_id, "session timeout"))
            elif member.revocation_deadline is not None and now >= member.revocation_deadline:
                out.append((member.member_id, "did not revoke partitions within the rebalance timeout"))
            elif member.join_deadline is not None and now >= member.join_deadline:
                out.append((member.member_id, "the classic member failed to join within the rebalance timeout"))
            elif member.sync_deadline is not None and now >= member.sync_deadline:
                out.append((member.member_id, "the member failed to sync within timeout"))
        return out

    def expire_sessions(self, coordinator: GroupCoordinator, now: float) -> None:
        """Fence the members :meth:`expired_members` names (without online downgrade)."""
        for member_id, reason in self.expired_members(now):
            self.remove_member(member_id, reason)
        if self.group_epoch > self.assignment_epoch:
            self.compute_target(coordinator.topic_partition_count)

    # ---------------------------------------------------------------- classic members (migration)

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept."""
        return all(m.classic is not None for m in self.members.values() if m.member_id != member_id)

    def supports_classic_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a classic member with these protocols may join (Kafka's supportsClassicProtocols):
        the consumer protocol type, and a protocol every classic member already supports."""
        if protocol_type != "consumer":
            return False
        classic = self.classic_members()
        if not classic:
            return bool(names)
        return any(all(n in {p for p, _ in m.classic.protocols} for m in classic if m.classic) for n in names)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Whether some partition of the member's target is still held by another member."""
        wanted = _minus(self.target.get(member.member_id, {}), member.assigned)
        for other in self.members.values():
            if other is member:
                continue
            held = _union(other.assigned, other.pending_revocation)
            if any(held.get(t, set()) & ps for t, ps in wanted.items()):
                return True
        return False


# ---------------------------------------------------------------------------------- persistence

_KEY_ORDER = (
    rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION,
    rec.CONSUMER_GROUP_METADATA_KEY_VERSION,
    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION,
    rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
)


def desired_records(group: ConsumerGroup, topic_id: Callable[[str], object | None]) -> dict[bytes, bytes]:
    """Every record (key -> value bytes) that describes the group's current state, in the order
    Kafka writes them (member subscriptions, group epoch, target assignment, current assignment)."""
    out: dict[int, list[tuple[bytes, bytes]]] = {v: [] for v in _KEY_ORDER}
    gid = group.group_id

    def partitions(cls: type, tps: TopicPartitions, member: ConsumerMember | None = None) -> list:
        items = []
        for name in sorted(tps):
            tid = topic_id(name)
            if tid is not None and tps[name]:
                ps = sorted(tps[name])
                if member is None:
                    items.append(cls(topic_id=tid, partitions=ps))
                else:  # a current assignment names each partition's assignment epoch, as Kafka 4.4's does
                    items.append(cls(topic_id=tid, partitions=ps,
                                     assignment_epochs=[member.held_since(name, p) for p in ps]))
        return items

    member_cls = rec.consumer_group_value_class(rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION)
    target_cls = rec.consumer_group_value_class(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION)
    current_cls = rec.consumer_group_value_class(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION)
    for m in group.members.values():
        v = rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION
        out[v].append((rec.consumer_group_key(v, group_id=gid, member_id=m.member_id), rec.consumer_group_value(v, member_cls(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=_classic_metadata(member_cls, m)))))
        v = rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION
        out[v].append((rec.consumer_group_key(v, group_id=gid, member_id=m.member_id), rec.consumer_group_value(
            v, target_cls(topic_partitions=partitions(target_cls.TopicPartition, group.target.get(m.member_id, {}))))))
        v = rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION
        out[v].append((rec.consumer_group_key(v, group_id=gid, member_id=m.member_id), rec.consumer_group_value(v, current_cls(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=STATE_VALUES[m.state],
            assigned_partitions=partitions(current_cls.TopicPartitions, m.assigned, m),
            partitions_pending_revocation=partitions(current_cls.TopicPartitions, m.pending_revocation, m)))))
    v = rec.CONSUMER_GROUP_METADATA_KEY_VERSION
    out[v].append((rec.consumer_group_key(v, group_id=gid),
                   rec.consumer_group_value(v, rec.consumer_group_value_class(v)(epoch=group.group_epoch))))
    v = rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION
    out[v].append((rec.consumer_group_key(v, group_id=gid),
                   rec.consumer_group_value(v, rec.consumer_group_value_class(v)(assignment_epoch=group.assignment_epoch))))
    return {k: val for version in _KEY_ORDER for k, val in out[version]}


def _classic_metadata(member_cls: type, member: ConsumerMember) -> object | None:
    if member.classic is None:
        return None
    meta_cls = member_cls.ClassicMemberMetadata
    return meta_cls(session_timeout_ms=member.classic.session_timeout_ms, supported_protocols=[
        member_cls.ClassicProtocol(name=n, metadata=bytes(m)) for n, m in member.classic.protocols])


def changes(group: ConsumerGroup, desired: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """Records to append so the log says `desired`: tombstones for what is gone, then what changed."""
    gone = [(k, None) for k in group.persisted if k not in desired]
    # a departing member's current assignment, target and subscription go first (Kafka's order)
    gone.sort(key=lambda kv: -int.from_bytes(kv[0][:2], "big"))
    updated = [(k, v) for k, v in desired.items() if group.persisted.get(k) != v]
    return [*gone, *updated]


def group_from_records(group_id: str, found: dict[int, dict[str, object]], topic_name: Callable[[object], str | None],
                       session_deadline: float) -> ConsumerGroup:
    """Rebuild a consumer group from its latest records: found[key version][member id or ""] = value."""
    group = ConsumerGroup(group_id)
    meta = found.get(rec.CONSUMER_GROUP_METADATA_KEY_VERSION, {}).get("")
    group.group_epoch = meta.epoch if meta is not None else 0
    target_meta = found.get(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION, {}).get("")
    group.assignment_epoch = target_meta.assignment_epoch if target_meta is not None else 0

    def names(tps: list) -> TopicPartitions:
        out: TopicPartitions = {}
        for tp in tps:
            name = topic_name(tp.topic_id)
            if name is not None:
                out.setdefault(name, set()).update(tp.partitions)
        return out

    for member_id, v in found.get(rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION, {}).items():
        group.members[member_id] = ConsumerMember(
            member_id=member_id, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
            client_host=v.client_host, rebalance_timeout_ms=v.rebalance_timeout_ms,
            subscribed_topic_names=list(v.subscribed_topic_names), subscribed_topic_regex=v.subscribed_topic_regex,
            server_assignor=v.server_assignor, session_deadline=session_deadline,
        )
        classic = getattr(v, "classic_member_metadata", None)
        if classic is not None:
            group.members[member_id].classic = ClassicMeta(
                session_timeout_ms=classic.session_timeout_ms,
                protocols=[(p.name, bytes(p.metadata)) for p in classic.supported_protocols])
    for member_id, v in found.get(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION, {}).items():
        if member_id in group.members:
            group.target[member_id] = names(v.topic_partitions)
    states = {value: name for name, value in STATE_VALUES.items()}
    for member_id, v in found.get(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION, {}).items():
        member = group.members.get(member_id)
        if member is None:
            continue
        member.member_epoch = v.member_epoch
        member.previous_member_epoch = v.previous_member_epoch
        member.state = states.get(v.state, STABLE)
        member.assigned = names(v.assigned_partitions)
        member.pending_revocation = names(v.partitions_pending_revocation)
        for tp in [*v.assigned_partitions, *v.partitions_pending_revocation]:
            name = topic_name(tp.topic_id)
            epochs = getattr(tp, "assignment_epochs", None)
            # without (or with a mismatched list of) epochs Kafka takes the member epoch for all
            if name is not None and epochs is not None and len(epochs) == len(tp.partitions):
                member.epochs.update({(name, p): e for p, e in zip(tp.partitions, epochs, strict=True)})
    names_ = {m.server_assignor for m in group.members.values() if m.server_assignor}
    group.assignor_name = sorted(names_)[0] if names_ else DEFAULT_ASSIGNOR
    return group
