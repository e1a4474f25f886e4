"""Kafka record batches (magic v2), sans-IO: zero-copy views, scanning, decoding, building.

Two forms of the same data, and the names keep them apart:

* **deflated** – a batch as it is stored in a ``.log`` file and sent over the wire: the 61-byte
  header plus the (possibly compressed) records block. :class:`RecordBatch` is a zero-copy view of
  that form; the broker's hot paths (produce append, fetch, recovery scans) only ever touch it:
  header fields, CRC, in-place patches of baseOffset / partitionLeaderEpoch / maxTimestamp.
  :func:`iter_batches` and :func:`parse_batch_header` scan deflated bytes without decoding.
* **inflated** – the decoded :class:`Record` objects (offset, timestamp, key, value, headers), got
  from :meth:`RecordBatch.records` after decompressing the records block once. Only consumers of
  the *contents* (group/transaction coordinators, dump-log, tests) go there.

Layout and rules follow ``DefaultRecordBatch`` / ``DefaultRecord`` / ``MemoryRecordsBuilder`` /
``FileLogInputStream`` (see docs: kafka-log-format.md §2.2, §2.3, §6). Every malformed input raises
:class:`CorruptRecordError` (record-structure problems the subclass :class:`InvalidRecordError`,
matching Kafka's ``CORRUPT_MESSAGE`` vs ``INVALID_RECORD``); nothing else escapes, and no decoder
allocates more than its input plus the bounded inflated size.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple, Protocol

from .checksum import crc32c
from .compression import (
    DEFAULT_MAX_INFLATED_BYTES,
    CompressionType,
    CorruptRecordError,
    InvalidRecordError,
    compress,
    decompress,
)
from .primitives import write_varint, write_varlong
from .records_types import FileSlice  # re-exported: architecture.md names wire.records.FileSlice

if TYPE_CHECKING:
    from collections.abc import Buffer


__all__ = [
    "BATCH_OVERHEAD",
    "DEFAULT_MAX_INFLATED_BYTES",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LOG_OVERHEAD",
    "MIN_ENTRY_SIZE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "CompressionType",
    "ControlRecordType",
    "CorruptRecordError",
    "EndTxnMarker",
    "FileSlice",
    "InvalidRecordError",
    "LegacyMessage",
    "Record",
    "RecordBatch",
    "RecordLike",
    "RecordsSummary",
    "SimpleRecord",
    "TimestampType",
    "build_batch",
    "build_control_batch",
    "build_end_txn_marker_batch",
    "control_record_key",
    "end_txn_marker_value",
    "increment_sequence",
    "iter_batches",
    "iter_legacy_messages",
    "iter_log_entries",
    "legacy_inner_messages",
    "next_batch_size",
    "parse_batch_header",
    "parse_control_record_key",
    "parse_end_txn_marker",
]

# ---------------------------------------------------------------------------------------------
# constants

LOG_OVERHEAD = 12  #: baseOffset + batchLength: the part not counted in batchLength
HEADER_SIZE_UP_TO_MAGIC = 17  #: FileLogInputStream reads this much before deciding anything
BATCH_OVERHEAD = 61  #: v2 batch header size = smallest valid v2 batch
MIN_ENTRY_SIZE = 14  #: smallest declared batchLength accepted while scanning (LegacyRecord v0 overhead)
MAGIC_V2 = 2

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
_INT32_MAX = 0x7FFFFFFF

# attribute bits
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40

# header field offsets
_OFF_BASE_OFFSET = 0
_OFF_LENGTH = 8
_OFF_LEADER_EPOCH = 12
_OFF_MAGIC = 16
_OFF_CRC = 17
_OFF_ATTRIBUTES = 21
_OFF_LAST_OFFSET_DELTA = 23
_OFF_BASE_TIMESTAMP = 27
_OFF_MAX_TIMESTAMP = 35
_OFF_PRODUCER_ID = 43
_OFF_PRODUCER_EPOCH = 51
_OFF_BASE_SEQUENCE = 53
_OFF_RECORD_COUNT = 57

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_OVERHEAD
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")
_H = struct.Struct(">h")
# attributes .. count: the CRC-covered part of the header, packed in one go by the builder
_TAIL = struct.Struct(">hiqqqhii")


class TimestampType(IntEnum):
    """Timestamp type of a batch (attribute bit 3); ``NO_TIMESTAMP_TYPE`` only for magic v0."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def display_name(self) -> str:
        """Kafka's name (``CreateTime``, ``LogAppendTime``, ``NoTimestampType``)."""
        return _TS_NAMES[self]


_TS_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: add, wrapping from Int.MAX_VALUE back to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _as_bytes_view(buf: Buffer) -> memoryview:
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


# ---------------------------------------------------------------------------------------------
# header-only parsing (no record decoding, no CRC)


