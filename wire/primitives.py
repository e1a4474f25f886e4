"""Codecs for Kafka's primitive wire types.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; ``buf`` is ``bytes`` or a
``memoryview`` of a frame and is never copied except to build the returned value. Writers
append to a ``bytearray``. Every reader raises ``ProtocolError`` on truncated or invalid input.

The schema compiler (``wire.schema``) inlines the fixed-width cases with the precompiled
``struct.Struct`` objects below and calls these functions for the variable-length ones.
"""

from __future__ import annotations

import base64
import struct

from .errors import ProtocolError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

#: struct format character of each fixed-width Kafka type (bool is read as int8, then != 0)
FIXED_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "b",
}


class Uuid:
    """Kafka's ``Uuid``: 16 bytes, printed as 22-char URL-safe base64 without padding.

    Immutable and hashable. ``Uuid.ZERO`` is Kafka's ``ZERO_UUID`` (the default of uuid fields).
    """

    __slots__ = ("_bytes",)
    ZERO: Uuid

    def __init__(self, raw: bytes | bytearray | memoryview | int = b"\0" * 16) -> None:
        if isinstance(raw, int):
            raw = raw.to_bytes(16, "big")
        raw = bytes(raw)
        if len(raw) != 16:
            raise ValueError("a Uuid is 16 bytes")
        object.__setattr__(self, "_bytes", raw)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Uuid is immutable")

    @classmethod
    def from_base64(cls, text: str) -> Uuid:
        """Parse Kafka's printed form (22 chars base64url, padding optional)."""
        return cls(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))

    @classmethod
    def from_parts(cls, most: int, least: int) -> Uuid:
        """From Java's two signed/unsigned 64-bit halves."""
        return cls((most & (2**64 - 1)).to_bytes(8, "big") + (least & (2**64 - 1)).to_bytes(8, "big"))

    @property
    def bytes(self) -> bytes:
        """The 16 raw bytes (as on the wire)."""
        return self._bytes

    @property
    def int(self) -> int:
        return int.from_bytes(self._bytes, "big")

    def to_base64(self) -> str:
        """Kafka's ``Uuid.toString()``: base64url, no padding, 22 chars."""
        return base64.urlsafe_b64encode(self._bytes).rstrip(b"=").decode("ascii")

    __str__ = to_base64

    def __repr__(self) -> str:
        return f"Uuid({self.to_base64()!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Uuid):
            return self._bytes == other._bytes
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __bool__(self) -> bool:
        return self._bytes != b"\0" * 16

    def __reduce__(self):
        return (Uuid, (self._bytes,))


Uuid.ZERO = Uuid()


def _truncated(what: str, pos: int) -> ProtocolError:
    return ProtocolError(f"truncated {what}", offset=pos)


