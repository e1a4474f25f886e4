"""The group coordinator: classic and consumer (KIP-848) groups, committed offsets, persistence.

State lives in memory; every change that Kafka persists is first written to
``__consumer_offsets`` (one batch per write, appended as coordinator) and replayed from
there at start-up. One node leads every partition, so this coordinator owns all groups.

Waiting is done with trio: a JoinGroup or SyncGroup call parks on its member's
``trio.Event`` until the join/sync phase completes; other connections are separate tasks and
keep being served. A background task (:meth:`GroupCoordinator.run`) drives the timers:
the initial rebalance delay, rebalance and sync timeouts, session expiry of members and
the expiry of offsets (``offsets.retention.minutes``).
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..config import BROKER_CONFIGS
from ..handlers.common import error_code_for
from ..wire.errors import ErrorCode
from ..wire.records import ControlRecordType, iter_batches, parse_control_record_key
from . import consumer as consumer_records
from . import migration
from . import records as rec
from . import share as share_groups
from . import streams as streams_groups
from .classic import (
    ClassicGroup,
    ClassicMember,
    GroupError,
    GroupState,
    JoinResult,
    SyncResult,
)
from .consumer import ConsumerGroup
from .share import ShareGroup
from .streams import StreamsGroup

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

# Kafka's defaults for group settings this broker's config table does not list.
_EXTRA_DEFAULTS = {
    "offsets.retention.check.interval.ms": 600000,
    "offset.metadata.max.bytes": 4096,
    "group.max.size": 2**31 - 1,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.max.size": 2**31 - 1,
}

#: Timer resolution of the background task (seconds).
TICK_S = 0.02

#: How long a new member's JoinGroup may wait (Kafka's NewMemberJoinTimeoutMs): it has no member
#: id to heartbeat with yet, so its session timeout cannot apply.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


class GroupTable(dict[str, "Group"]):
    """The coordinator's groups by id, and which of them the timer task has to visit.

    Most groups of a big cluster are classic groups with committed offsets and no members: they
    have no timer. Visiting every group on every tick (50 a second) cost O(groups) of event-loop
    time each time: at 20,000 groups the broker spent half its CPU there and a tick held the loop
    ~30 ms. So an idle classic group leaves `ticking` (on insertion, or when a tick finds it idle)
    and a join brings it back (`wake`): joining is the only way such a group gets a member.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ticking: dict[str, Group] = {}

    def __setitem__(self, group_id: str, group: Group) -> None:
        super().__setitem__(group_id, group)
        if _idle_classic(group):
            self.ticking.pop(group_id, None)
        else:
            self.ticking[group_id] = group

    def __delitem__(self, group_id: str) -> None:
        super().__delitem__(group_id)
        self.ticking.pop(group_id, None)

    def pop(self, group_id: str, *default: Any) -> Any:  # type: ignore[override]
        self.ticking.pop(group_id, None)
        return super().pop(group_id, *default)

    def clear(self) -> None:
        super().clear()
        self.ticking.clear()

    def wake(self, group_id: str) -> None:
        """A request may have given the group members or a timer: the ticks visit it again."""
        group = self.get(group_id)
        if group is not None:
            self.ticking[group_id] = group