class _BatchHeaderFields(NamedTuple):
    """The 13 fields of a v2 batch header, in file order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


class _BatchDerived:
    """What follows from a v2 batch header's fields; shared by :class:`BatchHeader` and :class:`RecordBatch`."""

    __slots__ = ()
    # provided by the subclass
    base_offset: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    producer_id: int
    base_sequence: int

    @property
    def last_offset(self) -> int:
        """Offset of the last record: baseOffset + lastOffsetDelta."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset after this batch (the log end offset once it is appended)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        """Codec of the records block; raises CorruptRecordError for ids 5-7."""
        return _codec(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        """CreateTime or LogAppendTime (attribute bit 3)."""
        return TimestampType.LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4."""
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """Attribute bit 5: the batch holds control records (txn markers, KRaft control records)."""
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        """Attribute bit 6: baseTimestamp holds the cleaner's delete horizon."""
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (= baseTimestamp) if attribute bit 6 is set, else None."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None

    @property
    def has_producer_id(self) -> bool:
        """True when producerId != -1 (idempotent or transactional batch)."""
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, with Kafka's wrap at Int.MAX_VALUE; -1 without a base sequence."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(base, self.last_offset_delta)


class BatchHeader(_BatchHeaderFields, _BatchDerived):
    """The 61 header bytes of a v2 batch, decoded in one ``struct`` call.

    For scanning files with ``os.pread`` (read 61 bytes, parse, skip ``size_in_bytes``) and for the
    dump tool. Nothing is validated here; use :meth:`RecordBatch.ensure_valid` for that.
    """

    __slots__ = ()

    @property
    def size_in_bytes(self) -> int:
        """Whole batch size on disk: batchLength + 12."""
        return self.batch_length + LOG_OVERHEAD


def _codec(attributes: int) -> CompressionType:
    try:
        return CompressionType(attributes & _CODEC_MASK)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {attributes & _CODEC_MASK}") from None


def parse_batch_header(data: Buffer, offset: int = 0) -> BatchHeader:
    """Decode the 61-byte v2 header at ``data[offset:]`` (e.g. the result of ``os.pread(fd, 61, pos)``).

    Raises CorruptRecordError if fewer than 61 bytes are there. Does not check magic or CRC.
    """
    mv = _as_bytes_view(data)
    if len(mv) - offset < BATCH_OVERHEAD or offset < 0:
        raise CorruptRecordError(f"need {BATCH_OVERHEAD} bytes for a batch header, got {max(0, len(mv) - offset)}")
    return BatchHeader._make(_HEADER.unpack_from(mv, offset))


def next_batch_size(prefix: Buffer, available: int) -> int | None:
    """Size of the batch starting at a file position, by ``FileLogInputStream``'s rules.

    ``prefix`` = the bytes read at that position (at least the first 17 if the file has them),
    ``available`` = bytes from that position to the end of the file/region.
    Returns None for "end of log" (a tail of 17 bytes or less, or a declared size reaching past the
    end: an incomplete write that recovery cuts off), else the whole batch size (batchLength + 12).
    Raises CorruptRecordError when the declared batchLength is < 14.
    """
    if available <= HEADER_SIZE_UP_TO_MAGIC:
        return None
    mv = _as_bytes_view(prefix)
    if len(mv) < LOG_OVERHEAD:
        raise CorruptRecordError("prefix shorter than the 12-byte log overhead")
    _, length = _PREFIX.unpack_from(mv, 0)
    if length < MIN_ENTRY_SIZE:
        raise CorruptRecordError(f"found record size {length} smaller than minimum record overhead ({MIN_ENTRY_SIZE})")
    size = length + LOG_OVERHEAD
    if size > available:
        return None
    return size


# ---------------------------------------------------------------------------------------------
# inflated records


class RecordLike(Protocol):
    """What :func:`build_batch` needs from a record: :class:`Record` and :class:`SimpleRecord` both fit."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...
    @property
    def timestamp(self) -> int: ...


class SimpleRecord(NamedTuple):
    """A record to write: input of :func:`build_batch` (Kafka's ``SimpleRecord``)."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int = NO_TIMESTAMP


class Record:
    """One inflated (decoded) record of a v2 batch.

    ``timestamp`` is the batch maxTimestamp for LogAppendTime batches (what consumers see),
    else baseTimestamp + timestampDelta. ``sequence`` is baseSequence + offsetDelta (wrapping) or -1.
    ``size_in_bytes`` counts the length varint too (Kafka's ``Record.sizeInBytes``).
    """

    __slots__ = (
        "attributes",
        "headers",
        "key",
        "offset",
        "offset_delta",
        "sequence",
        "size_in_bytes",
        "timestamp",
        "timestamp_delta",
        "value",
    )

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        sequence: int,
        size_in_bytes: int,
        attributes: int,
        offset_delta: int,
        timestamp_delta: int,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.sequence = sequence
        self.size_in_bytes = size_in_bytes
        self.attributes = attributes
        self.offset_delta = offset_delta
        self.timestamp_delta = timestamp_delta

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={_short(self.value)}, headers={self.headers!r}, sequence={self.sequence})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


def _short(v: bytes | None) -> str:
    if v is None or len(v) <= 32:
        return repr(v)
    return repr(v[:32]) + f"...({len(v)} bytes)"


class RecordsSummary(NamedTuple):
    """What the produce path needs from a batch's records, got by :meth:`RecordBatch.scan_records`
    without building Record objects.

    ``offsets_consecutive``: the offset deltas are exactly 0..n-1 (LogValidator rebuilds a
    compressed batch otherwise). ``max_timestamp``/``min_timestamp`` are over the record timestamps
    (baseTimestamp + delta, regardless of the timestamp type); NO_TIMESTAMP when there are no records.
    ``offset_delta_of_max_timestamp`` is the offset delta of the first record with the max timestamp.
    """

    record_count: int
    min_timestamp: int
    max_timestamp: int
    offset_delta_of_max_timestamp: int
    offsets_consecutive: bool
    has_null_key: bool
    inflated_size: int


