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
from . import metadata_hash
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


def _owns(owned: TopicPartitions | None, partitions: TopicPartitions) -> bool:
    """Kafka's ownsRevokedPartitions: the member still owns one of `partitions` (an unknown
    ownership counts as owning)."""
    return owned is None or any(owned.get(t, set()) & ps for t, ps in partitions.items())


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


@dataclass
class ResolvedRegex:
    """What a subscribed regular expression matched (ConsumerGroupRegularExpressionValue)."""

    topics: set[str]
    version: int
    timestamp: int


#: Kafka's UpdateRegularExpressionStatus
REGEX_NO_CHANGE, REGEX_UPDATED, REGEX_UPDATED_AND_RESOLVED = "no change", "updated", "updated and resolved"
#: Kafka resolves a group's regular expressions at most every 10 s
REGEX_MIN_REFRESH_MS = 10_000
#: group.consumer.regex.refresh.interval.ms's default: resolve again at least this often
REGEX_REFRESH_INTERVAL_MS = 600_000


class ConsumerGroup:
    """A consumer group: members, group epoch, target assignment and its epoch.

    As in Kafka 4.4, a new group starts at group epoch 1 and assignment epoch 1 (the group's
    first bump gives 2), and nothing says so in the log until the first bump: Kafka 4.4 made the
    initial target assignment (epoch 1, time 0) a value of its own, so that a target computed
    at time 0 is told apart from none; before it (4.1) a group started at 0 and a new group's
    first heartbeat always bumped."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1
        self.assignment_epoch = 1
        # wall-clock ms of the last target assignment; 0 = none computed yet
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        # whether the epoch record and the target assignment metadata record exist (a group
        # whose first members only subscribe to an unresolved regex has neither yet)
        self.epoch_written = False
        self.target_meta_written = False
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.assignor_name = DEFAULT_ASSIGNOR
        self.subscribed_partitions: dict[str, int] = {}
        self.resolved: dict[str, ResolvedRegex] = {}
        # a resolution of the regular expressions is due once this heartbeat is written
        self.regex_refresh_pending = False
        # the topics there were at the last resolution (None: unknown, e.g. after a load)
        self.regex_topics_seen: frozenset[str] | None = None
        # What __consumer_offsets holds for this group: record key -> value bytes.
        self.persisted: dict[bytes, bytes] = {}
        # Lists the cluster's topics, for regular-expression subscriptions (set by the coordinator).
        self.list_topics: Callable[[], list[str]] = list
        # topic name -> (16 bytes of its id, partition count), None if it does not exist
        self.topic_meta: Callable[[str], tuple[bytes, int] | None] = lambda name: None
        # the metadata version recorded with a resolved regex (Kafka: the metadata image's offset)
        self.metadata_version: Callable[[], int] = lambda: 0
        self._topic_hashes = metadata_hash.TopicHashes()

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
        """The topics a member subscribes to: its names plus what its regular expression was
        last resolved to (Kafka resolves regular expressions apart from heartbeats)."""
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved.get(member.subscribed_topic_regex)
            if resolved is not None:
                topics.update(resolved.topics)
        return topics

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in self.member_topics(m)}

    def subscribed_regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def preferred_assignor(self) -> str:
        """Kafka's preferred server assignor: the one most members name, else the default."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return DEFAULT_ASSIGNOR
        return min(counts, key=lambda name: (-counts[name], name))

    def compute_metadata_hash(self) -> int:
        """The hash of the subscribed topics' metadata, as Kafka 4.x stores it in the epoch record."""
        metas = ((name, self.topic_meta(name)) for name in self.subscribed_topic_names())
        return self._topic_hashes.group_hash((name, *meta) for name, meta in metas if meta is not None)

    def bump_epoch(self, new_hash: int) -> None:
        self.group_epoch += 1
        self.metadata_hash = new_hash
        self.epoch_written = True
        log.info("Bumped the epoch of consumer group %s to %d", self.group_id, self.group_epoch)

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
        """One ConsumerGroupHeartbeat: join (epoch 0), leave (-1/-2) or heartbeat and reconcile
        (Kafka 4.4's GroupMetadataManager.consumerGroupHeartbeat)."""
        now = coordinator.monotonic()
        now_ms = coordinator.now_ms()
        interval = coordinator.cfg("group.consumer.heartbeat.interval.ms")
        session_ms = coordinator.cfg("group.consumer.session.timeout.ms")
        if member_epoch in (-1, -2):
            member = self.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            self.remove_member(member_id, "the member left")
            return HeartbeatResult(member_id=member_id, member_epoch=member_epoch, heartbeat_interval_ms=0)
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
            if server_assignor is not None and server_assignor not in ASSIGNORS:
                raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported.")
            member = ConsumerMember(member_id=member_id, instance_id=instance_id, rack_id=rack_id,
                                    client_id=client_id, client_host=client_host)
            old_assignor = self.preferred_assignor()
            self.members[member_id] = member
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
            old_assignor = self.preferred_assignor()
        assigned_before = _copy(member.assigned)
        member.session_deadline = now + session_ms / 1000
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        names_changed = False
        if subscribed_topic_names is not None:
            names_changed = set(subscribed_topic_names) != set(member.subscribed_topic_names)
            member.subscribed_topic_names = sorted(set(subscribed_topic_names))
        old_regex = member.subscribed_topic_regex
        if subscribed_topic_regex is not None:
            member.subscribed_topic_regex = subscribed_topic_regex or None
        if server_assignor is not None and server_assignor != member.server_assignor:
            if server_assignor not in ASSIGNORS:
                raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported.")
            member.server_assignor = server_assignor
        regex_status = self._update_regexes(member, old_regex, now_ms)
        # Kafka 4.4 bumps the group epoch for a change of subscribed names, for a regex already
        # resolved, for a change of the group's preferred assignor, and for a new metadata hash
        # (a subscribed topic created, deleted or grown); a member joining is none of these
        bump = names_changed or regex_status == REGEX_UPDATED_AND_RESOLVED or old_assignor != self.preferred_assignor()
        new_hash = self.compute_metadata_hash()
        if bump or new_hash != self.metadata_hash:
            self.bump_epoch(new_hash)
        if self.assignment_epoch < self.group_epoch and self.may_assign(coordinator, now_ms):
            self.compute_target(topic_partitions, now_ms)
        self.reconcile(member, owned, now, subscription_changed=names_changed or regex_status != REGEX_NO_CHANGE)
        result = HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch, heartbeat_interval_ms=interval)
        full = (rebalance_timeout_ms != -1 and (subscribed_topic_names is not None or subscribed_topic_regex is not None)
                and owned is not None)
        if member_epoch == 0 or full or member.assigned != assigned_before:
            result.assignment = _copy(member.assigned)
            member.last_sent = _copy(member.assigned)
        return result

    def may_assign(self, coordinator: GroupCoordinator, now_ms: int) -> bool:
        """Kafka 4.4 computes a group's target assignment at most once per
        group.consumer.assignment.interval.ms (the first one at once)."""
        interval = coordinator.cfg("group.consumer.assignment.interval.ms")
        return self.assignment_timestamp == 0 or interval == 0 or now_ms >= self.assignment_timestamp + interval

    def _update_regexes(self, member: ConsumerMember, old_regex: str | None, now_ms: int) -> str:
        """Kafka's maybeUpdateRegularExpressions: what the member's regex change means for the
        epoch, and whether the group's regexes must be resolved (after this heartbeat is written)."""
        new_regex = member.subscribed_topic_regex
        others = [m.subscribed_topic_regex for m in self.members.values() if m is not member]
        status = REGEX_NO_CHANGE
        require_refresh = False
        if old_regex != new_regex:
            status = REGEX_UPDATED
            if old_regex and old_regex not in others:
                self.resolved.pop(old_regex, None)  # its record becomes a tombstone
            if new_regex:
                if new_regex not in others:
                    require_refresh = True
                elif new_regex in self.resolved:
                    status = REGEX_UPDATED_AND_RESOLVED
            elif old_regex:
                status = REGEX_UPDATED_AND_RESOLVED
        regexes = self.subscribed_regexes()
        before = {r for r in others if r} | ({old_regex} if old_regex else set())
        if not require_refresh and not before or self.regex_refresh_pending:
            return status
        last = max((r.timestamp for r in self.resolved.values()), default=None)
        if last is not None and now_ms <= last + REGEX_MIN_REFRESH_MS:
            return status
        require_refresh = (require_refresh or len(regexes) != len(self.resolved) or last is None
                           or now_ms > last + REGEX_REFRESH_INTERVAL_MS or self._new_topics())
        if require_refresh and regexes:
            self.regex_refresh_pending = True
        return status

    def _new_topics(self) -> bool:
        seen = self.regex_topics_seen
        return seen is None or any(t not in seen for t in self.list_topics())

    def resolve_regexes(self, now_ms: int) -> None:
        """Kafka's handleRegularExpressionsResult: resolve every subscribed regex (full match,
        internal topics left out), record each, and bump the epoch if a match or the metadata
        hash changed."""
        self.regex_refresh_pending = False
        topics = self.list_topics()
        self.regex_topics_seen = frozenset(topics)
        version = self.metadata_version()
        bump = False
        for regex in sorted(self.subscribed_regexes()):
            try:
                pattern = re.compile(regex)
            except re.error:
                matched: set[str] = set()
            else:
                matched = {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
            old = self.resolved.get(regex)
            if old is None and matched or old is not None and old.topics != matched:
                bump = True
            self.resolved[regex] = ResolvedRegex(matched, version, now_ms)
        new_hash = self.compute_metadata_hash()
        if bump or new_hash != self.metadata_hash:
            self.bump_epoch(new_hash)

    def partition_counts(self, topic_partitions: Callable[[str], int | None]) -> dict[str, int]:
        """Partition count of every subscribed topic that exists."""
        out = {}
        for topic in sorted(self.subscribed_topic_names()):
            n = topic_partitions(topic)
            if n is not None:
                out[topic] = n
        return out

    def compute_target(self, topic_partitions: Callable[[str], int | None], now_ms: int = 0) -> None:
        """Recompute the target assignment for the current group epoch."""
        self.assignor_name = self.preferred_assignor()
        assignor = ASSIGNORS[self.assignor_name]
        self.subscribed_partitions = self.partition_counts(topic_partitions)
        subs = {m.member_id: self.member_topics(m) for m in self.members.values()}
        self.target = assignor(subs, self.subscribed_partitions, self.target)
        self.assignment_epoch = self.group_epoch
        self.assignment_timestamp = now_ms
        self.target_meta_written = True
        log.info("Computed the target assignment of consumer group %s for epoch %d with the %s assignor",
                 self.group_id, self.assignment_epoch, self.assignor_name)

    def reconcile(self, member: ConsumerMember, owned: TopicPartitions | None, now: float,
                  subscription_changed: bool = False) -> None:
        """Move a member towards its target assignment (Kafka's CurrentAssignmentBuilder.build)."""
        if member.state == STABLE:
            if member.member_epoch != self.assignment_epoch:
                self._next_assignment(member, owned, now)
            elif subscription_changed:
                self._drop_unsubscribed(member, owned, now)
        elif member.state == UNREVOKED_PARTITIONS:
            if _owns(owned, member.pending_revocation):
                if subscription_changed:
                    self._drop_unsubscribed(member, owned, now)
                return  # still waiting for the member to give the partitions up
            self._next_assignment(member, owned, now)
        else:
            self._next_assignment(member, owned, now)

    def _next_assignment(self, member: ConsumerMember, owned: TopicPartitions | None, now: float) -> None:
        """Kafka's computeNextAssignment: revoke first; else take the target's partitions that
        nobody else holds (the rest stay unreleased)."""
        subscribed = self.member_topics(member)
        target = {t: ps for t, ps in self.target.get(member.member_id, {}).items() if t in subscribed}
        held: TopicPartitions = {}
        for other in self.members.values():
            if other is not member:
                held = _union(held, _union(other.assigned, other.pending_revocation))
        keep = {t: ps & target.get(t, set()) for t, ps in member.assigned.items() if ps & target.get(t, set())}
        revoke = _minus(member.assigned, keep)
        wanted = _minus(target, keep)
        free = {t: {p for p in ps if p not in held.get(t, set()) or p in member.pending_revocation.get(t, set())}
                for t, ps in wanted.items()}
        free = {t: ps for t, ps in free.items() if ps}
        unreleased = not _empty(_minus(wanted, free))
        member.previous_member_epoch = member.member_epoch
        if revoke and _owns(owned, revoke):
            member.state = UNREVOKED_PARTITIONS
            member.assigned = keep
            member.pending_revocation = revoke
            member.revocation_deadline = now + member.rebalance_timeout_ms / 1000
            return
        member.member_epoch = self.assignment_epoch
        member.assigned = _union(keep, free)
        for topic, partitions in free.items():
            for partition in partitions:
                member.epochs[(topic, partition)] = self.assignment_epoch
        member.pending_revocation = {}
        member.revocation_deadline = None
        _keep_epochs(member)
        member.state = UNRELEASED_PARTITIONS if unreleased else STABLE

    def _drop_unsubscribed(self, member: ConsumerMember, owned: TopicPartitions | None, now: float) -> None:
        """Kafka's updateCurrentAssignment: partitions of topics the member no longer subscribes
        to are revoked at once, without waiting for a new target."""
        subscribed = self.member_topics(member)
        if not subscribed and not member.pending_revocation:
            assigned, pending = {}, _copy(member.assigned)
        else:
            assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
            pending = _union(member.pending_revocation, {t: ps for t, ps in member.assigned.items() if t not in subscribed})
        if assigned == member.assigned:
            return
        member.previous_member_epoch = member.member_epoch
        member.assigned = assigned
        if pending and _owns(owned, pending):
            member.state = UNREVOKED_PARTITIONS
            member.pending_revocation = pending
            member.revocation_deadline = now + member.rebalance_timeout_ms / 1000
        _keep_epochs(member)

    def remove_member(self, member_id: str, reason: str, recompute: bool = True) -> None:
        """A member leaves or is fenced: with `recompute`, the epoch is bumped (Kafka's
        consumerGroupFenceMembers); an emptied group's assignment epoch follows it."""
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.target.pop(member_id, None)
        log.info("Member %s left consumer group %s: %s", member_id, self.group_id, reason)
        if not recompute:
            return
        regex = member.subscribed_topic_regex
        if regex and regex not in self.subscribed_regexes():
            self.resolved.pop(regex, None)
        self.bump_epoch(self.compute_metadata_hash())
        if not self.members:
            self.assignment_epoch = self.group_epoch
            self.assignment_timestamp = 0
            self.target_meta_written = True

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
        """Fence the members :meth:`expired_members` names (without online downgrade); as in
        Kafka, the next heartbeat computes the new target."""
        for member_id, reason in self.expired_members(now):
            self.remove_member(member_id, reason)

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
    rec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION,
    rec.CONSUMER_GROUP_METADATA_KEY_VERSION,
    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION,
    rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
)


