"""AlterReplicaLogDirs: move a partition's replica to another of this node's log dirs.

Kafka's ReplicaManager.alterReplicaLogDirs checks each partition in this order: the future dir
name fits in 255 bytes (else INVALID_TOPIC_EXCEPTION), the path is one of `log.dirs` exactly
as an absolute path (else LOG_DIR_NOT_FOUND, before the partition is even looked at), the
partition exists (else UNKNOWN_TOPIC_OR_PARTITION) and has a log here (else
REPLICA_NOT_AVAILABLE). A replica already in that dir needs nothing: NONE.

A live move between dirs (Kafka's ``-future`` log, caught up by its alter-log-dirs fetcher,
then swapped in) is not implemented yet: such a request is refused with KAFKA_STORAGE_ERROR,
the error Kafka gives when it cannot create the future log, rather than answered NONE and
never carried out.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

ALTER_REPLICA_LOG_DIRS_KEY = 34
AlterReplicaLogDirsResponse = response_class(ALTER_REPLICA_LOG_DIRS_KEY)

# UnifiedLog.logFutureDirName: "<topic>-<partition>.<32 hex digits>-future", a file name
MAX_DIR_NAME = 255
_FUTURE_SUFFIX_LEN = 1 + 32 + len("-future")


def _configured_dir(ctx: RequestContext, path: str) -> Path | None:
    """The configured log dir `path` names: its absolute form as Kafka compares it, or the
    resolved form Odradek's DescribeLogDirs reports."""
    for d in ctx.broker.config.log_dirs:
        if path in (os.path.abspath(d), str(Path(d).resolve())):
            return Path(d)
    return None


def _alter_one(ctx: RequestContext, topic: str, partition: int, path: str) -> ErrorCode:
    if len(f"{topic}-{partition}") + _FUTURE_SUFFIX_LEN > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    target = _configured_dir(ctx, path)
    if target is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    meta = ctx.broker.metadata.get(topic)
    if meta is None or not 0 <= partition < meta.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    plog = ctx.broker.partition_log(topic, partition)
    if plog is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if plog.dir.parent.resolve() == target.resolve():
        return ErrorCode.NONE
    log.warning("Cannot move %s-%d from %s to %s: moving a replica between log dirs is not supported yet",
                topic, partition, plog.dir.parent, target)
    return ErrorCode.KAFKA_STORAGE_ERROR


@handles(ALTER_REPLICA_LOG_DIRS_KEY, 1, supported_versions(ALTER_REPLICA_LOG_DIRS_KEY)[1])
async def handle_alter_replica_log_dirs(ctx: RequestContext, header, request) -> object:
    R = AlterReplicaLogDirsResponse
    # AlterReplicaLogDirsRequest.partitionDirs: one dir per partition, the last one named wins
    wanted: dict[tuple[str, int], str] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for partition in topic.partitions:
                wanted[(topic.name, partition)] = entry.path
    by_topic: dict[str, list] = {}
    for (topic, partition), path in wanted.items():
        code = _alter_one(ctx, topic, partition, path)
        by_topic.setdefault(topic, []).append(
            R.AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=int(code)))
    return R(throttle_time_ms=0, results=[R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
                                          for name, parts in by_topic.items()])
