"""The records of ``__share_group_state`` in Kafka 4.4's format: ShareSnapshot (key version 0)
and ShareUpdate (key version 1), each key (group, topic id, partition) and a version-0 value.

A snapshot holds the whole state of a share-partition; an update holds state batches written
since the snapshot of the same snapshot epoch. Batches are written like Kafka's coordinator
runtime writes them: uncompressed, CreateTime, baseSequence 0, no producer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ..logstore.java_hash import string_hash
from ..wire.records import SimpleRecord, build_batch
from ..wire.schema import codec, message_class

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1
_INT16 = struct.Struct(">h")

ShareSnapshotKey = message_class("ShareSnapshotKey")
ShareSnapshotValue = message_class("ShareSnapshotValue")
ShareUpdateKey = message_class("ShareUpdateKey")
ShareUpdateValue = message_class("ShareUpdateValue")


def coordinator_key(group_id: str, topic_id: Any, partition: int) -> str:
    """Kafka's SharePartitionKey as a coordinator key: ``group:topicId:partition``."""
    tid = topic_id.to_base64() if hasattr(topic_id, "to_base64") else str(topic_id)
    return f"{group_id}:{tid}:{partition}"


def partition_for(key: str, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of a key: ``Utils.abs(key.hashCode()) % n``."""
    h = string_hash(key)
    return 0 if h == -(2**31) else abs(h) % num_partitions


@dataclass
class ShareState:
    """A share-partition's persisted state."""

    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1
    create_timestamp: int = 0
    write_timestamp: int = 0
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)  # first, last, state, count
    updates_since_snapshot: int = 0


def _key(name: str, key_version: int, group_id: str, topic_id: Any, partition: int) -> bytes:
    obj = message_class(name)(group_id=group_id, topic_id=topic_id, partition=partition)
    return _INT16.pack(key_version) + codec(name, 0).encode_bytes(obj)


def snapshot_record(group_id: str, topic_id: Any, partition: int, state: ShareState) -> tuple[bytes, bytes]:
    """(key, value) of a ShareSnapshot record."""
    B = ShareSnapshotValue.StateBatch
    value = ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
        create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
        state_batches=[B(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                       for f, la, s, c in state.batches])
    return (_key("ShareSnapshotKey", SNAPSHOT_KEY_VERSION, group_id, topic_id, partition),
            _INT16.pack(0) + codec("ShareSnapshotValue", 0).encode_bytes(value))


def update_record(group_id: str, topic_id: Any, partition: int, state: ShareState,
                  batches: list[tuple[int, int, int, int]]) -> tuple[bytes, bytes]:
    """(key, value) of a ShareUpdate record carrying `batches`."""
    B = ShareUpdateValue.StateBatch
    value = ShareUpdateValue(
        snapshot_epoch=state.snapshot_epoch, leader_epoch=state.leader_epoch, start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
        state_batches=[B(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                       for f, la, s, c in batches])
    return (_key("ShareUpdateKey", UPDATE_KEY_VERSION, group_id, topic_id, partition),
            _INT16.pack(0) + codec("ShareUpdateValue", 0).encode_bytes(value))


def decode(key: bytes, value: bytes | None) -> tuple[int, Any, Any]:
    """(key version, key, value or None for a tombstone) of a ``__share_group_state`` record."""
    (key_version,) = _INT16.unpack_from(key, 0)
    name = "ShareSnapshot" if key_version == SNAPSHOT_KEY_VERSION else "ShareUpdate"
    if key_version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        raise ValueError(f"unknown __share_group_state key version {key_version}")
    k, _ = codec(name + "Key", 0).decode(memoryview(key), 2)
    if value is None:
        return key_version, k, None
    (value_version,) = _INT16.unpack_from(value, 0)
    v, _ = codec(name + "Value", value_version).decode(memoryview(value), 2)
    return key_version, k, v


def combine(so_far: list[tuple[int, int, int, int]], new: list[tuple[int, int, int, int]],
            start_offset: int) -> list[tuple[int, int, int, int]]:
    """State batches combined as Kafka 4.4's share coordinator combines them
    (PersisterStateBatchCombiner): batches ending before `start_offset` dropped and the rest
    clipped to it (unless it is -1); then, unless one batch or none is left, a sweep over the
    ranges where the highest delivery count, then the highest state, wins an overlap, adjacent
    runs of the same state and count joined. Works on ranges, not offsets."""
    pruned: list[tuple[int, int, int, int]] = []
    for first, last, state, count in [*so_far, *new]:
        if start_offset != -1 and last < start_offset:
            continue
        pruned.append((start_offset if start_offset != -1 and first < start_offset else first, last, state, count))
    if len(pruned) <= 1:
        return pruned
    # (offset, begins?, priority): ends sort before begins at the same offset
    events = sorted([(f, True, (c, s)) for f, _, s, c in pruned] + [(la + 1, False, (c, s)) for _, la, s, c in pruned],
                    key=lambda e: (e[0], e[1]))
    active: dict[tuple[int, int], int] = {}
    out: list[list[int]] = []
    current: tuple[int, int] | None = None
    previous = -1
    i = 0
    while i < len(events):
        offset = events[i][0]
        if current is not None and offset > previous:
            count, state = current
            if out and out[-1][1] + 1 == previous and out[-1][2] == state and out[-1][3] == count:
                out[-1][1] = offset - 1
            else:
                out.append([previous, offset - 1, state, count])
        while i < len(events) and events[i][0] == offset:
            _, begins, priority = events[i]
            if begins:
                active[priority] = active.get(priority, 0) + 1
            elif active[priority] == 1:
                del active[priority]
            else:
                active[priority] -= 1
            i += 1
        current = max(active) if active else None
        previous = offset
    return [tuple(b) for b in out]  # type: ignore[misc]


def state_batch(records: list[tuple[bytes, bytes | None]], timestamp: int) -> bytearray:
    """One uncompressed v2 batch of share coordinator records (baseSequence 0, as Kafka's runtime)."""
    return bytearray(build_batch([SimpleRecord(key=k, value=v, headers=(), timestamp=timestamp)
                                  for k, v in records], base_sequence=0))