# zig-zag varints. Kafka's readVarint accepts at most 5 bytes, readVarlong at most 10; more is
# an InvalidRecordException. IndexError on a short buffer is turned into one by the callers.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise InvalidRecordError("varint is too long")
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _varlong(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varlong is too long")
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


#: The zig-zag varlong reader of the record format, for other record scanners (the log cleaner);
#: raises InvalidRecordError when too long, IndexError on a short buffer.
read_record_varlong = _varlong


def _check_count(count: int, block_len: int) -> None:
    if count < 0:
        raise InvalidRecordError(f"found invalid record count {count}")
    # Every record takes at least 7 bytes (length, attributes, 2 deltas, key, value, header count
    # varints), so a bigger count cannot be honest; refusing early avoids a long futile loop.
    if count * 7 > block_len:
        raise InvalidRecordError(f"record count {count} does not fit in a {block_len}-byte records block")


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    base_sequence: int,
    log_append_time: int | None,
) -> Iterator[Record]:
    """Generator over the records in ``data`` (the whole inflated records block)."""
    _check_count(count, len(data))
    pos = 0
    end = len(data)
    varint = _varint
    for _ in range(count):
        start = pos
        try:
            size, pos = varint(data, pos)
            body_start = pos
            if size < 0 or size > end - pos:
                raise InvalidRecordError(f"invalid record size {size}: only {end - pos} bytes are available")
            rec_end = pos + size
            attributes = data[pos]
            pos += 1
            ts_delta, pos = _varlong(data, pos)
            # 1-byte varints inlined (the usual case), as in _scan_records
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = varint(data, pos)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                klen, pos = varint(data, pos)
            if klen < 0:
                key = None
            else:
                if klen > rec_end - pos:
                    raise InvalidRecordError("record key runs past the record")
                key = data[pos : pos + klen]
                pos += klen
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                vlen, pos = varint(data, pos)
            if vlen < 0:
                value = None
            else:
                if vlen > rec_end - pos:
                    raise InvalidRecordError("record value runs past the record")
                value = data[pos : pos + vlen]
                pos += vlen
            headers: list[tuple[str, bytes | None]] = []
            if data[pos] == 0:
                nh = 0
                pos += 1
            else:
                nh, pos = varint(data, pos)
            if nh < 0:
                raise InvalidRecordError(f"found invalid number of record headers {nh}")
            for _h in range(nh):
                hk, pos = varint(data, pos)
                if hk < 0:
                    raise InvalidRecordError(f"invalid negative header key size {hk}")
                if hk > rec_end - pos:
                    raise InvalidRecordError("header key runs past the record")
                # Java decodes with new String(bytes, UTF_8): malformed input becomes U+FFFD.
                hkey = data[pos : pos + hk].decode("utf-8", "replace")
                pos += hk
                hv, pos = varint(data, pos)
                if hv < 0:
                    hval = None
                else:
                    if hv > rec_end - pos:
                        raise InvalidRecordError("header value runs past the record")
                    hval = data[pos : pos + hv]
                    pos += hv
                headers.append((hkey, hval))
        except IndexError:
            raise InvalidRecordError("found invalid record structure (truncated record)") from None
        if pos != rec_end:
            raise InvalidRecordError(
                f"invalid record size: expected to read {size} bytes in record payload, but instead read {pos - body_start}"
            )
        yield Record(
            base_offset + off_delta,
            log_append_time if log_append_time is not None else base_timestamp + ts_delta,
            key,
            value,
            headers,
            increment_sequence(base_sequence, off_delta) if base_sequence >= 0 else NO_SEQUENCE,
            pos - start,
            attributes,
            off_delta,
            ts_delta,
        )
    if pos != end:
        raise InvalidRecordError(f"incorrect declared batch size, {end - pos} bytes of records still remaining")


