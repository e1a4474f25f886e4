"""The share coordinator's RPCs (KIP-932): Initialize/Read/Write/Delete ShareGroupState and
ReadShareGroupStateSummary, answered from :mod:`odradek.share_coordinator.coordinator`.

Kafka's partition leaders and group coordinators call these on the share coordinator of a key;
Odradek's own share-partitions call the coordinator in-process, so these serve other callers
(Kafka's brokers and tools, tests) with the same state.
"""

from __future__ import annotations

from ..share_coordinator.coordinator import ShareStateError
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles
from .share_fetch import _ready

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87


def _max(key: int) -> int:
    return supported_versions(key)[1]


def _each(topics, run, R, result_cls, partition_cls) -> list:
    """Run `run(topic_id, partition data)` per partition; ErrorCode results become the answer."""
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            try:
                fields = run(t.topic_id, p) or {}
                parts.append(partition_cls(partition=p.partition, error_code=0, **fields))
            except ShareStateError as exc:
                parts.append(partition_cls(partition=p.partition, error_code=int(exc.code),
                                           error_message=str(exc) if str(exc) != exc.code.name else None))
        out.append(result_cls(topic_id=t.topic_id, partitions=parts))
    return out


@handles(INITIALIZE, 0, _max(INITIALIZE))
async def handle_initialize_share_group_state(ctx: RequestContext, header, request) -> object:
    R = response_class(INITIALIZE)
    coordinator = (await _ready(ctx)).coordinator

    def run(topic_id, p):
        coordinator.initialize(request.group_id, topic_id, p.partition, p.state_epoch, p.start_offset)

    return R(results=_each(request.topics, run, R, R.InitializeStateResult, R.PartitionResult))


@handles(READ, 0, _max(READ))
async def handle_read_share_group_state(ctx: RequestContext, header, request) -> object:
    R = response_class(READ)
    coordinator = (await _ready(ctx)).coordinator

    def run(topic_id, p):
        state = coordinator.read(request.group_id, topic_id, p.partition, p.leader_epoch)
        if state is None:
            # never initialized: Kafka answers the partition without state, start offset -1
            return {"state_epoch": 0, "start_offset": -1, "state_batches": []}
        return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": [
            R.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
            for f, la, s, c in state.batches]}

    return R(results=_each(request.topics, run, R, R.ReadStateResult, R.PartitionResult))


@handles(WRITE, 0, _max(WRITE))
async def handle_write_share_group_state(ctx: RequestContext, header, request) -> object:
    R = response_class(WRITE)
    coordinator = (await _ready(ctx)).coordinator

    def run(topic_id, p):
        coordinator.write(request.group_id, topic_id, p.partition, p.state_epoch, p.leader_epoch, p.start_offset,
                          [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches],
                          p.delivery_complete_count if header.api_version >= 1 else -1)

    return R(results=_each(request.topics, run, R, R.WriteStateResult, R.PartitionResult))


@handles(DELETE, 0, _max(DELETE))
async def handle_delete_share_group_state(ctx: RequestContext, header, request) -> object:
    R = response_class(DELETE)
    coordinator = (await _ready(ctx)).coordinator

    def run(topic_id, p):
        coordinator.delete(request.group_id, topic_id, p.partition)

    return R(results=_each(request.topics, run, R, R.DeleteStateResult, R.PartitionResult))


@handles(READ_SUMMARY, 0, _max(READ_SUMMARY))
async def handle_read_share_group_state_summary(ctx: RequestContext, header, request) -> object:
    R = response_class(READ_SUMMARY)
    coordinator = (await _ready(ctx)).coordinator

    def run(topic_id, p):
        state = coordinator.read(request.group_id, topic_id, p.partition)
        if state is None:
            return {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1, "delivery_complete_count": -1}
        return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset, "delivery_complete_count": state.delivery_complete_count}

    return R(results=_each(request.topics, run, R, R.ReadStateSummaryResult, R.PartitionResult))
