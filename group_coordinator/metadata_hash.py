"""The metadata hash Kafka 4.x keeps in a consumer group's epoch record (ConsumerGroupMetadataValue).

A group's hash covers the topics its members subscribe to that exist: each topic's id, name,
partition count and the racks of each partition's replicas. When it changes (a subscribed topic
is created, deleted, recreated or grows) the group epoch is bumped. Kafka hashes with XXH3-64
over hash4j's byte layout: little-endian ints and longs, a string as its UTF-16LE chars followed
by its length; a group's hash is the XXH3-64 of its topics' hashes in topic-name order, 0 for
none (and then the record's tagged field is left out).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

import xxhash

_LONG = struct.Struct("<q")
_INT = struct.Struct("<i")


def _string(s: str) -> bytes:
    return s.encode("utf-16-le") + _INT.pack(len(s))


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def topic_hash(topic_id: bytes, name: str, partitions: int,
               racks: Callable[[int], Iterable[str]] | None = None) -> int:
    """Kafka's Utils.computeTopicHash: `topic_id` is the 16 bytes of the topic's UUID."""
    msb, lsb = struct.unpack(">qq", topic_id)
    out = bytearray(b"\x00")
    out += _LONG.pack(msb) + _LONG.pack(lsb) + _string(name) + _INT.pack(partitions)
    for index in range(partitions):
        out += _INT.pack(index)
        for rack in sorted(racks(index) if racks is not None else ()):
            out += _INT.pack(len(rack)) + _string(rack)
    return _signed(xxhash.xxh3_64_intdigest(bytes(out)))


def group_hash(topic_hashes: dict[str, int]) -> int:
    """Kafka's Utils.computeGroupHash: topic name -> topic hash, combined in name order."""
    if not topic_hashes:
        return 0
    data = b"".join(_LONG.pack(topic_hashes[name]) for name in sorted(topic_hashes))
    return _signed(xxhash.xxh3_64_intdigest(data))


class TopicHashes:
    """A group's topic hashes, kept while each topic's id and partition count stay the same."""

    def __init__(self) -> None:
        self._hashes: dict[tuple[str, bytes, int], int] = {}

    def group_hash(self, topics: Iterable[tuple[str, bytes, int]]) -> int:
        """Kafka's group hash over `topics` ((name, topic id bytes, partition count) of the
        subscribed topics that exist); only their hashes are kept, so the cache stays small."""
        hashes: dict[str, int] = {}
        kept: dict[tuple[str, bytes, int], int] = {}
        for name, topic_id, partitions in topics:
            key = (name, topic_id, partitions)
            found = self._hashes.get(key)
            kept[key] = hashes[name] = found if found is not None else topic_hash(topic_id, name, partitions)
        self._hashes = kept
        return group_hash(hashes)
