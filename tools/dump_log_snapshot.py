"""Producer-state ``.snapshot`` files for ``odradek dump-log``.

``odradek.logstore.producer_state.read_snapshot`` is the broker's reader; it reports problems in
its own words. DumpLogSegments prints Kafka's exact texts, and Kafka checks in a different order
(the schema read first, then the version, then the CRC), so the tool has this small reader that
follows Kafka's ``ProducerStateManager.readSnapshot`` step by step.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from ..wire.checksum import crc32c
from .dump_log_java import JavaException

__all__ = ["SnapshotEntry", "dump_producer_snapshot", "read_snapshot_kafka"]

_VERSION = 1
# (field name, struct format) of the Struct schema, in order
_HEADER_FIELDS = (("version", ">h"), ("crc", ">I"))
_ENTRY_FIELDS = (
    ("producer_id", ">q"),
    ("epoch", ">h"),
    ("last_sequence", ">i"),
    ("last_offset", ">q"),
    ("offset_delta", ">i"),
    ("timestamp", ">q"),
    ("coordinator_epoch", ">i"),
    ("current_txn_first_offset", ">q"),
)
_ENTRY_SIZE = 46


class SnapshotEntry(NamedTuple):
    """One producer entry as stored (46 bytes)."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class CorruptSnapshot(Exception):
    """Kafka's CorruptSnapshotException (caught by the tool and printed on stderr)."""


class _Underflow(Exception):
    pass


def _read(data: bytes, pos: int, fmt: str) -> tuple[int, int]:
    size = struct.calcsize(fmt)
    if pos + size > len(data):
        raise _Underflow
    return struct.unpack_from(fmt, data, pos)[0], pos + size


def read_snapshot_kafka(data: bytes) -> list[SnapshotEntry]:
    """Parse a snapshot like Kafka 3.9; raises :class:`CorruptSnapshot` with Kafka's message."""
    pos = 0
    values: dict[str, int] = {}
    for fname, fmt in _HEADER_FIELDS:
        try:
            values[fname], pos = _read(data, pos, fmt)
        except _Underflow:
            raise CorruptSnapshot(
                f"Snapshot failed schema validation: Error reading field '{fname}': java.nio.BufferUnderflowException"
            ) from None
    # producer_entries: int32 count, then the structs
    try:
        count, pos = _read(data, pos, ">i")
    except _Underflow:
        raise CorruptSnapshot(
            "Snapshot failed schema validation: Error reading field 'producer_entries': "
            "java.nio.BufferUnderflowException"
        ) from None
    if count < 0:
        raise CorruptSnapshot(
            f"Snapshot failed schema validation: Error reading field 'producer_entries': Array size {count} cannot be negative"
        )
    if count > len(data) - pos:
        raise CorruptSnapshot(
            "Snapshot failed schema validation: Error reading field 'producer_entries': "
            f"Error reading array of size {count}, only {len(data) - pos} bytes available"
        )
    entries: list[SnapshotEntry] = []
    for _ in range(count):
        vals = []
        for fname, fmt in _ENTRY_FIELDS:
            try:
                v, pos = _read(data, pos, fmt)
            except _Underflow:
                raise CorruptSnapshot(
                    "Snapshot failed schema validation: Error reading field 'producer_entries': "
                    f"Error reading field '{fname}': java.nio.BufferUnderflowException"
                ) from None
            vals.append(v)
        entries.append(SnapshotEntry(*vals))
    if values["version"] != _VERSION:
        raise CorruptSnapshot(f"Snapshot contained an unknown file version {values['version']}")
    computed = crc32c(data[6:])
    if values["crc"] != computed:
        raise CorruptSnapshot(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {values['crc']}. Computed crc: {computed}"
        )
    return entries


def _first_seq(last_seq: int, delta: int) -> int:
    # DefaultRecordBatch.decrementSequence: wraps below 0 back to Int.MAX_VALUE
    if last_seq < delta:
        return 2**31 - 1 - (delta - last_seq) + 1
    return last_seq - delta


def dump_producer_snapshot(
    file_str: str,
    println: Callable[[str], None],
    write: Callable[[str], None],
    err: Callable[[str], None],
) -> None:
    """Kafka's ``dumpProducerIdSnapshot``: one line per entry, or the corruption message on stderr."""
    try:
        with open(file_str, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise JavaException("java.nio.file.NoSuchFileException", file_str) from None
    except IsADirectoryError:
        raise JavaException("java.io.IOException", "Is a directory") from None
    try:
        entries = read_snapshot_kafka(data)
    except CorruptSnapshot as e:
        err(str(e))
        return
    for e in entries:
        txn = "OptionalLong.empty" if e.current_txn_first_offset < 0 else f"OptionalLong[{e.current_txn_first_offset}]"
        write(
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp} "
        )
        if e.last_offset >= 0:
            write(
                f"firstSequence: {_first_seq(e.last_sequence, e.offset_delta)} lastSequence: {e.last_sequence} "
                f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
            )
        println("")
