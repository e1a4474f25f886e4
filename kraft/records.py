"""Kafka's metadata records as they sit in a KRaft record's value, and KRaft control records.

A metadata record value is Kafka's ApiMessageAndVersion framing (``MetadataRecordSerde``):
unsigned varint frame version (1), unsigned varint API key of the record type, unsigned
varint record version, then the record body in its (always flexible) encoding. The record
key is null.

KRaft control records (leader change, snapshot header/footer, kraft.version, voters) are
plain bodies: the key says the control type (``wire.records.control_record_key``) and the
value is the message body at version 0, whose first field is its own ``Version``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..wire import schema
from ..wire.errors import ProtocolError
from ..wire.messages.defs import MESSAGES
from ..wire.primitives import encode_uvarint, read_uvarint
from ..wire.records import ControlRecordType

#: ApiMessageAndVersion frame version written by Kafka's metadata serde.
FRAME_VERSION = 1

#: Record versions Odradek writes: what Kafka 4.1 writes at metadata.version 27 (checked on the
#: 4.1 fixture's metadata log and snapshot).
WRITE_VERSIONS: dict[str, int] = {
    "TopicRecord": 0,
    "PartitionRecord": 2,
    "PartitionChangeRecord": 2,
    "ConfigRecord": 0,
    "RemoveTopicRecord": 0,
    "FeatureLevelRecord": 0,
    "RegisterBrokerRecord": 3,
    "ProducerIdsRecord": 0,
    "BeginTransactionRecord": 0,
    "EndTransactionRecord": 0,
    "NoOpRecord": 0,
}

#: Control record types of the KRaft log and the message that is their value.
CONTROL_MESSAGES: dict[int, str] = {
    int(ControlRecordType.LEADER_CHANGE): "LeaderChangeMessage",
    int(ControlRecordType.SNAPSHOT_HEADER): "SnapshotHeaderRecord",
    int(ControlRecordType.SNAPSHOT_FOOTER): "SnapshotFooterRecord",
    int(ControlRecordType.KRAFT_VERSION): "KRaftVersionRecord",
    int(ControlRecordType.KRAFT_VOTERS): "VotersRecord",
}


@cache
def metadata_record_names() -> dict[int, str]:
    """API key -> record name for every metadata record type the schema knows."""
    out: dict[int, str] = {}
    for name in schema.message_names():
        mdef = schema.message_def(name)
        # the storage module's tiered-storage records are also "metadata" records with their own
        # key space; only the kafka-metadata jar's records belong in the KRaft log
        if mdef.kind == "metadata" and mdef.api_key is not None and _is_kraft_record(name):
            out[int(mdef.api_key)] = name
    return out


def _is_kraft_record(name: str) -> bool:
    return str(MESSAGES[name].get("source", "kafka-metadata")).startswith("kafka-metadata")


def new_record(record_name: str, /, **fields: Any) -> Any:
    """An instance of a metadata (or control) record class with the given fields."""
    return schema.message_class(record_name)(**fields)


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """A decoded metadata record: its type name, the version it was written with, its fields."""

    name: str
    version: int
    message: Any


def _metadata_codec(name: str, version: int | None) -> tuple[Any, int, int]:
    """(codec, api key, version) of a metadata record type, written at `version` (default:
    what Kafka 4.1 writes)."""
    mdef = schema.message_def(name)
    if mdef.kind != "metadata":
        raise ValueError(f"{name} is not a metadata record")
    v = WRITE_VERSIONS.get(name, mdef.valid[1] if mdef.valid else 0) if version is None else version
    return schema.codec(name, v), int(mdef.api_key), v


def encode_metadata_record(name: str, message: Any, version: int | None = None) -> bytes:
    """The record value Kafka writes for ``message`` (ApiMessageAndVersion framing + body)."""
    codec, api_key, v = _metadata_codec(name, version)
    return encode_uvarint(FRAME_VERSION) + encode_uvarint(api_key) + encode_uvarint(v) + codec.encode_bytes(message)


def warm_metadata_codecs(names: Iterable[str], versions: Mapping[str, int]) -> None:
    """Compile the record classes and codecs of these metadata record types at the versions they
    are written in (`versions`, else the default). The first compilation costs a few ms of CPU:
    call this from a worker thread so that an event loop does not wait for it."""
    for name in names:
        _metadata_codec(name, versions.get(name))


def decode_metadata_record(value: bytes | memoryview) -> MetadataRecord:
    """Decode a metadata record value; ProtocolError if the framing or the body is bad.

    Unknown record types (a newer Kafka) come back with ``message`` None so that a replay can
    skip them knowingly instead of failing.
    """
    buf = bytes(value)
    frame, pos = read_uvarint(buf, 0)
    if frame != FRAME_VERSION:
        raise ProtocolError(f"unknown metadata record frame version {frame}")
    api_key, pos = read_uvarint(buf, pos)
    version, pos = read_uvarint(buf, pos)
    name = metadata_record_names().get(api_key)
    if name is None:
        return MetadataRecord(f"unknown({api_key})", version, None)
    mdef = schema.message_def(name)
    if version not in mdef.versions():
        raise ProtocolError(f"{name} version {version} is not supported")
    message, end = schema.codec(name, version).decode(buf, pos)
    if end != len(buf):
        raise ProtocolError(f"{len(buf) - end} trailing bytes after {name} v{version}")
    return MetadataRecord(name, version, message)


def encode_control_value(control_type: int, message: Any) -> bytes:
    """The value of a KRaft control record (body at version 0)."""
    return schema.codec(CONTROL_MESSAGES[int(control_type)], 0).encode_bytes(message)


def decode_control_value(control_type: int, value: bytes | memoryview) -> Any:
    """Decode a KRaft control record value (None for control types without a KRaft message)."""
    name = CONTROL_MESSAGES.get(int(control_type))
    if name is None:
        return None
    message, _end = schema.codec(name, 0).decode(bytes(value), 0)
    return message