def _scan_records(data: bytes, count: int, base_timestamp: int) -> RecordsSummary:
    """Validate the structure of every record like :func:`_decode_records`, without slicing.

    The single-byte varint case is inlined (``b < 0x80``): offset deltas, key/value lengths and
    header counts are almost always small, and a function call per field dominates otherwise.
    """
    _check_count(count, len(data))
    pos = 0
    end = len(data)
    varint = _varint
    varlong = _varlong
    min_delta = max_delta = 0
    max_delta_off = -1
    consecutive = True
    null_key = False
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = varint(data, pos)
            if size < 0 or size > end - pos:
                raise InvalidRecordError(f"invalid record size {size}: only {end - pos} bytes are available")
            rec_end = pos + size
            pos += 1  # attributes
            ts_delta, pos = varlong(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = varint(data, pos)
            if off_delta != i:
                consecutive = False
            if i == 0:
                min_delta = max_delta = ts_delta
                max_delta_off = off_delta
            elif ts_delta > max_delta:
                max_delta = ts_delta
                max_delta_off = off_delta
            elif ts_delta < min_delta:
                min_delta = ts_delta
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                klen, pos = varint(data, pos)
            if klen < 0:
                null_key = True
            else:
                pos += klen
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                vlen, pos = varint(data, pos)
            if vlen > 0:
                pos += vlen
            if pos >= rec_end:
                # the header count is still to come, so the fields must end before rec_end
                raise InvalidRecordError("record key/value runs past the record")
            b = data[pos]
            if b == 0:
                pos += 1
            else:
                nh, pos = varint(data, pos)
                if nh < 0:
                    raise InvalidRecordError(f"found invalid number of record headers {nh}")
                for _h in range(nh):
                    hk, pos = varint(data, pos)
                    if hk < 0:
                        raise InvalidRecordError(f"invalid negative header key size {hk}")
                    pos += hk
                    hv, pos = varint(data, pos)
                    if hv > 0:
                        pos += hv
                    if pos > rec_end:
                        raise InvalidRecordError("record header runs past the record")
            if pos != rec_end:
                raise InvalidRecordError("invalid record size: record payload size does not match its fields")
    except IndexError:
        raise InvalidRecordError("found invalid record structure (truncated record)") from None
    if pos != end:
        raise InvalidRecordError(f"incorrect declared batch size, {end - pos} bytes of records still remaining")
    if count == 0:
        return RecordsSummary(0, NO_TIMESTAMP, NO_TIMESTAMP, -1, True, False, end)
    return RecordsSummary(
        count, base_timestamp + min_delta, base_timestamp + max_delta, max_delta_off, consecutive, null_key, end
    )


# ---------------------------------------------------------------------------------------------
# the deflated batch view


class RecordBatch(_BatchDerived):
    """Zero-copy view of one deflated magic-v2 record batch.

    ``RecordBatch(buf, position=0)`` views the batch starting at ``buf[position]``, cut to its
    declared size (batchLength + 12); the bytes are not copied. Header fields are read in place on
    each access. The ``set_*`` patches need a writable buffer (``bytearray``, writable
    ``memoryview``/``mmap``); on read-only memory they raise ``TypeError``.

    Construction raises :class:`CorruptRecordError` if fewer than 61 bytes are there, if the
    declared size is below 61 or runs past the buffer. It does **not** check magic or CRC:
    call :meth:`ensure_valid` (or :meth:`is_valid`) for that, as Kafka does.
    """

    __slots__ = ("_inflated", "_mv", "position")

    def __init__(self, buf: Buffer, position: int = 0) -> None:
        mv = _as_bytes_view(buf)
        avail = len(mv) - position
        if position < 0 or avail < BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt (only {max(avail, 0)} bytes, less than the {BATCH_OVERHEAD}-byte overhead)"
            )
        (length,) = _I.unpack_from(mv, position + _OFF_LENGTH)
        size = length + LOG_OVERHEAD
        if size < BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt (the size {size} is smaller than the minimum allowed overhead {BATCH_OVERHEAD})"
            )
        if size > avail:
            raise CorruptRecordError(f"record batch declares {size} bytes but only {avail} are available")
        self._mv = mv[position : position + size]
        #: Byte position of the batch inside the buffer it was found in (for dump/index code).
        self.position = position
        self._inflated: bytes | None = None

    # -- raw access ---------------------------------------------------------------------------

    @property
    def buffer(self) -> memoryview:
        """The batch bytes (a view of the caller's buffer, exactly size_in_bytes long)."""
        return self._mv

    def __bytes__(self) -> bytes:
        return self._mv.tobytes()

    def __len__(self) -> int:
        return len(self._mv)

    def __repr__(self) -> str:
        h = self.header()
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, count={h.record_count}, "
            f"size={h.size_in_bytes}, codec={h.compression.display_name if h.attributes & 7 < 5 else '?'}, "
            f"magic={h.magic})"
        )

    def header(self) -> BatchHeader:
        """All 13 header fields at once (one struct call)."""
        return BatchHeader._make(_HEADER.unpack_from(self._mv, 0))

    # -- header fields ------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        """Offset of the first record (bytes 0-7)."""
        return _Q.unpack_from(self._mv, _OFF_BASE_OFFSET)[0]

    @property
    def batch_length(self) -> int:
        """Declared batchLength (size - 12)."""
        return _I.unpack_from(self._mv, _OFF_LENGTH)[0]

    @property
    def partition_leader_epoch(self) -> int:
        """Leader epoch set by the leader that appended the batch (not CRC-covered)."""
        return _I.unpack_from(self._mv, _OFF_LEADER_EPOCH)[0]

    @property
    def magic(self) -> int:
        """Format version byte (2 for every batch this class handles)."""
        return _b(self._mv[_OFF_MAGIC])

    @property
    def crc(self) -> int:
        """Stored CRC-32C, unsigned."""
        return _U.unpack_from(self._mv, _OFF_CRC)[0]

    @property
    def attributes(self) -> int:
        """Raw int16 attributes."""
        return _H.unpack_from(self._mv, _OFF_ATTRIBUTES)[0]

    @property
    def last_offset_delta(self) -> int:
        """lastOffset - baseOffset as declared in the header."""
        return _I.unpack_from(self._mv, _OFF_LAST_OFFSET_DELTA)[0]

    @property
    def base_timestamp(self) -> int:
        """Timestamp of the first record (or the delete horizon when that flag is set)."""
        return _Q.unpack_from(self._mv, _OFF_BASE_TIMESTAMP)[0]

    @property
    def max_timestamp(self) -> int:
        """Max record timestamp (CreateTime) or the broker's append time (LogAppendTime)."""
        return _Q.unpack_from(self._mv, _OFF_MAX_TIMESTAMP)[0]

    @property
    def producer_id(self) -> int:
        """Producer id, -1 if none."""
        return _Q.unpack_from(self._mv, _OFF_PRODUCER_ID)[0]

    @property
    def producer_epoch(self) -> int:
        """Producer epoch, -1 if none."""
        return _H.unpack_from(self._mv, _OFF_PRODUCER_EPOCH)[0]

    @property
    def base_sequence(self) -> int:
        """Sequence of the first record, -1 if none."""
        return _I.unpack_from(self._mv, _OFF_BASE_SEQUENCE)[0]

    @property
    def record_count(self) -> int:
        """Number of records declared in the header."""
        return _I.unpack_from(self._mv, _OFF_RECORD_COUNT)[0]

    # -- derived ------------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        """Whole batch size (batchLength + 12)."""
        return len(self._mv)

    # -- integrity ----------------------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC-32C of bytes [21, end) (attributes to the end; the leader epoch is not covered)."""
        return crc32c(self._mv[_OFF_ATTRIBUTES:])

    def is_valid(self) -> bool:
        """Size >= 61 and stored CRC == computed CRC (what DumpLogSegments prints as ``isvalid``)."""
        return len(self._mv) >= BATCH_OVERHEAD and self.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        """Kafka's ``ensureValid`` plus the magic check: raise CorruptRecordError unless magic is 2,
        the size is at least 61 and the CRC matches."""
        magic = self.magic
        if magic != MAGIC_V2:
            raise CorruptRecordError(f"invalid magic {magic} for a v2 record batch")
        if len(self._mv) < BATCH_OVERHEAD:
            raise CorruptRecordError(f"record batch is corrupt (size {len(self._mv)} < {BATCH_OVERHEAD})")
        stored = self.crc
        computed = self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(f"record is corrupt (stored crc = {stored}, computed crc = {computed})")

    # -- in-place patches (leader append path) ------------------------------------------------

    def set_base_offset(self, base_offset: int) -> None:
        """Overwrite baseOffset (not CRC-covered, so the CRC stays valid)."""
        _Q.pack_into(self._mv, _OFF_BASE_OFFSET, base_offset)

    def set_last_offset(self, last_offset: int) -> None:
        """Kafka's ``setLastOffset``: baseOffset := last_offset - lastOffsetDelta."""
        self.set_base_offset(last_offset - self.last_offset_delta)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Overwrite partitionLeaderEpoch (not CRC-covered)."""
        _I.pack_into(self._mv, _OFF_LEADER_EPOCH, epoch)

    def set_max_timestamp(self, max_timestamp: int, log_append_time: bool) -> None:
        """Kafka's ``setMaxTimestamp``: set the timestamp-type bit (set for LogAppendTime, cleared
        for CreateTime) and maxTimestamp, then recompute the CRC. A no-op (CRC untouched) when both
        already have these values, as in Kafka."""
        attrs = self.attributes
        if bool(attrs & _TIMESTAMP_TYPE_BIT) == log_append_time and self.max_timestamp == max_timestamp:
            return
        # Kafka recomputes the attributes from their parts, so unused bits 7-15 come out cleared.
        new_attrs = attrs & (_CODEC_MASK | _TRANSACTIONAL_BIT | _CONTROL_BIT | _DELETE_HORIZON_BIT)
        if log_append_time:
            new_attrs |= _TIMESTAMP_TYPE_BIT
        _H.pack_into(self._mv, _OFF_ATTRIBUTES, new_attrs)
        _Q.pack_into(self._mv, _OFF_MAX_TIMESTAMP, max_timestamp)
        _U.pack_into(self._mv, _OFF_CRC, self.compute_crc())

    # -- records (inflated) -------------------------------------------------------------------

    def inflated_block(self, max_inflated_size: int = DEFAULT_MAX_INFLATED_BYTES) -> bytes:
        """The inflated records block (decompressed once and cached; a fresh copy when uncompressed).

        Raises CorruptRecordError if decompression fails or exceeds ``max_inflated_size``.
        """
        if self._inflated is not None:
            return self._inflated
        raw = self._mv[BATCH_OVERHEAD:]
        codec = self.compression
        if codec is CompressionType.NONE:
            # A copy (bytes index faster than memoryview), not cached: the view stays the only
            # long-lived reference to uncompressed data.
            return raw.tobytes()
        self._inflated = decompress(codec, raw, max_inflated_size)
        return self._inflated

    def records(self, max_inflated_size: int = DEFAULT_MAX_INFLATED_BYTES) -> Iterator[Record]:
        """Lazily decode the records (decompressing the block once, bounded by ``max_inflated_size``).

        Raises CorruptRecordError / InvalidRecordError while iterating if the count, sizes or fields
        are inconsistent, including bytes left over after the declared number of records.
        """
        data = self.inflated_block(max_inflated_size)
        h = self.header()
        lat = h.max_timestamp if h.attributes & _TIMESTAMP_TYPE_BIT else None
        return _decode_records(data, h.record_count, h.base_offset, h.base_timestamp, h.base_sequence, lat)

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def scan_records(self, max_inflated_size: int = DEFAULT_MAX_INFLATED_BYTES) -> RecordsSummary:
        """Validate every record's structure and summarise timestamps/offset deltas/null keys,
        without materialising Record objects (the produce validation path)."""
        data = self.inflated_block(max_inflated_size)
        h = self.header()
        return _scan_records(data, h.record_count, h.base_timestamp)

    def validate_client_batch(self) -> None:
        """Header rules LogValidator applies to a v2 batch from a client, before assigning offsets.

        Raises CorruptRecordError for magic/size/CRC problems (``CORRUPT_MESSAGE``) and
        InvalidRecordError for rule violations (``INVALID_RECORD``): control batch from a client,
        count <= 0, lastOffsetDelta + 1 != count, a producer id without a base sequence, a
        transactional batch without a producer id.
        """
        self.ensure_valid()
        h = self.header()
        if h.attributes & _CONTROL_BIT:
            raise InvalidRecordError("clients are not allowed to write control records")
        if h.record_count <= 0:
            raise InvalidRecordError(f"invalid reported count for record batch: {h.record_count}")
        if h.last_offset_delta + 1 != h.record_count:
            raise InvalidRecordError(
                f"inconsistent batch offset range ({h.last_offset_delta + 1}) and record count ({h.record_count})"
            )
        if h.producer_id > NO_PRODUCER_ID and h.base_sequence < 0:
            raise InvalidRecordError(f"invalid sequence number {h.base_sequence} for a batch with producer id {h.producer_id}")
        if h.attributes & _TRANSACTIONAL_BIT and h.producer_id <= NO_PRODUCER_ID:
            raise InvalidRecordError("transactional batch without a producer id")


def _b(x: int) -> int:
    # memoryview item of format 'B' is unsigned; magic is a signed byte in Kafka
    return x - 256 if x > 127 else x


def iter_batches(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
    """Iterate over back-to-back deflated batches in ``buf[start:end]`` without decoding them.

    Follows ``FileLogInputStream``: stops (no error) at a tail of 17 bytes or less or at a batch
    whose declared size runs past the end (an incomplete write); raises CorruptRecordError for a
    declared batchLength < 14, or for a batch too small to be v2 (< 61 bytes) or with magic < 2
    (read those with :func:`iter_legacy_messages`); such errors carry the batch position in ``buf``
    as ``error.offset`` (where recovery truncates). Each batch's ``position`` is its offset in
    ``buf``; the caller knows where scanning stopped from the last ``position + size_in_bytes``.
    CRCs are not checked here: call :meth:`RecordBatch.ensure_valid` where Kafka would.
    """
    mv = _as_bytes_view(buf)
    stop = len(mv) if end is None else min(end, len(mv))
    pos = start
    while (size := _entry_size(mv, pos, stop)) is not None:
        magic = mv[pos + _OFF_MAGIC]
        if magic < MAGIC_V2:
            raise CorruptRecordError(f"legacy magic {magic} batch; use iter_legacy_messages", offset=pos)
        if size < BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt (the size {size} is smaller than the minimum allowed overhead "
                f"{BATCH_OVERHEAD})",
                offset=pos,
            )
        yield RecordBatch(mv[:stop], pos)
        pos += size


# ---------------------------------------------------------------------------------------------
# control records


class ControlRecordType(IntEnum):
    """Type field of a control record key (``ControlRecordType.java``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


def control_record_key(control_type: ControlRecordType | int, version: int = 0) -> bytes:
    """Encode a control record key: int16 version + int16 type."""
    return _CONTROL_KEY.pack(version, int(control_type))


def parse_control_record_key(key: Buffer | None) -> tuple[int, ControlRecordType | int]:
    """Decode a control record key to (version, type); unknown type ids come back as plain ints.

    Raises InvalidRecordError if the key is missing or shorter than 4 bytes.
    """
    if key is None or len(memoryview(key)) < 4:
        raise InvalidRecordError("invalid control record key: must have at least 4 bytes")
    version, type_id = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid version {version} in control record key")
    try:
        return version, ControlRecordType(type_id)
    except ValueError:
        return version, type_id


class EndTxnMarker(NamedTuple):
    """A transaction marker (COMMIT/ABORT control record), Kafka's ``EndTransactionMarker``."""

    control_type: ControlRecordType
    coordinator_epoch: int
    version: int = 0


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    """Encode an end-txn marker value: int16 version + int32 coordinatorEpoch."""
    return _END_TXN_VALUE.pack(version, coordinator_epoch)


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    """Decode a COMMIT/ABORT control record; InvalidRecordError for anything else or a short value."""
    _, ctype = parse_control_record_key(record.key)
    if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {ctype} is not a transaction marker")
    value = record.value
    if value is None or len(value) < 6:
        raise InvalidRecordError("invalid end transaction marker value: must have at least 6 bytes")
    version, epoch = _END_TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid version {version} for end transaction marker")
    return EndTxnMarker(ControlRecordType(ctype), epoch, version)


# ---------------------------------------------------------------------------------------------
# builder


def _encode_record(out: bytearray, r: RecordLike, offset_delta: int, ts_delta: int) -> None:
    # DefaultRecord.writeTo: length, attributes (0), timestampDelta (varlong), offsetDelta, key,
    # value, header count, headers; lengths -1 for null.
    body = bytearray(b"\x00")
    write_varlong(body, ts_delta)
    write_varint(body, offset_delta)
    key = r.key
    if key is None:
        body.append(1)  # zig-zag(-1)
    else:
        write_varint(body, len(key))
        body += key
    value = r.value
    if value is None:
        body.append(1)
    else:
        write_varint(body, len(value))
        body += value
    headers = r.headers or ()
    write_varint(body, len(headers))
    for hk, hv in headers:
        kb = hk.encode("utf-8")
        write_varint(body, len(kb))
        body += kb
        if hv is None:
            body.append(1)
        else:
            write_varint(body, len(hv))
            body += hv
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[RecordLike],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Build one deflated v2 batch the way ``MemoryRecordsBuilder`` lays it out.

    baseTimestamp = the first record's timestamp (or ``delete_horizon_ms`` with attribute bit 6),
    timestamp deltas relative to it, offset deltas 0..n-1 (or ``offset_deltas``, e.g. for a
    compacted rewrite), lastOffsetDelta = the last delta, maxTimestamp = the largest record
    timestamp, or ``log_append_time`` for LogAppendTime batches (whose record timestamps are
    written as given). Records need ``key``, ``value``, ``headers``, ``timestamp`` (see
    :class:`SimpleRecord`). At least one record is required.
    """
    recs = list(records)
    if not recs:
        raise ValueError("a record batch needs at least one record")
    if offset_deltas is None:
        deltas: Sequence[int] = range(len(recs))
    else:
        if len(offset_deltas) != len(recs):
            raise ValueError("offset_deltas must have one entry per record")
        deltas = offset_deltas
    first_ts = recs[0].timestamp
    base_ts = first_ts if delete_horizon_ms is None else delete_horizon_ms
    block = bytearray()
    max_ts = NO_TIMESTAMP
    for r, d in zip(recs, deltas, strict=True):
        ts = r.timestamp
        if ts > max_ts:
            max_ts = ts
        _encode_record(block, r, d, ts - base_ts)
    attrs = int(compression) & _CODEC_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= _TIMESTAMP_TYPE_BIT
        if log_append_time is None:
            raise ValueError("log_append_time is required for LogAppendTime batches")
        max_ts = log_append_time
    if is_transactional:
        attrs |= _TRANSACTIONAL_BIT
    if is_control:
        attrs |= _CONTROL_BIT
    if delete_horizon_ms is not None:
        attrs |= _DELETE_HORIZON_BIT
    payload = compress(compression, block, compression_level) if attrs & _CODEC_MASK else bytes(block)
    tail = _TAIL.pack(
        attrs, deltas[-1], base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(recs)
    )
    crc = crc32c(payload, crc32c(tail))
    length = BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    head = struct.pack(">qiibI", base_offset, length, partition_leader_epoch, MAGIC_V2, crc)
    return head + tail + payload


def build_control_batch(
    control_type: ControlRecordType | int,
    value: bytes | None,
    *,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    is_transactional: bool = False,
    version: int = 0,
) -> bytes:
    """Build a single-record control batch (KRaft control records, leader change, txn markers)."""
    rec = SimpleRecord(value=value, key=control_record_key(control_type, version), timestamp=timestamp)
    return build_batch(
        [rec],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
    )


def build_end_txn_marker_batch(
    marker: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Build the COMMIT/ABORT marker batch a broker writes for a transaction
    (``MemoryRecords.withEndTransactionMarker``: transactional control batch, one record, no sequence)."""
    if marker not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError("an end-txn marker is ABORT or COMMIT")
    return build_control_batch(
        marker,
        end_txn_marker_value(coordinator_epoch),
        timestamp=timestamp,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
    )


# ---------------------------------------------------------------------------------------------
# legacy message sets (magic v0/v1), read only


class LegacyMessage(NamedTuple):
    """One magic v0/v1 message (a "log entry"); for a compressed wrapper, one inner message.

    ``offset`` is absolute. ``timestamp`` is -1 (NO_TIMESTAMP) for v0; for inner messages of a v1
    LogAppendTime wrapper it is the wrapper's timestamp. ``position`` is the entry's byte position
    in the outer buffer (inner messages carry their wrapper's position). ``is_valid`` = stored CRC
    (CRC-32 over magic..end) matches.
    """

    offset: int
    position: int
    size_in_bytes: int
    magic: int
    crc: int
    attributes: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    is_valid: bool

    @property
    def compression(self) -> CompressionType:
        """Codec (bits 0-2 of the attributes)."""
        return _codec(self.attributes)


_LEGACY_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes (18 bytes, + key/value)
_LEGACY_TS = struct.Struct(">q")


def _legacy_entry_at(mv: memoryview, pos: int, size: int) -> LegacyMessage:
    """Decode the v0/v1 entry of ``size`` bytes (already bounds-checked) at ``pos``."""
    offset, _, crc, magic, attrs = _LEGACY_V0.unpack_from(mv, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"invalid magic {magic} in a legacy message set", offset=pos)
    p = pos + 18
    end = pos + size
    ts = NO_TIMESTAMP
    tt = TimestampType.NO_TIMESTAMP_TYPE
    if magic == 1:
        if end - p < 8:
            raise CorruptRecordError("truncated v1 message", offset=pos)
        (ts,) = _LEGACY_TS.unpack_from(mv, p)
        p += 8
        tt = TimestampType.LOG_APPEND_TIME if attrs & _TIMESTAMP_TYPE_BIT else TimestampType.CREATE_TIME
    key, p = _legacy_bytes(mv, p, end)
    value, p = _legacy_bytes(mv, p, end)
    if p != end:
        raise CorruptRecordError("legacy message size does not match its key and value", offset=pos)
    valid = (zlib.crc32(mv[pos + 16 : end]) & 0xFFFFFFFF) == crc
    return LegacyMessage(offset, pos, size, magic, crc, attrs & 0xFF, ts, tt, key, value, valid)


def _entry_size(mv: memoryview, pos: int, stop: int) -> int | None:
    # FileLogInputStream's framing, shared by both formats
    if stop - pos <= HEADER_SIZE_UP_TO_MAGIC:
        return None
    _, length = _PREFIX.unpack_from(mv, pos)
    if length < MIN_ENTRY_SIZE:
        raise CorruptRecordError(
            f"found record size {length} smaller than minimum record overhead ({MIN_ENTRY_SIZE})", offset=pos
        )
    size = length + LOG_OVERHEAD
    return None if size > stop - pos else size


def _legacy_entries(mv: memoryview, start: int, stop: int) -> Iterator[LegacyMessage]:
    pos = start
    while (size := _entry_size(mv, pos, stop)) is not None:
        yield _legacy_entry_at(mv, pos, size)
        pos += size


def _legacy_bytes(mv: memoryview, p: int, end: int) -> tuple[bytes | None, int]:
    if end - p < 4:
        raise CorruptRecordError("truncated legacy message")
    (n,) = _I.unpack_from(mv, p)
    p += 4
    if n < 0:
        return None, p
    if n > end - p:
        raise CorruptRecordError("legacy key/value runs past the message")
    return mv[p : p + n].tobytes(), p + n


def iter_legacy_messages(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    deep: bool = True,
    max_inflated_size: int = DEFAULT_MAX_INFLATED_BYTES,
) -> Iterator[LegacyMessage]:
    """Read a magic v0/v1 message set (old ``.log`` files). Read-only.

    With ``deep=False`` yields the outer entries (compressed wrappers as they are). With
    ``deep=True`` a compressed wrapper is replaced by its inner messages: v0 inner offsets are
    absolute; v1 inner offsets are relative and made absolute so the last one equals the wrapper
    offset; v1 LogAppendTime wrappers give their timestamp to the inner messages. Scanning stops
    at an incomplete tail like :func:`iter_batches`.
    """
    mv = _as_bytes_view(buf)
    stop = len(mv) if end is None else min(end, len(mv))
    for entry in _legacy_entries(mv, start, stop):
        if not deep or entry.attributes & _CODEC_MASK == 0:
            yield entry
        else:
            yield from legacy_inner_messages(entry, max_inflated_size)


def legacy_inner_messages(
    wrapper: LegacyMessage, max_inflated_size: int = DEFAULT_MAX_INFLATED_BYTES
) -> list[LegacyMessage]:
    """The messages inside a compressed v0/v1 wrapper, with absolute offsets (see
    :func:`iter_legacy_messages`). The lz4 header checksum is not checked (broken in old producers)."""
    codec = wrapper.compression
    if codec is CompressionType.NONE:
        return [wrapper]
    if wrapper.value is None:
        raise CorruptRecordError("compressed legacy wrapper without a value", offset=wrapper.position)
    inner_bytes = decompress(codec, wrapper.value, max_inflated_size, legacy_lz4=True)
    imv = memoryview(inner_bytes)
    inner = []
    pos = 0
    while pos < len(imv):
        size = _entry_size(imv, pos, len(imv))
        if size is None:
            raise CorruptRecordError("truncated message inside a compressed legacy wrapper", offset=wrapper.position)
        inner.append(_legacy_entry_at(imv, pos, size))
        pos += size
    if not inner:
        raise CorruptRecordError("compressed legacy wrapper holds no messages", offset=wrapper.position)
    shift = wrapper.offset - inner[-1].offset if wrapper.magic == 1 else 0
    lat = wrapper.magic == 1 and wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME
    out = []
    for m in inner:
        if m.attributes & _CODEC_MASK:
            raise CorruptRecordError("nested compression in a legacy message set", offset=wrapper.position)
        ts, tt = (wrapper.timestamp, TimestampType.LOG_APPEND_TIME) if lat else (m.timestamp, m.timestamp_type)
        out.append(m._replace(offset=m.offset + shift, position=wrapper.position, timestamp=ts, timestamp_type=tt))
    return out


def iter_log_entries(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[RecordBatch | LegacyMessage]:
    """Shallow iteration over a segment that may mix formats (old logs upgraded from v0/v1 to v2):
    a :class:`RecordBatch` per v2 batch, a :class:`LegacyMessage` per v0/v1 entry (compressed
    wrappers as they are; open them with :func:`legacy_inner_messages`). Same end-of-log and
    corruption rules as :func:`iter_batches`. For the dump tool; the broker reads only v2.
    """
    mv = _as_bytes_view(buf)
    stop = len(mv) if end is None else min(end, len(mv))
    pos = start
    while (size := _entry_size(mv, pos, stop)) is not None:
        if mv[pos + _OFF_MAGIC] < MAGIC_V2:
            yield _legacy_entry_at(mv, pos, size)
        else:
            if size < BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"record batch is corrupt (the size {size} is smaller than the minimum allowed overhead "
                    f"{BATCH_OVERHEAD})",
                    offset=pos,
                )
            yield RecordBatch(mv[:stop], pos)
        pos += size
