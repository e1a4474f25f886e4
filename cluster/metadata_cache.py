"""What a broker tells clients about the cluster: its brokers, the controller id it names, and
each partition's leader, epoch, replicas and ISR (Kafka's MetadataCache).

Two kinds, one interface: `LocalMetadataCache` for the single combined node (this node leads
everything), `KRaftMetadataCache` for a broker in a KRaft cluster, read from the metadata image
that the metadata-log observer keeps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

#: Kafka's error codes for a partition without a usable leader.
LEADER_NOT_AVAILABLE = 5
LISTENER_NOT_FOUND = 72

if TYPE_CHECKING:
    from ..broker import Broker
    from ..kraft.image import MetadataImage


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A broker as Metadata and DescribeCluster answers list it."""

    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A partition's leadership as this broker answers it."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error: int = 0
    #: KIP-966's eligible leader replicas and last known ones (DescribeTopicPartitions)
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)


class LocalMetadataCache:
    """The single combined node: the only broker, the controller, the leader of everything but the
    partitions of a failed log dir (their leader is -1 until a restart)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @property
    def generation(self) -> int:
        # only a failed log dir (and this node's own restart) changes what it answers
        log_manager = getattr(self.broker, "log_manager", None)
        return len(getattr(log_manager, "offline_partitions", ()) or ())

    def alive_brokers(self, listener_name: str) -> list[BrokerNode]:
        from ..handlers.common import advertised_endpoint  # noqa: PLC0415 - handlers import this module

        host, port = advertised_endpoint(self.broker, listener_name)
        return [BrokerNode(self.broker.node_id, host, port, None)]

    def all_brokers(self, listener_name: str) -> list[BrokerNode]:
        return self.alive_brokers(listener_name)

    def controller_id(self) -> int:
        return self.broker.node_id

    def partition(self, topic: str, index: int, listener_name: str | None = None) -> PartitionView | None:
        from ..handlers.common import partition_leader_epoch  # noqa: PLC0415

        node = self.broker.node_id
        offline = _offline_partition(self.broker, topic, index)
        if offline is not None:
            return offline
        return PartitionView(node, partition_leader_epoch(self.broker, topic, index), [node], [node], [])


_UNASSIGNED_OR_MIGRATING = (bytes(16), bytes(15) + b"\x02")


def _dir_online(part: Any, i: int, reg: Any) -> bool:
    """Kafka's DirectoryId.isOnline: the replica's dir is among the broker's online dirs (unassigned
    and migrating replicas, and brokers registered without dirs, count as online)."""
    directory = part.directories[i] if i < len(part.directories or ()) else None
    dirs = reg.log_dirs or []
    if directory is None or not dirs or directory.bytes in _UNASSIGNED_OR_MIGRATING:
        return True
    return directory in dirs


def _offline_partition(broker: Broker, topic: str, index: int) -> PartitionView | None:
    """A partition of a failed log dir as the metadata records it (leader -1, this node's replica
    offline: Kafka's KRaftMetadataCache with the dir gone from the broker's registration)."""
    log_manager = getattr(broker, "log_manager", None)
    if not getattr(log_manager, "offline_partitions", None) or (topic, index) not in log_manager.offline_partitions:
        return None
    image = getattr(getattr(broker, "metadata_store", None), "image", None)
    state = image.topic(topic) if image is not None else None
    part = state.partitions.get(index) if state is not None else None
    if part is None or part.leader != -1:
        return None
    offline = []
    for i, replica in enumerate(part.replicas):
        reg = image.brokers.get(replica)
        directory = part.directories[i] if i < len(part.directories) else None
        if reg is None or reg.fenced or (directory is not None and reg.log_dirs and directory not in reg.log_dirs):
            offline.append(replica)
    return PartitionView(-1, part.leader_epoch, list(part.replicas), list(part.isr), offline, LEADER_NOT_AVAILABLE)


class KRaftMetadataCache:
    """A broker of a KRaft cluster: brokers and partitions as the committed metadata says."""

    def __init__(self, image: MetadataImage, node_id: int) -> None:
        self.image = image
        self.node_id = node_id
        #: Bumped on every applied change, so cached Metadata entries of a changed cluster are rebuilt.
        self.generation = 0

    def changed(self) -> None:
        self.generation += 1

    def _nodes(self, listener_name: str, regs: list[Any]) -> list[BrokerNode]:
        out = []
        for reg in regs:
            endpoint = next((e for e in reg.end_points if e.name == listener_name), None)
            if endpoint is None:
                continue  # Kafka lists a broker only on the listeners it registered
            out.append(BrokerNode(reg.broker_id, endpoint.host, endpoint.port, reg.rack, bool(reg.fenced)))
        return out

    def alive_brokers(self, listener_name: str) -> list[BrokerNode]:
        return self._nodes(listener_name, self.image.alive_brokers())

    def all_brokers(self, listener_name: str) -> list[BrokerNode]:
        return self._nodes(listener_name, [reg for _id, reg in sorted(self.image.brokers.items())])

    def all_brokers_any_listener(self) -> list[BrokerNode]:
        """Every registered broker (id, rack), whatever its listeners (host and port left empty)."""
        return [BrokerNode(reg.broker_id, "", -1, reg.rack, bool(reg.fenced))
                for _id, reg in sorted(self.image.brokers.items())]

    def controller_id(self) -> int:
        # KRaft brokers name a random alive broker as the controller: clients send controller-bound
        # requests there and the broker forwards them (KIP-590)
        alive = self.image.alive_brokers()
        return random.choice(alive).broker_id if alive else -1

    def partition(self, topic: str, index: int, listener_name: str | None = None) -> PartitionView | None:
        """Kafka's KRaftMetadataCache.getPartitionMetadata: a leader that is not alive (or has no
        endpoint on the client's listener) is answered as -1 with LEADER_NOT_AVAILABLE
        (LISTENER_NOT_FOUND); replicas on fenced or unknown brokers are offline."""
        state = self.image.topic(topic)
        part = state.partitions.get(index) if state is not None else None
        if part is None:
            return None
        brokers = self.image.brokers
        alive = {reg.broker_id: reg for reg in self.image.alive_brokers()}
        offline = [r for i, r in enumerate(part.replicas) if r not in alive or not _dir_online(part, i, alive[r])]
        leader, error = part.leader, 0
        reg = alive.get(part.leader)
        if reg is None:
            leader, error = -1, LEADER_NOT_AVAILABLE
        elif listener_name is not None and not any(e.name == listener_name for e in reg.end_points):
            leader, error = -1, LISTENER_NOT_FOUND if part.leader in brokers else LEADER_NOT_AVAILABLE
        return PartitionView(leader, part.leader_epoch, list(part.replicas), list(part.isr), offline, error,
                             list(part.elr), list(part.last_known_elr))


class ControllerMetadataCache(KRaftMetadataCache):
    """The controller of a cluster (a combined node serving other brokers, or a pure controller):
    brokers and partitions as its own metadata store has them, right after each append."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker.metadata_store.image, broker.node_id)
        self._store = broker.metadata_store

    @property  # type: ignore[override]
    def generation(self) -> int:
        log = self._store.log
        return log.log_end_offset if log is not None else 0

    @generation.setter
    def generation(self, _value: int) -> None:
        pass  # follows the metadata log's end
