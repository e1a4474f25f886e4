"""The records of ``__transaction_state``, in Kafka's exact formats.

A key is an int16 key version (0) followed by ``TransactionLogKey`` (the transactional id); a
value is an int16 value version followed by ``TransactionLogValue``: version 0 while
transaction.version 0 is finalized (Kafka 3.9), the flexible version 1 with its tagged fields
from transaction.version 1 on, whatever version the client uses. A null value is a
tombstone (the transactional id expired). Each write is one uncompressed batch with one record,
no producer id, CreateTime = the coordinator's clock.
"""

from __future__ import annotations

import struct
from typing import Any

from ..logstore.java_hash import string_hash
from ..wire.records import SimpleRecord, build_batch, iter_batches
from ..wire.schema import codec, message_class

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

TransactionLogKey = message_class("TransactionLogKey")
TransactionLogValue = message_class("TransactionLogValue")
PartitionsSchema = TransactionLogValue.PartitionsSchema

_INT16 = struct.Struct(">h")


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """``Utils.abs(transactionalId.hashCode()) % n``: Kafka's Utils.abs is Math.abs except that
    Integer.MIN_VALUE maps to 0 (masking the sign bit would give another partition)."""
    h = string_hash(transactional_id)
    return 0 if h == -(2**31) else abs(h) % num_partitions


def encode_key(transactional_id: str) -> bytes:
    """Key bytes of a transactional id's record."""
    body = codec("TransactionLogKey", KEY_VERSION).encode_bytes(TransactionLogKey(transactional_id=transactional_id))
    return _INT16.pack(KEY_VERSION) + bytes(body)


def value_version(transaction_version: int) -> int:
    """TransactionVersion.transactionLogValueVersion: the flexible value version 1 from
    transaction.version 1 on (the finalized level, whatever the client's)."""
    return 1 if transaction_version >= 1 else 0


def encode_value(value: Any, version: int = VALUE_VERSION) -> bytes:
    """Value bytes of a ``TransactionLogValue``."""
    return _INT16.pack(version) + bytes(codec("TransactionLogValue", version).encode_bytes(value))


def decode_key(key: bytes | memoryview) -> str | None:
    """The transactional id of a key, None for a key version this coordinator does not know."""
    version = _INT16.unpack_from(key, 0)[0]
    if version != KEY_VERSION:
        return None
    obj, _ = codec("TransactionLogKey", version).decode(memoryview(key)[2:])
    return obj.transactional_id


def decode_value(value: bytes | memoryview | None) -> Any | None:
    """The ``TransactionLogValue`` of a value, None for a tombstone."""
    if value is None:
        return None
    version = _INT16.unpack_from(value, 0)[0]
    obj, _ = codec("TransactionLogValue", version).decode(memoryview(value)[2:])
    return obj


def partitions_field(partitions: set[tuple[str, int]]) -> list[Any]:
    """TransactionPartitions: one entry per topic with its partition ids (sorted, so writes are stable)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]


def record_batch(key: bytes, value: bytes | None, timestamp: int) -> bytearray:
    """The batch one transaction-log write appends (uncompressed, no producer id, one record)."""
    return bytearray(build_batch([SimpleRecord(value, key, (), timestamp)]))


def read_records(partition_log: Any) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of a transaction-log partition in offset order (control batches skipped)."""
    import os  # noqa: PLC0415 - only the loader reads files

    out: list[tuple[bytes, bytes | None]] = []
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        data = partition_log.read(offset, 8 * 1024 * 1024, None, True)
        if not data.slices:
            break
        buf = b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in data.slices)
        next_offset = offset
        for batch in iter_batches(buf):
            h = batch.header()
            next_offset = h.base_offset + h.last_offset_delta + 1
            if h.attributes & 0x20:
                continue
            for record in batch.records():
                if h.base_offset + record.offset_delta < offset or record.key is None:
                    continue
                out.append((bytes(record.key), None if record.value is None else bytes(record.value)))
        if next_offset <= offset:
            break
        offset = next_offset
    return out
