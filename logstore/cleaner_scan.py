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


#: the zig-zag bytes of offset deltas 0..n-1 (one byte each up to 63)
_DELTAS = [bytes(range(0, 2 * n, 2)) for n in range(65)]


def _map_uniform(buf: bytes, pos: int, end: int, count: int, base_offset: int,
                 entries: dict[bytes, int], tombstones: list[int]) -> bool:
    """`map_records` for a batch whose records all have one length and one key length, with
    one-byte timestamp deltas and offset deltas 0..count-1 (a producer's batch of fixed-size
    records): every field then sits at a fixed stride, so strided slices check the layout and
    find the keys in C, and one `dict.update` puts them. False (nothing done) when the batch is
    not like that; the record-by-record loop then reads it."""
    if count > 64 or count < 2 or end - pos < 2:
        return False
    b0 = buf[pos]
    if b0 < 0x80:
        size, head = (b0 >> 1) ^ -(b0 & 1), 1
    elif buf[pos + 1] < 0x80:
        raw = (b0 & 0x7F) | (buf[pos + 1] << 7)
        size, head = (raw >> 1) ^ -(raw & 1), 2
    else:
        return False
    stride = head + size
    if size <= 0 or stride * count != end - pos:
        return False
    # equal length prefixes at every stride: the records really lie there
    if buf[pos:end:stride] != bytes((b0,)) * count:
        return False
    if head == 2 and buf[pos + 1:end:stride] != bytes((buf[pos + 1],)) * count:
        return False
    p_ts = pos + head + 1
    if max(buf[p_ts:end:stride]) >= 0x80 or buf[p_ts + 1:end:stride] != _DELTAS[count]:
        return False
    p_klen = p_ts + 2
    kb = buf[p_klen]
    klen = (kb >> 1) ^ -(kb & 1)
    if kb >= 0x80 or klen < 0 or buf[p_klen:end:stride] != bytes((kb,)) * count:
        return False
    p_key = p_klen + 1
    values = buf[p_key + klen:end:stride]
    if len(values) != count:
        return False
    keys = [buf[k:k + klen] for k in range(p_key, end, stride)]
    if klen >= DIGEST_BYTES:
        md5 = hashlib.md5
        keys = [md5(k, usedforsecurity=False).digest() for k in keys]
    entries.update(zip(keys, range(base_offset, base_offset + count), strict=True))
    if 1 in values:  # value length -1: tombstones
        tombstones.extend(base_offset + i for i, v in enumerate(values) if v == 1)
    return True


def map_records(buf: bytes, pos: int, end: int, count: int, base_offset: int,
                entries: dict[bytes, int], tombstones: list[int]) -> int:
    """Put the key -> offset of each keyed record of `buf[pos:end]` (one batch's records) into
    `entries` (the OffsetMap's table, keys digested as `OffsetMap._digest` does) and append the
    offset of every keyed tombstone to `tombstones`. Returns the offset of the last keyed record
    (-1 if none). The caller has made sure the map has room for `count` more keys."""
    if _map_uniform(buf, pos, end, count, base_offset, entries, tombstones):
        return base_offset + count - 1
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


def _uniform_stride(buf: bytes, count: int) -> tuple[int, int] | None:
    """(record length, length of its size varint) when every record of the block has the same
    length, a one-byte timestamp delta and offset delta i (what `_map_uniform` checks but the
    key), else None."""
    end = len(buf)
    if count > 64 or count < 2 or end < 2:
        return None
    b0 = buf[0]
    if b0 < 0x80:
        size, head = (b0 >> 1) ^ -(b0 & 1), 1
    elif buf[1] < 0x80:
        raw = (b0 & 0x7F) | (buf[1] << 7)
        size, head = (raw >> 1) ^ -(raw & 1), 2
    else:
        return None
    stride = head + size
    if size < 3 or stride * count != end or buf[0:end:stride] != bytes((b0,)) * count:
        return None
    if head == 2 and buf[1:end:stride] != bytes((buf[1],)) * count:
        return None
    if max(buf[head + 1:end:stride]) >= 0x80 or buf[head + 2:end:stride] != _DELTAS[count]:
        return None
    return stride, head


def kept_records(buf: bytes, count: int, base_offset: int, base_timestamp: int, lat_timestamp: int | None,
                 keep: set[int]) -> list[tuple[int, int, int, int]]:
    """The records of an inflated records block whose offsets are in `keep`, as
    (offset, timestamp, tail_start, end): what `cleaner.rebuild_batch` copies. The timestamp is
    base + delta, or the batch max timestamp for LogAppendTime (`lat_timestamp`)."""
    out: list[tuple[int, int, int, int]] = []
    uniform = _uniform_stride(buf, count)
    if uniform is not None:
        # fixed-size records: the kept ones are found by arithmetic, the others never read
        stride, head = uniform
        for offset in sorted(keep):
            i = offset - base_offset
            if 0 <= i < count:
                rec = i * stride
                if lat_timestamp is None:
                    b = buf[rec + head + 1]
                    ts = base_timestamp + ((b >> 1) ^ -(b & 1))
                else:
                    ts = lat_timestamp
                out.append((offset, ts, rec + head + 3, rec + stride))
        return out
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
