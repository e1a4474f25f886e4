"""Per-partition leadership on a broker of a KRaft cluster (Kafka's ReplicaManager and Partition).

The committed metadata says who leads each partition and in which epoch. `ReplicaManager.apply`
brings this broker in line after every metadata change, as Kafka's ReplicaManager.applyDelta
does: it becomes the leader of the partitions the controller gave it (their log made if needed,
the new leader epoch started at the log end), stops leading the ones taken away, and deletes the
logs of replicas it no longer hosts (deleted topics, reassigned partitions). Handlers ask it for
a partition's log and for the error to answer when this broker does not lead the partition.

Followers (replication factor above 1) come with the replication work: a partition this broker
hosts but does not lead is answered NOT_LEADER_OR_FOLLOWER and its log is kept as it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..logstore.config import LogConfig
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid

if TYPE_CHECKING:
    from ..broker import Broker
    from ..kraft.image import MetadataImage
    from ..logstore.partition_log import PartitionLog

log = logging.getLogger(__name__)


@dataclass
class Partition:
    """One partition as this broker knows it: its registration and, where hosted here, its log."""

    topic: str
    index: int
    topic_id: Uuid
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    log: PartitionLog | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"


class ReplicaManager:
    """The partitions of the cluster, and this broker's part in each."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.partitions: dict[tuple[str, int], Partition] = {}

    # ------------------------------------------------------------------ queries

    def leader_log(self, topic: str, index: int) -> PartitionLog | None:
        """The log of a partition this broker leads, else None."""
        part = self.partitions.get((topic, index))
        if part is None or part.leader != self.node_id:
            return None
        return part.log

    def error_for(self, topic: str, index: int) -> ErrorCode:
        """What to answer for a partition this broker has no leader log of (Kafka's
        getPartitionOrError): NOT_LEADER_OR_FOLLOWER when it exists, else UNKNOWN_TOPIC_OR_PARTITION."""
        if (topic, index) in self.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # ------------------------------------------------------------------ metadata changes

    def apply(self, image: MetadataImage) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """Bring the partitions (and this broker's logs) in line with the committed metadata;
        returns the partitions this broker became the leader of, and those it stopped leading."""
        broker = self.broker
        seen: set[tuple[str, int]] = set()
        elected: list[tuple[str, int]] = []
        resigned: list[tuple[str, int]] = []
        for topic in image.topics_by_id.values():
            configs = image.topic_configs(topic.name)
            for index, state in topic.partitions.items():
                key = (topic.name, index)
                seen.add(key)
                part = self.partitions.get(key)
                if part is None or part.topic_id != topic.topic_id:
                    if part is not None:
                        if part.leader == self.node_id:
                            resigned.append(key)
                        self._drop(part, "its topic was replaced")
                    part = self.partitions[key] = Partition(topic.name, index, topic.topic_id)
                was_leader = part.leader == self.node_id
                new_epoch = state.leader_epoch != part.leader_epoch
                part.leader, part.leader_epoch = state.leader, state.leader_epoch
                part.partition_epoch = state.partition_epoch
                part.replicas, part.isr = list(state.replicas), list(state.isr)
                if self.node_id not in state.replicas:
                    if was_leader:
                        resigned.append(key)
                    if part.log is not None:
                        self._drop(part, "this broker is no longer one of its replicas")
                    continue
                if state.leader == self.node_id:
                    if part.log is None:
                        config = LogConfig.from_props(configs, base=broker.default_log_config)
                        part.log = broker.log_manager.create_log(topic.name, index, topic.topic_id.bytes, config)
                    if new_epoch or not was_leader:
                        # Kafka's Partition.makeLeader: the new epoch starts at the log end offset
                        part.log.become_leader(state.leader_epoch)
                        log.info("[ReplicaManager broker=%d] Leader %s with leader epoch %d", self.node_id,
                                 part.name, state.leader_epoch)
                    if not was_leader:
                        elected.append(key)
                elif was_leader:
                    resigned.append(key)
                    log.info("[ReplicaManager broker=%d] No longer the leader of %s (leader %d, epoch %d)",
                             self.node_id, part.name, state.leader, state.leader_epoch)
        for key in [k for k in self.partitions if k not in seen]:
            part = self.partitions.pop(key)
            if part.leader == self.node_id:
                resigned.append(key)
            self._drop(part, "its topic was deleted")
        return elected, resigned

    def _drop(self, part: Partition, why: str) -> None:
        if part.log is None:
            return
        log.info("[ReplicaManager broker=%d] Deleting the log of %s: %s", self.node_id, part.name, why)
        self.broker.log_manager.delete_log(part.topic, part.index)
        part.log = None
