"""ShareFetch and ShareAcknowledge (KIP-932) on the partition leader.

A ShareFetch first applies the acknowledgements it carries, then acquires records of the
session's partitions for the member: whole batches, returned with the AcquiredRecords ranges
(and their delivery counts) the member now holds. With nothing to hand out it waits until an
append to one of its partitions, a release by another member, the first lock that runs out, or
MaxWaitMs -- it sleeps on the broker's append waiters, it never polls.
"""

from __future__ import annotations

import trio

from ..share_coordinator.coordinator import ShareCoordinator
from ..share_coordinator.partition import Acquired
from ..share_coordinator.partition_manager import FINAL_EPOCH, INITIAL_EPOCH, SharePartitionManager
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles
from .topics import ensure_internal_topic

SHARE_FETCH_KEY = 78
SHARE_ACKNOWLEDGE_KEY = 79
ShareFetchResponse = response_class(SHARE_FETCH_KEY)
ShareAcknowledgeResponse = response_class(SHARE_ACKNOWLEDGE_KEY)
#: Kafka's fetch.max.bytes broker default caps a request's MaxBytes
BROKER_FETCH_MAX_BYTES = 55 * 1024 * 1024
DEFAULT_MAX_RECORDS = 500
RECORD_LIMIT = 1  # ShareAcquireMode: at most MaxRecords records, even mid-batch


def share_coordinator(broker) -> ShareCoordinator:
    """The broker's share coordinator (made on first use)."""
    found = broker.coordinators.get("share")
    if found is None:
        found = broker.coordinators["share"] = ShareCoordinator(broker)
    return found


def share_partitions(broker) -> SharePartitionManager:
    """The broker's share-partition manager (made on first use)."""
    found = broker.coordinators.get("share_partitions")
    if found is None:
        found = broker.coordinators["share_partitions"] = SharePartitionManager(broker, share_coordinator(broker))
    return found


async def _ready(ctx: RequestContext) -> SharePartitionManager:
    manager = share_partitions(ctx.broker)
    coordinator = manager.coordinator
    if getattr(ctx.broker, "forwarding", None) is None:
        await ensure_internal_topic(ctx.broker, coordinator.state_topic_spec())
    if not coordinator.loaded:
        await trio.to_thread.run_sync(coordinator.load)
    return manager


def _acks(topics) -> list[tuple[object, int, list[tuple[int, int, list[int]]]]]:
    out = []
    for t in topics or ():
        for p in t.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
            if batches:
                out.append((t.topic_id, p.partition_index, batches))
    return out


def _leader(ctx: RequestContext, R, topic_id, index: int):
    meta = ctx.broker.metadata
    topic = meta.by_id(topic_id) if meta is not None else None
    plog = ctx.broker.partition_log(topic.name, index) if topic is not None else None
    if plog is None:
        return R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    return R.LeaderIdAndEpoch(leader_id=ctx.broker.node_id, leader_epoch=plog.leader_epoch)


