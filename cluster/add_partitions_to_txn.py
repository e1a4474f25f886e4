"""The first transactional batch of a producer in a partition, checked with its transaction
coordinator on another broker (Kafka's AddPartitionsToTxnManager): AddPartitionsToTxn v4+,
`verify_only` for KIP-890 part 1 verification, else (Transactions V2) to add the partition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..kraft.node_client import NodeConnection, NodeUnavailableError
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class

ADD_PARTITIONS_TO_TXN = 24
TRANSACTION_STATE_TOPIC = "__transaction_state"


class AddPartitionsToTxnManager:
    """Asks the coordinator of a transactional id, wherever it is, about one partition."""

    def __init__(self, node_id: int, image: Callable[[], Any], cache: Callable[[], Any], listener_name: str) -> None:
        self.node_id = node_id
        self._image = image
        self._cache = cache
        self.listener_name = listener_name
        self._conns: dict[int, NodeConnection] = {}

    async def add_partition_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                   topic: str, partition: int, verify_only: bool) -> ErrorCode:
        """The coordinator's answer for the partition (COORDINATOR_NOT_AVAILABLE when unreachable)."""
        from ..txn_coordinator.records import partition_for  # noqa: PLC0415

        state = self._image().topic(TRANSACTION_STATE_TOPIC)
        if state is None or not state.partitions:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        index = partition_for(transactional_id, max(state.partitions) + 1)
        cache = self._cache()
        view = cache.partition(TRANSACTION_STATE_TOPIC, index, self.listener_name)
        node = next((b for b in cache.alive_brokers(self.listener_name)
                     if view is not None and b.node_id == view.leader), None)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        conn = self._conns.get(node.node_id)
        if conn is None or (conn.host, conn.port) != (node.host, node.port):
            if conn is not None:
                await conn.close()
            conn = self._conns[node.node_id] = NodeConnection(
                node.host, node.port, node_id=node.node_id, client_id=f"broker-{self.node_id}-txn-verifier")
        req = request_class(ADD_PARTITIONS_TO_TXN)
        body = req(transactions=[req.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=verify_only, topics=[req.AddPartitionsToTxnTopic(name=topic, partitions=[partition])])])
        try:
            version, resp = await conn.request(ADD_PARTITIONS_TO_TXN, body)
        except NodeUnavailableError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if version < 4:
            return ErrorCode.UNSUPPORTED_VERSION
        if resp.error_code:
            return ErrorCode(resp.error_code)
        for txn in resp.results_by_transaction:
            for result in txn.topic_results:
                for part in result.results_by_partition:
                    if result.name == topic and part.partition_index == partition:
                        return ErrorCode(part.partition_error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()
