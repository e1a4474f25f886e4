"""Fetch sessions (KIP-227): the broker remembers what a consumer fetches so that later
requests and responses carry only the partitions that changed.

Epoch rules, as in Kafka's FetchManager: session_id 0 with epoch -1 is a sessionless full
fetch; epoch 0 starts a new full session; epoch > 0 is an incremental fetch of an existing
session whose next expected epoch must match; epoch -1 with a session id closes it.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

import trio

from ..wire.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# Kafka's max.incremental.fetch.session.cache.slots default.
MAX_SESSIONS = 1000

# A partition is keyed by (topic name or topic id, partition index).
PartitionKey = tuple[object, int]


@dataclass
class CachedPartition:
    """What the session knows about one partition: the fetch position and what was last sent."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


@dataclass
class FetchSession:
    session_id: int
    next_epoch: int
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)


class SessionError(Exception):
    """The request names a session or epoch the broker does not have."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class FetchSessionCache:
    """All fetch sessions of the broker, bounded like Kafka's cache (oldest evicted first)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 2**30))

    def _new_id(self) -> int:
        while True:
            candidate = next(self._ids) & 0x7FFFFFFF
            if candidate and candidate not in self.sessions:
                return candidate

    def begin(self, session_id: int, epoch: int, full: list[tuple[PartitionKey, CachedPartition]],
              forgotten: list[PartitionKey]) -> tuple[FetchSession | None, list[PartitionKey], bool]:
        """Resolve a request into (session or None, partitions to read, incremental?).

        Raises SessionError with Kafka's code for an unknown session or a wrong epoch.
        """
        if epoch == FINAL_EPOCH:
            self.sessions.pop(session_id, None)
            return None, [key for key, _ in full], False
        if epoch == INITIAL_EPOCH:
            self.sessions.pop(session_id, None)
            session = FetchSession(self._new_id(), 1, OrderedDict(full))
            self.sessions[session.session_id] = session
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
            return session, list(session.partitions), False
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.next_epoch:
            raise SessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for key, cached in full:
            existing = session.partitions.get(key)
            if existing is None:
                session.partitions[key] = cached
            else:
                existing.fetch_offset = cached.fetch_offset
                existing.max_bytes = cached.max_bytes
                existing.current_leader_epoch = cached.current_leader_epoch
        for key in forgotten:
            session.partitions.pop(key, None)
        session.next_epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        self.sessions.move_to_end(session.session_id)
        return session, list(session.partitions), True


class AppendWaiters:
    """Long-polling fetches waiting for data, by partition.

    A Fetch waits on the partitions it reads, so an append to one partition wakes only the fetches
    that read it (before, every append woke every waiting fetch, which then re-read all of their
    partitions to find nothing new). Partitions are keyed by (topic name, index).
    """

    def __init__(self) -> None:
        self._by_partition: dict[tuple[str, int], set[trio.Event]] = {}
        self._any: set[trio.Event] = set()

    def waiting(self) -> int:
        """How many waits are registered (tests)."""
        events = set(self._any)
        for waiting in self._by_partition.values():
            events |= waiting
        return len(events)

    def notify(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Data was appended to `partitions` (None: to anything, e.g. coordinator records and
        transaction markers, which can move the last stable offset of many partitions)."""
        if partitions is None:
            for waiting in self._by_partition.values():
                for event in waiting:
                    event.set()
        else:
            by_partition = self._by_partition
            for tp in partitions:
                waiting = by_partition.get(tp)
                if waiting:
                    for event in waiting:
                        event.set()
        for event in self._any:
            event.set()

    async def wait(self, timeout_s: float, partitions: Iterable[tuple[str, int]] | None = None) -> bool:
        """Wait until one of `partitions` (None: any partition) gets data or `timeout_s` passes;
        True if woken by an append."""
        event = trio.Event()
        keys = list(partitions) if partitions is not None else None
        by_partition = self._by_partition
        if keys is None:
            self._any.add(event)
        else:
            for tp in keys:
                waiting = by_partition.get(tp)
                if waiting is None:
                    waiting = by_partition[tp] = set()
                waiting.add(event)
        try:
            with trio.move_on_after(timeout_s):
                await event.wait()
                return True
            return False
        finally:
            if keys is None:
                self._any.discard(event)
            else:
                for tp in keys:
                    waiting = by_partition.get(tp)
                    if waiting is not None:
                        waiting.discard(event)
                        if not waiting:
                            del by_partition[tp]
