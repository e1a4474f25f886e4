"""InitProducerId for idempotent producers, and the broker's producer id allocator.

Kafka's controller hands out producer ids in blocks of 1000 and a broker never reuses an
id after a restart: it asks for a fresh block. Odradek does the same, deriving the first
free block at start-up from the highest producer id found in any partition's producer state.
Transactional ids belong to the transaction coordinator; without one the request gets
NOT_COORDINATOR, which makes a client look the coordinator up again.
"""

from __future__ import annotations

from collections.abc import Callable

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .registry import RequestContext, handles

INIT_PRODUCER_ID_KEY = 22
InitProducerIdResponse = response_class(INIT_PRODUCER_ID_KEY)

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids from blocks of 1000, never reusing one across restarts."""

    def __init__(self, highest_seen: int, allocate_block: Callable[[int], int] | None = None) -> None:
        # Start at the block after the one holding the highest id ever used.
        self.next_id = 0 if highest_seen < 0 else (highest_seen // PRODUCER_ID_BLOCK_SIZE + 1) * PRODUCER_ID_BLOCK_SIZE
        # With an allocator (the metadata store persisting ProducerIdsRecord), ids come in
        # persisted blocks; allocate_block(at_least) returns the first id of a fresh block.
        self._allocate = allocate_block
        self.block_end = self.next_id if allocate_block is not None else None

    @classmethod
    def after_logs(cls, logs, allocate_block: Callable[[int], int] | None = None) -> ProducerIdManager:
        """A manager whose first block follows every producer id found in the partition logs."""
        highest = max((pid for plog in logs for pid in plog.producer_state.producers), default=-1)
        return cls(highest, allocate_block)

    def generate(self) -> int:
        if self._allocate is not None and self.block_end is not None and self.next_id >= self.block_end:
            self.next_id = self._allocate(self.next_id)
            self.block_end = self.next_id + PRODUCER_ID_BLOCK_SIZE
        pid = self.next_id
        self.next_id += 1
        return pid


@handles(INIT_PRODUCER_ID_KEY, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, header, request) -> object:
    transactions = ctx.broker.coordinators.get("transactions")
    if request.transactional_id is not None:
        if transactions is None:
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=int(ErrorCode.NOT_COORDINATOR), producer_id=-1, producer_epoch=-1
            )
        return await transactions.init_producer_id(ctx, header, request)
    role = getattr(ctx.broker, "broker_role", None)
    if role is not None:
        # a broker of a KRaft cluster: ids come in blocks from the controller
        from ..kraft.node_client import NodeUnavailableError  # noqa: PLC0415

        try:
            pid = await role.next_producer_id()
        except NodeUnavailableError:
            return InitProducerIdResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
                                          producer_id=-1, producer_epoch=-1)
    else:
        pid = ctx.broker.producer_ids.generate()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
