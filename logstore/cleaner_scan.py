"""The log cleaner's record walkers: keys and offsets read straight from a batch's (inflated)
records bytes, without building a Record or RawRecord per record.

Both passes of a cleaning are bound by per-record interpreter work, so these loops do the least
per record that the format allows: one-byte varints decoded inline, the timestamp delta skipped
(the map does not need it), the value and headers never looked at except the value length's sign
(a tombstone). They raise the same `CorruptRecordError`s as `cleaner.scan_records`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator

from odradek.wire.records import (
    BATCH_OVERHEAD,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_ENTRY_SIZE,
    BatchHeader,
    CorruptRecordError,
    read_record_varlong,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")

#: keys shorter than an MD5 digest are their own key in the map (OffsetMap._digest)
DIGEST_BYTES = 16


def batch_at(chunk: bytes | memoryview, pos: int) -> tuple[int, BatchHeader] | None:
    """(size, header) of the v2 batch at `chunk[pos]`, or None at an incomplete tail: the framing
    and errors of `iter_batches`, without a RecordBatch."""
    stop = len(chunk)
    if stop - pos <= HEADER_SIZE_UP_TO_MAGIC:
        return None
    (length,) = _LENGTH.unpack_from(chunk, pos + 8)
    if length < MIN_ENTRY_SIZE:
        raise CorruptRecordError(
            f"found record size {length} smaller than minimum record overhead ({MIN_ENTRY_SIZE})", offset=pos)
    size = length + LOG_OVERHEAD
    if size > stop - pos:
        return None
    magic = chunk[pos + 16]
    if magic < MAGIC_V2:
        raise CorruptRecordError(f"legacy magic {magic} batch; use iter_legacy_messages", offset=pos)
    if size < BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch is corrupt (the size {size} is smaller than the minimum allowed overhead "
            f"{BATCH_OVERHEAD})", offset=pos)
    return size, BatchHeader._make(_HEADER.unpack_from(chunk, pos))


def plain_batches(chunk: bytes, pos: int, skip_bits: int) -> Iterator[tuple[int, int, tuple]]:
    """(position, size, raw header tuple) of the well-framed v2 batches from `pos` on, stopping
    (without an error) before the first one whose attributes have any of `skip_bits`, or whose
    framing `batch_at` would question: the caller's general path takes over there."""
    stop = len(chunk)
    unpack = _HEADER.unpack_from
    while stop - pos > BATCH_OVERHEAD:
        t = unpack(chunk, pos)
        size = t[1] + LOG_OVERHEAD
        if size < BATCH_OVERHEAD or size > stop - pos or t[3] < MAGIC_V2 or t[5] & skip_bits:
            return
        yield pos, size, t
        pos += size


def map_records(buf: bytes, pos: int, end: int, count: int, base_offset: int,
                entries: dict[bytes, int], tombstones: list[int]) -> int:
    """Put the key -> offset of each keyed record of `buf[pos:end]` (one batch's records) into
    `entries` (the OffsetMap's table, keys digested as `OffsetMap._digest` does) and append the
    offset of every keyed tombstone to `tombstones`. Returns the offset of the last keyed record
    (-1 if none). The caller has made sure the map has room for `count` more keys."""
    md5 = hashlib.md5
    zz = read_record_varlong
    last_keyed = -1
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:  # records of 64 to 8191 bytes
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                size = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                size, pos = zz(buf, pos)
            rec_end = pos + size
            if size < 0 or rec_end > end:
                raise CorruptRecordError(f"record size {size} runs past the batch")
            p = pos + 1  # after the attributes byte
            # the timestamp delta is not needed: skip its bytes (a varlong is at most 10 bytes)
            if buf[p] & 0x80:
                _ts, p = zz(buf, p)
            else:
                p += 1
            b = buf[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                offset_delta, p = zz(buf, p)
            b = buf[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = zz(buf, p)
            if klen >= 0:
                q = p + klen
                key = buf[p:q]
                last_keyed = base_offset + offset_delta
                entries[key if klen < DIGEST_BYTES else md5(key, usedforsecurity=False).digest()] = last_keyed
                if buf[q] == 1:  # value length -1: a tombstone
                    tombstones.append(last_keyed)
            pos = rec_end
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the declared records")
    return last_keyed


def kept_records(buf: bytes, count: int, base_offset: int, base_timestamp: int, lat_timestamp: int | None,
                 keep: set[int]) -> list[tuple[int, int, int, int]]:
    """The records of an inflated records block whose offsets are in `keep`, as
    (offset, timestamp, tail_start, end): what `cleaner.rebuild_batch` copies. The timestamp is
    base + delta, or the batch max timestamp for LogAppendTime (`lat_timestamp`)."""
    out: list[tuple[int, int, int, int]] = []
    zz = read_record_varlong
    pos = 0
    end = len(buf)
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:  # records of 64 to 8191 bytes
                b = (b & 0x7F) | (buf[pos + 1] << 7)
                size = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                size, pos = zz(buf, pos)
            rec_end = pos + size
            if size < 0 or rec_end > end:
                raise CorruptRecordError(f"record size {size} runs past the batch")
            p = pos + 1
            b = buf[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = zz(buf, p)
            b = buf[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                offset_delta, p = zz(buf, p)
            offset = base_offset + offset_delta
            if offset in keep:
                out.append((offset, lat_timestamp if lat_timestamp is not None else base_timestamp + ts_delta,
                            p, rec_end))
            pos = rec_end
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the declared records")
    return out