def desired_records(group: ConsumerGroup, topic_id: Callable[[str], object | None]) -> dict[bytes, bytes]:
    """Every record (key -> value bytes) that describes the group's current state, in the order
    Kafka writes them (member subscriptions, resolved regexes, group epoch, target assignment,
    current assignment)."""
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
        value = member_cls(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex or "",
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=_classic_metadata(member_cls, m))
        if m.classic is None:
            value._unknown_tagged_fields = list(rec.EXPLICIT_NULL_CLASSIC_METADATA)
        out[v].append((rec.consumer_group_key(v, group_id=gid, member_id=m.member_id), rec.consumer_group_value(v, value)))
        v = rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION
        if m.member_id in group.target:
            out[v].append((rec.consumer_group_key(v, group_id=gid, member_id=m.member_id), rec.consumer_group_value(
                v, target_cls(topic_partitions=partitions(target_cls.TopicPartition, group.target[m.member_id])))))
        v = rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION
        out[v].append((rec.consumer_group_key(v, group_id=gid, member_id=m.member_id), rec.consumer_group_value(v, current_cls(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=STATE_VALUES[m.state],
            assigned_partitions=partitions(current_cls.TopicPartitions, m.assigned, m),
            partitions_pending_revocation=partitions(current_cls.TopicPartitions, m.pending_revocation, m)))))
    v = rec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION
    for regex, resolved in sorted(group.resolved.items()):
        out[v].append((rec.consumer_group_key(v, group_id=gid, regular_expression=regex), rec.consumer_group_value(
            v, rec.consumer_group_value_class(v)(topics=sorted(resolved.topics), version=resolved.version,
                                                 timestamp=resolved.timestamp))))
    if group.epoch_written:
        v = rec.CONSUMER_GROUP_METADATA_KEY_VERSION
        out[v].append((rec.consumer_group_key(v, group_id=gid), rec.consumer_group_value(
            v, rec.consumer_group_value_class(v)(epoch=group.group_epoch, metadata_hash=group.metadata_hash))))
    if group.target_meta_written:
        v = rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION
        out[v].append((rec.consumer_group_key(v, group_id=gid), rec.consumer_group_value(
            v, rec.consumer_group_value_class(v)(assignment_epoch=group.assignment_epoch,
                                                 assignment_timestamp=group.assignment_timestamp))))
    return {k: val for version in _KEY_ORDER for k, val in out[version]}