def _idle_classic(group: Any) -> bool:
    """A classic group with no member, no pending member and no rebalance: no timer to run."""
    return (isinstance(group, ClassicGroup) and not group.members and not group.pending_members
            and group.state in (GroupState.EMPTY, GroupState.DEAD))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class CommittedOffset:
    """A committed offset as OffsetCommitValue holds it."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


Group = ClassicGroup | ConsumerGroup | ShareGroup | StreamsGroup


class GroupCoordinator:
    """Kafka's group coordinator for a single-node cluster (it leads every offsets partition)."""

    def __init__(self, broker: Broker | None, config: Any = None) -> None:
        self.broker = broker
        self.config = config if config is not None else (broker.config if broker is not None else None)
        self.groups = GroupTable()
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.active = False
        # Transactional offset commits found at load whose transaction has no marker yet:
        # (producer id, offsets partition) -> group -> (topic, partition) -> CommittedOffset.
        self.pending_transactional: dict[tuple[int, int], dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        self._last_retention_check = 0.0
        self._clock_ms = _now_ms
        #: group id -> whether this broker coordinates it; None: all of them (the single node)
        self.owns: Any = None
        # Which Kafka release's record layout to write (Odradek's own setting; see records.FORMATS).
        raw = getattr(self.config, "raw", {}) if self.config is not None else {}
        name = str(raw.get("group.coordinator.record.format", rec.DEFAULT_FORMAT))
        if name not in rec.FORMATS:
            raise ValueError(f"group.coordinator.record.format must be one of {sorted(rec.FORMATS)}, not {name!r}")
        self.format = rec.FORMATS[name]

    # ================================================================== config

    def cfg(self, key: str) -> int:
        """An integer broker setting: configured value, else Kafka's default."""
        if self.config is None:
            spec = BROKER_CONFIGS.get(key)
            return int(spec.default) if spec is not None else int(_EXTRA_DEFAULTS[key])
        if key in BROKER_CONFIGS:
            return int(self.config.get(key))
        raw = getattr(self.config, "raw", {}).get(key)
        return int(raw) if raw is not None else int(_EXTRA_DEFAULTS[key])

    def now_ms(self) -> int:
        return self._clock_ms()

    @staticmethod
    def monotonic() -> float:
        return trio.current_time()

    # ================================================================== lifecycle

    async def startup(self) -> None:
        """Load groups and offsets from ``__consumer_offsets`` (if it exists)."""
        if self.broker is not None:
            self._load_all()
            self._hand_over_pending_transactional()
        self.active = True

    async def shutdown(self) -> None:
        """Answer parked JoinGroup/SyncGroup calls; the log itself is closed by the broker."""
        self.active = False
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self._answer_join(member, JoinResult(error=ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
                    self._answer_sync(member, SyncResult(error=ErrorCode.NOT_COORDINATOR))

    async def run(self) -> None:
        """Background timers; runs in the server's nursery until cancelled."""
        while True:
            await trio.sleep(TICK_S)
            try:
                self.tick()
            except Exception:
                log.exception("Group coordinator timer failed")

    def tick(self) -> None:
        """One pass over the timers (called by :meth:`run`; tests call it directly)."""
        now = self.monotonic()
        ticking = self.groups.ticking
        for group_id, group in list(ticking.items()):
            if isinstance(group, ClassicGroup):
                self._classic_timers(group, now)
                if _idle_classic(group) and ticking.get(group_id) is group:
                    del ticking[group_id]
            elif isinstance(group, ShareGroup):
                share_groups.tick(self, group, now)
            elif isinstance(group, StreamsGroup):
                streams_groups.tick(self, group, now)
            else:
                migration.expire(self, group, now)
        interval = self.cfg("offsets.retention.check.interval.ms") / 1000
        if now - self._last_retention_check >= interval:
            self._last_retention_check = now
            self.expire_offsets()

    # ================================================================== persistence

    def _offsets_partitions(self) -> int:
        if self.broker is not None and self.broker.metadata is not None:
            topic = self.broker.metadata.get(rec.OFFSETS_TOPIC)
            if topic is not None:
                return topic.partitions
        return self.cfg("offsets.topic.num.partitions")

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds a group."""
        return rec.partition_for(group_id, self._offsets_partitions())

    def offsets_topic_spec(self) -> tuple[str, int, dict[str, str]] | None:
        """(name, partitions, configs) of ``__consumer_offsets`` as Kafka creates it, None if it exists."""
        broker = self.broker
        if broker is None or broker.metadata is None or broker.metadata.get(rec.OFFSETS_TOPIC) is not None:
            return None
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.cfg("offsets.topic.segment.bytes")),
            "compression.type": "producer",
        }
        return rec.OFFSETS_TOPIC, self.cfg("offsets.topic.num.partitions"), configs

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (synchronously; FindCoordinator normally made it
        already, off the event loop). Nothing while that creation is still under way: the caller then
        finds no partition and answers COORDINATOR_NOT_AVAILABLE, which clients retry."""
        spec = self.offsets_topic_spec()
        if getattr(self.broker, "forwarding", None) is not None:
            return  # a broker of a KRaft cluster: the controller creates it (FindCoordinator asks)
        if spec is not None and spec[0] not in getattr(self.broker, "topics_being_created", ()):
            self.broker.metadata.create_topic(*spec)

    def _append(self, group_id: str, batch: bytearray) -> None:
        """Append one coordinator batch to the group's offsets partition (raises GroupError)."""
        broker = self.broker
        if broker is None:
            return
        self.ensure_offsets_topic()
        partition_log = broker.partition_log(rec.OFFSETS_TOPIC, self.partition_for(group_id))
        if partition_log is None:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            partition_log.append_as_coordinator(batch, now_ms=self.now_ms())
        except Exception as exc:  # a failed write must not change the in-memory state
            log.exception("Writing group %s to %s failed", group_id, rec.OFFSETS_TOPIC)
            raise GroupError(_append_error(error_code_for(exc)), str(exc)) from exc
        broker.notify_appended()

    def _write_group_metadata(self, group: ClassicGroup, assignments: dict[str, bytes] | None = None,
                              extra: list[tuple[bytes, bytes | None]] | None = None) -> None:
        value = self.group_metadata_value(group, assignments)
        records = [(rec.group_metadata_key(group.group_id), rec.group_metadata_value(value))]
        self._append(group.group_id, rec.group_metadata_batch([*(extra or []), *records], self.now_ms(), self.format))

    def _write_empty_group(self, group: ClassicGroup) -> None:
        value = rec.GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None,
                                       current_state_timestamp=group.current_state_timestamp, members=[])
        records = [(rec.group_metadata_key(group.group_id), rec.group_metadata_value(value))]
        try:
            self._append(group.group_id, rec.group_metadata_batch(records, self.now_ms(), self.format))
        except GroupError:
            del self.groups[group.group_id]
            raise

    @staticmethod
    def group_metadata_value(group: ClassicGroup, assignments: dict[str, bytes] | None = None) -> Any:
        """The GroupMetadataValue Kafka writes for a group (members only when it has a protocol)."""
        members = []
        if group.protocol_name is not None:
            for member in group.members.values():
                assignment = (assignments or {}).get(member.member_id, member.assignment)
                members.append(rec.MemberMetadata(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout=member.rebalance_timeout_ms,
                    session_timeout=member.session_timeout_ms,
                    subscription=member.metadata(group.protocol_name),
                    assignment=assignment,
                ))
        return rec.GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id if group.protocol_name is not None else None,
            current_state_timestamp=-1 if group.current_state_timestamp is None else group.current_state_timestamp,
            members=members,
        )

    def _load_all(self) -> None:
        broker = self.broker
        if broker is None or broker.metadata is None or broker.metadata.get(rec.OFFSETS_TOPIC) is None:
            return
        self._load_partitions(range(self._offsets_partitions()))

    def on_election(self, partitions: list[int]) -> None:
        """This broker now leads these ``__consumer_offsets`` partitions (a broker of a KRaft
        cluster): load their groups and offsets, as Kafka's coordinator does on election."""
        self._load_partitions(partitions)
        self._hand_over_pending_transactional()

    def on_resignation(self, partitions: list[int]) -> None:
        """Another broker leads these partitions now: forget their groups (members parked in a
        join or sync are told NOT_COORDINATOR and look the coordinator up again)."""
        gone = set(partitions)
        for group_id in [g for g in set(self.groups) | set(self.offsets) if self.partition_for(g) in gone]:
            group = self.groups.pop(group_id, None)
            self.offsets.pop(group_id, None)
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self._answer_join(member, JoinResult(error=ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
                    self._answer_sync(member, SyncResult(error=ErrorCode.NOT_COORDINATOR))
        log.info("Unloaded the groups of %s partitions %s", rec.OFFSETS_TOPIC, sorted(gone))

    def _load_partitions(self, partitions: Any) -> None:
        broker = self.broker
        assert broker is not None
        group_values: dict[str, Any] = {}
        # consumer group records: group -> key version -> member id ("" for group-level) -> value
        consumer_found: dict[str, dict[int, dict[str, Any]]] = {}
        consumer_bytes: dict[str, dict[bytes, bytes]] = {}
        share_found: dict[str, dict[int, dict[str, Any]]] = {}
        share_bytes: dict[str, dict[bytes, bytes]] = {}
        streams_found: dict[str, dict[int, dict[str, Any]]] = {}
        streams_bytes: dict[str, dict[bytes, bytes]] = {}
        for partition in partitions:
            partition_log = broker.partition_log(rec.OFFSETS_TOPIC, partition)
            if partition_log is None:
                continue
            # transactional offset commits wait for their transaction's marker
            in_txn: dict[int, list[rec.OffsetCommitRecord]] = {}
            for producer_id, marker, key, value in _read_entries(partition_log):
                if marker is not None:
                    for pending in in_txn.pop(producer_id, []):
                        if marker == ControlRecordType.COMMIT:
                            self._apply_offset_record(pending)
                    continue
                try:
                    record = rec.decode_record(key, value)
                except Exception:
                    log.warning("Skipping an unreadable record in %s-%d", rec.OFFSETS_TOPIC, partition)
                    continue
                if isinstance(record, rec.OffsetCommitRecord):
                    if producer_id >= 0:
                        in_txn.setdefault(producer_id, []).append(record)
                    else:
                        self._apply_offset_record(record)
                elif isinstance(record, rec.GroupMetadataRecord):
                    if record.value is None:
                        group_values.pop(record.group, None)
                        group_values[record.group] = None
                    else:
                        group_values[record.group] = record.value
                elif isinstance(record, rec.ConsumerGroupRecord):
                    by_type = consumer_found.setdefault(record.group, {}).setdefault(record.key_version, {})
                    # per member, per regular expression (resolved regex records), or the group's
                    member = getattr(record.key, "member_id", None) or getattr(record.key, "regular_expression", "")
                    raw = consumer_bytes.setdefault(record.group, {})
                    assert key is not None
                    if record.value is None:
                        by_type.pop(member, None)
                        raw.pop(key, None)
                    else:
                        by_type[member] = record.value
                        raw[key] = value  # type: ignore[assignment]
                elif isinstance(record, rec.OtherRecord):
                    if not share_groups.collect(share_found, share_bytes, record.key, record.value):
                        streams_groups.collect(streams_found, streams_bytes, record.key, record.value)
            for producer_id, records in in_txn.items():
                target = self.pending_transactional.setdefault((producer_id, partition), {})
                for r in records:
                    if r.value is not None:
                        target.setdefault(r.group, {})[(r.topic, r.partition)] = _committed(r)
        now = self.monotonic()
        for group_id, value in group_values.items():
            if value is None:
                continue
            self.groups[group_id] = self._group_from_value(group_id, value, now)
        session_s = self.cfg("group.consumer.session.timeout.ms") / 1000
        for group_id, found in consumer_found.items():
            if not any(found.values()):
                continue  # the group was deleted (its records are tombstones)
            group = consumer_records.group_from_records(group_id, found, self._topic_name, now + session_s)
            group.persisted = consumer_bytes.get(group_id, {})
            self.wire_consumer_group(group)
            # the stored metadata hash tells the next heartbeat whether topics changed meanwhile
            group.subscribed_partitions = group.partition_counts(self.topic_partition_count)
            self.groups[group_id] = group
        share_groups.load(self, share_found, share_bytes)
        streams_groups.load(self, streams_found, streams_bytes)
        for group_id, offsets in list(self.offsets.items()):
            if not offsets:
                del self.offsets[group_id]
            elif group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id)
        log.info("Loaded %d groups and offsets of %d groups from %s",
                 len(self.groups), len(self.offsets), rec.OFFSETS_TOPIC)

    def _apply_offset_record(self, record: rec.OffsetCommitRecord) -> None:
        offsets = self.offsets.setdefault(record.group, {})
        tp = (record.topic, record.partition)
        if record.value is None:
            offsets.pop(tp, None)
        else:
            offsets[tp] = _committed(record)

    def _hand_over_pending_transactional(self) -> None:
        """Give open transactions' offsets to the transaction coordinator, which applies them when
        it writes the transaction's COMMIT marker (its ``groups.pending`` table)."""
        if not self.pending_transactional or self.broker is None:
            return
        txn = self.broker.coordinators.get("transactions")
        table = getattr(getattr(txn, "groups", None), "pending", None)
        if not isinstance(table, dict):
            return
        for key, groups in self.pending_transactional.items():
            slot = table.setdefault(key, {})
            for group_id, values in groups.items():
                slot.setdefault(group_id, {}).update(values)

    def has_pending_transactional(self, group_id: str, tp: tuple[str, int]) -> bool:
        """Whether an open transaction holds an offset for the partition (OffsetFetch require_stable)."""
        tables = [self.pending_transactional]
        if self.broker is not None:
            txn = self.broker.coordinators.get("transactions")
            table = getattr(getattr(txn, "groups", None), "pending", None)
            if isinstance(table, dict):
                tables = [table]
        return any(tp in groups.get(group_id, {}) for table in tables for groups in table.values())

    def _group_from_value(self, group_id: str, value: Any, now: float) -> ClassicGroup:
        group = ClassicGroup(group_id)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.current_state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        for m in value.members:
            member = ClassicMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                session_timeout_ms=m.session_timeout, protocol_type=value.protocol_type,
                protocols=[(value.protocol, bytes(m.subscription))], assignment=bytes(m.assignment),
            )
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
            group.add_member(member)
        group.leader_id = value.leader if value.members else None
        # A loaded group with members is Stable (its members heartbeat or expire), else Empty.
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    # ================================================================== helpers

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _check_active(self, group_id: str | None = None) -> None:
        if not self.active:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group_id and self.owns is not None and not self.owns(group_id):
            # a broker of a KRaft cluster coordinates only the groups of the offsets partitions it leads
            raise GroupError(ErrorCode.NOT_COORDINATOR)

    @staticmethod
    def _answer_join(member: ClassicMember, result: JoinResult) -> None:
        event = member.join_event
        if event is not None:
            member.join_result = result
            member.join_event = None
            event.set()

    @staticmethod
    def _answer_sync(member: ClassicMember, result: SyncResult) -> None:
        event = member.sync_event
        if event is not None:
            member.sync_result = result
            member.sync_event = None
            event.set()

    def _heartbeat(self, member: ClassicMember) -> None:
        member.heartbeat_deadline = self.monotonic() + member.session_timeout_ms / 1000

    @staticmethod
    def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ClassicMember:
        """Kafka's validateMember: a given instance id must be known (else UNKNOWN_MEMBER_ID) and map
        to this member id (else FENCED_INSTANCE_ID); without one, the member id must be known."""
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if known != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    # ================================================================== JoinGroup

    async def join_group(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool, reason: str | None = None,
        supports_skip_assignment: bool = True,
    ) -> JoinResult:
        """JoinGroup: answers at once (errors, MEMBER_ID_REQUIRED, static rejoin) or when the join phase ends."""
        try:
            member = self._join(
                group_id, member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, require_known_member_id, reason,
                supports_skip_assignment,
            )
        except GroupError as exc:
            return JoinResult(error=exc.code, member_id=member_id)
        finally:
            self.groups.wake(group_id)
        if isinstance(member, JoinResult):
            return member
        event = member.join_event
        if event is not None:
            await event.wait()
        result = member.join_result or JoinResult(error=ErrorCode.UNKNOWN_SERVER_ERROR, member_id=member_id)
        member.join_result = None
        return result

    def _join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str,
              client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
              protocols: list[tuple[str, bytes]], require_known_member_id: bool,
              reason: str | None, supports_skip_assignment: bool) -> ClassicMember | JoinResult:
        self._check_active(group_id)
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        if not (self.cfg("group.min.session.timeout.ms") <= session_timeout_ms
                <= self.cfg("group.max.session.timeout.ms")):
            raise GroupError(ErrorCode.INVALID_SESSION_TIMEOUT)
        existing = self.groups.get(group_id)
        if isinstance(existing, ShareGroup | StreamsGroup):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if isinstance(existing, ConsumerGroup):
            if not existing.is_empty():
                # a classic member inside a consumer group (online migration)
                return migration.join(
                    self, existing, member_id=member_id, instance_id=instance_id, client_id=client_id,
                    client_host=client_host, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=protocols,
                    require_known_member_id=require_known_member_id)
            # An empty consumer group turns into a classic group: its records are deleted.
            self._persist_consumer_group(existing, deleted=True)
            del self.groups[group_id]
            existing = None
        group = existing
        names = [n for n, _ in protocols]
        if not member_id:
            if group is None:
                group = self.groups[group_id] = ClassicGroup(group_id)
                group.current_state_timestamp = self.now_ms()
                if self.format.empty_group_record_on_create:
                    # Kafka 4.x commits a new group to its log at once: an empty GroupMetadata record.
                    self._write_empty_group(group)
            return self._join_new_member(group, instance_id, client_id, client_host, session_timeout_ms,
                                         rebalance_timeout_ms, protocol_type, protocols, names,
                                         require_known_member_id, reason, supports_skip_assignment)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(protocol_type, names):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            # The second join of a KIP-394 member: now it becomes a member.
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member_id, instance_id, client_id, client_host,
                                                  session_timeout_ms, rebalance_timeout_ms, protocol_type,
                                                  protocols, reason or "new member joined")
        member = self._validate_member(group, member_id, instance_id)
        self._heartbeat(member)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                     session_timeout_ms, reason)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retried JoinGroup: answer with the current generation again.
                return self._current_join_result(group, member)
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                     session_timeout_ms, reason)
        if state is GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(protocols):
                # The leader rejoins to pick up metadata changes; a changed member forces a rebalance.
                return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                         session_timeout_ms, reason or "leader rejoined")
            return self._current_join_result(group, member)
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)

    def _current_join_result(self, group: ClassicGroup, member: ClassicMember,
                             skip_assignment: bool = False) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            generation_id=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "", member_id=member.member_id,
            skip_assignment=skip_assignment, members=self._member_list(group) if is_leader else [],
        )

    @staticmethod
    def _member_list(group: ClassicGroup) -> list[tuple[str, str | None, bytes]]:
        protocol = group.protocol_name
        return [(m.member_id, m.group_instance_id, m.metadata(protocol) if protocol else b"")
                for m in group.members.values()]

    def _join_new_member(self, group: ClassicGroup, instance_id: str | None, client_id: str,
                         client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]], names: list[str],
                         require_known_member_id: bool, reason: str | None,
                         supports_skip_assignment: bool) -> ClassicMember | JoinResult:
        if group.is_in(GroupState.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(protocol_type, names):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if len(group.members) + len(group.pending_members) >= self.cfg("group.max.size"):
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                return self._replace_static_member(group, old_id, new_id, protocols, session_timeout_ms,
                                                   rebalance_timeout_ms, client_id, client_host,
                                                   supports_skip_assignment)
            return self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                                  session_timeout_ms, rebalance_timeout_ms, protocol_type,
                                                  protocols, reason or "static member joined")
        if require_known_member_id:
            # KIP-394: hand out the id and let the client join again with it.
            group.pending_members[new_id] = self.monotonic() + session_timeout_ms / 1000
            return JoinResult(error=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member_and_rebalance(group, new_id, None, client_id, client_host, session_timeout_ms,
                                              rebalance_timeout_ms, protocol_type, protocols,
                                              reason or "new member joined")

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, session_timeout_ms: int,
                                  rebalance_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]], reason: str) -> ClassicMember:
        member = ClassicMember(
            member_id=member_id, group_instance_id=instance_id, client_id=client_id, client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms, session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type, protocols=list(protocols), is_new=True,
        )
        member.join_event = trio.Event()
        # Only the first rebalance (generation 0) keeps extending the initial delay.
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add_member(member)
        member.heartbeat_deadline = self.monotonic() + NEW_MEMBER_JOIN_TIMEOUT_MS / 1000
        self._maybe_prepare_rebalance(group, reason)
        return member

    def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicMember,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, reason: str | None) -> ClassicMember:
        if member.join_event is not None:
            # A newer JoinGroup of the same member replaces the pending one.
            self._answer_join(member, JoinResult(error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_event = trio.Event()
        self._maybe_prepare_rebalance(group, reason or "member rejoined")
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        return member

    def _replace_static_member(self, group: ClassicGroup, old_id: str, new_id: str,
                               protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                               rebalance_timeout_ms: int, client_id: str, client_host: str,
                               supports_skip_assignment: bool) -> ClassicMember | JoinResult:
        old = group.members.pop(old_id)
        # The old incarnation's parked calls are fenced.
        self._answer_join(old, JoinResult(error=ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        self._answer_sync(old, SyncResult(error=ErrorCode.FENCED_INSTANCE_ID))
        old_protocols = old.protocols
        old.member_id = new_id
        old.protocols = list(protocols)
        old.session_timeout_ms = session_timeout_ms
        old.rebalance_timeout_ms = rebalance_timeout_ms
        old.client_id = client_id
        old.client_host = client_host
        group.members[new_id] = old
        assert old.group_instance_id is not None
        group.static_members[old.group_instance_id] = new_id
        current_leader = group.leader_id
        was_leader = current_leader == old_id
        if was_leader:
            group.leader_id = new_id
        self._heartbeat(old)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning for the old member id: start over.
            old.join_event = trio.Event()
            self._prepare_rebalance(group, "static member rejoined during CompletingRebalance")
            return old
        if group.is_in(GroupState.STABLE):
            try:
                unchanged = group.select_protocol() == group.protocol_name
            except GroupError:
                unchanged = False
            if unchanged:
                try:
                    self._write_group_metadata(group)
                except GroupError as exc:
                    # Undo: the old member id stays valid.
                    del group.members[new_id]
                    old.member_id = old_id
                    old.protocols = old_protocols
                    group.members[old_id] = old
                    group.static_members[old.group_instance_id] = old_id
                    if was_leader:
                        group.leader_id = old_id
                    raise exc
                if supports_skip_assignment:
                    # v9+: the leader learns it leads but must not run the assignor again.
                    return self._current_join_result(group, old, skip_assignment=was_leader)
                # Before v9 the old leader id is returned, so a replaced leader does not assign.
                return JoinResult(generation_id=group.generation_id, protocol_type=group.protocol_type,
                                  protocol_name=group.protocol_name, leader=current_leader or "",
                                  member_id=new_id)
        old.join_event = trio.Event()
        self._maybe_prepare_rebalance(group, "static member rejoined with a new member id")
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        return old

    # ================================================================== rebalance

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        now = self.monotonic()
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The assignment being synced is void: members still waiting hear REBALANCE_IN_PROGRESS.
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(member, SyncResult(error=ErrorCode.REBALANCE_IN_PROGRESS))
        group.sync_deadline = None
        group.pending_sync.clear()
        if group.is_in(GroupState.EMPTY):
            delay_ms = self.cfg("group.initial.rebalance.delay.ms")
            group.initial_delay_until = now + delay_ms / 1000
            group.initial_delay_remaining_ms = max(group.max_rebalance_timeout_ms() - delay_ms, 0)
            group.new_member_added = False
            group.rebalance_deadline = None
        else:
            group.initial_delay_until = None
            group.rebalance_deadline = now + group.max_rebalance_timeout_ms() / 1000
        group.transition_to(GroupState.PREPARING_REBALANCE, self.now_ms())
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
                 group.group_id, group.generation_id, reason)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        """Complete the join phase early when every known member has rejoined (not during the initial delay)."""
        if (group.is_in(GroupState.PREPARING_REBALANCE) and group.initial_delay_until is None
                and group.all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        group.rebalance_deadline = None
        group.initial_delay_until = None
        # Dynamic members that did not rejoin are dropped; static ones keep their place.
        for member in group.not_yet_rejoined():
            if member.group_instance_id is not None:
                continue
            log.info("Member %s of group %s did not rejoin in time; removing it", member.member_id, group.group_id)
            self._answer_sync(member, SyncResult(error=ErrorCode.REBALANCE_IN_PROGRESS))
            group.remove_member(member.member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not self._elect_joined_leader(group) and group.members:
            # Nobody rejoined (only absent static members are left): wait another rebalance timeout.
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            group.rebalance_deadline = self.monotonic() + group.max_rebalance_timeout_ms() / 1000
            return
        now_ms = self.now_ms()
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(GroupState.EMPTY, now_ms)
        log.info("Group %s is now generation %d (%s) with %d members", group.group_id, group.generation_id,
                 group.state.value, len(group.members))
        if group.is_in(GroupState.EMPTY):
            try:
                self._write_group_metadata(group)
            except GroupError:
                pass  # Kafka logs and carries on: the group is empty either way
            return
        now = self.monotonic()
        # Every member must send SyncGroup within the rebalance timeout.
        group.sync_deadline = now + group.max_rebalance_timeout_ms() / 1000
        group.pending_sync = set(group.members)
        member_list = self._member_list(group)
        for member in group.members.values():
            result = JoinResult(
                generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=group.leader_id or "", member_id=member.member_id,
                members=member_list if member.member_id == group.leader_id else [],
            )
            member.is_new = False
            self._heartbeat(member)
            self._answer_join(member, result)

    @staticmethod
    def _elect_joined_leader(group: ClassicGroup) -> bool:
        """Keep the leader if it rejoined, else make the first rejoined member the leader."""
        leader = group.members.get(group.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in group.members.values():
            if member.is_awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    def _classic_timers(self, group: ClassicGroup, now: float) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE):
            if group.initial_delay_until is not None:
                if now >= group.initial_delay_until:
                    delay_ms = self.cfg("group.initial.rebalance.delay.ms")
                    if group.new_member_added and group.initial_delay_remaining_ms > 0:
                        # Members keep arriving: wait another delay (bounded by the rebalance timeout).
                        step = min(delay_ms, group.initial_delay_remaining_ms)
                        group.new_member_added = False
                        group.initial_delay_until = now + step / 1000
                        group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - step, 0)
                    else:
                        self._complete_join(group)
            elif group.rebalance_deadline is not None and now >= group.rebalance_deadline:
                self._complete_join(group)
        if (group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.sync_deadline is not None
                and now >= group.sync_deadline):
            group.sync_deadline = None
            if group.pending_sync:
                # Members that never sent SyncGroup after the join are dropped and the group starts over.
                for member_id in sorted(group.pending_sync):
                    member = group.members.get(member_id)
                    if member is not None:
                        self._answer_join(member, JoinResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
                        group.remove_member(member_id)
                removed = sorted(group.pending_sync)
                group.pending_sync.clear()
                self._prepare_rebalance(group, f"removing {removed} on pending sync request expiration")
                self._maybe_complete_join(group)
        for pending_id, deadline in list(group.pending_members.items()):
            if now >= deadline:
                del group.pending_members[pending_id]
                self._maybe_complete_join(group)
        for member in list(group.members.values()):
            if member.is_awaiting_join and not member.is_new:
                continue  # a rejoining member is kept alive for the join phase
            if member.is_awaiting_sync:
                continue
            if now >= member.heartbeat_deadline:
                log.info("Member %s in group %s has failed, removing it from the group",
                         member.member_id, group.group_id)
                self._remove_member_and_update_group(group, member, "session timeout")

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember, reason: str) -> None:
        self._answer_join(member, JoinResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        self._answer_sync(member, SyncResult(error=ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove_member(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
            self._maybe_complete_join(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # ================================================================== SyncGroup

    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        """SyncGroup: the leader's call stores the assignment; followers wait for it."""
        try:
            member = self._sync(group_id, generation_id, member_id, group_instance_id, protocol_type,
                                protocol_name, assignments)
        except GroupError as exc:
            return SyncResult(error=exc.code)
        if isinstance(member, SyncResult):
            return member
        event = member.sync_event
        if event is not None:
            await event.wait()
        result = member.sync_result or SyncResult(error=ErrorCode.UNKNOWN_SERVER_ERROR)
        member.sync_result = None
        return result

    def _sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
              protocol_type: str | None, protocol_name: str | None,
              assignments: dict[str, bytes]) -> ClassicMember | SyncResult:
        self._check_active(group_id)
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        consumer_group = self.groups.get(group_id)
        if isinstance(consumer_group, ConsumerGroup):
            return migration.sync(self, consumer_group, member_id=member_id, instance_id=instance_id,
                                  generation_id=generation_id, protocol_type=protocol_type,
                                  protocol_name=protocol_name)
        group = self._classic(group_id)
        if group is None or group.is_in(GroupState.EMPTY):
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        member = self._validate_member(group, member_id, instance_id)
        if generation_id != group.generation_id:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        self._heartbeat(member)
        group.pending_sync.discard(member_id)
        if group.is_in(GroupState.STABLE):
            return SyncResult(protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                              assignment=member.assignment)
        # CompletingRebalance
        if member.sync_event is not None:
            self._answer_sync(member, SyncResult(error=ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_event = trio.Event()
        if member_id == group.leader_id:
            full = {m: bytes(assignments.get(m, b"")) for m in group.members}
            try:
                self._write_group_metadata(group, full)
            except GroupError as exc:
                # Kafka resets the assignment and answers everyone with the error.
                for m in group.members.values():
                    m.assignment = b""
                    self._answer_sync(m, SyncResult(error=exc.code))
                self._prepare_rebalance(group, "failed to store the assignment")
                return member
            for m in group.members.values():
                m.assignment = full[m.member_id]
            # (the pending-sync timer keeps running: members that never sync are still dropped)
            group.transition_to(GroupState.STABLE, self.now_ms())
            for m in group.members.values():
                self._heartbeat(m)
                self._answer_sync(m, SyncResult(protocol_type=group.protocol_type,
                                                protocol_name=group.protocol_name, assignment=m.assignment))
        return member

    # ================================================================== Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """Heartbeat: keeps the member's session alive and tells it whether a rebalance is on."""
        try:
            self._check_active(group_id)
            if not group_id:
                raise GroupError(ErrorCode.INVALID_GROUP_ID)
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                return migration.heartbeat(self, group, member_id=member_id, instance_id=instance_id,
                                           generation_id=generation_id)
            if group is None or isinstance(group, ShareGroup):
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if group.is_in(GroupState.DEAD):
                raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            member = self._validate_member(group, member_id, instance_id)
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            if group.is_in(GroupState.EMPTY):
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            self._heartbeat(member)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                return ErrorCode.REBALANCE_IN_PROGRESS
            return ErrorCode.NONE
        except GroupError as exc:
            return exc.code

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup (batched since v3): top-level error and one error per (member id, instance id)."""
        try:
            self._check_active(group_id)
            if not group_id:
                raise GroupError(ErrorCode.INVALID_GROUP_ID)
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                return ErrorCode.NONE, migration.leave(self, group, members)
            if group is None or isinstance(group, ShareGroup):
                # Kafka answers an unknown group member by member.
                return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
            if group.is_in(GroupState.DEAD):
                raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        except GroupError as exc:
            return exc.code, []
        results = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None:
                    known = group.static_members.get(instance_id)
                    if known is None:
                        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                    if member_id and member_id != known:
                        raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
                    member_id = known
                if member_id in group.pending_members:
                    del group.pending_members[member_id]
                    self._maybe_complete_join(group)
                    results.append(ErrorCode.NONE)
                    continue
                member = group.members.get(member_id)
                if member is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                log.info("Member %s is leaving group %s", member_id, group_id)
                self._remove_member_and_update_group(group, member, "the consumer left the group")
                results.append(ErrorCode.NONE)
            except GroupError as exc:
                results.append(exc.code)
        return ErrorCode.NONE, results

    # ================================================================== offsets

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               instance_id: str | None, api_version: int, *, transactional: bool = False,
                               partitions: list[tuple[str, int]] | None = None) -> Group:
        """The group an OffsetCommit (or, `transactional`, a TxnOffsetCommit) may write to; a simple
        group is created for consumers without group management. Raises GroupError.

        Kafka's OffsetMetadataManager validates both through the group's validateOffsetCommit, which
        relaxes three rules for transactional commits: no OffsetCommit-v9 requirement for consumer
        protocol members, memberless commits to a classic group with members, and commits while a
        classic group completes a rebalance. Transactional commits do not count as a heartbeat.
        `partitions` (topic, partition) lets a consumer group member commit with an older member
        epoch for partitions it has held since then (Kafka 4.4)."""
        self._check_active(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation for a group that does not exist: Kafka says so plainly from
                # OffsetCommit v9 and TxnOffsetCommit v6 on.
                if api_version >= (6 if transactional else 9):
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            # The admin client or a consumer without group management: a simple group is created.
            group = self.groups[group_id] = ClassicGroup(group_id)
            return group
        if isinstance(group, ShareGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if isinstance(group, ConsumerGroup):
            group.validate_offset_commit(member_id, generation_id, api_version, instance_id=instance_id,
                                         transactional=transactional, partitions=partitions)
            return group
        if isinstance(group, StreamsGroup):
            group.validate_offset_commit(member_id, generation_id, transactional=transactional,
                                         api_version=api_version)
            return group
        if group.is_in(GroupState.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return group
        if generation_id >= 0 or member_id or instance_id is not None:
            member = self._validate_member(group, member_id, instance_id)
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            if transactional:
                return group
            if group.is_in(GroupState.COMPLETING_REBALANCE):
                raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
            self._heartbeat(member)
        elif not transactional and not group.is_in(GroupState.EMPTY):
            # A commit without a generation to a group that has members (old TxnOffsetCommit
            # versions carry no member, so Kafka lets those through).
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return group

    def commit_offsets(self, group_id: str, commits: list[tuple[str, int, int, int, str, int]]) -> None:
        """Store (topic, partition, offset, leader epoch, metadata, expire timestamp) commits in one batch."""
        if not commits:
            return
        now = self.now_ms()
        records = []
        values = []
        for topic, partition, offset, leader_epoch, metadata, expire in commits:
            value = CommittedOffset(offset, leader_epoch, metadata, now, expire)
            values.append(((topic, partition), value))
            records.append((rec.offset_commit_key(group_id, topic, partition),
                            rec.offset_commit_value(offset, leader_epoch, metadata, now, expire,
                                                    self.format.offset_value_version,
                                                    self._topic_id(topic) if self.format.offset_topic_id else None)))
        self._append(group_id, rec.offset_commit_batch(records, now, self.format))
        stored = self.offsets.setdefault(group_id, {})
        for tp, value in values:
            stored[tp] = value

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], CommittedOffset | None]:
        """Committed offsets of a group: the requested partitions (None if not committed) or all."""
        stored = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(sorted(stored.items()))
        return {tp: stored.get(tp) for tp in partitions}

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ from a consumer group member: the member and epoch must be current.
        Only a request with neither (the admin client, a classic consumer) skips the check, as in
        Kafka's ConsumerGroup.validateOffsetFetch."""
        self._check_active(group_id)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup | StreamsGroup) and not (member_id is None and member_epoch < 0):
            group.validate_offset_fetch(member_id, member_epoch)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """OffsetDelete: tombstones for offsets of topics the group does not consume (raises GroupError)."""
        self._check_active(group_id)
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_in(GroupState.DEAD)):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
        subscribed: set[str] = set()
        if isinstance(group, ClassicGroup):
            if not group.is_in(GroupState.EMPTY):
                topics = group.subscribed_topics()
                if topics is None:
                    raise GroupError(ErrorCode.NON_EMPTY_GROUP)
                subscribed = topics
        else:
            subscribed = group.subscribed_topic_names()
        results: dict[tuple[str, int], ErrorCode] = {}
        tombstones = []
        stored = self.offsets.get(group_id, {})
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in stored:
                tombstones.append(tp)
        if tombstones:
            self._append(group_id, rec.cleanup_batch(
                [(rec.offset_commit_key(group_id, t, p), None) for t, p in tombstones], self.now_ms(), self.format))
            for tp in tombstones:
                stored.pop(tp, None)
        return results

    def expire_offsets(self) -> int:
        """Delete offsets past ``offsets.retention.minutes`` (Kafka's rules); empty groups with no
        offsets left die. Returns the number of offsets removed."""
        retention_ms = self.cfg("offsets.retention.minutes") * 60_000
        now = self.now_ms()
        removed = 0
        for group_id in list(self.groups):
            group = self.groups[group_id]
            if isinstance(group, ShareGroup):
                continue  # Kafka 4.4 never expires a share group (ShareGroup.shouldExpire is false)
            stored = self.offsets.get(group_id, {})
            expired: list[tuple[str, int]] = []
            if isinstance(group, ClassicGroup):
                if group.is_in(GroupState.EMPTY):
                    # Offsets of an empty group expire counted from when it became empty (or, for a
                    # group that never had members, from each commit).
                    base = group.current_state_timestamp if group.protocol_type else None
                    for tp, value in stored.items():
                        start = base if base is not None else value.commit_timestamp
                        if (value.expire_timestamp >= 0 and now >= value.expire_timestamp) or (
                                value.expire_timestamp < 0 and now - start >= retention_ms):
                            expired.append(tp)
                elif group.is_in(GroupState.STABLE):
                    topics = group.subscribed_topics()
                    if topics is not None:
                        expired = [tp for tp, v in stored.items()
                                   if tp[0] not in topics and now - v.commit_timestamp >= retention_ms]
            else:
                topics = group.subscribed_topic_names()
                expired = [tp for tp, v in stored.items()
                           if tp[0] not in topics and now - v.commit_timestamp >= retention_ms]
            empty = group.is_in(GroupState.EMPTY) if isinstance(group, ClassicGroup) else group.is_empty()
            group_dies = empty and len(expired) == len(stored)
            if not expired and not group_dies:
                continue
            tombstones: list[tuple[bytes, bytes | None]] = [
                (rec.offset_commit_key(group_id, t, p), None) for t, p in expired]
            try:
                if group_dies and isinstance(group, ClassicGroup):
                    tombstones.append((rec.group_metadata_key(group_id), None))
                elif group_dies:
                    tombstones.extend(consumer_records.changes(group, {}))
                self._append(group_id, rec.cleanup_batch(tombstones, now, self.format))
            except GroupError:
                continue
            for tp in expired:
                stored.pop(tp, None)
            removed += len(expired)
            if group_dies:
                if isinstance(group, ClassicGroup):
                    group.transition_to(GroupState.DEAD, now)
                del self.groups[group_id]
                self.offsets.pop(group_id, None)
                log.info("Group %s expired: empty with no offsets left", group_id)
        return removed

    # ================================================================== consumer groups (KIP-848)

    def _topic_id(self, name: str) -> Any:
        topic = self.broker.metadata.get(name) if self.broker is not None and self.broker.metadata else None
        return topic.topic_id if topic is not None else None

    def _topic_name(self, topic_id: Any) -> str | None:
        topic = self.broker.metadata.by_id(topic_id) if self.broker is not None and self.broker.metadata else None
        return topic.name if topic is not None else None

    def _persist_consumer_group(self, group: ConsumerGroup, extra: list[tuple[bytes, bytes | None]] | None = None,
                                deleted: bool = False) -> None:
        """Append what changed in a consumer group since it was last written (records, tombstones)."""
        if self.broker is None:
            return
        desired = {} if deleted else consumer_records.desired_records(group, self._topic_id)
        records = [*(extra or []), *consumer_records.changes(group, desired)]
        if not records:
            return
        try:
            self._append(group.group_id, rec.consumer_group_batch(records, self.now_ms()))
        except GroupError:
            return  # logged by _append; the next change writes the full difference again
        group.persisted = desired

    def _topic_meta(self, name: str) -> tuple[bytes, int] | None:
        topic = self.broker.metadata.get(name) if self.broker is not None and self.broker.metadata else None
        return (topic.topic_id.bytes, topic.partitions) if topic is not None else None

    def wire_consumer_group(self, group: ConsumerGroup) -> None:
        """Give a consumer group its views of the cluster's topics."""
        group.list_topics = self.topic_names
        group.topic_meta = self._topic_meta

    def topic_names(self) -> list[str]:
        """Names of every topic of the cluster."""
        if self.broker is None or self.broker.metadata is None:
            return []
        return list(self.broker.metadata.topics)

    def topic_partition_count(self, topic: str) -> int | None:
        """Partitions of a topic, None if it does not exist."""
        if self.broker is None or self.broker.metadata is None:
            return None
        found = self.broker.metadata.get(topic)
        return found.partitions if found is not None else None

    def consumer_group_heartbeat(self, *, group_id: str, api_version: int, member_id: str, member_epoch: int,
                                 instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                                 subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                                 server_assignor: str | None, owned: dict[str, set[int]] | None,
                                 client_id: str, client_host: str) -> Any:
        """ConsumerGroupHeartbeat: returns a consumer.HeartbeatResult (errors included)."""
        from .consumer import HeartbeatResult

        try:
            self._check_active(group_id)
            _validate_consumer_heartbeat(api_version, group_id, member_id, member_epoch, instance_id, rack_id,
                                         rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                         server_assignor, owned)
            group = self.groups.get(group_id)
            if isinstance(group, ShareGroup | StreamsGroup):
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            converted: list[tuple[bytes, bytes | None]] = []
            classic_before: ClassicGroup | None = None
            if isinstance(group, ClassicGroup):
                if group.is_in(GroupState.EMPTY) and member_epoch == 0:
                    # An empty classic group (maybe with offsets) becomes a consumer group; its
                    # group metadata record is deleted.
                    group = None
                    converted = [(rec.group_metadata_key(group_id), None)]
                elif member_epoch == 0 and not group.is_in(GroupState.DEAD) and migration.can_upgrade(self, group):
                    classic_before = group
                    group, converted = migration.to_consumer_group(self, group)
                    self.groups[group_id] = group
                else:
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                                     f"Group {group_id} is not a consumer group.")
            elif (isinstance(group, ConsumerGroup) and member_epoch == -1 and member_id in group.members
                  and migration.can_downgrade(self, group, member_id)):
                # the last consumer-protocol member leaves: the classic members carry on in a classic group
                migration.to_classic_group(self, group, member_id)
                return HeartbeatResult(member_id=member_id, member_epoch=-1, heartbeat_interval_ms=0)
            if group is None:
                if member_epoch != 0:
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
                group = ConsumerGroup(group_id)
                self.wire_consumer_group(group)
                self.groups[group_id] = group
            try:
                result = group.heartbeat(
                    self, api_version=api_version, member_id=member_id, member_epoch=member_epoch,
                    instance_id=instance_id, rack_id=rack_id, rebalance_timeout_ms=rebalance_timeout_ms,
                    subscribed_topic_names=subscribed_topic_names, subscribed_topic_regex=subscribed_topic_regex,
                    server_assignor=server_assignor, owned=owned, client_id=client_id, client_host=client_host,
                    topic_partitions=self.topic_partition_count,
                )
            except GroupError:
                if classic_before is not None:  # nothing was written: the group stays classic
                    self.groups[group_id] = classic_before
                    converted = []
                raise
            finally:
                if converted or classic_before is None:
                    self._persist_consumer_group(group, converted)
            if isinstance(group, ConsumerGroup) and group.regex_refresh_pending:
                # Kafka resolves regular expressions in the background and writes what they
                # match after the heartbeat that asked for it: a batch of its own
                group.resolve_regexes(self.now_ms())
                self._persist_consumer_group(group)
            return result
        except GroupError as exc:
            return HeartbeatResult(error=exc.code, error_message=str(exc) if str(exc) != exc.code.name else None)

    # ================================================================== admin

    def list_groups(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of every live group."""
        out = []
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                if group.is_in(GroupState.DEAD):
                    continue
                out.append((group.group_id, group.protocol_type or "", group.state.value, "classic"))
            elif isinstance(group, ShareGroup):
                out.append((group.group_id, "share", group.state_name(), "share"))
            elif isinstance(group, StreamsGroup):
                out.append((group.group_id, "streams", group.state_name(), "streams"))
            else:
                out.append((group.group_id, "consumer", group.state_name(), "consumer"))
        return out

    def describe_group(self, group_id: str) -> Group | None:
        """The group to describe (None if unknown)."""
        return self.groups.get(group_id)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: empty groups lose their offsets and metadata (tombstones, one batch each)."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            try:
                self._check_active(group_id)
                group = self.groups.get(group_id)
                if group is None or (isinstance(group, ClassicGroup) and group.is_in(GroupState.DEAD)):
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND)
                if isinstance(group, ClassicGroup) and not group.is_in(GroupState.EMPTY):
                    raise GroupError(ErrorCode.NON_EMPTY_GROUP)
                if isinstance(group, ConsumerGroup | ShareGroup | StreamsGroup) and not group.is_empty():
                    raise GroupError(ErrorCode.NON_EMPTY_GROUP)
                stored = self.offsets.get(group_id, {})
                tombstones: list[tuple[bytes, bytes | None]] = [
                    (rec.offset_commit_key(group_id, t, p), None) for t, p in stored]
                if isinstance(group, ConsumerGroup):
                    tombstones.extend(consumer_records.changes(group, {}))
                elif isinstance(group, ShareGroup):
                    share_groups.delete_state(self, group)
                    tombstones.extend(share_groups.changes(group, {}))
                elif isinstance(group, StreamsGroup):
                    tombstones.extend(streams_groups.tombstones(group))
                else:
                    tombstones.append((rec.group_metadata_key(group_id), None))
                self._append(group_id, rec.cleanup_batch(tombstones, self.now_ms(), self.format))
                if isinstance(group, ClassicGroup):
                    group.transition_to(GroupState.DEAD, self.now_ms())
                del self.groups[group_id]
                self.offsets.pop(group_id, None)
                results[group_id] = ErrorCode.NONE
            except GroupError as exc:
                results[group_id] = exc.code
        return results

    def on_topics_deleted(self, topics: set[str]) -> None:
        """Drop (with tombstones) the offsets of deleted topics."""
        for group_id, stored in list(self.offsets.items()):
            gone = [tp for tp in stored if tp[0] in topics]
            if not gone:
                continue
            try:
                self._append(group_id, rec.cleanup_batch(
                    [(rec.offset_commit_key(group_id, t, p), None) for t, p in gone], self.now_ms(), self.format))
            except GroupError:
                continue
            for tp in gone:
                del stored[tp]


def _validate_consumer_heartbeat(api_version: int, group_id: str, member_id: str, member_epoch: int,
                                 instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                                 subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                                 server_assignor: str | None, owned: dict[str, set[int]] | None) -> None:
    """Kafka's checks of a ConsumerGroupHeartbeat request, before any state is touched."""
    from .assignors import ASSIGNORS

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.INVALID_REQUEST, message)

    if not group_id:
        raise invalid("GroupId can't be empty.")
    if instance_id is not None and not instance_id:
        raise invalid("InstanceId can't be empty.")
    if rack_id is not None and not rack_id:
        raise invalid("RackId can't be empty.")
    if api_version >= 1 and not member_id:
        raise invalid("MemberId can't be empty.")
    if member_epoch == 0:
        if rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if subscribed_topic_names is None and subscribed_topic_regex is None:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif member_epoch == -2 and instance_id is None:
        raise invalid("InstanceId can't be null.")
    elif member_epoch < -2:
        raise invalid(f"MemberEpoch is {member_epoch}, but must be greater than or equal to -2.")
    if subscribed_topic_regex:
        try:
            re.compile(subscribed_topic_regex)
        except re.error as exc:
            raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                             f"SubscribedTopicRegex `{subscribed_topic_regex}` is not a valid regular expression: {exc}.") from None
    if server_assignor is not None and server_assignor not in ASSIGNORS:
        raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported.")


def _append_error(code: ErrorCode) -> ErrorCode:
    """The error a client sees when the coordinator's write fails (Kafka's mapping)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


def _inconsistent(requested: str | None, current: str | None) -> bool:
    """Kafka's isProtocolInconsistent: only two known, different values conflict."""
    return requested is not None and current is not None and requested != current


def _committed(record: rec.OffsetCommitRecord) -> CommittedOffset:
    v = record.value
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp,
                           v.expire_timestamp if record.value_version == 1 else -1)


def _read_entries(partition_log: Any) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    """Every record of a partition log in offset order as (producer id if transactional else -1,
    marker type for a transaction marker else None, key, value)."""
    out: list[tuple[int, int | None, bytes | None, bytes | None]] = []
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        data = partition_log.read(offset, 8 * 1024 * 1024, None, True)
        if not data.slices:
            break
        chunks = [os.pread(s.file.fileno(), s.size, s.position) for s in data.slices]
        buf = b"".join(chunks)
        next_offset = offset
        for batch in iter_batches(buf):
            header = batch.header()
            next_offset = header.base_offset + header.last_offset_delta + 1
            transactional = bool(header.attributes & 0x10)
            producer_id = header.producer_id if transactional else -1
            for record in batch.records():
                if header.base_offset + record.offset_delta < offset:
                    continue
                if header.attributes & 0x20:  # control batch: a transaction marker
                    _, marker = parse_control_record_key(record.key)
                    out.append((header.producer_id, int(marker), None, None))
                    continue
                key = None if record.key is None else bytes(record.key)
                value = None if record.value is None else bytes(record.value)
                out.append((producer_id, None, key, value))
        if next_offset <= offset:
            break
        offset = next_offset
    return out
