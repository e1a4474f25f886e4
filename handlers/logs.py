"""Partition-log administration: DescribeLogDirs, DeleteRecords, OffsetForLeaderEpoch."""

from __future__ import annotations

import os
from pathlib import Path

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .common import error_code_for, leader_epoch_error
from .registry import RequestContext, handles
from .replica_log_dirs import moves_of

DELETE_RECORDS_KEY = 21
OFFSET_FOR_LEADER_EPOCH_KEY = 23
DESCRIBE_LOG_DIRS_KEY = 35

DeleteRecordsResponse = response_class(DELETE_RECORDS_KEY)
OffsetForLeaderEpochResponse = response_class(OFFSET_FOR_LEADER_EPOCH_KEY)
DescribeLogDirsResponse = response_class(DESCRIBE_LOG_DIRS_KEY)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def end_offset_for_epoch(entries: list[tuple[int, int]], requested: int, log_end_offset: int) -> tuple[int, int]:
    """Kafka's LeaderEpochFileCache.endOffsetFor: (epoch, end offset) for a requested leader epoch."""
    if requested == UNDEFINED_EPOCH or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if requested == entries[-1][0]:
        return requested, log_end_offset
    higher = next(((e, o) for e, o in entries if e > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    floor = None
    for e, o in entries:
        if e <= requested:
            floor = (e, o)
    return (floor[0] if floor is not None else requested), higher[1]


@handles(OFFSET_FOR_LEADER_EPOCH_KEY, 2, supported_versions(OFFSET_FOR_LEADER_EPOCH_KEY)[1])
async def handle_offset_for_leader_epoch(ctx: RequestContext, header, request) -> object:
    R = OffsetForLeaderEpochResponse
    broker = ctx.broker
    topics = []
    for wanted in request.topics:
        topic = broker.metadata.get(wanted.topic)
        results = []
        for p in wanted.partitions:
            plog = broker.partition_log(wanted.topic, p.partition) if topic is not None else None
            if plog is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = leader_epoch_error(p.current_leader_epoch, plog.leader_epoch)
            if code != ErrorCode.NONE:
                results.append(R.EpochEndOffset(error_code=int(code), partition=p.partition,
                                                leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_EPOCH_OFFSET))
                continue
            epoch, end = end_offset_for_epoch(plog.leader_epoch_cache.entries, p.leader_epoch, plog.log_end_offset)
            results.append(R.EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(R.OffsetForLeaderTopicResult(topic=wanted.topic, partitions=results))
    return R(throttle_time_ms=0, topics=topics)


@handles(DELETE_RECORDS_KEY, 0, supported_versions(DELETE_RECORDS_KEY)[1])
async def handle_delete_records(ctx: RequestContext, header, request) -> object:
    R = DeleteRecordsResponse
    broker = ctx.broker
    topics = []
    for wanted in request.topics:
        topic = broker.metadata.get(wanted.name)
        results = []
        for p in wanted.partitions:
            plog = broker.partition_log(wanted.name, p.partition_index) if topic is not None else None
            if plog is None:
                results.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                              error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                continue
            if "delete" not in plog.config.cleanup_policy.replace(" ", "").split(","):
                # Kafka's Partition.deleteRecordsOnLeader refuses logs without the delete policy
                results.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                              error_code=int(ErrorCode.POLICY_VIOLATION)))
                continue
            # -1 means "up to the high watermark", as in Kafka.
            offset = plog.high_watermark if p.offset == -1 else p.offset
            if offset < 0:
                results.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                              error_code=int(ErrorCode.OFFSET_OUT_OF_RANGE)))
                continue
            try:
                # Kafka only moves the log start offset here (no file I/O but the small epoch
                # checkpoint); the segments below it go at the next retention check
                low = plog.delete_records_before(offset, delete_segments=False)
            except Exception as exc:
                results.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                              error_code=int(error_code_for(exc))))
                continue
            results.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=low,
                                                          error_code=0))
        topics.append(R.DeleteRecordsTopicResult(name=wanted.name, partitions=results))
    return R(throttle_time_ms=0, topics=topics)


def _cordoned_dirs(config) -> set[Path] | None:
    """The dirs of `cordoned.log.dirs` (KIP-1066; "*" = all), None for all; empty when unset or
    when this build's config does not know the key."""
    try:
        value = config.get("cordoned.log.dirs")
    except KeyError:
        return set()
    names = [v.strip() for v in (value.split(",") if isinstance(value, str) else value or []) if v.strip()]
    if "*" in names:
        return None
    return {Path(n).resolve() for n in names}


@handles(DESCRIBE_LOG_DIRS_KEY, 1, 5)
async def handle_describe_log_dirs(ctx: RequestContext, header, request) -> object:
    R = DescribeLogDirsResponse
    broker = ctx.broker
    cordoned = _cordoned_dirs(broker.config)
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    for log_dir in broker.config.log_dirs:
        if not broker.log_manager.is_dir_online(log_dir):
            # a failed dir (Kafka: KafkaStorageException): only the error, no sizes or partitions
            results.append(R.DescribeLogDirsResult(error_code=int(ErrorCode.KAFKA_STORAGE_ERROR),
                                                   log_dir=str(log_dir.resolve()), topics=[]))
            continue
        by_topic: dict[str, list] = {}
        for plog in broker.log_manager.all_logs():
            if plog.dir.parent.resolve() != log_dir.resolve():
                continue
            if wanted is not None and (plog.topic, plog.partition) not in wanted:
                continue
            by_topic.setdefault(plog.topic, []).append(R.DescribeLogDirsPartition(
                partition_index=plog.partition, partition_size=plog.size_in_bytes(), offset_lag=0, is_future_key=False))
        for move in moves_of(broker).values():
            # a replica on its way to this dir (AlterReplicaLogDirs): Kafka lists its future log
            # with how far it is behind the current one
            if move.target.resolve() != log_dir.resolve() or (wanted is not None and
                                                              (move.topic, move.partition) not in wanted):
                continue
            lag = max(0, move.source.log_end_offset - move.future.log_end_offset)
            by_topic.setdefault(move.topic, []).append(R.DescribeLogDirsPartition(
                partition_index=move.partition, partition_size=move.future.size_in_bytes(), offset_lag=lag,
                is_future_key=True))
        try:
            stats = os.statvfs(log_dir)
            total, usable = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
        except OSError:
            total = usable = -1
        results.append(R.DescribeLogDirsResult(
            error_code=0, log_dir=str(log_dir.resolve()),
            topics=[R.DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in sorted(by_topic.items())],
            total_bytes=total, usable_bytes=usable,
            # v5: whether new partitions may be placed in the dir
            is_cordoned=header.api_version >= 5 and (cordoned is None or log_dir.resolve() in cordoned)))
    return R(throttle_time_ms=0, error_code=0, results=results)