def _classic_metadata(member_cls: type, member: ConsumerMember) -> object | None:
    if member.classic is None:
        return None
    meta_cls = member_cls.ClassicMemberMetadata
    return meta_cls(session_timeout_ms=member.classic.session_timeout_ms, supported_protocols=[
        member_cls.ClassicProtocol(name=n, metadata=bytes(m)) for n, m in member.classic.protocols])


def changes(group: ConsumerGroup, desired: dict[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """Records to append so the log says `desired`, in Kafka's order: a departing member's
    current assignment, target and subscription tombstones, then the new subscriptions, the
    tombstones of regexes nobody subscribes to any more, then the rest of what changed."""
    def version(key: bytes) -> int:
        return int.from_bytes(key[:2], "big")

    gone = [k for k in group.persisted if k not in desired]
    # Kafka tombstones a departing member's current assignment, target and subscription, whether
    # or not it had a target yet
    for k in list(gone):
        if version(k) == rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION:
            member_id = rec.decode_record(k, None).key.member_id
            for v in (rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
                      rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION):
                key = rec.consumer_group_key(v, group_id=group.group_id, member_id=member_id)
                if key not in gone:
                    gone.append(key)
    member_gone = sorted((k for k in gone if version(k) != rec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION),
                         key=lambda k: -version(k))
    regex_gone = [k for k in gone if version(k) == rec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION]
    updated = [(k, v) for k, v in desired.items() if group.persisted.get(k) != v]
    subscriptions = [kv for kv in updated if version(kv[0]) == rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION]
    rest = [kv for kv in updated if version(kv[0]) != rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION]
    return [*((k, None) for k in member_gone), *subscriptions, *((k, None) for k in regex_gone), *rest]


def group_from_records(group_id: str, found: dict[int, dict[str, object]], topic_name: Callable[[object], str | None],
                       session_deadline: float) -> ConsumerGroup:
    """Rebuild a consumer group from its latest records: found[key version][member id or ""] = value."""
    group = ConsumerGroup(group_id)
    meta = found.get(rec.CONSUMER_GROUP_METADATA_KEY_VERSION, {}).get("")
    if meta is not None:
        group.group_epoch, group.metadata_hash, group.epoch_written = meta.epoch, meta.metadata_hash, True
    target_meta = found.get(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION, {}).get("")
    if target_meta is not None:
        group.assignment_epoch, group.assignment_timestamp = target_meta.assignment_epoch, target_meta.assignment_timestamp
        group.target_meta_written = True
    for regex, v in found.get(rec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION, {}).items():
        group.resolved[regex] = ResolvedRegex(set(v.topics), v.version, v.timestamp)

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
            subscribed_topic_names=list(v.subscribed_topic_names), subscribed_topic_regex=v.subscribed_topic_regex or None,
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
    group.assignor_name = group.preferred_assignor()
    return group
