"""The log cleaner's key -> latest offset map (Kafka's OffsetMap / SkimpyOffsetMap).

Kafka stores a 16-byte MD5 of each key and an 8-byte offset per slot in a fixed buffer
(log.cleaner.dedupe.buffer.size / number of cleaner threads), and stops adding keys once
`slots * log.cleaner.io.buffer.load.factor` are used: the cleaning round then ends at the last
offset the map covers and the rest of the dirty section waits for the next round. This map keeps
the same capacity rules (same slot count, same "full" point) so a round covers the same offsets
as Kafka's, and the same memory bound: an open-addressing table of 16-byte digests and 8-byte
offsets in two numpy arrays (24 bytes a slot, no Python object per key), grown by doubling up to
the buffer's slot count as keys arrive (a small map does not take the whole buffer).

Keys reach the table through a staging dict (`entries`, digest -> offset, at most
`STAGE_LIMIT` keys): the cleaner's batch walkers put into it at dict speed, and a flush moves it
into the table with a handful of vectorised numpy operations (later puts win, as the log is read
in order). Keys shorter than a digest are staged as themselves (cheaper than MD5) and stored as
the key, zero-padded, with its length in the last byte; a digest of a longer key that happened to
equal that form is as likely as an MD5 collision.

Besides the table, the map can mark the offsets it holds (`latest_marks`): inside the mapped part
of the dirty section a record is the latest of its key exactly when its offset is one of them
(offsets are unique), so the rewrite decides whole batches by counting marks in their offset
range instead of hashing every key again.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: bytes of one slot in Kafka's map: MD5 digest + offset
BYTES_PER_ENTRY = 16 + 8
#: staged keys that trigger a flush into the table (bounds the Python objects alive at once)
STAGE_LIMIT = 1 << 16
#: the table's first capacity (slots), doubled as keys arrive, up to `slots`
_INITIAL_CAPACITY = 1 << 12
_M0 = 0x9E3779B97F4A7C15
_M1 = 0xC2B2AE3D27D4EB4F
_MASK = (1 << 64) - 1


# numpy is imported where the table is used, not with this module: a broker whose cleaner works
# in a worker process never loads it (start-up time, idle memory)


def _hash(k0: np.ndarray, k1: np.ndarray, capacity: int) -> np.ndarray:
    import numpy as np  # noqa: PLC0415

    # a multiply-xorshift mix of both halves (short keys differ in a few bytes only)
    h = k0 ^ (k1 * np.uint64(_M1))
    h ^= h >> np.uint64(29)
    h *= np.uint64(_M0)
    h ^= h >> np.uint64(32)
    return h % np.uint64(capacity)


def _hash_one(k0: int, k1: int, capacity: int) -> int:
    """`_hash` of one key in Python integers (numpy's uint64 arithmetic wraps modulo 2**64)."""
    h = k0 ^ ((k1 * _M1) & _MASK)
    h ^= h >> 29
    h = (h * _M0) & _MASK
    h ^= h >> 32
    return h % capacity


def fixed_digests(keys: list[bytes]) -> np.ndarray:
    """(n, 2) uint64: the 16-byte table form of staged keys (digests as they are, shorter keys
    zero-padded with their length in the last byte)."""
    import numpy as np  # noqa: PLC0415

    n = len(keys)
    lens = np.fromiter(map(len, keys), np.int64, n)
    joined = b"".join(keys)
    if n and lens.min() == lens.max():
        # one key length (the usual case): a reshape, no gather
        width = int(lens[0])
        if width == 16:
            return np.frombuffer(joined, np.uint8).reshape(n, 16).view("<u8").copy()
        rows = np.zeros((n, 16), np.uint8)
        rows[:, :width] = np.frombuffer(joined, np.uint8).reshape(n, width)
        rows[:, 15] = width
        return rows.view("<u8")
    buf = np.frombuffer(joined + bytes(16), np.uint8)
    starts = np.zeros(n, np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    cols = np.arange(16)
    rows = buf[starts[:, None] + cols[None, :]]
    short = lens < 16
    rows[short[:, None] & (cols[None, :] >= lens[:, None])] = 0
    rows[short, 15] = lens[short].astype(np.uint8)
    return rows.view("<u8")


class OffsetMap:
    """Latest offset of each key of the dirty section being cleaned.

    `memory_bytes` is the dedupe buffer given to one cleaner thread; `slots` is what Kafka's
    SkimpyOffsetMap would get from it (and the most slots the table ever has). `latest_offset` is
    the last offset the map has seen (or was fast-forwarded to with `update_latest_offset`), -1
    when empty.
    """

    __slots__ = ("_count", "_k0", "_k1", "_latest", "_latest_first", "_offsets", "_staged", "latest_offset", "lookups",
                 "probes", "slots", "tombstones")

    def __init__(self, memory_bytes: int) -> None:
        self.slots = max(memory_bytes // BYTES_PER_ENTRY, 1)
        self._staged: dict[bytes, int] = {}
        # the table: allocated at the first flush (and numpy imported then)
        self._k0: np.ndarray | None = None
        self._k1: np.ndarray | None = None
        self._offsets: np.ndarray | None = None
        self._count = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0
        #: offsets of the keyed tombstones put (latest or not), in put order
        self.tombstones: list[int] = []
        self._latest: bytearray | None = None
        self._latest_first = 0

    @property
    def entries(self) -> dict[bytes, int]:
        """The staging dict (digest -> offset), for the cleaner's batch walkers, which put
        `_digest(key)` directly (they must append tombstones' offsets to `tombstones` too, and
        call `flush` when it holds `STAGE_LIMIT` keys or the map may be near full)."""
        self._latest = None
        return self._staged

    @staticmethod
    def _digest(key: bytes | memoryview) -> bytes:
        # Keys shorter than a digest are their own (collision-free) hash: cheaper than MD5, and
        # their length tells them apart from the 16-byte digests of longer keys.
        if len(key) < 16:
            return bytes(key)
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes | memoryview, offset: int, tombstone: bool = False) -> None:
        """Record `offset` as the latest offset of `key` (later puts win, as the log is read in order)."""
        staged = self._staged
        staged[self._digest(key)] = offset
        self.latest_offset = offset
        self._latest = None
        if tombstone:
            self.tombstones.append(offset)
        if len(staged) >= STAGE_LIMIT:
            self.flush()

    # -- the table --------------------------------------------------------------------------
    def flush(self) -> None:
        """Move the staged keys into the table."""
        staged = self._staged
        if not staged:
            return
        import numpy as np  # noqa: PLC0415

        if self._offsets is None:
            self._alloc(min(self.slots, _INITIAL_CAPACITY))
        assert self._offsets is not None
        n = len(staged)
        digests = fixed_digests(list(staged))
        offsets = np.fromiter(staged.values(), np.int64, n)
        staged.clear()
        needed = self._count + n
        capacity = len(self._offsets)
        if needed * 2 > capacity and capacity < self.slots:
            self._grow(min(self.slots, max(capacity * 2, 1 << (needed * 2 - 1).bit_length())))
        if self._count + n > len(self._offsets):
            # more new keys than free slots can only mean these are updates; the cleaner never
            # puts past its "full" point, which is below the slot count
            self._insert(digests, offsets, strict=False)
        else:
            self._insert(digests, offsets)

    def _alloc(self, capacity: int) -> None:
        import numpy as np  # noqa: PLC0415

        self._k0 = np.zeros(capacity, np.uint64)
        self._k1 = np.zeros(capacity, np.uint64)
        self._offsets = np.full(capacity, -1, np.int64)
        self._count = 0

    def _grow(self, capacity: int) -> None:
        import numpy as np  # noqa: PLC0415

        assert self._k0 is not None and self._k1 is not None and self._offsets is not None
        occupied = self._offsets >= 0
        keys = np.stack((self._k0[occupied], self._k1[occupied]), axis=1)
        offsets = self._offsets[occupied]
        self._alloc(capacity)
        self._insert(keys, offsets)

    def _insert(self, digests: np.ndarray, offsets: np.ndarray, strict: bool = True) -> None:
        """Linear-probing insert of distinct digests, all at once: each round, every pending key
        looks at its slot; a key already there takes the new offset, keys on an empty slot claim
        it (one per slot wins; the others look again next round), keys on another key's slot
        move on to the next one."""
        import numpy as np  # noqa: PLC0415

        t0, t1, table_offsets = self._k0, self._k1, self._offsets
        assert t0 is not None and t1 is not None and table_offsets is not None
        capacity = len(table_offsets)
        k0 = np.ascontiguousarray(digests[:, 0])
        k1 = np.ascontiguousarray(digests[:, 1])
        pos = _hash(k0, k1, capacity).astype(np.int64)
        pending = np.arange(len(offsets))
        rounds = 0
        while pending.size:
            rounds += 1
            # a key moves one slot a round, or loses a claim to another key (at most n times)
            if rounds > capacity + len(offsets) + 1:
                if strict:
                    raise RuntimeError("offset map table is full")
                break
            p = pos[pending]
            empty = table_offsets[p] < 0
            claimants = pending[empty]
            if claimants.size:
                slots = p[empty]
                # every claimant writes its (negative) mark; the one that stays there wins
                table_offsets[slots] = -2 - claimants
                won = table_offsets[slots] == -2 - claimants
                winners, won_slots = claimants[won], slots[won]
                t0[won_slots] = k0[winners]
                t1[won_slots] = k1[winners]
                table_offsets[won_slots] = offsets[winners]
                self._count += len(winners)
                losers = claimants[~won]
                taken = ~empty
                p, pending = p[taken], pending[taken]
            else:
                losers = claimants
            same = (t0[p] == k0[pending]) & (t1[p] == k1[pending])
            if same.any():
                table_offsets[p[same]] = offsets[pending[same]]
            other = ~same
            moving = pending[other]
            pos[moving] = (p[other] + 1) % capacity
            pending = np.concatenate((moving, losers)) if losers.size else moving
        self.probes += rounds

    def latest_marks(self, first: int) -> bytearray:
        """One byte per offset from `first` (no offset held is below it) to `latest_offset`:
        1 where the map holds that offset, 2 where it is also a tombstone, 0 elsewhere."""
        if self._latest is None or self._latest_first != first:
            import numpy as np  # noqa: PLC0415

            self.flush()
            marks = np.zeros(max(self.latest_offset - first + 1, 0), np.uint8)
            if self._offsets is not None:
                held = self._offsets[self._offsets >= 0]
                marks[held - first] = 1
            if self.tombstones:
                tombs = np.asarray(self.tombstones, np.int64) - first
                tombs = tombs[marks[tombs] == 1]
                marks[tombs] = 2
            self._latest = bytearray(marks.tobytes())
            self._latest_first = first
        return self._latest

    def get(self, key: bytes | memoryview) -> int:
        """The latest offset of `key`, or -1 if the map has not seen it."""
        self.lookups += 1
        self.flush()
        d = self._digest(key)
        if len(d) < 16:
            d = d.ljust(15, b"\0") + bytes((len(d),))
        k0 = int.from_bytes(d[:8], "little")
        k1 = int.from_bytes(d[8:], "little")
        t0, t1, table_offsets = self._k0, self._k1, self._offsets
        if t0 is None or t1 is None or table_offsets is None:
            return -1
        capacity = len(table_offsets)
        pos = _hash_one(k0, k1, capacity)
        for _ in range(capacity):
            offset = int(table_offsets[pos])
            if offset < 0:
                return -1
            if int(t0[pos]) == k0 and int(t1[pos]) == k1:
                return offset
            pos = (pos + 1) % capacity
        return -1

    def has_room(self, limit: int) -> bool:
        """Whether the map holds fewer than `limit` distinct keys (exact: flushes when the
        staged keys might reach it)."""
        if self._count + len(self._staged) < limit:
            return True
        self.flush()
        return self._count < limit

    def update_latest_offset(self, offset: int) -> None:
        """Move `latest_offset` forward over offsets without keys (gaps, control batches, aborted data)."""
        self.latest_offset = offset

    def clear(self) -> None:
        # the table keeps its size, as Kafka keeps its buffer; only the occupancy is reset
        self._staged.clear()
        if self._offsets is not None:
            self._offsets.fill(-1)
        self._count = 0
        self.latest_offset = -1
        self.tombstones = []
        self._latest = None

    @property
    def size(self) -> int:
        """Number of distinct keys held."""
        self.flush()
        return self._count

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def __len__(self) -> int:
        return self.size
