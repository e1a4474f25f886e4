"""The log cleaner's key -> latest offset map (Kafka's OffsetMap / SkimpyOffsetMap).

Kafka stores a 16-byte MD5 of each key and an 8-byte offset per slot in a fixed buffer
(log.cleaner.dedupe.buffer.size / number of cleaner threads), and stops adding keys once
`slots * log.cleaner.io.buffer.load.factor` are used: the cleaning round then ends at the last
offset the map covers and the rest of the dirty section waits for the next round. This map keeps
the same capacity rules (same slot count, same "full" point) so a round covers the same offsets
as Kafka's; it stores the MD5 digests in a dict, so its memory use differs from Kafka's buffer.

Besides the table, the map can mark the offsets it holds (`latest_marks`): inside the mapped part
of the dirty section a record is the latest of its key exactly when its offset is one of them
(offsets are unique), so the rewrite decides whole batches by counting marks in their offset
range instead of hashing every key again.
"""

from __future__ import annotations

import hashlib

#: bytes of one slot in Kafka's map: MD5 digest + offset
BYTES_PER_ENTRY = 16 + 8


class OffsetMap:
    """Latest offset of each key of the dirty section being cleaned.

    `memory_bytes` is the dedupe buffer given to one cleaner thread; `slots` is what Kafka's
    SkimpyOffsetMap would get from it. `latest_offset` is the last offset the map has seen (or was
    fast-forwarded to with `update_latest_offset`), -1 when empty.
    """

    __slots__ = ("_latest", "_latest_first", "_map", "latest_offset", "lookups", "probes", "slots",
                 "tombstones")

    def __init__(self, memory_bytes: int) -> None:
        self.slots = max(memory_bytes // BYTES_PER_ENTRY, 1)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0
        #: offsets of the keyed tombstones put (latest or not), in put order
        self.tombstones: list[int] = []
        self._latest: bytearray | None = None
        self._latest_first = 0

    @property
    def entries(self) -> dict[bytes, int]:
        """The table itself (digest -> offset), for the cleaner's batch walkers, which put
        `_digest(key)` directly; they must append tombstones' offsets to `tombstones` too."""
        self._latest = None
        return self._map

    @staticmethod
    def _digest(key: bytes | memoryview) -> bytes:
        # Keys shorter than a digest are their own (collision-free) hash: cheaper than MD5, and
        # their length tells them apart from the 16-byte digests of longer keys.
        if len(key) < 16:
            return bytes(key)
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes | memoryview, offset: int, tombstone: bool = False) -> None:
        """Record `offset` as the latest offset of `key` (later puts win, as the log is read in order)."""
        self._map[self._digest(key)] = offset
        self.latest_offset = offset
        self._latest = None
        if tombstone:
            self.tombstones.append(offset)

    def latest_marks(self, first: int) -> bytearray:
        """One byte per offset from `first` (no offset held is below it) to `latest_offset`:
        1 where the map holds that offset, 2 where it is also a tombstone, 0 elsewhere. Built by
        plain loops rather than one sort, so a cleaner thread building it for millions of keys
        gives the GIL up as usual (a `sorted()` of 100,000 offsets holds it ~12 ms)."""
        if self._latest is None or self._latest_first != first:
            marks = bytearray(max(self.latest_offset - first + 1, 0))
            for offset in self._map.values():
                marks[offset - first] = 1
            for offset in self.tombstones:
                if marks[offset - first]:
                    marks[offset - first] = 2
            self._latest = marks
            self._latest_first = first
        return self._latest

    def get(self, key: bytes | memoryview) -> int:
        """The latest offset of `key`, or -1 if the map has not seen it."""
        self.lookups += 1
        return self._map.get(self._digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        """Move `latest_offset` forward over offsets without keys (gaps, control batches, aborted data)."""
        self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1
        self.tombstones = []
        self._latest = None

    @property
    def size(self) -> int:
        """Number of distinct keys held."""
        return len(self._map)

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def __len__(self) -> int:
        return len(self._map)
