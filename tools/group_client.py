"""Consumer-group requests for the command-line tools, on top of :mod:`odradek.tools.client`.

Covers what kafka-consumer-groups.sh and a console consumer with ``--group`` need: finding
the coordinator, listing and describing groups, reading and committing offsets, and a
classic-protocol member (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) that assigns partitions
with the range strategy when it is the leader.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any

from ..wire.errors import ErrorCode
from ..wire.protocol import request_class
from ..wire.schema import codec, message_class
from .client import KafkaClient, KafkaError, check

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16

CONSUMER_PROTOCOL_VERSION = 0

_RETRY_CODES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}

TopicPartition = tuple[str, int]


def find_coordinator(client: KafkaClient, group: str, wait_s: float = 15.0) -> int:
    """Node id of the group's coordinator (retried while the coordinator is loading)."""
    cls = request_class(FIND_COORDINATOR)
    deadline = time.monotonic() + wait_s
    while True:
        response = client.send(FIND_COORDINATOR, cls(key=group, key_type=0))
        if response.error_code == 0:
            client.brokers.setdefault(response.node_id, (response.host, response.port))
            return response.node_id
        if response.error_code not in _RETRY_CODES or time.monotonic() > deadline:
            check(response.error_code, response.error_message or f"FindCoordinator {group}")
        time.sleep(0.2)


@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


def list_groups(client: KafkaClient) -> list[GroupListing]:
    """Every group of every broker (ListGroups goes to each broker, as Kafka's admin client does)."""
    client.metadata([])
    out: dict[str, GroupListing] = {}
    for node_id in sorted(client.brokers):
        response = client.send(LIST_GROUPS, request_class(LIST_GROUPS)(), node_id)
        check(response.error_code, "ListGroups")
        for g in response.groups:
            out[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state or "")
    return sorted(out.values(), key=lambda g: g.group_id)


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: list[MemberDescription] = field(default_factory=list)


def describe_group(client: KafkaClient, group: str) -> GroupDescription:
    coordinator = find_coordinator(client, group)
    response = client.send(DESCRIBE_GROUPS, request_class(DESCRIBE_GROUPS)(groups=[group]), coordinator)
    g = response.groups[0]
    check(g.error_code, f"DescribeGroups {group}")
    members = []
    for m in g.members:
        assignment: list[TopicPartition] = []
        if g.protocol_type == "consumer" and m.member_assignment:
            assignment = decode_assignment(m.member_assignment)
        members.append(MemberDescription(m.member_id, m.client_id, m.client_host, assignment))
    return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, coordinator, members)