# -- varints -----------------------------------------------------------------------------------


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 5 bytes (Kafka's unsigned varint, 32-bit)."""
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise _truncated("varint", pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("varint longer than 5 bytes", offset=pos)


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 10 bytes (64-bit)."""
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise _truncated("varlong", pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtocolError("varlong longer than 10 bytes", offset=pos)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Signed (zigzag) 32-bit varint."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Signed (zigzag) 64-bit varint."""
    v, pos = read_uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def encode_uvarint(value: int) -> bytes:
    """Unsigned varint bytes of a non-negative integer."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Signed 32-bit zigzag varint."""
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Signed 64-bit zigzag varint."""
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    """Encoded size of an unsigned varint."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


# -- fixed width ------------------------------------------------------------------------------


def _fixed_reader(s: struct.Struct, what: str):
    unpack_from = s.unpack_from
    size = s.size

    def read(buf, pos: int):
        if pos + size > len(buf):
            raise _truncated(what, pos)
        return unpack_from(buf, pos)[0], pos + size

    read.__name__ = f"read_{what}"
    read.__doc__ = f"Big-endian {what}."
    return read


read_int8 = _fixed_reader(INT8, "int8")
read_int16 = _fixed_reader(INT16, "int16")
read_int32 = _fixed_reader(INT32, "int32")
read_int64 = _fixed_reader(INT64, "int64")
read_uint16 = _fixed_reader(UINT16, "uint16")
read_uint32 = _fixed_reader(UINT32, "uint32")
read_float64 = _fixed_reader(FLOAT64, "float64")


def read_bool(buf, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise _truncated("bool", pos)
    return buf[pos] != 0, pos + 1


def read_uuid(buf, pos: int) -> tuple[Uuid, int]:
    end = pos + 16
    if end > len(buf):
        raise _truncated("uuid", pos)
    u = object.__new__(Uuid)
    object.__setattr__(u, "_bytes", bytes(buf[pos:end]))
    return u, end


def write_uuid(out: bytearray, value: Uuid) -> None:
    out += value._bytes


# -- strings and bytes ------------------------------------------------------------------------
# Kafka's "classic" encodings use an int16 (strings) or int32 (bytes, arrays) length with -1 =
# null; the "compact" ones of flexible versions use an unsigned varint of length + 1, 0 = null.


def _length(buf, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    if compact:
        b = buf[pos] if pos < len(buf) else -1
        if 0 <= b < 0x80:
            return b - 1, pos + 1
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    if wide:
        return read_int32(buf, pos)
    return read_int16(buf, pos)


def read_string(buf, pos: int, compact: bool = False, nullable: bool = False) -> tuple[str | None, int]:
    """A (compact)(nullable) string; null only where ``nullable``."""
    n, pos = _length(buf, pos, compact, False)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError("null or negative string length", offset=pos)
    end = pos + n
    if end > len(buf):
        raise _truncated("string", pos)
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as e:
        raise ProtocolError(f"invalid UTF-8 in string: {e.reason}", offset=pos) from None


def read_bytes(buf, pos: int, compact: bool = False, nullable: bool = False) -> tuple[bytes | None, int]:
    """A (compact)(nullable) byte string, copied out of the frame."""
    n, pos = _length(buf, pos, compact, True)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError("null or negative bytes length", offset=pos)
    end = pos + n
    if end > len(buf):
        raise _truncated("bytes", pos)
    return bytes(buf[pos:end]), end


def read_bytes_view(buf: memoryview, pos: int, compact: bool = False, nullable: bool = True):
    """Like ``read_bytes`` but returns a zero-copy ``memoryview`` slice (for ``records``)."""
    n, pos = _length(buf, pos, compact, True)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError("null or negative bytes length", offset=pos)
    end = pos + n
    if end > len(buf):
        raise _truncated("records", pos)
    return buf[pos:end], end


def read_array_length(buf, pos: int, compact: bool = False, nullable: bool = False) -> tuple[int, int]:
    """An array's element count (-1 = null, only where ``nullable``).

    A count larger than the bytes left in the frame is rejected here, before anything is
    allocated: every element takes at least one byte in any real schema, and this keeps a
    hostile count of 2**31 from turning into a MemoryError.
    """
    n, pos = _length(buf, pos, compact, True)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise ProtocolError("null or negative array length", offset=pos)
    if n > len(buf) - pos:
        raise ProtocolError(f"array length {n} exceeds the {len(buf) - pos} bytes left", offset=pos)
    return n, pos


def write_string(out: bytearray, value: str | None, compact: bool = False) -> None:
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    if compact:
        write_uvarint(out, len(data) + 1)
    else:
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        out += INT16.pack(len(data))
    out += data


def write_bytes(out: bytearray, value, compact: bool = False) -> None:
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    n = value.nbytes if isinstance(value, memoryview) else len(value)
    if compact:
        write_uvarint(out, n + 1)
    else:
        out += INT32.pack(n)
    out += value


def write_array_length(out: bytearray, n: int | None, compact: bool = False) -> None:
    if n is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
    elif compact:
        write_uvarint(out, n + 1)
    else:
        out += INT32.pack(n)


# -- tagged fields ------------------------------------------------------------------------------


def read_tagged_fields(buf, pos: int) -> tuple[list[tuple[int, bytes]], int]:
    """A tagged-field section as raw ``(tag, data)`` pairs (the schema decodes known tags itself)."""
    count, pos = read_uvarint(buf, pos)
    fields = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _truncated("tagged field", pos)
        fields.append((tag, bytes(buf[pos:end])))
        pos = end
    return fields, pos


def write_tagged_fields(out: bytearray, fields: list[tuple[int, bytes]]) -> None:
    """Raw ``(tag, data)`` pairs, which must be sorted by tag."""
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
