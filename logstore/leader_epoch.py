"""Leader epoch cache backed by `leader-epoch-checkpoint` (Kafka's LeaderEpochFileCache)."""

from __future__ import annotations

import logging
from pathlib import Path

from .checkpoints import LeaderEpochCheckpointFile

log = logging.getLogger(__name__)


class LeaderEpochCache:
    """(epoch, start offset) pairs in increasing order; rewritten to disk on every change."""

    def __init__(self, path: Path, create: bool = True) -> None:
        self.file = LeaderEpochCheckpointFile(path, create=create)
        self.entries: list[tuple[int, int]] = self.file.read()

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (Kafka's assign rules); True if it changed.

        Only added if the epoch differs from the latest one or starts lower; entries with an epoch >=
        the new one or a start offset >= the new one are dropped first.
        """
        if epoch < 0:
            return False
        if self.entries:
            last_epoch, last_off = self.entries[-1]
            if last_epoch == epoch and last_off <= start_offset:
                return False
        kept = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        kept.append((epoch, start_offset))
        if kept == self.entries:
            return False
        removed = [x for x in self.entries if x not in kept]
        if removed:
            log.debug("leader epoch cache %s: removed %s while assigning (%d, %d)",
                      self.file.path, removed, epoch, start_offset)
        self.entries = kept
        self.flush()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries whose start offset is >= `end_offset` (after a log truncation)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below `start_offset`; the one covering it is moved up to it."""
        if not self.entries:
            return
        kept = [(e, o) for e, o in self.entries if o >= start_offset]
        below = [(e, o) for e, o in self.entries if o < start_offset]
        if below:
            kept.insert(0, (below[-1][0], start_offset))
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: the start of the next higher epoch."""
        if not self.entries or epoch < self.entries[0][0]:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        found = None
        for i, (e, _o) in enumerate(self.entries):
            if e > epoch:
                found = i
                break
        if found is None:
            return self.entries[-1][0], log_end_offset
        prev = self.entries[found - 1] if found > 0 else None
        if prev is None:
            return -1, -1
        return prev[0], self.entries[found][1]

    def flush(self) -> None:
        self.file.write(self.entries)

    def clear(self) -> None:
        self.entries = []
        self.flush()
