"""Multi-node KRaft clusters of real Apache Kafka nodes (and Odradek nodes) for the cluster tests.

A :class:`KafkaNode` is one Kafka process in a role (``controller``, ``broker`` or both); a
:class:`Quorum` is the static voter set all nodes of a test cluster share. Every node is
formatted with the same cluster id (``kafka_oracle.CLUSTER_ID``). The nodes use loopback ports
chosen at creation and keep them across restarts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafka_oracle import KAFKA_4_4, KafkaBroker, free_port, metadata_broker_count, port_accepts


@dataclass
class Quorum:
    """The controllers of a cluster: node id -> controller port (a static voter set)."""

    host: str = "127.0.0.1"
    voters: dict[int, int] = field(default_factory=dict)

    def add(self, node_id: int) -> int:
        port = free_port(self.host)
        self.voters[node_id] = port
        return port

    @property
    def voters_config(self) -> str:
        """``controller.quorum.voters``: ``id@host:port,...``."""
        return ",".join(f"{n}@{self.host}:{p}" for n, p in sorted(self.voters.items()))

    @property
    def bootstrap_servers(self) -> str:
        """``controller.quorum.bootstrap.servers``: ``host:port,...``."""
        return ",".join(f"{self.host}:{p}" for _n, p in sorted(self.voters.items()))


class KafkaNode(KafkaBroker):
    """One real Kafka process of a multi-node cluster, in the given roles."""

    def __init__(self, workdir: str | Path, quorum: Quorum, node_id: int, *, roles: Sequence[str] = ("broker",),
                 version: str = KAFKA_4_4, overrides: Mapping[str, object] | None = None,
                 format_args: Sequence[str] = ()) -> None:
        self.quorum = quorum
        self.node_id = node_id
        self.roles = tuple(roles)
        controller_port = quorum.add(node_id) if "controller" in self.roles else 0
        super().__init__(workdir, version=version, overrides=overrides, host=quorum.host,
                         port=free_port(quorum.host), controller_port=controller_port)
        self._auto_ports = False
        self.format_args = list(format_args)

    def properties(self) -> dict[str, str]:
        props = super().properties()
        listeners = []
        if "broker" in self.roles:
            listeners.append(f"PLAINTEXT://{self.host}:{self.port}")
        if "controller" in self.roles:
            listeners.append(f"CONTROLLER://{self.host}:{self.controller_port}")
        props.update({
            "process.roles": ",".join(self.roles),
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.quorum.voters_config,
            "listeners": ",".join(listeners),
        })
        if "broker" not in self.roles:
            props.pop("advertised.listeners", None)
        props.update({k: str(v) for k, v in self.overrides.items()})
        return props

    def _is_ready(self) -> bool:
        if "broker" in self.roles:
            return metadata_broker_count(self.host, self.port) > 0
        return port_accepts(self.host, self.controller_port)


def odradek_controller(workdir: str | Path, quorum: Quorum, node_id: int, *, roles: Sequence[str] = ("controller",),
                       overrides: Mapping[str, object] | None = None):
    """An `odradek serve` node as the cluster's controller (a voter of `quorum`): a pure controller,
    or with roles ("broker", "controller") a combined node that is a broker of the cluster too."""
    from kafka_oracle import CLUSTER_ID  # noqa: PLC0415
    from odradek_broker import OdradekBroker  # noqa: PLC0415

    controller_port = quorum.add(node_id)
    listeners = [f"CONTROLLER://{quorum.host}:{controller_port}"]
    props: dict[str, object] = {
        "process.roles": ",".join(roles), "node.id": node_id, "cluster.id": CLUSTER_ID,
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": quorum.voters_config,
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    }
    if "broker" in roles:
        broker_port = free_port(quorum.host)
        listeners.insert(0, f"PLAINTEXT://{quorum.host}:{broker_port}")
        props["advertised.listeners"] = f"PLAINTEXT://{quorum.host}:{broker_port}"
        node = OdradekBroker(workdir, port=broker_port, overrides={**props, "listeners": ",".join(listeners),
                                                                  **(overrides or {})})
    else:
        node = OdradekBroker(workdir, port=controller_port, overrides={**props, "listeners": ",".join(listeners),
                                                                      **(overrides or {})})
    node.node_id = node_id
    node.controller_port = controller_port
    return node
