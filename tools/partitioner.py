"""Choosing a record's partition the way Kafka's Java producer does.

Keyed records go to ``murmur2(key) & 0x7fffffff % partitions`` (Kafka's BuiltInPartitioner),
so a key lands on the same partition whether the console producer or a Java, librdkafka
(``murmur2_random``) or kafka-python producer wrote it. Records without a key are spread
round-robin per batch, which is enough for a command-line tool.
"""

from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32-bit, Kafka's seed) of `data`, as a signed 32-bit int like Java's."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition of a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class RoundRobin:
    """Partitions for key-less records: the next partition each time."""

    def __init__(self) -> None:
        self._next = 0

    def next(self, num_partitions: int) -> int:
        partition = self._next % num_partitions
        self._next += 1
        return partition
