"""`.timeindex` files (Kafka's TimeIndex): 12-byte entries, int64 timestamp + int32 relative offset.

Meaning of an entry (ts, o): every record with a timestamp larger than ts is at or after offset o.
"""

from __future__ import annotations

import struct

from .index_base import CorruptIndexError, IndexFile, IndexFullError, IndexOffsetError

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """Sparse map from timestamp to offset; timestamps and offsets never decrease."""

    ENTRY_SIZE = 12

    def _load_last(self) -> None:
        if self._entries == 0:
            self._last_ts, self._last_offset = NO_TIMESTAMP, self.base_offset
        else:
            ts, rel = _ENTRY.unpack_from(self._mm, (self._entries - 1) * 12)
            self._last_ts, self._last_offset = ts, self.base_offset + rel

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, (-1, base offset) when empty."""
        return self._last_ts, self._last_offset

    def is_full(self) -> bool:
        # One slot is kept free so the roll/close entry always fits (Kafka's TimeIndex.isFull).
        return self._entries >= self.max_entries - 1

    def entry(self, n: int) -> tuple[int, int]:
        ts, rel = _ENTRY.unpack_from(self._mm, n * 12)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) only if the timestamp is strictly larger than the last entry's."""
        if not skip_full_check and self.is_full():
            raise IndexFullError(f"Attempt to append to a full time index (size = {self._entries}).")
        if self._entries != 0 and offset < self._last_offset:
            raise IndexOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than the last "
                f"offset appended ({self._last_offset}) to {self.path}."
            )
        if self._entries != 0 and timestamp < self._last_ts:
            raise IndexOffsetError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than the "
                f"last timestamp appended ({self._last_ts}) to {self.path}."
            )
        if timestamp > self._last_ts:
            if self._entries >= self.max_entries:
                raise IndexFullError(f"Time index {self.path} has no room left")
            pos = self._entries * 12
            if pos + 12 > self._materialized:
                self._materialize(pos, 12)
            _ENTRY.pack_into(self._mm, pos, timestamp, offset - self.base_offset)
            self._entries += 1
            self._last_ts, self._last_offset = timestamp, offset

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target; (-1, base offset) if none."""
        mm = self._mm
        n = self._entries
        unpack = _ENTRY.unpack_from
        if n == 0 or unpack(mm, 0)[0] > target_ts:
            return NO_TIMESTAMP, self.base_offset
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * 12)[0] <= target_ts:
                lo = mid
            else:
                hi = mid - 1
        return self.entry(lo)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= `offset`."""
        rel = offset - self.base_offset
        unpack = _ENTRY.unpack_from
        n = self._entries
        # entries are few compared with the offset index; find the last slot with rel offset <= rel
        lo, hi, slot = 0, n - 1, -1
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(self._mm, mid * 12)[1] <= rel:
                slot, lo = mid, mid + 1
            else:
                hi = mid - 1
        if slot < 0:
            keep = 0
        elif unpack(self._mm, slot * 12)[1] == rel:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)

    def sanity_check(self) -> None:
        super().sanity_check()
        if self._entries != 0:
            first_ts = _ENTRY.unpack_from(self._mm, 0)[0]
            if self._last_ts < first_ts:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size but the "
                    f"last timestamp is {self._last_ts} which is less than the first timestamp {first_ts}"
                )
            if self._last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size but the "
                    f"last offset is {self._last_offset} which is less than the base offset {self.base_offset}"
                )
