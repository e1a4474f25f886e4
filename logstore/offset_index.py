"""`.index` files (Kafka's OffsetIndex): 8-byte entries, int32 relative offset + int32 file position."""

from __future__ import annotations

import struct

from .index_base import CorruptIndexError, IndexFile, IndexFullError, IndexOffsetError

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    """Sparse map from offset to byte position in the segment's `.log`.

    Entry offsets strictly increase; `lookup(o)` returns the last entry at or below `o` so a reader
    can start scanning batch headers from there.
    """

    ENTRY_SIZE = 8

    def _load_last(self) -> None:
        if self._entries == 0:
            self._last_offset = self.base_offset
        else:
            self._last_offset = self.base_offset + _ENTRY.unpack_from(self._mm, (self._entries - 1) * 8)[0]

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_offset

    def entry(self, n: int) -> tuple[int, int]:
        """(absolute offset, position) of entry `n`."""
        rel, pos = _ENTRY.unpack_from(self._mm, n * 8)
        return self.base_offset + rel, pos

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position). Offsets must strictly increase (Kafka raises InvalidOffsetException)."""
        if self._entries >= self.max_entries:
            raise IndexFullError(f"Attempt to append to a full index (size = {self._entries}).")
        if self._entries != 0 and offset <= self._last_offset:
            raise IndexOffsetError(
                f"Attempt to append an offset ({offset}) to position {self._entries} no larger than "
                f"the last offset appended ({self._last_offset}) to {self.path}."
            )
        pos = self._entries * 8
        if pos + 8 > self._materialized:
            self._materialize(pos, 8)
        _ENTRY.pack_into(self._mm, pos, offset - self.base_offset, position)
        self._entries += 1
        self._last_offset = offset

    def _slot_for(self, target_rel: int) -> int:
        """Index of the last entry whose relative offset <= target_rel, or -1."""
        mm = self._mm
        lo, hi = 0, self._entries - 1
        if hi < 0 or _ENTRY.unpack_from(mm, 0)[0] > target_rel:
            return -1
        unpack = _ENTRY.unpack_from
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * 8)[0] <= target_rel:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target; (base offset, 0) if none."""
        slot = self._slot_for(target_offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)

    def fetch_upper_bound_position(self, fetch_offset: int, fetch_size: int) -> int | None:
        """Position of the first entry whose position is >= that of `fetch_offset` + fetch_size, if any."""
        slot = self._slot_for(fetch_offset - self.base_offset)
        start = 0 if slot < 0 else self.entry(slot)[1]
        for i in range(max(slot, 0), self._entries):
            pos = self.entry(i)[1]
            if pos >= start + fetch_size:
                return pos
        return None

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= `offset`."""
        rel = offset - self.base_offset
        slot = self._slot_for(rel)
        if slot < 0:
            n = 0
        elif _ENTRY.unpack_from(self._mm, slot * 8)[0] == rel:
            n = slot
        else:
            n = slot + 1
        self._truncate_to_entries(n)

    def sanity_check(self) -> None:
        super().sanity_check()
        if self._entries != 0 and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset is "
                f"{self._last_offset} which is less than the base offset {self.base_offset}."
            )
