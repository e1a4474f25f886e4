"""Java's hash-table iteration orders, for the share groups' simple assignor.

Kafka 4.4's simple assignor walks ``java.util.HashMap``/``HashSet`` tables (and the group's
members sit in a ``TimelineHashMap``); which member keeps or gets a partition follows from the
order those tables hand out their keys. These classes reproduce that order: bucket by bucket,
collisions in insertion order, the same capacities and resizes. Keys are hashed as Java hashes
them: ``str`` as ``String.hashCode``, ``int`` as ``Integer``, :class:`~odradek.wire.primitives.Uuid`
as Kafka's ``Uuid.hashCode`` and ``(Uuid, int)`` as the ``TopicIdPartition`` record.
(Java turns a bucket of 8+ colliding keys into a tree when the table has 64+ buckets; that case
is not reproduced.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..logstore.java_hash import string_hash, to_int32
from ..wire.primitives import Uuid

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


def uuid_hash(u: Uuid) -> int:
    """Kafka's ``Uuid.hashCode``: the two halves xor-ed, then folded to 32 bits."""
    raw = u.bytes
    x = int.from_bytes(raw[:8], "big") ^ int.from_bytes(raw[8:], "big")
    return to_int32((x >> 32) ^ x)


def java_hash(key: Any) -> int:
    if isinstance(key, str):
        return string_hash(key)
    if isinstance(key, int):
        return to_int32(key)
    if isinstance(key, Uuid):
        return uuid_hash(key)
    if isinstance(key, tuple):  # (topic id, partition): the TopicIdPartition record
        return to_int32(31 * uuid_hash(key[0]) + key[1])
    raise TypeError(f"no Java hash for {type(key).__name__}")


def table_size_for(capacity: int) -> int:
    """The power of two ``HashMap(int)`` starts with."""
    n = 1
    while n < capacity:
        n <<= 1
    return n


def sized(expected: int) -> int:
    """The initial capacity Kafka's AssignorHelpers.newHashMap/newHashSet ask for."""
    return int((expected + 1) / 0.75 + 1.0)


class JavaHashMap:
    """A ``java.util.HashMap`` as far as its iteration order goes (``capacity`` is the
    constructor's argument; None is the no-argument constructor)."""

    __slots__ = ("_buckets", "_capacity", "_size", "_values")

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = 16 if capacity is None else table_size_for(capacity)
        self._buckets: list[list[Any]] | None = None
        self._values: dict[Any, Any] = {}
        self._size = 0

    def _index(self, key: Any, capacity: int) -> int:
        h = java_hash(key) & _M32
        return (h ^ (h >> 16)) & (capacity - 1)

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: Any) -> bool:
        return key in self._values

    def get(self, key: Any, default: Any = None) -> Any:
        return self._values.get(key, default)

    def __getitem__(self, key: Any) -> Any:
        return self._values[key]

    def put(self, key: Any, value: Any = True) -> None:
        if key in self._values:
            self._values[key] = value
            return
        if self._buckets is None:
            self._buckets = [[] for _ in range(self._capacity)]
        self._buckets[self._index(key, self._capacity)].append(key)
        self._values[key] = value
        self._size += 1
        if self._size > int(self._capacity * 0.75):
            self._resize()

    def compute_if_absent(self, key: Any, make: Callable[[], Any]) -> Any:
        """``computeIfAbsent``: unlike ``put`` it grows the table first (when already over its
        threshold, even if the key is there) and puts a new key at the head of its bucket."""
        if self._buckets is None:
            self._buckets = [[] for _ in range(self._capacity)]
        elif self._size > int(self._capacity * 0.75):
            self._resize()
        if key in self._values:
            return self._values[key]
        self._buckets[self._index(key, self._capacity)].insert(0, key)
        self._values[key] = value = make()
        self._size += 1
        return value

    def _resize(self) -> None:
        old = self._buckets or []
        self._capacity *= 2
        self._buckets = [[] for _ in range(self._capacity)]
        for bucket in old:  # a split keeps each bucket's order
            for key in bucket:
                self._buckets[self._index(key, self._capacity)].append(key)

    def remove(self, key: Any) -> bool:
        if key not in self._values:
            return False
        del self._values[key]
        assert self._buckets is not None
        self._buckets[self._index(key, self._capacity)].remove(key)
        self._size -= 1
        return True

    def keys(self) -> list[Any]:
        """The keys in iteration order (a snapshot)."""
        return [k for bucket in self._buckets or () for k in bucket]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def items(self) -> list[tuple[Any, Any]]:
        return [(k, self._values[k]) for k in self.keys()]


class JavaHashSet(JavaHashMap):
    """A ``java.util.HashSet``: a HashMap of its elements."""

    __slots__ = ()

    def add(self, key: Any) -> None:
        self.put(key, True)

    @classmethod
    def of(cls, items: Iterable[Any]) -> JavaHashSet:
        """``new HashSet<>(collection)``: sized for the collection, filled in its order."""
        items = list(items)
        out = cls(max(int(len(items) / 0.75) + 1, 16))
        for item in items:
            out.add(item)
        return out


def copy_assignment(assignment: JavaHashMap) -> JavaHashMap:
    """Kafka's AssignorHelpers.deepCopyAssignment (topic id -> partition set)."""
    out = JavaHashMap(len(assignment))
    for topic_id, partitions in assignment.items():
        out.put(topic_id, JavaHashSet.of(partitions.keys()))
    return out


_FIB = 0x9E3779B97F4A7C15  # -7046029254386353131 as an unsigned 64-bit number


class TimelineOrder:
    """The iteration order of a Kafka ``TimelineHashMap`` (the group's members): slots by a
    multiplicative hash of the key, each slot's keys newest first, doubling at 3/4 load."""

    __slots__ = ("_slots", "_size")

    def __init__(self) -> None:
        self._slots: list[list[Any]] = [[], []]
        self._size = 0

    @staticmethod
    def _slot(key: Any, n: int) -> int:
        shift = 65 - n.bit_length()
        return (((java_hash(key) & _M64) * _FIB) & _M64) >> shift

    def add(self, key: Any) -> None:
        n = len(self._slots)
        if key in self._slots[self._slot(key, n)]:
            return
        if (self._size + 1) * 0.75 > n:
            old = self._slots
            self._slots = [[] for _ in range(n * 2)]
            for slot in old:
                for k in slot:
                    self._slots[self._slot(k, len(self._slots))].append(k)
        self._slots[self._slot(key, len(self._slots))].append(key)
        self._size += 1

    def remove(self, key: Any) -> None:
        slot = self._slots[self._slot(key, len(self._slots))]
        if key in slot:
            slot.remove(key)
            self._size -= 1

    def keys(self) -> list[Any]:
        return [k for slot in self._slots for k in reversed(slot)]