def fetch_committed(
    client: KafkaClient, group: str, partitions: list[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    """Committed offsets of `group` (all of them when `partitions` is None); -1 entries are left out."""
    cls = request_class(OFFSET_FETCH)
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    coordinator = find_coordinator(client, group)
    response = client.send(OFFSET_FETCH, cls(group_id=group, topics=topics), coordinator)
    check(response.error_code, f"OffsetFetch {group}")
    out = {}
    for t in response.topics:
        for p in t.partitions:
            check(p.error_code, f"OffsetFetch {group} {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def commit_offsets(
    client: KafkaClient,
    group: str,
    offsets: dict[TopicPartition, int],
    *,
    generation: int = -1,
    member_id: str = "",
    coordinator: int | None = None,
) -> None:
    """OffsetCommit; generation -1 and an empty member id commit for an empty group (admin-style)."""
    cls = request_class(OFFSET_COMMIT)
    by_topic: dict[str, list[Any]] = {}
    for (t, p), offset in sorted(offsets.items()):
        by_topic.setdefault(t, []).append(
            cls.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset, committed_metadata="")
        )
    req = cls(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[cls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    if coordinator is None:
        coordinator = find_coordinator(client, group)
    response = client.send(OFFSET_COMMIT, req, coordinator)
    for t in response.topics:
        for p in t.partitions:
            check(p.error_code, f"OffsetCommit {group} {t.name}-{p.partition_index}")


# ---------------------------------------------------------------------- consumer protocol


def encode_subscription(topics: list[str]) -> bytes:
    cls = message_class("ConsumerProtocolSubscription")
    body = codec("ConsumerProtocolSubscription", CONSUMER_PROTOCOL_VERSION).encode_bytes(cls(topics=topics))
    return struct.pack(">h", CONSUMER_PROTOCOL_VERSION) + body


def decode_subscription(data: bytes) -> list[str]:
    (version,) = struct.unpack_from(">h", data, 0)
    obj, _ = codec("ConsumerProtocolSubscription", min(version, 3)).decode(memoryview(data), 2)
    return list(obj.topics)


def encode_assignment(partitions: list[TopicPartition]) -> bytes:
    cls = message_class("ConsumerProtocolAssignment")
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    obj = cls(assigned_partitions=[cls.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()])
    return struct.pack(">h", CONSUMER_PROTOCOL_VERSION) + codec(
        "ConsumerProtocolAssignment", CONSUMER_PROTOCOL_VERSION
    ).encode_bytes(obj)


def decode_assignment(data: bytes) -> list[TopicPartition]:
    if len(data) < 2:
        return []
    (version,) = struct.unpack_from(">h", data, 0)
    obj, _ = codec("ConsumerProtocolAssignment", min(version, 3)).decode(memoryview(bytes(data)), 2)
    return [(tp.topic, p) for tp in obj.assigned_partitions for p in tp.partitions]


def range_assign(
    members: dict[str, list[str]], partition_counts: dict[str, int]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, consecutive partition ranges to members in id order."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic, count in sorted(partition_counts.items()):
        subscribers = sorted(m for m, topics in members.items() if topic in topics)
        if not subscribers:
            continue
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            out[member].extend((topic, p) for p in range(start, start + n))
            start += n
    return out


class GroupMember:
    """A classic-protocol consumer group member for a command-line consumer.

    ``join()`` runs JoinGroup + SyncGroup (assigning with the range strategy when this member
    leads) and returns the assigned partitions; ``heartbeat()`` must be called within the
    session timeout and returns False when the group rebalances (call ``join()`` again).
    """

    def __init__(self, client: KafkaClient, group: str, topics: list[str], *, session_timeout_ms: int = 45000,
                 rebalance_timeout_ms: int = 60000) -> None:
        self.client = client
        self.group = group
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.coordinator = find_coordinator(client, group)
        self.assignment: list[TopicPartition] = []
        self.last_heartbeat = time.monotonic()

    def join(self) -> list[TopicPartition]:
        while True:
            cls = request_class(JOIN_GROUP)
            req = cls(
                group_id=self.group,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                member_id=self.member_id,
                protocol_type="consumer",
                protocols=[cls.JoinGroupRequestProtocol(name="range", metadata=encode_subscription(self.topics))],
            )
            response = self.client.send(JOIN_GROUP, req, self.coordinator)
            if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                # KIP-394: the first join only hands out the member id to rejoin with.
                self.member_id = response.member_id
                continue
            if response.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if response.error_code in _RETRY_CODES:
                time.sleep(0.2)
                self.coordinator = find_coordinator(self.client, self.group)
                continue
            check(response.error_code, f"JoinGroup {self.group}")
            self.member_id = response.member_id
            self.generation = response.generation_id
            assignments = []
            if response.leader == self.member_id:
                assignments = self._assign(response.members)
            sync_cls = request_class(SYNC_GROUP)
            sync = self.client.send(
                SYNC_GROUP,
                sync_cls(
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    protocol_type="consumer",
                    protocol_name=response.protocol_name,
                    assignments=assignments,
                ),
                self.coordinator,
            )
            if sync.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            check(sync.error_code, f"SyncGroup {self.group}")
            self.assignment = decode_assignment(sync.assignment or b"")
            self.last_heartbeat = time.monotonic()
            return self.assignment

    def _assign(self, members: list[Any]) -> list[Any]:
        subscriptions = {m.member_id: decode_subscription(bytes(m.metadata)) for m in members}
        wanted = sorted({t for topics in subscriptions.values() for t in topics})
        counts = {name: len(info.partitions) for name, info in self.client.metadata(wanted).items() if not info.error_code}
        plan = range_assign(subscriptions, counts)
        cls = request_class(SYNC_GROUP).SyncGroupRequestAssignment
        return [cls(member_id=m, assignment=encode_assignment(parts)) for m, parts in plan.items()]

    def heartbeat_due(self) -> bool:
        return time.monotonic() - self.last_heartbeat > self.session_timeout_ms / 3000

    def heartbeat(self) -> bool:
        """Heartbeat; False when the member must rejoin (a rebalance started)."""
        req = request_class(HEARTBEAT)(group_id=self.group, generation_id=self.generation, member_id=self.member_id)
        response = self.client.send(HEARTBEAT, req, self.coordinator)
        self.last_heartbeat = time.monotonic()
        if response.error_code in (
            ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID,
        ):
            return False
        check(response.error_code, f"Heartbeat {self.group}")
        return True

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if offsets:
            commit_offsets(
                self.client, self.group, offsets, generation=self.generation, member_id=self.member_id,
                coordinator=self.coordinator,
            )

    def leave(self) -> None:
        cls = request_class(LEAVE_GROUP)
        try:
            self.client.send(
                LEAVE_GROUP,
                cls(group_id=self.group, members=[cls.MemberIdentity(member_id=self.member_id)]),
                self.coordinator,
            )
        except (KafkaError, OSError):
            pass  # leaving is a courtesy; the session timeout removes the member anyway


def list_groups_of_type(client: KafkaClient, group_type: str) -> list[tuple[str, str]]:
    """(group id, state) of every group of a type ("share", "streams", ...) on every broker
    (ListGroups v5 with its type filter), sorted by id."""
    client.metadata([])
    out: dict[str, str] = {}
    for node_id in sorted(client.brokers):
        response = client.send(LIST_GROUPS, request_class(LIST_GROUPS)(states_filter=[], types_filter=[group_type]),
                               node_id)
        check(response.error_code, "ListGroups")
        for g in response.groups:
            out[g.group_id] = g.group_state or ""
    return sorted(out.items())


def selected_groups(client: KafkaClient, args: Any, group_type: str) -> list[str]:
    """The groups a group tool's --group / --all-groups names."""
    if args.all_groups:
        return [g for g, _ in list_groups_of_type(client, group_type)]
    if not args.group:
        raise ValueError("--group or --all-groups is required")
    return list(args.group)
