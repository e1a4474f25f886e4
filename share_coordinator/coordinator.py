"""The share coordinator: the persisted state of every share-partition in ``__share_group_state``.

Kafka's share coordinator answers Initialize/Read/Write/Delete ShareGroupState and
ReadShareGroupStateSummary for the keys (group, topic id, partition) that hash to the state
partitions it leads. Each write appends a ShareUpdate record; every
``share.coordinator.snapshot.update.records.per.snapshot`` updates it appends a ShareSnapshot
of the merged state instead, so a reload reads at most that many updates after a snapshot.
State is read back from the topic when the coordinator starts (lazily, on first use).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from . import records as rec

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

DEFAULTS = {
    "share.coordinator.state.topic.num.partitions": 50,
    "share.coordinator.state.topic.segment.bytes": 104857600,
    "share.coordinator.snapshot.update.records.per.snapshot": 500,
}

Key = tuple[str, Any, int]  # group id, topic id, partition


class ShareStateError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ShareCoordinator:
    """Share-partition state kept in ``__share_group_state`` (single node: it leads every partition)."""

    def __init__(self, broker: Broker | None) -> None:
        self.broker = broker
        self.states: dict[Key, rec.ShareState] = {}
        #: the highest leader and state epochs the records of a key carried (Kafka's fencing maps)
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}
        self.loaded = broker is None
        #: records written for Write/Initialize/Read requests (share-coordinator-metrics write-total)
        self.writes = 0

    async def shutdown(self) -> None:
        """Nothing to flush: every write was appended when it happened."""

    def cfg(self, key: str) -> int:
        raw = getattr(getattr(self.broker, "config", None), "raw", {}) or {}
        found = raw.get(key)
        return int(found) if found is not None else int(DEFAULTS[key])

    # ---------------------------------------------------------------- the topic

    def num_partitions(self) -> int:
        meta = getattr(self.broker, "metadata", None)
        topic = meta.get(rec.SHARE_STATE_TOPIC) if meta is not None else None
        return topic.partitions if topic is not None else self.cfg("share.coordinator.state.topic.num.partitions")

    def state_topic_spec(self) -> tuple[str, int, dict[str, str]] | None:
        """(name, partitions, configs) of ``__share_group_state`` as Kafka creates it; None if it exists."""
        meta = getattr(self.broker, "metadata", None)
        if meta is None or meta.get(rec.SHARE_STATE_TOPIC) is not None:
            return None
        return rec.SHARE_STATE_TOPIC, self.cfg("share.coordinator.state.topic.num.partitions"), {
            "cleanup.policy": "delete",
            "segment.bytes": str(self.cfg("share.coordinator.state.topic.segment.bytes")),
            "compression.type": "producer",
            "retention.ms": "-1",
        }

    def load(self) -> None:
        """Read every state partition, replaying its records as Kafka's share coordinator shard
        replays them; blocking file reads."""
        from ..group_coordinator.coordinator import _read_entries  # noqa: PLC0415 - shared reader

        broker = self.broker
        if broker is None or broker.metadata is None or broker.metadata.get(rec.SHARE_STATE_TOPIC) is None:
            self.loaded = True
            return
        self.states, self.leader_epochs, self.state_epochs = {}, {}, {}
        for partition in range(self.num_partitions()):
            plog = broker.partition_log(rec.SHARE_STATE_TOPIC, partition)
            if plog is None:
                continue
            for _pid, marker, key, value in _read_entries(plog):
                if marker is not None or key is None:
                    continue
                try:
                    key_version, k, v = rec.decode(key, value)
                except Exception:
                    log.warning("Skipping an unreadable record in %s-%d", rec.SHARE_STATE_TOPIC, partition)
                    continue
                ident = (k.group_id, k.topic_id, k.partition)
                if v is None:
                    self._forget(ident)
                    continue
                batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in v.state_batches]
                if key_version == rec.SNAPSHOT_KEY_VERSION:
                    self._replay_snapshot(ident, rec.ShareState(
                        snapshot_epoch=v.snapshot_epoch, state_epoch=v.state_epoch, leader_epoch=v.leader_epoch,
                        start_offset=v.start_offset, delivery_complete_count=v.delivery_complete_count,
                        create_timestamp=v.create_timestamp, write_timestamp=v.write_timestamp, batches=batches))
                else:
                    self._replay_update(ident, v.snapshot_epoch, v.leader_epoch, v.start_offset,
                                        v.delivery_complete_count, batches)
        self.loaded = True
        log.info("Loaded the state of %d share-partitions from %s", len(self.states), rec.SHARE_STATE_TOPIC)

    def _append(self, ident: Key, records: list[tuple[bytes, bytes | None]]) -> None:
        broker = self.broker
        if broker is None:
            return
        self.writes += 1
        key = rec.coordinator_key(*ident)
        plog = broker.partition_log(rec.SHARE_STATE_TOPIC, rec.partition_for(key, self.num_partitions()))
        if plog is None:
            raise ShareStateError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            plog.append_as_coordinator(rec.state_batch(records, _now_ms()), now_ms=_now_ms())
        except Exception as exc:
            log.exception("Writing share state %s to %s failed", key, rec.SHARE_STATE_TOPIC)
            raise ShareStateError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc
        broker.notify_appended()

    # ---------------------------------------------------------------- replay (Kafka's ShareCoordinatorShard)

    def _forget(self, ident: Key) -> None:
        for table in (self.states, self.leader_epochs, self.state_epochs):
            table.pop(ident, None)

    def _note_epochs(self, ident: Key, leader_epoch: int, state_epoch: int | None) -> None:
        # the highest epochs any record carried: later requests with lower ones are fenced
        self.leader_epochs[ident] = max(self.leader_epochs.get(ident, leader_epoch), leader_epoch)
        if state_epoch is not None:
            self.state_epochs[ident] = max(self.state_epochs.get(ident, state_epoch), state_epoch)

    def _replay_snapshot(self, ident: Key, state: rec.ShareState) -> None:
        old = self.states.get(ident)
        count = old.updates_since_snapshot if old is not None else 0
        self._note_epochs(ident, state.leader_epoch, state.state_epoch)
        # Kafka restarts the count only when this snapshot was due: an initializing snapshot
        # (InitializeShareGroupState, AlterShareGroupOffsets) keeps it
        state.updates_since_snapshot = 0 if count >= self.cfg(
            "share.coordinator.snapshot.update.records.per.snapshot") else count
        self.states[ident] = state

    def _replay_update(self, ident: Key, snapshot_epoch: int, leader_epoch: int, start_offset: int,
                       delivery_complete_count: int, batches: list[tuple[int, int, int, int]]) -> None:
        self._note_epochs(ident, leader_epoch, None)
        old = self.states.get(ident)
        if old is None:
            state = rec.ShareState(snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                                   delivery_complete_count=delivery_complete_count, batches=list(batches))
        else:
            start = old.start_offset if start_offset == -1 else start_offset
            state = rec.ShareState(
                snapshot_epoch=old.snapshot_epoch, state_epoch=old.state_epoch,
                leader_epoch=old.leader_epoch if leader_epoch == -1 else leader_epoch, start_offset=start,
                delivery_complete_count=delivery_complete_count, create_timestamp=old.create_timestamp,
                write_timestamp=old.write_timestamp, batches=rec.combine(old.batches, batches, start),
                updates_since_snapshot=old.updates_since_snapshot)
        state.updates_since_snapshot += 1
        self.states[ident] = state

    def _write_record(self, ident: Key, old: rec.ShareState, leader_epoch: int, start_offset: int,
                      delivery_complete_count: int, batches: list[tuple[int, int, int, int]]) -> None:
        """The record a write (or a read that moves the leader epoch) appends, as Kafka's
        generateShareStateRecord makes it: a ShareSnapshot once
        ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed the last one,
        else a ShareUpdate of the request's batches."""
        group_id, topic_id, partition = ident
        now = _now_ms()
        start = max(start_offset, old.start_offset)
        if start_offset == old.start_offset:
            count = max(delivery_complete_count, old.delivery_complete_count)
        elif start_offset < old.start_offset:
            count = old.delivery_complete_count
        else:
            count = delivery_complete_count
        if old.updates_since_snapshot >= self.cfg("share.coordinator.snapshot.update.records.per.snapshot"):
            state = rec.ShareState(snapshot_epoch=old.snapshot_epoch + 1, state_epoch=old.state_epoch,
                                   leader_epoch=leader_epoch, start_offset=start, delivery_complete_count=count,
                                   create_timestamp=now, write_timestamp=now,
                                   batches=rec.combine(old.batches, batches, start))
            self._append(ident, [rec.snapshot_record(group_id, topic_id, partition, state)])
            self._replay_snapshot(ident, state)
            return
        update = rec.combine([], batches, start)
        head = rec.ShareState(snapshot_epoch=old.snapshot_epoch, leader_epoch=leader_epoch, start_offset=start,
                              delivery_complete_count=count)
        self._append(ident, [rec.update_record(group_id, topic_id, partition, head, update)])
        self._replay_update(ident, old.snapshot_epoch, leader_epoch, start, count, update)

    def _check_topic(self, topic_id: Any, partition: int) -> None:
        meta = getattr(self.broker, "metadata", None)
        if meta is None:
            return
        topic = meta.by_id(topic_id)
        if topic is None or partition >= topic.partitions:
            raise ShareStateError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    # ---------------------------------------------------------------- the RPCs' operations

    def initialize(self, group_id: str, topic_id: Any, partition: int, state_epoch: int, start_offset: int) -> None:
        """InitializeShareGroupState: a fresh snapshot (the old state, if any, is replaced)."""
        ident = (group_id, topic_id, partition)
        old = self.states.get(ident)
        if old is not None and old.state_epoch > state_epoch:
            raise ShareStateError(ErrorCode.FENCED_STATE_EPOCH, "Initialize state epoch is older than the current one.")
        now = _now_ms()
        # Kafka 4.4's initialization snapshots carry leader epoch 0 (seen in its __share_group_state)
        state = rec.ShareState(snapshot_epoch=0 if old is None else old.snapshot_epoch + 1, state_epoch=state_epoch,
                               leader_epoch=0, start_offset=start_offset, delivery_complete_count=-1,
                               create_timestamp=now, write_timestamp=now, batches=[])
        self._append(ident, [rec.snapshot_record(group_id, topic_id, partition, state)])
        self._replay_snapshot(ident, state)

    def read(self, group_id: str, topic_id: Any, partition: int, leader_epoch: int = -1) -> rec.ShareState | None:
        """ReadShareGroupState (None: never initialized). A partition leader reading with a
        leader epoch other than the one last recorded has it written (an update with no batches),
        as Kafka's readStateAndMaybeUpdateLeaderEpoch does; an older one is fenced."""
        ident = (group_id, topic_id, partition)
        state = self.states.get(ident)
        if state is None or leader_epoch < 0:
            return state
        known = self.leader_epochs.get(ident)
        if known is not None and known > leader_epoch:
            raise ShareStateError(ErrorCode.FENCED_LEADER_EPOCH)
        if known != leader_epoch:
            self._write_record(ident, state, leader_epoch, state.start_offset, state.delivery_complete_count, [])
        return state

    def write(self, group_id: str, topic_id: Any, partition: int, state_epoch: int, leader_epoch: int,
              start_offset: int, batches: list[tuple[int, int, int, int]], delivery_complete_count: int = -1) -> None:
        """WriteShareGroupState, checked as Kafka 4.4 checks it: an update record, or a snapshot
        once enough updates followed the last one. The record keeps the leader epoch last
        recorded (reads move it)."""
        ident = (group_id, topic_id, partition)
        if topic_id is None or partition < 0 or leader_epoch < 0 or state_epoch < 0:
            raise ShareStateError(ErrorCode.INVALID_REQUEST)
        old = self.states.get(ident)
        if old is None:
            raise ShareStateError(ErrorCode.INVALID_REQUEST, "Write on uninitialized share partition.")
        if self.leader_epochs.get(ident, leader_epoch) > leader_epoch:
            raise ShareStateError(ErrorCode.FENCED_LEADER_EPOCH)
        if self.state_epochs.get(ident, state_epoch) > state_epoch:
            raise ShareStateError(ErrorCode.FENCED_STATE_EPOCH)
        self._check_topic(topic_id, partition)
        self._write_record(ident, old, old.leader_epoch, start_offset, delivery_complete_count, batches)

    def delete(self, group_id: str, topic_id: Any, partition: int) -> None:
        """DeleteShareGroupState: tombstones for the key's snapshot and update records."""
        ident = (group_id, topic_id, partition)
        if ident not in self.states:
            return
        snapshot_key = rec.snapshot_record(group_id, topic_id, partition, rec.ShareState())[0]
        update_key = rec.update_record(group_id, topic_id, partition, rec.ShareState(), [])[0]
        self._append(ident, [(snapshot_key, None), (update_key, None)])
        self._forget(ident)

    def keys_of_group(self, group_id: str) -> list[Key]:
        return [k for k in self.states if k[0] == group_id]
