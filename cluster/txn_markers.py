"""Transaction markers for partitions led by other brokers (Kafka's TransactionMarkerChannelManager).

When a transaction this broker coordinates ends, the transaction coordinator writes the markers
of the partitions it leads itself and hands the others here: one WriteTxnMarkers request per
leader broker, retried while the answer is retriable (the leader moved, it is loading), until
every partition has its marker or no longer exists. Then the coordinator writes
CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..kraft.node_client import NodeConnection, NodeUnavailableError
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
RETRY_BACKOFF_S = 0.1

#: Answers after which the marker is given up for that partition, as Kafka's handler does.
_GIVE_UP = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH,
            ErrorCode.TRANSACTION_COORDINATOR_FENCED}


class TransactionMarkerChannelManager:
    """Sends WriteTxnMarkers to partition leaders on other brokers, from a background task."""

    def __init__(self, broker: Broker, listener_name: str) -> None:
        self.broker = broker
        self.listener_name = listener_name
        self._connections: dict[int, NodeConnection] = {}
        self._nursery: trio.Nursery | None = None
        self._pending: list[tuple[Any, bool, list[tuple[str, int]], Callable[[], None]]] = []

    async def run(self) -> None:
        """Serve marker jobs until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for job in self._pending:
                    nursery.start_soon(self._send, *job)
                self._pending.clear()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                for conn in self._connections.values():
                    await conn.close()

    def send(self, meta: Any, commit: bool, partitions: list[tuple[str, int]], done: Callable[[], None]) -> None:
        """Queue the markers of `meta`'s transaction for `partitions`; `done()` when all are written."""
        if self._nursery is None:
            self._pending.append((meta, commit, partitions, done))
        else:
            self._nursery.start_soon(self._send, meta, commit, partitions, done)

    async def _send(self, meta: Any, commit: bool, partitions: list[tuple[str, int]], done: Callable[[], None]) -> None:
        txn = self.broker.coordinators.get("transactions")
        left = set(partitions)
        while left:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for topic, index in sorted(left):
                view = self.broker.metadata_cache.partition(topic, index, self.listener_name)
                if view is None:
                    left.discard((topic, index))  # deleted meanwhile: Kafka drops its marker
                    continue
                by_leader.setdefault(view.leader, []).append((topic, index))
            for leader, parts in by_leader.items():
                if leader < 0:
                    continue
                try:
                    written = await self._write(leader, meta, commit, parts, txn)
                except NodeUnavailableError as e:
                    log.info("[TransactionMarkerChannelManager] markers of %s to broker %d not sent: %s",
                             meta.transactional_id, leader, e)
                    continue
                left -= written
            if left:
                await trio.sleep(RETRY_BACKOFF_S)
        done()

    async def _write(self, leader: int, meta: Any, commit: bool, parts: list[tuple[str, int]],
                     txn: Any) -> set[tuple[str, int]]:
        node = next((b for b in self.broker.metadata_cache.alive_brokers(self.listener_name) if b.node_id == leader),
                    None)
        if node is None:
            raise NodeUnavailableError(f"broker {leader} is not alive")
        conn = self._connections.get(leader)
        if conn is None or (conn.host, conn.port) != (node.host, node.port):
            conn = self._connections[leader] = NodeConnection(
                node.host, node.port, node_id=leader, client_id=f"broker-{self.broker.node_id}-txn-marker-sender")
        req = request_class(WRITE_TXN_MARKERS)
        topics: dict[str, list[int]] = {}
        for topic, index in parts:
            topics.setdefault(topic, []).append(index)
        coordinator_epoch = txn.coordinator_epoch(meta.transactional_id) if txn is not None else 0
        body = req(markers=[req.WritableTxnMarker(
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, transaction_result=commit,
            topics=[req.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
            coordinator_epoch=coordinator_epoch,
            # WriteTxnMarkers v2: the leader checks a V2 marker's epoch by the V2 rules
            transaction_version=getattr(meta, "client_txn_version", 0))])
        _v, resp = await conn.request(WRITE_TXN_MARKERS, body)
        written: set[tuple[str, int]] = set()
        for result in resp.markers:
            for topic in result.topics:
                for part in topic.partitions:
                    code = ErrorCode(part.error_code) if part.error_code in ErrorCode._value2member_map_ \
                        else part.error_code
                    if code == ErrorCode.NONE or code in _GIVE_UP:
                        written.add((topic.name, part.partition_index))
                        if code != ErrorCode.NONE:
                            log.warning("[TransactionMarkerChannelManager] broker %d refused the marker of %s for "
                                        "%s-%d: %s", leader, meta.transactional_id, topic.name,
                                        part.partition_index, code)
        return written
