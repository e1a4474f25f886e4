"""A broker's registration with the active controller, its heartbeats and its controlled shutdown.

Kafka's BrokerLifecycleManager: BrokerRegistration (a new incarnation id each process start,
the listeners, the supported feature ranges, the log dir ids, the previous broker epoch from a
clean shutdown), then a BrokerHeartbeat every `broker.heartbeat.interval.ms` carrying the
highest applied metadata offset. The broker asks to stay fenced until it has caught up with the
metadata log; the controller unfences it when it has. A controlled shutdown is heartbeats with
`want_shut_down` until the controller answers `should_shut_down` (it has moved leadership away).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import request_class
from .node_client import NodeConnection, NodeUnavailableError
from .observer import QuorumNode

log = logging.getLogger(__name__)

BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63

_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class BrokerLifecycleManager:
    """Registers this broker and keeps its session alive; `controller()` says where the active
    controller is (the quorum leader, from the metadata observer)."""

    def __init__(self, *, node_id: int, cluster_id: str, incarnation_id: Uuid,
                 listeners: Sequence[tuple[str, str, int, str]], features: Mapping[str, tuple[int, int]],
                 log_dirs: Sequence[Uuid], rack: str | None, previous_broker_epoch: int,
                 controller: Callable[[], QuorumNode | None], metadata_offset: Callable[[], int],
                 caught_up: Callable[[], bool], heartbeat_interval_s: float = 2.0, client_id: str = "") -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.incarnation_id = incarnation_id
        self.listeners = list(listeners)
        self.features = dict(features)
        self.log_dirs = list(log_dirs)
        self.rack = rack
        self.previous_broker_epoch = previous_broker_epoch
        self.controller = controller
        self.metadata_offset = metadata_offset
        self.caught_up = caught_up
        self.heartbeat_interval_s = heartbeat_interval_s
        self.client_id = client_id or f"broker-{node_id}-lifecycle"
        self.broker_epoch = -1
        self.fenced = True
        #: log dirs that failed (directory ids): every heartbeat names them, as Kafka's broker does
        self.offline_dirs: set[Uuid] = set()
        self.registered = trio.Event()
        self.unfenced = trio.Event()
        self.want_shutdown = False
        self.shutdown_granted = trio.Event()
        self._conn: NodeConnection | None = None
        self._conn_node: QuorumNode | None = None

    def registration_request(self) -> Any:
        req = request_class(BROKER_REGISTRATION)
        return req(
            broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=[req.Listener(name=name, host=host, port=port,
                                    security_protocol=_SECURITY_PROTOCOLS.get(proto, 0))
                       for name, host, port, proto in self.listeners],
            features=[req.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, (lo, hi) in self.features.items()],
            rack=self.rack, is_migrating_zk_broker=False, log_dirs=sorted(self.log_dirs, key=lambda u: u.bytes),
            previous_broker_epoch=self.previous_broker_epoch)

    def heartbeat_request(self) -> Any:
        req = request_class(BROKER_HEARTBEAT)
        return req(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                   current_metadata_offset=self.metadata_offset(),
                   want_fence=not self.caught_up() and not self.want_shutdown,
                   want_shut_down=self.want_shutdown,
                   offline_log_dirs=sorted(self.offline_dirs, key=lambda u: u.bytes))

    async def _send(self, api_key: int, body: Any) -> Any:
        node = self.controller()
        if node is None:
            raise NodeUnavailableError("no active controller known yet")
        if self._conn is None or self._conn_node != node:
            if self._conn is not None:
                await self._conn.close()
            self._conn = NodeConnection(node.host, node.port, client_id=self.client_id, node_id=node.node_id)
            self._conn_node = node
        _v, resp = await self._conn.request(api_key, body)
        return resp

    async def run(self) -> None:
        """Register, then heartbeat until cancelled (or until a controlled shutdown is granted)."""
        try:
            while self.broker_epoch < 0:
                try:
                    resp = await self._send(BROKER_REGISTRATION, self.registration_request())
                except NodeUnavailableError as e:
                    log.info("[BrokerLifecycleManager id=%d] registration not sent: %s", self.node_id, e)
                    await trio.sleep(0.1)
                    continue
                if resp.error_code:
                    log.warning("[BrokerLifecycleManager id=%d] Unable to register broker %d: %s", self.node_id,
                                self.node_id, _name(resp.error_code))
                    await trio.sleep(min(self.heartbeat_interval_s, 1.0))
                    continue
                self.broker_epoch = resp.broker_epoch
                log.info("[BrokerLifecycleManager id=%d] Successfully registered broker %d with broker epoch %d",
                         self.node_id, self.node_id, self.broker_epoch)
                self.registered.set()
            while True:
                await self._heartbeat()
                if self.shutdown_granted.is_set():
                    return
                # while fenced and catching up, Kafka heartbeats more often (on each metadata offset change)
                await trio.sleep(self.heartbeat_interval_s if not self.fenced else min(self.heartbeat_interval_s, 0.5))
        finally:
            if self._conn is not None:
                with trio.CancelScope(shield=True):
                    await self._conn.close()

    async def _heartbeat(self) -> None:
        try:
            resp = await self._send(BROKER_HEARTBEAT, self.heartbeat_request())
        except NodeUnavailableError as e:
            log.info("[BrokerLifecycleManager id=%d] heartbeat not sent: %s", self.node_id, e)
            return
        if resp.error_code:
            log.warning("[BrokerLifecycleManager id=%d] Broker heartbeat answered %s", self.node_id,
                        _name(resp.error_code))
            if resp.error_code == ErrorCode.STALE_BROKER_EPOCH:
                self.broker_epoch = -1
            return
        if self.fenced and not resp.is_fenced:
            log.info("[BrokerLifecycleManager id=%d] The broker has been unfenced. Transitioning from "
                     "RECOVERY to RUNNING.", self.node_id)
            self.unfenced.set()
        self.fenced = resp.is_fenced
        if self.want_shutdown and resp.should_shut_down:
            log.info("[BrokerLifecycleManager id=%d] The controller has asked us to exit controlled shutdown.",
                     self.node_id)
            self.shutdown_granted.set()

    async def controlled_shutdown(self, timeout_s: float = 30.0) -> bool:
        """Ask the controller to move leadership away; True once it has agreed."""
        if self.broker_epoch < 0:
            return False
        self.want_shutdown = True
        with trio.move_on_after(timeout_s):
            while not self.shutdown_granted.is_set():
                await self._heartbeat()
                if not self.shutdown_granted.is_set():
                    await trio.sleep(0.1)
        return self.shutdown_granted.is_set()


def _name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
