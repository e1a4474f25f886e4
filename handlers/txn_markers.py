"""WriteTxnMarkers: a transaction coordinator on another broker ends a transaction in the
partitions this broker leads (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

Each marker is a COMMIT or ABORT control batch appended as the leader appends coordinator
batches (the log store checks the producer's epoch and the coordinator epoch, updates producer
state, the `.txnindex` and the last stable offset); in `__consumer_offsets` it also settles the
transaction's pending offset commits. A v2 request's TransactionVersion 2 (a TV2 coordinator) asks
for a marker epoch above the producer's, as Kafka 4.4's log does.
"""

from __future__ import annotations

import logging
import time

from ..txn_coordinator.coordinator import tv2_marker_fenced
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from ..wire.records import ControlRecordType, build_end_txn_marker_batch
from .common import error_code_for
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_KEY = 27
WriteTxnMarkersResponse = response_class(WRITE_TXN_MARKERS_KEY)
OFFSETS_TOPIC = "__consumer_offsets"


@handles(WRITE_TXN_MARKERS_KEY, 0, supported_versions(WRITE_TXN_MARKERS_KEY)[1])
async def handle_write_txn_markers(ctx: RequestContext, header, request) -> object:
    broker = ctx.broker
    now = time.time_ns() // 1_000_000
    results = []
    appended: set[tuple[str, int]] = set()
    for marker in request.markers:
        kind = ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                code = _write(ctx, topic.name, index, kind, marker, now)
                if code == ErrorCode.NONE:
                    appended.add((topic.name, index))
                partitions.append(WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=int(code)))
            topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
        results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    if appended:
        broker.notify_appended(appended)
    return WriteTxnMarkersResponse(markers=results)


def _write(ctx: RequestContext, topic: str, index: int, kind: ControlRecordType, marker, now: int) -> ErrorCode:
    broker = ctx.broker
    plog = broker.partition_log(topic, index)
    if plog is None:
        return broker.partition_error(topic, index)
    if marker.transaction_version >= 2 and tv2_marker_fenced(plog, marker.producer_id, marker.producer_epoch):
        # WriteTxnMarkers v2: a TV2 marker's epoch must be above the producer's (Kafka 4.4's log check)
        return ErrorCode.INVALID_PRODUCER_EPOCH
    batch = bytearray(build_end_txn_marker_batch(
        kind, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch, timestamp=now))
    try:
        plog.append_as_coordinator(batch, now_ms=now)
    except Exception as exc:  # noqa: BLE001 - each partition answers its own error, as in Kafka
        code = error_code_for(exc)
        log.info("Writing the %s marker of producer %d to %s-%d failed: %s", kind.name, marker.producer_id, topic,
                 index, exc)
        return code
    if topic == OFFSETS_TOPIC:
        txn = broker.coordinators.get("transactions")
        if txn is not None:
            txn.groups.complete(marker.producer_id, index, kind == ControlRecordType.COMMIT)
    return ErrorCode.NONE
