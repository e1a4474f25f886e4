"""One partition as a broker of a KRaft cluster knows it (Kafka's Partition): its registration,
its log where hosted here, and, while this broker leads it, where each follower is.

The leader's high watermark is the least log end offset of the in-sync replicas (a follower's log
end is the offset of its last fetch); a follower that has caught up with the high watermark is a
candidate to join the ISR, and one that has not caught up with the leader's log end for
`replica.lag.time.max.ms` is one to leave it. The ISR changes themselves go to the controller
(AlterPartition, `cluster.alter_partition`); the registration comes back through the metadata log.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..wire.primitives import Uuid

if TYPE_CHECKING:
    from ..logstore.partition_log import PartitionLog


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass
class ReplicaState:
    """A follower as its leader sees it (Kafka's Replica.ReplicaState)."""

    log_end_offset: int = -1
    last_fetch_ms: int = -1
    #: the last time the follower's fetch reached the leader's log end (as of its previous fetch)
    last_caught_up_ms: int = -1
    #: the leader's log end at the follower's previous fetch (Kafka's lastFetchLeaderLogEndOffset)
    last_fetch_leader_end: int = -1
    broker_epoch: int = -1


@dataclass
class Partition:
    """One partition: registration, log (if hosted here) and, when led here, the followers' states."""

    topic: str
    index: int
    topic_id: Uuid
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    log: PartitionLog | None = None
    followers: dict[int, ReplicaState] = field(default_factory=dict)
    #: an AlterPartition in flight (Kafka's PendingExpandIsr / PendingShrinkIsr): the ISR asked for
    pending_isr: list[int] | None = None
    #: the leader epoch's start offset on this log (a follower must reach it to join the ISR)
    leader_epoch_start_offset: int = 0

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def replicated(self) -> bool:
        return len(self.replicas) > 1

    # ------------------------------------------------------------------ leader side

    def reset_followers(self, now: int) -> None:
        """Kafka's makeLeader: every follower starts unknown, the ISR members as just caught up."""
        self.followers = {r: ReplicaState(last_caught_up_ms=now if r in self.isr else -1)
                          for r in self.replicas if r != self.leader}
        self.pending_isr = None
        if self.log is not None:
            self.leader_epoch_start_offset = self.log.log_end_offset

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now: int) -> bool:
        """A follower fetched from `fetch_offset` (its log end); True if it is known here."""
        state = self.followers.get(replica_id)
        if state is None or self.log is None:
            return False
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_end >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now
        state.last_fetch_leader_end = leader_end
        return True

    def effective_isr(self) -> list[int]:
        """The ISR the high watermark waits for: during an expansion, the larger one (Kafka's maximalIsr)."""
        if self.pending_isr is not None and len(self.pending_isr) > len(self.isr):
            return self.pending_isr
        return self.isr

    def new_high_watermark(self) -> int | None:
        """The high watermark the ISR allows now, if it moves forward (Kafka's maybeIncrementLeaderHW)."""
        log = self.log
        if log is None:
            return None
        ends = [log.log_end_offset]
        for replica in self.effective_isr():
            if replica == self.leader:
                continue
            state = self.followers.get(replica)
            ends.append(state.log_end_offset if state is not None else -1)
        hw = min(ends)
        return hw if hw > log.high_watermark else None

    def isr_to_expand(self) -> list[int]:
        """Followers out of the ISR that have caught up (Kafka's isFollowerInSync)."""
        if self.log is None or self.pending_isr is not None:
            return []
        hw = self.log.high_watermark
        return [r for r, s in sorted(self.followers.items())
                if r not in self.isr and s.log_end_offset >= hw and s.log_end_offset >= self.leader_epoch_start_offset]

    def isr_to_shrink(self, now: int, max_lag_ms: int) -> list[int]:
        """ISR followers that have not caught up for `max_lag_ms` (Kafka's getOutOfSyncReplicas)."""
        if self.log is None or self.pending_isr is not None:
            return []
        out = []
        for r in self.isr:
            if r == self.leader:
                continue
            state = self.followers.get(r)
            if state is None:
                continue
            if state.log_end_offset != self.log.log_end_offset and now - state.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return out