@handles(SHARE_FETCH_KEY, 1, supported_versions(SHARE_FETCH_KEY)[1])
async def handle_share_fetch(ctx: RequestContext, header, request) -> object:
    R = ShareFetchResponse
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), acquisition_lock_timeout_ms=0,
                 responses=[], node_endpoints=[])
    manager = await _ready(ctx)
    lock_ms = manager.setting(group_id, "group.share.record.lock.duration.ms")
    epoch = request.share_session_epoch
    acks = _acks(request.topics)
    if epoch == INITIAL_EPOCH and acks:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST),
                 error_message="Acknowledge data present in initial share fetch request.",
                 acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])
    session = manager.open_session(group_id, member_id, epoch)
    if isinstance(session, ErrorCode):
        return R(throttle_time_ms=0, error_code=int(session), acquisition_lock_timeout_ms=lock_ms, responses=[],
                 node_endpoints=[])
    for t in request.forgotten_topics_data or ():
        for index in t.partitions:
            session.partitions.pop((t.topic_id, index), None)
    if epoch != FINAL_EPOCH:
        for t in request.topics or ():
            for p in t.partitions:
                session.partitions.setdefault((t.topic_id, p.partition_index), None)
    now = trio.current_time()
    ack_codes = {(tid, index): manager.acknowledge(group_id, member_id, tid, index, batches, now)
                 for tid, index, batches in acks}
    results: dict[tuple[object, int], Acquired | ErrorCode] = {}
    if epoch == FINAL_EPOCH:
        manager.close_session(group_id, member_id)
    else:
        keys = list(session.partitions)
        max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
        # ShareAcquireMode (v2): 1 = record_limit, at most max_records records even mid-batch;
        # 0 = batch_optimized, whole batches
        record_limit = getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT
        max_bytes = min(request.max_bytes, BROKER_FETCH_MAX_BYTES) if request.max_bytes > 0 else BROKER_FETCH_MAX_BYTES
        deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
        while True:
            now = trio.current_time()
            results = {}
            records_left, bytes_left, total = max_records, max_bytes, 0
            for tid, index in keys:
                if records_left <= 0 or bytes_left <= 0:
                    break
                got = manager.acquire(group_id, member_id, tid, index, records_left, bytes_left, now,
                                      record_limit=record_limit)
                results[(tid, index)] = got
                if isinstance(got, Acquired):
                    records_left -= got.count
                    bytes_left -= len(got.data)
                    total += len(got.data)
            # keep the partition order fair between fetches: the next one starts after these
            if keys:
                keys = keys[1:] + keys[:1]
                session.partitions = dict.fromkeys(keys)
            errors = any(isinstance(r, ErrorCode) for r in results.values())
            if total >= max(request.min_bytes, 1) or errors or now >= deadline or not keys:
                break
            wake = min(deadline, manager.next_deadline([(group_id, tid, i) for tid, i in keys]))
            watch = []
            meta = ctx.broker.metadata
            for tid, index in keys:
                topic = meta.by_id(tid) if meta is not None else None
                if topic is not None:
                    watch.append((topic.name, index))
            await ctx.broker.wait_for_append(max(wake - trio.current_time(), 0.001), watch)
    full = epoch == INITIAL_EPOCH
    by_topic: dict[object, list] = {}
    for key in [*results, *(k for k in ack_codes if k not in results)]:
        got = results.get(key)
        ack = ack_codes.get(key)
        has_data = isinstance(got, Acquired) and got.ranges
        if not (full or has_data or ack is not None or isinstance(got, ErrorCode)):
            continue
        tid, index = key
        code = got if isinstance(got, ErrorCode) else ErrorCode.NONE
        by_topic.setdefault(tid, []).append(R.PartitionData(
            partition_index=index, error_code=int(code), error_message=None,
            acknowledge_error_code=int(ack) if ack is not None else 0, acknowledge_error_message=None,
            current_leader=_leader(ctx, R, tid, index),
            records=got.data if has_data else b"",
            acquired_records=[R.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c)
                              for f, la, c in got.ranges] if has_data else []))
    return R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareFetchableTopicResponse(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()],
             node_endpoints=[])


@handles(SHARE_ACKNOWLEDGE_KEY, 1, supported_versions(SHARE_ACKNOWLEDGE_KEY)[1])
async def handle_share_acknowledge(ctx: RequestContext, header, request) -> object:
    R = ShareAcknowledgeResponse
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), responses=[], node_endpoints=[])
    manager = await _ready(ctx)
    lock_ms = manager.setting(group_id, "group.share.record.lock.duration.ms")
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_SHARE_SESSION_EPOCH),
                 acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])
    session = manager.open_session(group_id, member_id, epoch)
    if isinstance(session, ErrorCode):
        return R(throttle_time_ms=0, error_code=int(session), acquisition_lock_timeout_ms=lock_ms, responses=[],
                 node_endpoints=[])
    now = trio.current_time()
    by_topic: dict[object, list] = {}
    for tid, index, batches in _acks(request.topics):
        code = manager.acknowledge(group_id, member_id, tid, index, batches, now)
        by_topic.setdefault(tid, []).append(R.PartitionData(
            partition_index=index, error_code=int(code), error_message=None,
            current_leader=_leader(ctx, R, tid, index)))
    if epoch == FINAL_EPOCH:
        manager.close_session(group_id, member_id)
    return R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=parts)
                        for tid, parts in by_topic.items()],
             node_endpoints=[])
