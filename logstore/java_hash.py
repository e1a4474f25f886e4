"""Java/Scala hash functions needed to reproduce the iteration order Kafka's hash maps give files.

Line order in offset checkpoints and entry order in producer snapshots follow the iteration order of
Java/Scala hash maps; we emulate those orders so our files can be byte-identical with Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")
_M32 = 0xFFFFFFFF


def to_int32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def string_hash(s: str) -> int:
    """java.lang.String.hashCode (over UTF-16 code units, int32 arithmetic)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _M32
    return to_int32(h)


def long_hash(v: int) -> int:
    """java.lang.Long.hashCode: (int)(v ^ (v >>> 32))."""
    u = v & 0xFFFFFFFFFFFFFFFF
    return to_int32((u ^ (u >> 32)) & _M32)


def topic_partition_hash(topic: str, partition: int) -> int:
    """org.apache.kafka.common.TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode()."""
    return to_int32(31 * (31 + partition) + string_hash(topic))


def spread(h: int) -> int:
    """HashMap/ConcurrentHashMap bucket hash: h ^ (h >>> 16) (unsigned, 32 bits)."""
    u = h & _M32
    return (u ^ (u >> 16)) & _M32


def hashmap_capacity(max_size_ever: int, initial: int = 16) -> int:
    """Table size of a java.util.HashMap that once held `max_size_ever` entries (it never shrinks)."""
    cap = initial
    while max_size_ever > cap * 3 // 4:
        cap *= 2
    return cap


def copied_hashmap_capacity(n: int) -> int:
    """Table size of `new HashMap<>(otherMap)` with n entries: tableSizeFor((int)(n / 0.75f + 1))."""
    t = int(n / 0.75 + 1.0)
    cap = 1
    while cap < t:
        cap *= 2
    return cap


def hashmap_order(items: Iterable[T], hash_of, max_size_ever: int | None = None,
                  copied: bool = False) -> list[T]:
    """Iteration order of a java.util.HashMap filled with `items` in the given insertion order.

    Bucket = spread(hash) & (capacity - 1); ties keep insertion order (resizing keeps the relative
    order of a bucket's chain). Tree bins (more than 8 colliding keys) are not modelled.
    `copied=True` sizes the table like the copy constructor `new HashMap<>(map)` (this is what
    reproduces Kafka's recovery-point and log-start-offset checkpoint line order, 3.9 and 4.1);
    otherwise like a map grown by put() from the default 16 buckets (producer snapshots).
    """
    items = list(items)
    if copied:
        cap = copied_hashmap_capacity(len(items))
    else:
        cap = hashmap_capacity(max(len(items), max_size_ever or 0))
    keyed = [(spread(hash_of(it)) & (cap - 1), i, it) for i, it in enumerate(items)]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [it for _, _, it in keyed]


def scala_improve(h: int) -> int:
    """Scala 2.12/2.13 immutable HashMap/HashSet `improve` (hash trie) of a 32-bit hashCode."""
    h &= _M32
    h = (h + ~(h << 9)) & _M32
    h ^= h >> 14
    h = (h + (h << 4)) & _M32
    h ^= h >> 10
    return h


def scala_trie_order(items: Iterable[T], hash_of) -> list[T]:
    """Iteration order of a Scala 2.12-style immutable hash trie: 5-bit groups, least significant first."""
    items = list(items)

    def key(it):
        h = scala_improve(hash_of(it))
        return tuple((h >> (5 * i)) & 31 for i in range(7))

    return sorted(items, key=key)


def anyrefmap_order(items: Iterable[T], hash_of) -> list[T]:
    """Iteration order (table order) of a scala.collection.mutable.AnyRefMap filled in the given order."""
    mask = 15
    table: list = [None] * (mask + 1)
    hashes = [0] * (mask + 1)
    size = 0

    def hash_of_key(h: int) -> int:
        i = (spread(h) * 0x85EBCA6B) & _M32
        j = i ^ (i >> 13)
        return j & 0x7FFFFFFF

    def insert(tab, hs, m, it, hk):
        e = hk & m
        x = 0
        while tab[e] is not None:
            x += 1
            e = (e + 2 * (x + 1) * x - 3) & m
        tab[e] = it
        hs[e] = hk

    for it in items:
        hk = hash_of_key(hash_of(it))
        if size + 1 > 0.5 * mask:
            # grow before inserting when the table would get too full, rehashing in table order
            new_mask = 2 * mask + 1
            new_tab: list = [None] * (new_mask + 1)
            new_h = [0] * (new_mask + 1)
            for k in range(mask + 1):
                if table[k] is not None:
                    insert(new_tab, new_h, new_mask, table[k], hashes[k])
            table, hashes, mask = new_tab, new_h, new_mask
        insert(table, hashes, mask, it, hk)
        size += 1
    return [t for t in table if t is not None]
