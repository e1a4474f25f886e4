"""The controller of a KRaft cluster with other brokers (Kafka's QuorumController, single voter).

A node whose process.roles include `controller` and whose `controller.listener.names` are set
leads its metadata log for other brokers too: `RaftLeader` serves the log to them,
`ClusterControlManager` keeps their registrations, sessions and fencing and places new partitions
over them, `ReplicationControlManager` takes their ISR and directory changes. The topic, config,
ACL, quota, SCRAM and feature changes they forward (Envelope) run through the same handlers as a
client's, on the controller's metadata store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cluster_control import ClusterControlManager
from .raft_leader import RaftLeader
from .replication_control import ReplicationControlManager

if TYPE_CHECKING:
    from .store import MetadataStore


def serves_brokers(config: Any) -> bool:
    """Whether this node is the controller of other brokers: the controller role and a controller
    listener to reach it on (a combined node without one is its own single-node cluster)."""
    roles = {str(r).strip().lower() for r in config.get("process.roles") or []}
    return "controller" in roles and bool(config.get("controller.listener.names"))


def is_broker(config: Any) -> bool:
    return "broker" in {str(r).strip().lower() for r in config.get("process.roles") or []}


class QuorumController:
    """The parts of the controller that serve other brokers, over one metadata store."""

    def __init__(self, store: MetadataStore, cluster_id: str, node_id: int, *, session_timeout_ms: int) -> None:
        self.store = store
        self.raft = RaftLeader(store, cluster_id, node_id)
        self.cluster = ClusterControlManager(store, cluster_id, session_timeout_ms=session_timeout_ms,
                                             own_broker=store.is_broker)
        self.replication = ReplicationControlManager(store, self.cluster)
        #: called after every change of the metadata (a combined node's broker side publishes it)
        self.on_change: list[Any] = []
        store.on_flushed = self._changed
        store.placement = self.cluster.place
        store.leadership_loss = self.cluster.leadership_loss

    def _changed(self) -> None:
        self.raft.notify_appended()
        for listener in self.on_change:
            listener()

    async def run(self) -> None:
        await self.cluster.run()
