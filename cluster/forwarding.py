"""Requests that change the cluster's metadata go to the active controller (Kafka's
ForwardingManager, KIP-590): the client's request, header included, travels as it is inside an
Envelope with the client's principal and address; the controller's answer, header included, goes
back to the client as it is.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable

import trio

from ..kraft.node_client import NodeConnection, NodeUnavailableError
from ..kraft.observer import QuorumNode
from ..wire.errors import ProtocolError
from ..wire.protocol import API_NAMES, request_class
from ..wire.schema import codec, message_class

log = logging.getLogger(__name__)

ENVELOPE = 58
#: How long a forwarded request waits for an unreachable controller before the client is cut off.
FORWARD_RETRY_S = 15.0
RETRY_BACKOFF_S = 0.2

#: The APIs a KRaft broker forwards to the controller (those Kafka marks forwardable).
FORWARDED_APIS = frozenset({
    19,  # CreateTopics
    20,  # DeleteTopics
    30,  # CreateAcls
    31,  # DeleteAcls
    33,  # AlterConfigs
    37,  # CreatePartitions
    38,  # CreateDelegationToken
    39,  # RenewDelegationToken
    40,  # ExpireDelegationToken
    43,  # ElectLeaders
    44,  # IncrementalAlterConfigs
    45,  # AlterPartitionReassignments
    46,  # ListPartitionReassignments
    49,  # AlterClientQuotas
    51,  # AlterUserScramCredentials
    57,  # UpdateFeatures
})


def serialize_principal(principal: str) -> bytes:
    """Kafka's DefaultKafkaPrincipalBuilder.serialize: a version-prefixed DefaultPrincipalData."""
    kind, _, name = principal.partition(":")
    message = message_class("DefaultPrincipalData")(type=kind, name=name, token_authenticated=False)
    return (0).to_bytes(2, "big") + codec("DefaultPrincipalData", 0).encode_bytes(message)


class ForwardingError(ProtocolError):
    """The request could not be forwarded: the connection is closed and the client retries."""


class ForwardingManager:
    """Sends forwarded requests to the active controller (`controller()` says where it is)."""

    def __init__(self, node_id: int, controller: Callable[[], QuorumNode | None]) -> None:
        self.node_id = node_id
        self.controller = controller
        self._conn: NodeConnection | None = None
        self._conn_node: QuorumNode | None = None
        self._retired: list[NodeConnection] = []

    async def forward(self, frame: memoryview, api_key: int, api_version: int, principal: str,
                      peer: str) -> list:
        """The response frame (size prefix included) for a client's request frame."""
        host = peer.rsplit(":", 1)[0].strip("[]")
        try:
            address = ipaddress.ip_address(host).packed
        except ValueError:
            address = b"\x7f\x00\x00\x01"
        body = request_class(ENVELOPE)(request_data=bytes(frame), request_principal=serialize_principal(principal),
                                       client_host_address=address)
        try:
            resp = await self._send(body)
        except NodeUnavailableError as e:
            raise ForwardingError(f"could not forward {API_NAMES.get(api_key, api_key)} v{api_version} to the "
                                  f"controller: {e}") from None
        if resp.error_code or resp.response_data is None:
            raise ForwardingError(f"the controller refused the forwarded {API_NAMES.get(api_key, api_key)} "
                                  f"v{api_version} (envelope error {resp.error_code})")
        data = bytes(resp.response_data)
        return [len(data).to_bytes(4, "big") + data]

    async def send_own(self, api_key: int, body: object) -> object:
        """A request of this broker's own to the active controller (not forwarded for a client)."""
        node = self.controller()
        if node is None:
            raise NodeUnavailableError("no active controller known")
        conn = self._connection(node)
        _v, resp = await conn.request(api_key, body)
        return resp

    def _connection(self, node: QuorumNode) -> NodeConnection:
        if self._conn is None or self._conn_node != node:
            if self._conn is not None:
                # the controller moved: the old connection's socket is closed when it is dropped
                self._retired.append(self._conn)
            self._conn = NodeConnection(node.host, node.port, client_id=f"broker-{self.node_id}-forwarding",
                                        node_id=node.node_id)
            self._conn_node = node
        return self._conn

    async def _send(self, body: object) -> object:
        """Send an envelope to the active controller, retrying while it is unreachable (a
        controller that restarted or moved) for up to FORWARD_RETRY_S, as Kafka's forwarding
        retries until the request's timeout."""
        deadline = trio.current_time() + FORWARD_RETRY_S
        while True:
            node = self.controller()
            try:
                if node is None:
                    raise NodeUnavailableError("no active controller known")
                _v, resp = await self._connection(node).request(ENVELOPE, body)
                return resp
            except NodeUnavailableError:
                if trio.current_time() >= deadline:
                    raise
                await trio.sleep(RETRY_BACKOFF_S)

    async def close(self) -> None:
        for conn in [*self._retired, *([self._conn] if self._conn is not None else [])]:
            await conn.close()
        self._retired.clear()
        self._conn = None
