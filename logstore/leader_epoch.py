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
        """(epoch, end offset) for OffsetsForLeaderEpoch (Kafka's endOffsetFor).

        The latest epoch ends at the LEO; an older one ends where the next higher epoch starts (with the
        largest known epoch <= the requested one); an epoch above every known one gives (-1, -1).
        """
        if epoch < 0 or not self.entries:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > epoch), None)
        if higher is None:
            return -1, -1
        floor = [(e, o) for e, o in self.entries if e <= epoch]
        return (floor[-1][0] if floor else epoch), higher[1]

    def flush(self) -> None:
        self.file.write(self.entries)

    def clear(self) -> None:
        self.entries = []
        self.flush()
