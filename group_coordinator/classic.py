"""Classic (JoinGroup/SyncGroup) groups: members, the group state machine and protocol selection.

The states and their legal transitions are Kafka's:

* Empty -> PreparingRebalance (a member joins) or Dead (deleted / offsets expired)
* PreparingRebalance -> CompletingRebalance (join phase done), Empty (nobody rejoined), Dead
* CompletingRebalance -> Stable (leader's SyncGroup), PreparingRebalance, Dead
* Stable -> PreparingRebalance, Dead
* Dead is final.

This module holds data and pure decisions only; the coordinator drives the transitions,
the waits (trio events) and persistence.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import trio

from ..wire.errors import ErrorCode
from ..wire.schema import codec

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """Kafka's classic group states; the value is the name clients see (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
         GroupState.EMPTY, GroupState.DEAD}
    ),
}


class GroupError(Exception):
    """An operation failed with a Kafka error code (answered to the client as such)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass
class JoinResult:
    """What a JoinGroup call answers once the join phase completes."""

    error: ErrorCode = ErrorCode.NONE
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) for the leader, empty for followers
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    """What a SyncGroup call answers."""

    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class ClassicMember:
    """A member of a classic group as the coordinator knows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # A member that joined in this rebalance and was never part of a generation yet.
    is_new: bool = False
    heartbeat_deadline: float = 0.0
    # Pending JoinGroup / SyncGroup of this member: an event to set and the answer.
    join_event: trio.Event | None = None
    join_result: JoinResult | None = None
    sync_event: trio.Event | None = None
    sync_result: SyncResult | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_event is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_event is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"member does not support {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order (a rejoin that changes nothing)."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols (in its preference order) that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)


@dataclass
class ClassicGroup:
    """A classic group: members, generation, selected protocol and state."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    # Dynamic members that got MEMBER_ID_REQUIRED and must rejoin with their id (KIP-394).
    pending_members: dict[str, float] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    # Join phase bookkeeping.
    rebalance_deadline: float | None = None
    initial_delay_until: float | None = None
    sync_deadline: float | None = None
    # Members that got a JoinGroup answer but have not sent SyncGroup yet.
    pending_sync: set[str] = field(default_factory=set)
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False
    # Members awaiting a JoinGroup answer
    num_awaiting_join: int = 0

    # ---------------------------------------------------------------- state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(
                f"group {self.group_id} cannot go from {self.state.value} to {target.value}"
            )
        self.state = target
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ---------------------------------------------------------------- members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add_member(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return self.static_members.get(instance_id) if instance_id is not None else None

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---------------------------------------------------------------- protocols

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Whether a joining member with these protocols fits the group (Kafka's supportsProtocols)."""
        if not self.members and self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        counts = Counter(p for m in self.members.values() for p in m.protocol_names())
        return any(counts[p] == len(self.members) for p in protocols)

    def select_protocol(self) -> str:
        """Majority vote: each member votes for its most preferred protocol that all support.

        Ties go to the protocol that appears first in the iteration (Kafka takes the max of
        the vote counts over a map, so ties are broken by map order; members vote in join
        order here).
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        for name, count in votes.items():
            if count == best:
                return name
        raise AssertionError("unreachable")

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                sub = parse_subscription(member.metadata(self.protocol_name))
            except Exception:  # a client-defined blob we cannot read: be conservative
                return None
            topics.update(sub)
        return topics


def parse_subscription(data: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (any version)."""
    view = memoryview(data)
    version = int.from_bytes(view[0:2], "big", signed=True)
    version = min(max(version, 0), 3)
    sub, _ = codec("ConsumerProtocolSubscription", version).decode(view, 2)
    return list(sub.topics)


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """Partitions of a ConsumerProtocolAssignment (any version); {} for an empty blob."""
    if not data:
        return {}
    view = memoryview(data)
    version = int.from_bytes(view[0:2], "big", signed=True)
    version = min(max(version, 0), 3)
    assignment, _ = codec("ConsumerProtocolAssignment", version).decode(view, 2)
    return {tp.topic: list(tp.partitions) for tp in assignment.assigned_partitions}


def describe_metadata(member: ClassicMember, protocol: str | None) -> Any:
    """The member's metadata for the group's protocol, or empty bytes if not known."""
    if protocol is None:
        return b""
    for name, meta in member.protocols:
        if name == protocol:
            return meta
    return b""
