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

    def __init__(self, java_class: str, message: str | None) -> None:
        super().__init__(message)
        self.java_class = java_class
        self.message = message

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
    """``new String(bytes, StandardCharsets.UTF_8)``: malformed input becomes U+FFFD.

    Python's "replace" handler substitutes per maximal invalid subpart, which is what the JDK's
    UTF-8 decoder does too (checked against DumpLogSegments output of binary keys/values).
    """
    return bytes(data).decode("utf-8", "replace")


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
