"""ISR changes a leader asks its controller for (Kafka's AlterPartitionManager): AlterPartition v3
with the new ISR and each member's broker epoch, at the partition's leader and partition epochs.
One request in flight per partition (`Partition.pending_isr`); the controller's answer (or, when
refused, the next metadata change) settles it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from ..kraft.node_client import NodeUnavailableError
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class

if TYPE_CHECKING:
    from .partition import Partition

log = logging.getLogger(__name__)

ALTER_PARTITION = 56
AlterPartitionRequest = request_class(ALTER_PARTITION)


class AlterPartitionManager:
    """Sends a leader's ISR changes to the active controller, from the broker role's nursery."""

    def __init__(self, node_id: int, send: Any, broker_epoch: Any, image: Any, on_done: Any) -> None:
        self.node_id = node_id
        self._send = send  # async (api_key, body) -> response, to the active controller
        self._broker_epoch = broker_epoch  # () -> this broker's epoch
        self._image = image  # () -> MetadataImage, for the members' broker epochs
        self._on_done = on_done  # (Partition) -> None, after the ISR changed
        self.nursery: trio.Nursery | None = None

    def submit(self, part: Partition, new_isr: list[int]) -> None:
        """Ask for `new_isr` unless a change of this partition is already in flight."""
        if part.pending_isr is not None or self.nursery is None or new_isr == part.isr:
            return
        part.pending_isr = list(new_isr)
        self.nursery.start_soon(self._alter, part, list(new_isr), part.leader_epoch, part.partition_epoch)

    async def _alter(self, part: Partition, new_isr: list[int], leader_epoch: int, partition_epoch: int) -> None:
        brokers = self._image().brokers
        members = [AlterPartitionRequest.BrokerState(
            broker_id=b, broker_epoch=self._broker_epoch() if b == self.node_id else
            (brokers[b].broker_epoch if b in brokers else -1)) for b in new_isr]
        body = AlterPartitionRequest(broker_id=self.node_id, broker_epoch=self._broker_epoch(), topics=[
            AlterPartitionRequest.TopicData(topic_id=part.topic_id, partitions=[AlterPartitionRequest.PartitionData(
                partition_index=part.index, leader_epoch=leader_epoch, new_isr_with_epochs=members,
                leader_recovery_state=0, partition_epoch=partition_epoch)])])
        try:
            resp = await self._send(ALTER_PARTITION, body)
        except NodeUnavailableError as exc:
            log.info("[AlterPartitionManager broker=%d] ISR change of %s not sent: %s", self.node_id, part.name, exc)
            part.pending_isr = None
            return
        code = resp.error_code
        result = None
        for topic in resp.topics:
            for p in topic.partitions:
                if p.partition_index == part.index:
                    result = p
        if not code and result is not None:
            code = result.error_code
        if code or result is None:
            log.info("[AlterPartitionManager broker=%d] The controller refused ISR %s of %s: %s", self.node_id,
                     new_isr, part.name, ErrorCode(code).name if code in ErrorCode._value2member_map_ else code)
            part.pending_isr = None
            return
        if part.leader_epoch == result.leader_epoch:
            part.isr, part.partition_epoch = list(result.isr), result.partition_epoch
            log.info("[Partition %s broker=%d] ISR updated to %s (partition epoch %d)", part.name, self.node_id,
                     part.isr, part.partition_epoch)
        part.pending_isr = None
        self._on_done(part)
