"""Produce: validate each partition's record batch, append it as leader, answer per partition.

Record bytes are never decoded here: the batch is a writable view into the request frame,
the log store patches base offset and leader epoch in place and writes it with one syscall.
"""

from __future__ import annotations

import logging

import trio

from .. import faults
from ..broker import now_ms
from ..cluster_metadata import INTERNAL_TOPICS
from ..logstore import write_pressure
from ..logstore.partition_log import AppendInfo, PartitionLog, PendingAppend
from ..txn_coordinator.coordinator import RemoteTxnCheck, produce_refusal, verify_transactional_produce
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from ..wire.records import LOG_OVERHEAD, CorruptRecordError, next_batch_size
from .common import error_code_for
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

PRODUCE_KEY = 0
ProduceResponse = response_class(PRODUCE_KEY)
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
BatchIndexError = ProduceResponse.BatchIndexAndErrorMessage

# Yield to other tasks after appending this many bytes of one request (~0.5 ms of pwrite + CRC).
_YIELD_AFTER_BYTES = 1 << 20

# Clients whose writes to internal topics Kafka accepts (the admin client's id).
_INTERNAL_WRITERS = frozenset({"__admin_client"})


def _partition_error(index: int, code: ErrorCode, message: str | None = None) -> object:
    return PartitionResponse(
        index=index, error_code=int(code), base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
        error_message=message,
    )


# Errors ReplicaManager answers without the partition's log start offset (Kafka's list of the
# exceptions it expects from an append); for any other refusal it looks the offset up.
_NO_LOG_START_OFFSET = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_ID,
})


def _append_failed(exc: Exception, topic: str, index: int, partition_log: PartitionLog) -> object:
    """The partition response for an append the log store refused or could not do.

    Like Kafka, only a refusal of named records (KIP-467) carries an error message, with the
    records' batch indexes and messages: clients then fail just those records. Any other
    refusal's text stays in the broker's log."""
    code = error_code_for(exc)  # the log store's typed errors become Kafka error codes
    if code is ErrorCode.UNKNOWN_SERVER_ERROR or code is ErrorCode.KAFKA_STORAGE_ERROR:
        log.error("Append to %s-%s failed", topic, index, exc_info=exc)
    else:
        log.debug("Rejected produce to %s-%s: %s", topic, index, exc)
    start = -1 if code in _NO_LOG_START_OFFSET else partition_log.log_start_offset
    record_errors = getattr(exc, "record_errors", None)
    if not record_errors:
        return PartitionResponse(index=index, error_code=int(code), base_offset=-1, log_append_time_ms=-1,
                                 log_start_offset=start)
    return PartitionResponse(
        index=index, error_code=int(code), base_offset=-1, log_append_time_ms=-1, log_start_offset=start,
        record_errors=[BatchIndexError(batch_index=e.batch_index, batch_index_error_message=e.message)
                       for e in record_errors],
        error_message=str(exc),
    )


def _more_than_one_batch(records) -> bool:
    """Whether a second complete batch follows the first (an incomplete tail does not count)."""
    try:
        first = next_batch_size(records[:LOG_OVERHEAD], len(records))
        if first is None or len(records) - first <= LOG_OVERHEAD:
            return False
        return next_batch_size(records[first:first + LOG_OVERHEAD], len(records) - first) is not None
    except CorruptRecordError:
        return False  # the log store names what is wrong with the first batch


def _write_all(pendings: list[PendingAppend]) -> None:
    """The pwrites of one request's appends (in a worker thread)."""
    for pending in pendings:
        pending.write()


# Partition logs (by id) whose pending appends a worker thread is writing, and the event set once
# they are finished: another append to one of them waits for it instead of settling it (which
# would wait for the thread's write on the event loop).
_writing: dict[int, trio.Event] = {}


