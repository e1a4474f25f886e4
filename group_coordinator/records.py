"""The records the group coordinator keeps in ``__consumer_offsets``, in Kafka's exact formats.

Every record key starts with an int16 *key version* that says which schema follows
(0/1 = offset commit, 2 = group metadata, 3+ = KIP-848 consumer group records); every
value starts with an int16 *value version* of its own schema. A null value is a
tombstone: the key's state is deleted (and the log cleaner drops it eventually).

Batches are uncompressed, CreateTime, no producer id, one batch per write. Two Kafka
releases write them differently (both observed in real logs, see ``docs/groups.md``), so a
:class:`RecordFormat` names the one to reproduce: Kafka 3.9's group coordinator gives
OffsetCommit batches baseSequence 0 and every other write -1 and stores OffsetCommitValue v3;
Kafka 4.1's coordinator runtime writes baseSequence 0 everywhere, OffsetCommitValue v4, and an
empty GroupMetadata record when JoinGroup creates a group.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..logstore.java_hash import string_hash
from ..wire.records import SimpleRecord, build_batch
from ..wire.schema import codec, message_class

OFFSETS_TOPIC = "__consumer_offsets"

#: Key versions (the int16 in front of every key) of the record types in __consumer_offsets.
LEGACY_OFFSET_COMMIT_KEY_VERSION = 0
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2

#: Value versions Kafka 3.9/4.x write: OffsetCommitValue v3 (v1 when an expire timestamp is
#: set, i.e. OffsetCommit v2-v4 with a retention time), GroupMetadataValue v3.
#: KIP-848 consumer group records (key version -> key and value schema), all value version 0.
CONSUMER_GROUP_SCHEMAS = {
    3: ("ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue"),
    4: ("ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue"),
    5: ("ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue"),
    6: ("ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue"),
    7: ("ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue"),
    8: ("ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue"),
    16: ("ConsumerGroupRegularExpressionKey", "ConsumerGroupRegularExpressionValue"),
}
CONSUMER_GROUP_METADATA_KEY_VERSION = 3
CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION = 16
#: ConsumerGroupMemberMetadataValue's tagged ClassicMemberMetadata as Kafka writes it for a
#: consumer-protocol member: Kafka's default for a struct field is an empty struct, so a null is
#: not the default and is written (tag 0, one byte, 0 = null)
EXPLICIT_NULL_CLASSIC_METADATA = [(0, b"\x00")]

OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """How one Kafka release writes its coordinator records."""

    name: str
    offset_value_version: int  # OffsetCommitValue version without an expire timestamp
    commit_base_sequence: int  # baseSequence of OffsetCommit batches
    other_base_sequence: int  # baseSequence of every other coordinator batch
    empty_group_record_on_create: bool  # JoinGroup creating a group writes an empty GroupMetadata
    offset_topic_id: bool = False  # OffsetCommitValue carries the topic's id (Kafka 4.4)


FORMATS = {
    "3.9": RecordFormat("3.9", 3, 0, -1, False),
    "4.1": RecordFormat("4.1", 4, 0, 0, True),
    # Kafka 4.4's broker fills in the topic id of every committed partition (whatever the
    # OffsetCommit version) and the coordinator stores it in OffsetCommitValue's tagged TopicId
    "4.4": RecordFormat("4.4", 4, 0, 0, True, True),
}
DEFAULT_FORMAT = "4.4"

OffsetCommitKey = message_class("OffsetCommitKey")
OffsetCommitValue = message_class("OffsetCommitValue")
GroupMetadataKey = message_class("GroupMetadataKey")
GroupMetadataValue = message_class("GroupMetadataValue")
MemberMetadata = GroupMetadataValue.MemberMetadata


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode()) % n``.

    Kafka's ``Utils.abs`` is Math.abs except that Integer.MIN_VALUE (which Math.abs leaves
    negative) becomes 0. It is not the producer's ``toPositive`` (``n & 0x7fffffff``): for a
    negative hash the two give different partitions.
    """
    h = string_hash(group_id)
    return 0 if h == -(2**31) else abs(h) % num_partitions


# ---------------------------------------------------------------------------------- encoding


def _versioned(name: str, version: int, obj: Any) -> bytes:
    return _INT16.pack(version) + codec(name, version).encode_bytes(obj)


