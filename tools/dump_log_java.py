"""Small JVM behaviours ``odradek dump-log`` reproduces: file-name handling of ``java.io.File``,
``Long.parseLong``, ``new String(bytes, UTF_8)`` and the iteration order of Scala 2.13 hash
collections (which decides the order of DumpLogSegments' summary blocks and of the partitions the
transaction-log decoder prints)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeVar

from odradek.logstore.java_hash import string_hash, to_int32

__all__ = [
    "JavaException",
    "java_file_name",
    "java_file_string",
    "java_parse_long",
    "java_utf8",
    "scala_hash_order",
    "string_hash",
]

T = TypeVar("T")


class JavaException(Exception):
    """An exception Kafka's tool would let escape from ``main`` (``Exception in thread "main" ...``)."""

    def __init__(self, java_class: str, message: str | None, causes: list[str] | None = None) -> None:
        super().__init__(message)
        self.java_class = java_class
        self.message = message
        #: ``Caused by: ...`` lines the JVM prints after the first one (stack frames left out)
        self.causes = causes or []

    def java_text(self) -> str:
        """``Throwable.toString()``: the class name, then ``: message`` when there is one."""
        if self.message is None or self.message == "":
            return self.java_class
        return f"{self.java_class}: {self.message}"


def java_file_string(path: str) -> str:
    """``new File(path).toString()`` on Unix: repeated slashes collapsed, a trailing slash dropped."""
    s = re.sub(r"/{2,}", "/", path)
    if len(s) > 1 and s.endswith("/"):
        s = s[:-1]
    return s


def java_file_name(file_str: str) -> str:
    """``File.getName()``: the part after the last slash."""
    return file_str.rsplit("/", 1)[-1]


_LONG = re.compile(r"[+-]?[0-9]+")


def java_parse_long(s: str, bits: int = 64) -> int:
    """``Long.parseLong`` (``Integer.parseInt`` with ``bits=32``): optional sign, ASCII digits only,
    NumberFormatException text on failure."""
    if not _LONG.fullmatch(s):
        raise JavaException("java.lang.NumberFormatException", f'For input string: "{s}"')
    v = int(s)
    lim = 1 << (bits - 1)
    if not -lim <= v < lim:
        raise JavaException("java.lang.NumberFormatException", f'For input string: "{s}"')
    return v


def java_utf8(data: bytes | bytearray | memoryview) -> str:
    """``new String(bytes, StandardCharsets.UTF_8)`` as the JDK (9-21) decodes it.

    Valid UTF-8 takes the fast path. Malformed input is replaced like the JDK does, which is
    not always Python's "replace": an encoded surrogate (``ED A0..BF xx``) is one U+FFFD in Java
    (Python: one per byte), and so is a truncated ``ED A0..BF`` (Python: two).
    """
    b = bytes(data)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return _java_utf8_slow(b)


def _cont(x: int) -> bool:
    return (x & 0xC0) == 0x80


def _java_utf8_slow(src: bytes) -> str:
    # Follows the structure of the JDK's UTF-8 String decoder: lead byte decides the length,
    # the "malformedN" rules decide how many bytes one U+FFFD replaces.
    out: list[str] = []
    repl = "\ufffd"
    sp = 0
    sl = len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif (b1 >> 5) == 0b110 and (b1 & 0x1E) != 0:
            if sp < sl:
                b2 = src[sp]
                sp += 1
                if not _cont(b2):
                    out.append(repl)
                    sp -= 1
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            out.append(repl)
            break
        elif (b1 >> 4) == 0b1110:
            if sp + 1 < sl:
                b2 = src[sp]
                b3 = src[sp + 1]
                sp += 2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append(repl)
                    sp -= 2
                    # malformed3: one byte if the second cannot continue this lead, else two
                    if not ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)):
                        sp += 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(repl if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _cont(src[sp])):
                out.append(repl)
                continue
            sp += 1
            out.append(repl)
            break
        elif (b1 >> 3) == 0b11110:
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not _cont(b2) or not _cont(b3) or not _cont(b4) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(repl)
                    sp -= 3
                    # malformed4
                    if b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) \
                            or not _cont(b2):
                        pass
                    elif not _cont(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                continue
            if b1 > 0xF4 or (sp < sl and _malformed4_2(b1, src[sp])):
                out.append(repl)
                continue
            sp += 1
            out.append(repl)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            out.append(repl)
    return "".join(out)


def _malformed4_2(b1: int, b2: int) -> bool:
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2)


def _scala_improve(h: int) -> int:
    # scala.collection.mutable.HashMap/HashSet (2.13): h ^ (h >>> 16), as a signed int
    u = h & 0xFFFFFFFF
    return to_int32(u ^ (u >> 16))


def scala_table_size(n: int, initial: int = 16) -> int:
    """Table length of a Scala 2.13 mutable HashMap/HashSet after ``n`` single adds (it doubles
    when the size would reach 0.75 of the table)."""
    size = initial
    count = 0
    for _ in range(n):
        if count + 1 >= int(size * 0.75):
            size *= 2
        count += 1
    return size


def scala_hash_order(items: Iterable[T], hash_of: Callable[[T], int], table_size: int | None = None) -> list[T]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap``/``HashSet`` holding ``items``.

    Buckets are visited in index order (index = improved hash & (table length - 1)); inside a
    bucket the nodes are kept sorted by improved hash (signed comparison).
    """
    lst = list(items)
    size = table_size if table_size is not None else scala_table_size(len(lst))
    keyed = []
    for pos, it in enumerate(lst):
        h = _scala_improve(hash_of(it))
        keyed.append(((h & (size - 1)), h, pos, it))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    return [k[3] for k in keyed]