@handles(PRODUCE_KEY, 3, supported_versions(PRODUCE_KEY)[1], advertised_min=0)
async def handle_produce(ctx: RequestContext, header, request) -> object | None:
    # Kafka 4 advertises Produce from v0 (librdkafka only enables compression then) but serves v3+.
    broker = ctx.broker
    acks = request.acks
    responses = []
    # While segment writes are being made to wait (write_pressure), the appends are validated and
    # placed on the loop and written by a worker thread; otherwise appended right away.
    # A test's slow disk (odradek.faults) sleeps in the writes: they must leave the loop too.
    threaded = write_pressure.under_pressure() or bool(faults.SLOW_DISKS)
    # (response list, slot in it, topic, partition, log, AppendInfo or pending append, bytes sent)
    results: list[tuple[list, int, str, int, PartitionLog, AppendInfo | PendingAppend, int]] = []
    # bytes appended since the last checkpoint: a request of many large batches lets other tasks
    # run between partitions instead of holding the loop for all of it
    unyielded = 0
    finished = 0  # results[:finished] are answered and their fetches woken
    flush_logs: list[PartitionLog] = []
    for topic_data in request.topic_data:
        topic = (
            broker.metadata.get(topic_data.name)
            if topic_data.name
            else broker.metadata.by_id(topic_data.topic_id)
        )
        partitions: list = []
        for pdata in topic_data.partition_data:
            index = pdata.index
            if acks not in (0, 1, -1):
                partitions.append(_partition_error(index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if not topic_data.name else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                partitions.append(_partition_error(index, code))
                continue
            if topic.name in INTERNAL_TOPICS and header.client_id not in _INTERNAL_WRITERS:
                # Kafka's InvalidTopicException text ("Cannot append to internal topic") is not
                # sent: ReplicaManager answers it without an error message
                partitions.append(_partition_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            partition_log = broker.partition_log(topic.name, index) if 0 <= index < topic.partitions else None
            if partition_log is None:
                code = broker.partition_error(topic.name, index) if 0 <= index < topic.partitions \
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                partitions.append(_partition_error(index, code))
                continue
            if acks == -1 and partition_log.replicated and broker.replica_manager is not None and \
                    broker.replica_manager.isr_size(topic.name, index) < partition_log.config.min_insync_replicas:
                # Kafka's Partition.appendRecordsToLeader: too few in sync for acks=all
                partitions.append(_partition_error(index, ErrorCode.NOT_ENOUGH_REPLICAS))
                continue
            records = pdata.records
            if records is None or len(records) == 0:
                # KafkaApis answers ProduceRequest.validateRecords' refusal by its code alone
                partitions.append(_partition_error(index, ErrorCode.INVALID_RECORD))
                continue
            if _more_than_one_batch(records):
                # KafkaApis refuses it before the log sees it (ProduceRequest.validateRecords)
                partitions.append(_partition_error(index, ErrorCode.INVALID_RECORD))
                continue
            while (written := _writing.get(id(partition_log))) is not None:
                await written.wait()
            refused = verify_transactional_produce(
                broker, request.transactional_id, topic.name, index, partition_log, records, header.api_version)
            if isinstance(refused, RemoteTxnCheck):
                # the coordinator is on another broker of the cluster (Kafka's AddPartitionsToTxnManager)
                code = await broker.add_partitions_to_txn.add_partition_to_txn(
                    request.transactional_id, refused.producer_id, refused.producer_epoch, topic.name, index,
                    verify_only=not refused.add)
                refused = produce_refusal(code, refused.add)
            if refused is not None:
                partitions.append(_partition_error(index, *refused))
                continue
            try:
                if threaded:
                    result = partition_log.prepare_append(records, now_ms=now_ms())
                else:
                    result = partition_log.append_as_leader(records, now_ms=now_ms())
            except Exception as exc:
                partitions.append(_append_failed(exc, topic.name, index, partition_log))
                continue
            results.append((partitions, len(partitions), topic.name, index, partition_log, result, len(records)))
            partitions.append(None)  # the response, once the append is finished
            unyielded += len(records)
            if unyielded >= _YIELD_AFTER_BYTES:
                unyielded = 0
                if not threaded:
                    # wake the fetches of what is appended so far first: they run while we yield
                    appended, flushes = _finish(broker, results[finished:])
                    finished = len(results)
                    flush_logs += flushes
                    broker.notify_appended(appended)
                await trio.lowlevel.checkpoint()
        responses.append(TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id, partition_responses=partitions))
    pendings = [r[5] for r in results if isinstance(r[5], PendingAppend)]
    done = trio.Event()
    try:
        if pendings:
            for pending in pendings:
                _writing[id(pending.log)] = done
            # shielded: once the bytes are going to the file the append is finished and answered,
            # like any other append (a cancelled connection does not leave it half done)
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_write_all, pendings)
        appended, flushes = _finish(broker, results[finished:])
        flush_logs += flushes
    finally:
        for pending in pendings:
            if _writing.get(id(pending.log)) is done:
                del _writing[id(pending.log)]
        done.set()
    if appended:
        # the waiting fetches of these partitions (only those) answer as soon as this task yields;
        # they do not wait for the flush below (the high watermark does not depend on it)
        broker.notify_appended(appended)
    for partition_log in flush_logs:
        # fsync leaves the event loop (log.flush.interval.messages / .ms asked for it).
        await trio.to_thread.run_sync(partition_log.flush)
    if acks == -1:
        await _wait_for_replicas(broker, results, request.timeout_ms)
    if acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


async def _wait_for_replicas(broker, results: list, timeout_ms: int) -> None:
    """acks=all on a partition with followers (Kafka's DelayedProduce): answer once the high
    watermark has passed the batch, REQUEST_TIMED_OUT after the request's timeout, and
    NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas meanwhile."""
    waits = []
    for partitions, slot, topic_name, index, partition_log, result, _sent in results:
        response = partitions[slot]
        if not partition_log.replicated or response is None or response.error_code:
            continue
        info = result if isinstance(result, AppendInfo) else result.info
        if info is not None:
            waits.append((partitions, slot, topic_name, index, partition_log, info.last_offset))
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    while waits:
        left = []
        for w in waits:
            partitions, slot, topic_name, index, partition_log, last = w
            if broker.partition_log(topic_name, index) is not partition_log:
                # no longer the leader (Kafka's DelayedProduce: the client retries with the new one,
                # and the same sequence numbers keep an idempotent producer's batch once)
                partitions[slot] = _partition_error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif partition_log.high_watermark > last:
                if broker.replica_manager.isr_size(topic_name, index) < partition_log.config.min_insync_replicas:
                    partitions[slot] = _partition_error(index, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            else:
                left.append(w)
        waits = left
        remaining = deadline - trio.current_time()
        if not waits:
            return
        if remaining <= 0:
            for partitions, slot, _t, index, *_ in waits:
                partitions[slot] = _partition_error(index, ErrorCode.REQUEST_TIMED_OUT)
            return
        await broker.wait_for_append(remaining, [(w[2], w[3]) for w in waits])


def _finish(broker, results: list) -> tuple[list[tuple[str, int]], list[PartitionLog]]:
    """Finish the appends (a pending one's write is done), fill in their partition responses;
    the partitions appended to and the logs due for a flush."""
    appended: list[tuple[str, int]] = []
    flush_logs = []
    metrics = getattr(broker, "metrics", None)
    for partitions, slot, topic_name, index, partition_log, result, sent in results:
        try:
            info = result if isinstance(result, AppendInfo) else result.finish()
        except Exception as exc:
            partitions[slot] = _append_failed(exc, topic_name, index, partition_log)
            continue
        appended.append((topic_name, index))
        if metrics is not None:  # BytesIn/MessagesInPerSec
            metrics.produced(topic_name, info.num_records, sent)
        if partition_log.needs_flush():
            flush_logs.append(partition_log)
        partitions[slot] = PartitionResponse(
            index=index,
            error_code=0,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )
    return appended, flush_logs
