"""Record-batch compression codecs, sans-IO: gzip, snappy (xerial framing), lz4 frame, zstd.

Kafka compresses the *records block* of a batch (everything after the 61-byte batch header) as one
unit, with the codec named in attribute bits 0-2. This module turns such a block into bytes and back.

Decompression is always **bounded**: every ``decompress`` takes ``max_size`` and raises
:class:`CorruptRecordError` as soon as the output would exceed it, without ever holding more than
about ``max_size`` bytes of output, so a small "zip bomb" batch cannot exhaust memory.

Wire formats, as Java and librdkafka clients produce them:

* gzip: RFC 1952 members (concatenated members are accepted on read, like ``GZIPInputStream``).
* snappy: the xerial ``snappy-java`` stream framing: magic ``\\x82SNAPPY\\x00``, int32 version,
  int32 min-compatible version, then chunks of int32 big-endian length + raw snappy block. Input
  without the magic is read as one raw snappy block (what ``SnappyInputStream`` falls back to).
* lz4: the LZ4 frame format with independent blocks (Kafka's reader cannot follow linked blocks).
* zstd: standard zstd frames.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import TYPE_CHECKING

import cramjam

from .errors import ErrorCode, ProtocolError

if TYPE_CHECKING:
    from collections.abc import Buffer

__all__ = [
    "DEFAULT_MAX_INFLATED_BYTES",
    "XERIAL_MAGIC",
    "CompressionType",
    "CorruptRecordError",
    "InvalidRecordError",
    "compress",
    "decompress",
    "xxh32_short",
]


class CorruptRecordError(ProtocolError, ValueError):
    """A record batch or record is malformed (bad size, CRC, magic, varint, compression stream ...).

    Kafka's ``CorruptRecordException``; a broker answers a produce with ``error_code``
    (``CORRUPT_MESSAGE``, 2) for that partition rather than closing the connection.
    Canonical import: ``odradek.wire.records.CorruptRecordError``. It is a ``ProtocolError`` (the
    wire layer's one error for malformed input) and a ``ValueError``.
    """

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch breaks a broker rule (Kafka's ``InvalidRecordException``, ``INVALID_RECORD`` 87).

    Example: a client batch whose ``lastOffsetDelta + 1 != count``. Being a subclass of
    :class:`CorruptRecordError`, "catch CorruptRecordError" still catches everything a batch can raise.
    """

    error_code = ErrorCode.INVALID_RECORD


class CompressionType(IntEnum):
    """Codec ids of attribute bits 0-2 (``CompressionType.java``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def display_name(self) -> str:
        """Lower-case name as Kafka prints it (``compresscodec: gzip``)."""
        return self.name.lower()


#: Default bound for one inflated records block when the caller does not give one. Kafka's
#: default ``message.max.bytes`` is ~1 MiB of *compressed* data; 64 MiB leaves room for very
#: compressible batches while keeping a hostile one from taking the process down.
DEFAULT_MAX_INFLATED_BYTES = 64 * 1024 * 1024

# ---------------------------------------------------------------------------------------------
# gzip


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    # wbits=31: gzip header/trailer. mtime 0 and no file name, like Java's GZIPOutputStream.
    lvl = -1 if level is None else level
    co = zlib.compressobj(lvl, zlib.DEFLATED, 31)
    return co.compress(data) + co.flush()


def _gzip_decompress(data: Buffer, max_size: int) -> bytes:
    out = bytearray()
    pending = bytes(data)
    if not pending:
        raise CorruptRecordError("empty gzip stream")
    while pending:
        d = zlib.decompressobj(31)
        chunk = pending
        try:
            while True:
                # max_length bounds each step, so a bomb never inflates past max_size + 1.
                room = max_size + 1 - len(out)
                part = d.decompress(chunk, room)
                out += part
                if len(out) > max_size:
                    raise CorruptRecordError(f"gzip data inflates beyond {max_size} bytes")
                if d.eof:
                    break
                chunk = d.unconsumed_tail
                if not chunk:
                    # Input exhausted without the end of the member: truncated stream.
                    raise CorruptRecordError("truncated gzip stream")
        except zlib.error as e:
            raise CorruptRecordError(f"invalid gzip data: {e}") from None
        pending = d.unused_data
        # Trailing zero padding after the last member is tolerated by GZIPInputStream too
        # (it stops when the next bytes are not a gzip header).
        if pending[:2] != b"\x1f\x8b":
            break
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# snappy (xerial framing)

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default chunk size
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    mv = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for pos in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[pos : pos + _XERIAL_BLOCK]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_block(block: Buffer, room: int) -> bytes:
    try:
        # The raw format starts with the uncompressed length as a varint: check it before
        # allocating anything, so the bound holds without inflating first.
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:  # cramjam raises its own error types
        raise CorruptRecordError(f"invalid snappy block: {e}") from None
    if n > room:
        raise CorruptRecordError("snappy data inflates beyond the allowed size")
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as e:
        raise CorruptRecordError(f"invalid snappy block: {e}") from None


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    mv = memoryview(data).cast("B")
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return _snappy_raw_block(mv, max_size)
    if len(mv) < 16:
        raise CorruptRecordError("truncated xerial snappy header")
    out = bytearray()
    pos = 16
    end = len(mv)
    while pos < end:
        # snappy-java accepts concatenated streams: a new header may start at a chunk boundary.
        if bytes(mv[pos : pos + 8]) == XERIAL_MAGIC:
            pos += 16
            continue
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy chunk length")
        (n,) = _I32.unpack_from(mv, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise CorruptRecordError("xerial snappy chunk length out of range")
        out += _snappy_raw_block(mv[pos : pos + n], max_size - len(out))
        pos += n
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# lz4 frame

_LZ4_MAGIC = 0x184D2204
_LZ4_SKIPPABLE_MASK = 0xFFFFFFF0
_LZ4_SKIPPABLE = 0x184D2A50
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")
# Frame header we write: FLG = version 01 + independent blocks; BD = 64 KiB max block; then
# HC = (xxh32(FLG BD) >> 8) & 0xff. Same choices as Kafka's own lz4 output stream.
_LZ4_WRITE_BLOCK = 64 * 1024

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of an input shorter than 16 bytes (the lz4 frame descriptor checksum needs nothing more)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short only handles inputs shorter than 16 bytes")
    h = (seed + _P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        (w,) = _U32LE.unpack_from(data, i)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < len(data):
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_DESCRIPTOR = bytes([0x60, 0x40])
_LZ4_HEADER = _U32LE.pack(_LZ4_MAGIC) + _LZ4_DESCRIPTOR + bytes([(xxh32_short(_LZ4_DESCRIPTOR) >> 8) & 0xFF])


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    mv = memoryview(data).cast("B")
    parts = [_LZ4_HEADER]
    for pos in range(0, len(mv), _LZ4_WRITE_BLOCK):
        raw = mv[pos : pos + _LZ4_WRITE_BLOCK]
        if level is not None and level > 0:
            block = bytes(cramjam.lz4.compress_block(raw, mode="high_compression", compression=level, store_size=False))
        else:
            block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            # Incompressible: store it, flagged by the high bit of the block size.
            parts.append(_U32LE.pack(len(raw) | 0x80000000))
            parts.append(bytes(raw))
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")  # EndMark
    return b"".join(parts)


def _lz4_decompress(data: Buffer, max_size: int, check_header_checksum: bool = True) -> bytes:
    mv = memoryview(data).cast("B")
    end = len(mv)
    out = bytearray()
    scratch = bytearray()
    pos = 0
    if end == 0:
        raise CorruptRecordError("empty lz4 stream")
    while pos < end:
        if end - pos < 7:
            raise CorruptRecordError("truncated lz4 frame header")
        (magic,) = _U32LE.unpack_from(mv, pos)
        if magic & _LZ4_SKIPPABLE_MASK == _LZ4_SKIPPABLE:
            (n,) = _U32LE.unpack_from(mv, pos + 4)
            pos += 8 + n
            if pos > end:
                raise CorruptRecordError("truncated lz4 skippable frame")
            continue
        if magic != _LZ4_MAGIC:
            raise CorruptRecordError("bad lz4 frame magic")
        flg = mv[pos + 4]
        bd = mv[pos + 5]
        if flg >> 6 != 1 or flg & 0x02 or bd & 0x8F:
            raise CorruptRecordError("unsupported lz4 frame descriptor")
        block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
        if block_max is None:
            raise CorruptRecordError("bad lz4 block maximum size")
        block_checksum = bool(flg & 0x10)
        content_size = bool(flg & 0x08)
        content_checksum = bool(flg & 0x04)
        dict_id = bool(flg & 0x01)
        desc_len = 2 + (8 if content_size else 0) + (4 if dict_id else 0)
        if end - pos < 4 + desc_len + 1:
            raise CorruptRecordError("truncated lz4 frame header")
        desc = bytes(mv[pos + 4 : pos + 4 + desc_len])
        hc = mv[pos + 4 + desc_len]
        # Magic v0/v1 producers (KAFKA-3160) computed HC over the wrong bytes, so legacy readers
        # skip this check.
        if check_header_checksum and hc != (xxh32_short(desc) >> 8) & 0xFF:
            raise CorruptRecordError("lz4 frame header checksum mismatch")
        pos += 4 + desc_len + 1
        while True:
            if end - pos < 4:
                raise CorruptRecordError("truncated lz4 block size")
            (word,) = _U32LE.unpack_from(mv, pos)
            pos += 4
            if word == 0:
                break
            size = word & 0x7FFFFFFF
            if size > block_max or size > end - pos:
                raise CorruptRecordError("lz4 block size out of range")
            block = mv[pos : pos + size]
            pos += size
            if block_checksum:
                pos += 4
                if pos > end:
                    raise CorruptRecordError("truncated lz4 block checksum")
            if word & 0x80000000:
                part: Buffer = block
                n = size
            else:
                if len(scratch) < block_max:
                    # one block never inflates past block_max (<= 4 MiB): that is the bound per step
                    scratch = bytearray(block_max)
                try:
                    # The scratch buffer is the capacity: decoding fails rather than grow it.
                    n = cramjam.lz4.decompress_block_into(block, scratch)
                except Exception as e:
                    raise CorruptRecordError(f"invalid lz4 block: {e}") from None
                part = memoryview(scratch)[:n]
            if len(out) + n > max_size:
                raise CorruptRecordError("lz4 data inflates beyond the allowed size")
            out += part
        if content_checksum:
            pos += 4
            if pos > end:
                raise CorruptRecordError("truncated lz4 content checksum")
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# zstd


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_FCS_SIZES = (0, 2, 4, 8)
_DICT_ID_SIZES = (0, 1, 2, 4)


def _zstd_content_size(data: Buffer) -> int | None:
    """Frame_Content_Size of the first zstd frame (RFC 8878 §3.1.1.1), or None if absent/unreadable."""
    head = bytes(memoryview(data)[:18])
    if len(head) < 5 or head[:4] != _ZSTD_MAGIC:
        return None
    fhd = head[4]
    single_segment = bool(fhd & 0x20)
    fcs_flag = fhd >> 6
    fcs_size = 1 if (fcs_flag == 0 and single_segment) else _FCS_SIZES[fcs_flag]
    if fcs_size == 0:
        return None
    pos = 5 + (0 if single_segment else 1) + _DICT_ID_SIZES[fhd & 0x03]
    if len(head) < pos + fcs_size:
        return None
    value = int.from_bytes(head[pos : pos + fcs_size], "little")
    return value + 256 if fcs_size == 2 else value


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    if len(memoryview(data)) == 0:
        raise CorruptRecordError("empty zstd stream")
    # cramjam decodes into a caller-sized buffer and fails when it would overflow it, so memory
    # stays bounded by the buffer. Start with the frame's declared content size if it has one,
    # else a guess, and grow geometrically up to max_size + 1.
    declared = _zstd_content_size(data)
    if declared is not None and declared > max_size:
        raise CorruptRecordError(f"zstd frame declares {declared} bytes, more than {max_size}")
    if declared is not None:
        cap = max(declared, 1)
    else:
        cap = min(max_size + 1, max(64 * 1024, 8 * len(memoryview(data))))
    while True:
        buf = bytearray(cap)
        try:
            n = cramjam.zstd.decompress_into(data, buf)
        except Exception as e:
            if "whole buffer" in str(e) and cap <= max_size:
                cap = min(max_size + 1, cap * 4)
                continue
            if "whole buffer" in str(e):
                raise CorruptRecordError(f"zstd data inflates beyond {max_size} bytes") from None
            raise CorruptRecordError(f"invalid zstd data: {e}") from None
        if n > max_size:
            raise CorruptRecordError(f"zstd data inflates beyond {max_size} bytes")
        del buf[n:]
        return bytes(buf)


# ---------------------------------------------------------------------------------------------
# public entry points


def compress(codec: CompressionType | int, data: Buffer, level: int | None = None) -> bytes:
    """Compress one records block with ``codec`` (``NONE`` returns the bytes unchanged).

    ``level`` is the codec's level (``compression.<codec>.level``); ``None`` = the codec default.
    """
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_compress(data, level)
    if codec is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec is CompressionType.LZ4:
        return _lz4_compress(data, level)
    return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))


def decompress(
    codec: CompressionType | int,
    data: Buffer,
    max_size: int = DEFAULT_MAX_INFLATED_BYTES,
    *,
    legacy_lz4: bool = False,
) -> bytes:
    """Inflate one compressed records block; raise :class:`CorruptRecordError` if it is invalid
    or would inflate to more than ``max_size`` bytes.

    ``legacy_lz4`` skips the lz4 frame header checksum (broken in magic v0/v1 producers).
    """
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec}") from None
    if codec is CompressionType.NONE:
        if len(memoryview(data)) > max_size:
            raise CorruptRecordError(f"records block larger than {max_size} bytes")
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_decompress(data, max_size)
    if codec is CompressionType.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec is CompressionType.LZ4:
        return _lz4_decompress(data, max_size, check_header_checksum=not legacy_lz4)
    return _zstd_decompress(data, max_size)