def _key(name: str, key_version: int, obj: Any) -> bytes:
    # The int16 in front of a key names the record type; the key schema itself has version 0.
    return _INT16.pack(key_version) + codec(name, 0).encode_bytes(obj)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Key of an offset commit record (key version 1)."""
    return _key(
        "OffsetCommitKey", OFFSET_COMMIT_KEY_VERSION,
        OffsetCommitKey(group=group, topic=topic, partition=partition),
    )


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: int = -1, version: int = OFFSET_COMMIT_VALUE_VERSION,
                        topic_id: Any = None) -> bytes:
    """Value of an offset commit record: `version` (3 for Kafka 3.9, 4 for 4.x), or v1 when an
    expire timestamp is given; `topic_id` (a Uuid) only where the version has it (v4+)."""
    if expire_timestamp >= 0:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    value = OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                              commit_timestamp=commit_timestamp, expire_timestamp=expire_timestamp)
    if topic_id is not None and version >= 4:
        value.topic_id = topic_id
    return _versioned("OffsetCommitValue", version, value)


def group_metadata_key(group: str) -> bytes:
    """Key of a group metadata record (key version 2)."""
    return _key("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group))


def group_metadata_value(value: Any) -> bytes:
    """A ``GroupMetadataValue`` object encoded at v3."""
    return _versioned("GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, value)


def consumer_group_key(key_version: int, **fields: Any) -> bytes:
    """Key of a KIP-848 consumer group record (``group_id=...``, ``member_id=...`` as the schema has)."""
    name = CONSUMER_GROUP_SCHEMAS[key_version][0]
    return _key(name, key_version, message_class(name)(**fields))


def consumer_group_value(key_version: int, value: Any) -> bytes:
    """Value (version 0) of a KIP-848 consumer group record."""
    return _versioned(CONSUMER_GROUP_SCHEMAS[key_version][1], 0, value)


def consumer_group_value_class(key_version: int) -> type:
    """Generated class of the value of a KIP-848 record type."""
    return message_class(CONSUMER_GROUP_SCHEMAS[key_version][1])


# ---------------------------------------------------------------------------------- decoding


@dataclass(slots=True)
class OffsetCommitRecord:
    """A decoded offset commit (value None = tombstone)."""

    group: str
    topic: str
    partition: int
    value: Any | None
    value_version: int = -1


@dataclass(slots=True)
class GroupMetadataRecord:
    """A decoded group metadata record (value None = tombstone)."""

    group: str
    value: Any | None
    value_version: int = -1


@dataclass(slots=True)
class ConsumerGroupRecord:
    """A decoded KIP-848 consumer group record (value None = tombstone)."""

    key_version: int
    key: Any
    value: Any | None

    @property
    def group(self) -> str:
        return self.key.group_id


@dataclass(slots=True)
class OtherRecord:
    """A record of a type this coordinator keeps no state for (KIP-848/share/streams groups)."""

    key_version: int
    key: bytes
    value: bytes | None


def _decode_versioned(name: str, data: bytes) -> tuple[Any, int]:
    (version,) = _INT16.unpack_from(data, 0)
    obj, end = codec(name, version).decode(memoryview(data), 2)
    return obj, version


def decode_record(key: bytes | None, value: bytes | None
                  ) -> OffsetCommitRecord | GroupMetadataRecord | ConsumerGroupRecord | OtherRecord:
    """Decode one ``__consumer_offsets`` record by its key version."""
    if key is None or len(key) < 2:
        raise ValueError("coordinator record without a key")
    (key_version,) = _INT16.unpack_from(key, 0)
    if key_version in (LEGACY_OFFSET_COMMIT_KEY_VERSION, OFFSET_COMMIT_KEY_VERSION):
        k, _ = codec("OffsetCommitKey", 0).decode(memoryview(key), 2)
        if value is None:
            return OffsetCommitRecord(k.group, k.topic, k.partition, None)
        v, vv = _decode_versioned("OffsetCommitValue", value)
        return OffsetCommitRecord(k.group, k.topic, k.partition, v, vv)
    if key_version == GROUP_METADATA_KEY_VERSION:
        k, _ = codec("GroupMetadataKey", 0).decode(memoryview(key), 2)
        if value is None:
            return GroupMetadataRecord(k.group, None)
        v, vv = _decode_versioned("GroupMetadataValue", value)
        return GroupMetadataRecord(k.group, v, vv)
    if key_version in CONSUMER_GROUP_SCHEMAS:
        key_name, value_name = CONSUMER_GROUP_SCHEMAS[key_version]
        k, _ = codec(key_name, 0).decode(memoryview(key), 2)
        v = None if value is None else _decode_versioned(value_name, value)[0]
        return ConsumerGroupRecord(key_version, k, v)
    return OtherRecord(key_version, bytes(key), None if value is None else bytes(value))


# ---------------------------------------------------------------------------------- batches


def build_coordinator_batch(records: list[tuple[bytes, bytes | None]], timestamp: int,
                            base_sequence: int) -> bytearray:
    """One uncompressed v2 batch of coordinator records, all stamped with ``timestamp``.

    The result is writable: the log store patches base offset and leader epoch in place.
    """
    batch = build_batch(
        [SimpleRecord(key=k, value=v, headers=(), timestamp=timestamp) for k, v in records],
        base_sequence=base_sequence,
    )
    return bytearray(batch)


def offset_commit_batch(records: list[tuple[bytes, bytes | None]], timestamp: int,
                        fmt: RecordFormat = FORMATS["3.9"]) -> bytearray:
    """The batch of an OffsetCommit (baseSequence 0 in both formats)."""
    return build_coordinator_batch(records, timestamp, fmt.commit_base_sequence)


def group_metadata_batch(records: list[tuple[bytes, bytes | None]], timestamp: int,
                         fmt: RecordFormat = FORMATS["3.9"]) -> bytearray:
    """A batch holding a group metadata record: baseSequence -1 (3.9) or 0 (4.1)."""
    return build_coordinator_batch(records, timestamp, fmt.other_base_sequence)


def consumer_group_batch(records: list[tuple[bytes, bytes | None]], timestamp: int) -> bytearray:
    """KIP-848 group records: these exist only with Kafka's new coordinator runtime, which writes
    every batch with baseSequence 0."""
    return build_coordinator_batch(records, timestamp, 0)


def cleanup_batch(records: list[tuple[bytes, bytes | None]], timestamp: int,
                  fmt: RecordFormat = FORMATS["3.9"]) -> bytearray:
    """Tombstones of deleted/expired offsets and groups: written like group metadata."""
    return build_coordinator_batch(records, timestamp, fmt.other_base_sequence)


class RecordFamily:
    """Keys, values and decoding of one family of group records in `__consumer_offsets` (share
    groups, streams groups): `schemas` maps a key version to its (key, value) message names."""

    def __init__(self, schemas: dict[int, tuple[str, str]]) -> None:
        self.schemas = schemas

    def key(self, key_version: int, **fields: Any) -> bytes:
        name = self.schemas[key_version][0]
        return _key(name, key_version, message_class(name)(**fields))

    def value(self, key_version: int, obj: Any) -> bytes:
        """The record's value (version 0)."""
        return _versioned(self.schemas[key_version][1], 0, obj)

    def value_class(self, key_version: int) -> type:
        return message_class(self.schemas[key_version][1])

    def decode(self, key_bytes: bytes, value_bytes: bytes | None) -> tuple[int, Any, Any] | None:
        """(key version, key, value or None) of a record of this family; None for other records."""
        (key_version,) = _INT16.unpack_from(key_bytes, 0)
        if key_version not in self.schemas:
            return None
        key_name, value_name = self.schemas[key_version]
        k, _ = codec(key_name, 0).decode(memoryview(key_bytes), 2)
        v = None if value_bytes is None else _decode_versioned(value_name, value_bytes)[0]
        return key_version, k, v

    def collect(self, found: dict[str, dict[int, dict[str, Any]]], raw: dict[str, dict[bytes, bytes]],
                key_bytes: bytes, value_bytes: bytes | None) -> bool:
        """Note a record of this family read at load: its value by group, key version and member
        in `found`, its raw bytes by group in `raw` (a tombstone removes both); False if the
        record is not of this family."""
        decoded = self.decode(key_bytes, value_bytes)
        if decoded is None:
            return False
        key_version, k, v = decoded
        by_type = found.setdefault(k.group_id, {}).setdefault(key_version, {})
        member = getattr(k, "member_id", "")
        group_raw = raw.setdefault(k.group_id, {})
        if v is None:
            by_type.pop(member, None)
            group_raw.pop(key_bytes, None)
        else:
            by_type[member] = v
            group_raw[key_bytes] = value_bytes  # type: ignore[assignment]
        return True
