"""The partition leader's share-partitions and share sessions (Kafka's SharePartitionManager).

Share sessions (KIP-932) work like fetch sessions keyed by (group, member): ShareSessionEpoch 0
opens a session (a full fetch), every later request carries the next epoch and names only
partitions to add (topics) or drop (forgotten topics); epoch -1 closes the session, and what the
member still holds goes back to the group.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from .coordinator import ShareCoordinator, ShareStateError
from .partition import DEFAULTS, GROUP_OVERRIDES, Acquired, SharePartition, read_batches

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
#: AcknowledgeType names as Kafka's ShareGroupMetrics tags them (ackType)
ACK_TYPE_NAMES = {0: "Gap", 1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
PartitionKey = tuple[Any, int]  # topic id, partition
#: Most bytes one acquisition reads from a log (at least one batch): a fetch asks for 50 MB by
#: default but takes max.poll.records (500) records, and the read is on the event loop
READ_CHUNK = 1 << 20


@dataclass
class ShareSession:
    """A member's share session: the next epoch it must send and the partitions it fetches."""

    epoch: int = 1
    partitions: dict[PartitionKey, None] = field(default_factory=dict)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class SharePartitionManager:
    """Share-partitions of the partitions this broker leads, and the share sessions of members."""

    def __init__(self, broker: Broker, coordinator: ShareCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.partitions: dict[tuple[str, Any, int], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        #: counters for the metrics endpoint (Kafka's ShareGroupMetrics / SharePartitionMetrics):
        #: (group, ack type) -> records acknowledged; (group, topic, partition) -> lock timeouts
        self.acknowledged: dict[tuple[str, str], int] = {}
        self.lock_timeouts: dict[tuple[str, str, int], int] = {}

    async def shutdown(self) -> None:
        """Nothing to flush: every state change was written when it happened."""

    # ---------------------------------------------------------------- settings

    def group_configs(self, group_id: str) -> dict[str, str]:
        store = getattr(self.broker, "metadata_store", None)
        image = getattr(store, "image", None)
        return dict(image.configs.get((GROUP_RESOURCE, group_id), {})) if image is not None else {}

    def setting(self, group_id: str, key: str) -> Any:
        """A share setting for a group: the group's config, else the broker's, else Kafka's default."""
        group = self.group_configs(group_id)
        for override, broker_key in GROUP_OVERRIDES.items():
            if broker_key == key and override in group:
                return int(group[override])
        if key in group:
            return group[key]
        raw = getattr(self.broker.config, "raw", {}) or {}
        found = raw.get(key, DEFAULTS[key])
        return found if key in ("share.auto.offset.reset", "share.isolation.level") else int(found)

    # ---------------------------------------------------------------- sessions

    def open_session(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        """The session a request with `epoch` uses (opened, continued or taken for closing)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            old = self.sessions.pop(key, None)
            if old is not None:
                self.release(group_id, member_id)
            session = self.sessions[key] = ShareSession()
            return session
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            log.debug("Share session of %s in %s expects epoch %d, not %d", member_id, group_id, session.epoch, epoch)
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        session.epoch = next_epoch(epoch)
        return session

    def close_session(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        self.release(group_id, member_id)

    def member_left(self, group_id: str, member_id: str) -> None:
        """The member left its group (ShareGroupHeartbeat epoch -1)."""
        self.close_session(group_id, member_id)

    def release(self, group_id: str, member_id: str) -> None:
        """Give back everything the member holds in the group's share-partitions."""
        limit = self.setting(group_id, "group.share.delivery.count.limit")
        woken = []
        for (gid, _tid, _p), sp in self.partitions.items():
            if gid == group_id and sp.release_member(member_id, limit):
                self.persist(sp)
                sp.advance()
                woken.append((sp.topic, sp.partition))
        if woken:
            self.broker.notify_appended(woken)

    # ---------------------------------------------------------------- share-partitions

    def partition(self, group_id: str, topic_id: Any, index: int) -> SharePartition | ErrorCode:
        """The share-partition (made and initialized on first use), or why there is none."""
        key = (group_id, topic_id, index)
        sp = self.partitions.get(key)
        meta = self.broker.metadata
        topic = meta.by_id(topic_id) if meta is not None else None
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if sp is not None and sp.topic == topic.name:
            return sp
        if not 0 <= index < topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        plog = self.broker.partition_log(topic.name, index)
        if plog is None:
            return self.broker.partition_error(topic.name, index)
        if not self.coordinator.loaded:
            self.coordinator.load()
        try:
            if self.coordinator.read(group_id, topic_id, index) is None:
                # the group coordinator initializes a partition's state when it first assigns it;
                # a fetch that comes first (its member's assignment predates a deletion) does it here
                self.coordinator.initialize(group_id, topic_id, index, 0, -1)
            # the leader reads with its leader epoch: a new one is written (Kafka's
            # readStateAndMaybeUpdateLeaderEpoch), an older one is fenced
            state = self.coordinator.read(group_id, topic_id, index, max(plog.leader_epoch, 0))
        except ShareStateError as exc:
            return exc.code
        assert state is not None
        if state.start_offset < 0:
            # as Kafka 4.4: the start offset share.auto.offset.reset gives is written with the
            # first acknowledgement, not now (a restart before that resolves it again)
            start = reset_offset(plog, str(self.setting(group_id, "share.auto.offset.reset")))
            sp = SharePartition(group_id, topic.name, index, topic_id, start, state.state_epoch)
        else:
            # the log may have lost records before the state's start (retention, DeleteRecords)
            start = max(state.start_offset, plog.log_start_offset)
            sp = SharePartition(group_id, topic.name, index, topic_id, start, state.state_epoch, state.batches)
        self.partitions[key] = sp
        return sp

    def persist(self, sp: SharePartition) -> ErrorCode:
        """Write a share-partition's state to the share coordinator."""
        plog = self.broker.partition_log(sp.topic, sp.partition)
        try:
            self.coordinator.write(sp.group_id, sp.topic_id, sp.partition, sp.state_epoch,
                                   plog.leader_epoch if plog is not None else -1, sp.start_offset,
                                   sp.state_batches(changed_only=True), sp.delivery_complete_count())
        except ShareStateError as exc:
            return exc.code
        sp.dirty.clear()
        return ErrorCode.NONE

    def acknowledge(self, group_id: str, member_id: str, topic_id: Any, index: int,
                    batches: list[tuple[int, int, list[int]]], now: float) -> ErrorCode:
        """Apply one partition's acknowledgement batches (all or none) and persist them."""
        sp = self.partition(group_id, topic_id, index)
        if isinstance(sp, ErrorCode):
            return sp
        limit = self.setting(group_id, "group.share.delivery.count.limit")
        lock_s = self.setting(group_id, "group.share.record.lock.duration.ms") / 1000
        while sp.expire_locks(now, limit):
            key = (group_id, sp.topic, sp.partition)
            self.lock_timeouts[key] = self.lock_timeouts.get(key, 0) + 1
            self.persist(sp)
            sp.advance()
        for first, last, types in batches:
            code = sp.check_acknowledge(member_id, first, last, types)
            if code != ErrorCode.NONE:
                return code
        changed = False
        released = False
        for first, last, types in batches:
            changed |= sp.acknowledge(member_id, first, last, types, now, lock_s, limit)
            released |= 2 in types
            for kind in types if len(types) > 1 else types * (last - first + 1):
                name = ACK_TYPE_NAMES.get(kind, str(kind))
                self.acknowledged[(group_id, name)] = self.acknowledged.get((group_id, name), 0) + 1
        if changed:
            code = self.persist(sp)
            sp.advance()
            if code != ErrorCode.NONE:
                return code
        if released:  # a waiting ShareFetch of another member may take these now
            self.broker.notify_appended([(sp.topic, sp.partition)])
        return ErrorCode.NONE

    def acquire(self, group_id: str, member_id: str, topic_id: Any, index: int, max_records: int, max_bytes: int,
                now: float, record_limit: bool = False) -> Acquired | ErrorCode:
        """Acquire records of one partition for a member."""
        sp = self.partition(group_id, topic_id, index)
        if isinstance(sp, ErrorCode):
            return sp
        plog = self.broker.partition_log(sp.topic, sp.partition)
        if plog is None:
            return self.broker.partition_error(sp.topic, sp.partition)
        limit = self.setting(group_id, "group.share.delivery.count.limit")
        while sp.expire_locks(now, limit):
            key = (group_id, sp.topic, sp.partition)
            self.lock_timeouts[key] = self.lock_timeouts.get(key, 0) + 1
            self.persist(sp)
            sp.advance()
        hw = plog.high_watermark
        aborted = None
        if str(self.setting(group_id, "share.isolation.level")).strip().lower() == "read_committed":
            hw = getattr(plog, "last_stable_offset", hw)
            collect = getattr(plog, "collect_aborted_transactions", None)
            aborted = collect(sp.start_offset, hw) if collect is not None else []
        if sp.start_offset < plog.log_start_offset:
            sp.reset_start(plog.log_start_offset)
        lock_s = self.setting(group_id, "group.share.record.lock.duration.ms") / 1000
        max_locks = self.setting(group_id, "group.share.partition.max.record.locks")
        # nothing is written for an acquisition (Kafka neither): transaction markers archived
        # here reach the state with the next write
        return sp.acquire(member_id, max_records, now, lock_s, max_locks, hw,
                          lambda offset: read_batches(plog, offset, min(max_bytes, READ_CHUNK), hw), aborted,
                          record_limit)

    def next_deadline(self, keys: list[tuple[str, Any, int]]) -> float:
        """The earliest lock deadline among these share-partitions (when a wait must end)."""
        return min((self.partitions[k].next_deadline for k in keys if k in self.partitions), default=float("inf"))


def reset_offset(plog: Any, strategy: str) -> int:
    """Where a share-partition without state starts (share.auto.offset.reset): the log start
    (earliest), the high watermark (latest), or the first record at or after now minus an ISO-8601
    duration (``by_duration:PT1H``), the high watermark if there is none."""
    import time  # noqa: PLC0415

    value = strategy.strip().lower()
    if value == "earliest":
        return plog.log_start_offset
    if value.startswith("by_duration:"):
        seconds = iso_duration_seconds(value.split(":", 1)[1])
        if seconds is not None:
            found = plog.fetch_offset_by_timestamp(int((time.time() - seconds) * 1000))
            if found is not None:
                return min(max(found.offset, plog.log_start_offset), plog.high_watermark)
    return plog.high_watermark


def iso_duration_seconds(text: str) -> float | None:
    """Seconds of a java.time.Duration text (PnDTnHnMn.nS), None if it is not one."""
    import re  # noqa: PLC0415

    m = re.fullmatch(r"p(?:(\d+)d)?(?:t(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?)?", text.strip().lower())
    if m is None or text.strip().lower() in ("p", "pt"):
        return None
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s

