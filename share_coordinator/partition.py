"""Share-partitions on the partition leader (Kafka's SharePartition / SharePartitionManager).

A share-partition is one topic-partition as one share group consumes it. Its *in-flight window*
runs from the start offset (everything before it is done) to the end offset (the next offset not
yet handed out); each offset in the window has a delivery state and a delivery count:

* AVAILABLE -- may be acquired (again); ACQUIRED -- locked by one member until it acknowledges
  or the lock (``group.share.record.lock.duration.ms``) runs out;
* ACKNOWLEDGED -- accepted; ARCHIVED -- rejected, a gap, or released/timed out once the delivery
  count reached ``group.share.delivery.count.limit``.

The start offset moves past offsets that are ACKNOWLEDGED or ARCHIVED; the window never holds
more than ``group.share.partition.max.record.locks`` offsets. Every change of state other than an
acquisition is written to the share coordinator (``__share_group_state``) before it is answered,
as Kafka's persister does; locks are not persisted, so after a restart acquired records are
available again with the delivery count last written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..wire.errors import ErrorCode
from ..wire.records import iter_batches

log = logging.getLogger(__name__)

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
#: AcknowledgeTypes on the wire (KIP-932; RENEW is Kafka 4.2+)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

#: Kafka's defaults of the share settings (broker settings; groups may override some, see group_setting)
DEFAULTS = {
    "group.share.record.lock.duration.ms": 30000,
    "group.share.delivery.count.limit": 5,
    "group.share.partition.max.record.locks": 2000,
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
}
#: group config -> the broker setting it overrides
GROUP_OVERRIDES = {
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
}


class _Offset:
    __slots__ = ("state", "count", "member", "deadline")

    def __init__(self, state: int, count: int, member: str | None = None, deadline: float = 0.0) -> None:
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline


@dataclass
class Acquired:
    """What one acquisition hands a member: batch bytes and the acquired ranges in them."""

    data: bytes = b""
    ranges: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, delivery count)

    @property
    def count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.ranges)


class SharePartition:
    """The share state of one (group, topic partition) on its leader."""

    def __init__(self, group_id: str, topic: str, partition: int, topic_id: Any, start_offset: int,
                 state_epoch: int = 0, batches: list[tuple[int, int, int, int]] | None = None) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.window: dict[int, _Offset] = {}
        self.end_offset = start_offset
        for first, last, state, count in batches or ():
            # a lock does not survive a restart: ACQUIRED comes back as AVAILABLE
            for offset in range(max(first, start_offset), last + 1):
                self.window[offset] = _Offset(AVAILABLE if state == ACQUIRED else state, count)
            self.end_offset = max(self.end_offset, last + 1)
        for offset in range(start_offset, self.end_offset):
            self.window.setdefault(offset, _Offset(AVAILABLE, 0))
        self.advance()
        self.next_deadline = float("inf")
        #: offsets whose state changed since the last write to the share coordinator
        self.dirty: set[int] = set()
        self._locked = 0  # offsets in ACQUIRED state
        # offsets in AVAILABLE state: where the next acquisition starts, without a scan of the window
        self._available: set[int] = {o for o, e in self.window.items() if e.state == AVAILABLE}

    # ---------------------------------------------------------------- queries

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def available(self) -> set[int]:
        """Offsets of the window that may be acquired again."""
        return self._available

    def locked(self) -> int:
        """Records acquired (locked) now: ``group.share.partition.max.record.locks`` bounds these,
        not the window (Kafka's windows grow past it while records wait to be acknowledged)."""
        return self._locked

    def state_batches(self, changed_only: bool = False) -> list[tuple[int, int, int, int]]:
        """(first, last, state, delivery count) runs of the window (`changed_only`: of the offsets
        changed since the last write), as the state records hold them; an acquired offset is
        written as available (locks are not persisted)."""
        out: list[list[int]] = []
        offsets = (sorted(o for o in self.dirty if o >= self.start_offset) if changed_only
                   else range(self.start_offset, self.end_offset))
        for offset in offsets:
            entry = self.window[offset]
            state = AVAILABLE if entry.state == ACQUIRED else entry.state
            if out and out[-1][1] == offset - 1 and out[-1][2] == state and out[-1][3] == entry.count:
                out[-1][1] = offset
            else:
                out.append([offset, offset, state, entry.count])
        return [tuple(b) for b in out]  # type: ignore[misc]

    def delivery_complete_count(self) -> int:
        """Offsets of the window whose delivery is complete (ACKNOWLEDGED or ARCHIVED)."""
        return sum(1 for e in self.window.values() if e.state in (ACKNOWLEDGED, ARCHIVED))

    # ---------------------------------------------------------------- state changes

    def advance(self) -> None:
        """Move the start offset past the offsets whose delivery is complete. Kafka does this once
        the state change is written, so a write carries the start offset from before it; callers
        of expire_locks, release_member and acknowledge persist first, then advance."""
        while self.start_offset < self.end_offset:
            entry = self.window.get(self.start_offset)
            if entry is None or entry.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del self.window[self.start_offset]
            self.start_offset += 1

    def _give_back(self, offset: int, entry: _Offset, limit: int) -> None:
        self._locked -= 1  # only acquired records are given back
        entry.state = ARCHIVED if entry.count >= limit else AVAILABLE
        entry.member = None
        self.dirty.add(offset)
        if entry.state == AVAILABLE:
            self._available.add(offset)

    def expire_locks(self, now: float, limit: int) -> bool:
        """The locks of one acquisition (they share a deadline) that ran out go back (or to
        ARCHIVED at the delivery limit); True if any did (then persist, :meth:`advance` and call
        again): Kafka writes each acquisition's lock timeout on its own."""
        if now < self.next_deadline:
            return False
        due = min((e.deadline for e in self.window.values() if e.state == ACQUIRED), default=float("inf"))
        if due > now:
            self.next_deadline = due
            return False
        upcoming = float("inf")
        for offset, entry in self.window.items():
            if entry.state != ACQUIRED:
                continue
            if entry.deadline == due:
                self._give_back(offset, entry, limit)
            else:
                upcoming = min(upcoming, entry.deadline)
        self.next_deadline = upcoming
        return True

    def release_member(self, member: str, limit: int) -> bool:
        """Everything the member holds goes back (it left or closed its share session)."""
        changed = False
        for offset, entry in self.window.items():
            if entry.state == ACQUIRED and entry.member == member:
                self._give_back(offset, entry, limit)
                changed = True
        return changed

    def acquire(self, member: str, max_records: int, now: float, lock_s: float, max_locks: int,
                high_watermark: int, read: Callable[[int], bytes],
                aborted: list[tuple[int, int]] | None = None, record_limit: bool = False) -> Acquired:
        """Acquire for `member` up to about `max_records` records (whole batches): first offsets
        of the window that are available again, then new ones from the log up to the high
        watermark, as long as at most `max_locks` records are locked at once. `read(offset)` gives the
        log's batches from the one holding `offset`. With `aborted` (producer id, first offset of
        an aborted transaction: share.isolation.level=read_committed, `high_watermark` then the
        last stable offset) the records of aborted transactions are archived, never delivered.
        With `record_limit` (ShareAcquireMode record_limit) exactly up to `max_records` records are
        acquired, stopping inside a batch if need be."""
        fetch_from = min(self._available, default=self.end_offset)
        locked = self.locked()
        if locked >= max_locks or fetch_from >= high_watermark:
            return Acquired()
        if fetch_from >= high_watermark:
            return Acquired()
        buf = read(fetch_from)
        acquired: list[int] = []
        batch_of: dict[int, int] = {}  # acquired offset -> base offset of its batch
        first_pos = last_end = -1
        deadline = now + lock_s
        full = False
        pending = sorted(aborted or (), key=lambda a: a[1])
        open_aborts: set[int] = set()  # producers inside an aborted transaction here
        for batch in iter_batches(buf):
            h = batch.header()
            base, last = h.base_offset, h.base_offset + h.last_offset_delta
            while pending and pending[0][1] <= base:
                open_aborts.add(pending.pop(0)[0])
            control = bool(h.attributes & 0x20)
            in_abort = bool(h.attributes & 0x10) and h.producer_id in open_aborts
            if in_abort and control:
                open_aborts.discard(h.producer_id)  # the abort marker ends it
            if last < fetch_from or last >= high_watermark and base >= high_watermark:
                continue
            if len(acquired) >= max_records or full:
                break
            control = control or in_abort
            took = False
            for offset in range(max(base, fetch_from), min(last, high_watermark - 1) + 1):
                if record_limit and len(acquired) >= max_records:
                    full = True
                    break
                entry = self.window.get(offset)
                if entry is None:
                    if offset < self.end_offset:
                        continue  # before the window: done already
                    if locked >= max_locks:
                        full = True
                        break
                    entry = self.window[offset] = _Offset(AVAILABLE, 0)
                    self.end_offset = offset + 1
                if entry.state != AVAILABLE:
                    continue
                if control:
                    self._available.discard(offset)
                    # transaction markers and aborted records are never delivered; as in Kafka this
                    # is not written (a restart archives them again)
                    entry.state = ARCHIVED
                    continue
                if locked >= max_locks:
                    full = True
                    break
                self._available.discard(offset)
                locked += 1
                self._locked += 1
                entry.state = ACQUIRED
                entry.count += 1
                entry.member = member
                entry.deadline = deadline
                acquired.append(offset)
                batch_of[offset] = base
                took = True
            if took:
                if first_pos < 0:
                    first_pos = batch.position
                last_end = batch.position + batch.size_in_bytes
        if acquired:
            self.next_deadline = min(self.next_deadline, deadline)
        self.advance()
        if not acquired:
            return Acquired()
        ranges: list[list[int]] = []
        for offset in acquired:
            count = self.window[offset].count
            # one AcquiredRecords per batch, as Kafka answers (its in-flight batches follow the log's)
            if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == count \
                    and batch_of[offset] == batch_of[offset - 1]:
                ranges[-1][1] = offset
            else:
                ranges.append([offset, offset, count])
        return Acquired(bytes(buf[first_pos:last_end]), [tuple(r) for r in ranges])  # type: ignore[misc]

    def check_acknowledge(self, member: str, first: int, last: int, types: list[int]) -> ErrorCode:
        """Whether the member may acknowledge [first, last] with these types."""
        if last < first or not types or len(types) not in (1, last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            return ErrorCode.INVALID_REQUEST
        for offset in range(first, last + 1):
            entry = self.window.get(offset)
            if entry is None or entry.state != ACQUIRED or entry.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        return ErrorCode.NONE

    def acknowledge(self, member: str, first: int, last: int, types: list[int], now: float, lock_s: float,
                    limit: int) -> bool:
        """Apply checked acknowledgements; True if anything to persist changed (RENEW alone does not)."""
        changed = False
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            entry = self.window[offset]
            if kind == RENEW:
                entry.deadline = now + lock_s
                self.next_deadline = min(self.next_deadline, entry.deadline)
                continue
            changed = True
            entry.member = None
            self.dirty.add(offset)
            if kind == ACCEPT:
                self._locked -= 1
                entry.state = ACKNOWLEDGED
            elif kind == RELEASE:
                self._give_back(offset, entry, limit)
            else:  # REJECT, GAP
                self._locked -= 1
                entry.state = ARCHIVED
        return changed

    def reset_start(self, offset: int) -> None:
        """AlterShareGroupOffsets: start again at `offset` with an empty window."""
        self.window.clear()
        self.dirty.clear()
        self._locked = 0
        self._available.clear()
        self.start_offset = self.end_offset = offset
        self.next_deadline = float("inf")


def read_batches(plog: Any, offset: int, max_bytes: int, high_watermark: int) -> bytes:
    """The log's batches from the one holding `offset`, up to `max_bytes` (at least one batch)."""
    data = plog.read(offset, max_bytes, high_watermark, True)
    return b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in data.slices)
