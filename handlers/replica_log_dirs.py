"""AlterReplicaLogDirs: move a partition's replica to another of this node's log dirs (JBOD).

Kafka's ReplicaManager.alterReplicaLogDirs checks each partition in this order: the future dir
name fits in 255 bytes (else INVALID_TOPIC_EXCEPTION), the path is one of `log.dirs` exactly
as an absolute path (else LOG_DIR_NOT_FOUND, before the partition is even looked at), the
partition exists (else UNKNOWN_TOPIC_OR_PARTITION) and has a log here (else
REPLICA_NOT_AVAILABLE). A replica already in that dir needs nothing: NONE.

A move to another dir is Kafka's: the answer (NONE) comes once an empty future log
``<dir>/<topic>-<p>.<uuid>-future`` exists; a background task then copies the batches over as
they are (offsets, epochs, timestamps; retention and the cleaner keep out of the partition
meanwhile, as Kafka pauses cleaning), the bulk in worker threads, and the last few on the event
loop between two appends, where the future log takes the current one's place: it is renamed
``<topic>-<p>``, the old log goes to ``-delete``, and the metadata records the new directory id.
A request naming the current dir again, or another dir, drops the future log first.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from ..logstore.files import FUTURE_DIR_SUFFIX, delete_dir_name, partition_dir_name
from ..logstore.partition_log import AppendInfo, AppendOrigin, PartitionLog
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from ..wire.records import RecordBatch, iter_batches
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

ALTER_REPLICA_LOG_DIRS_KEY = 34
AlterReplicaLogDirsResponse = response_class(ALTER_REPLICA_LOG_DIRS_KEY)

# UnifiedLog.logFutureDirName: "<topic>-<partition>.<32 hex digits>-future", a file name
MAX_DIR_NAME = 255
_FUTURE_SUFFIX_LEN = 1 + 32 + len(FUTURE_DIR_SUFFIX)

#: Bytes copied per worker-thread step; below FINAL_BYTES left, the rest is copied on the event
#: loop together with the swap (Kafka's ReplicaAlterLogDirsThread fetches up to 10 MiB a time).
COPY_CHUNK = 4 * 1024 * 1024
FINAL_BYTES = 256 * 1024
_LOG_APPEND_TIME = 0x08


@dataclass(eq=False)
class Move:
    """A replica on its way to `target`: the future log being filled from the current one."""

    topic: str
    partition: int
    target: Path
    future: PartitionLog
    source: PartitionLog
    cancelled: bool = False
    done: bool = False


# moves under way, per broker, by (topic, partition)
_moves: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# one AlterReplicaLogDirs request at a time, per broker
_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _lock_of(broker: Any) -> trio.Lock:
    lock = _locks.get(broker)
    if lock is None:
        lock = _locks[broker] = trio.Lock()
    return lock


def moves_of(broker: Any) -> dict[tuple[str, int], Move]:
    """The replica moves under way on `broker` (DescribeLogDirs shows their future logs)."""
    moves = _moves.get(broker)
    if moves is None:
        moves = _moves[broker] = {}
    return moves


def _configured_dir(ctx: RequestContext, path: str) -> Path | None:
    """The configured log dir `path` names: its absolute form as Kafka compares it, or the
    resolved form Odradek's DescribeLogDirs reports."""
    for d in ctx.broker.config.log_dirs:
        if path in (os.path.abspath(d), str(Path(d).resolve())):
            return Path(d)
    return None


def _same_dir(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


async def _alter_one(ctx: RequestContext, topic: str, partition: int, path: str) -> ErrorCode:
    if len(f"{topic}-{partition}") + _FUTURE_SUFFIX_LEN > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    target = _configured_dir(ctx, path)
    if target is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    broker = ctx.broker
    if not broker.log_manager.is_dir_online(target):
        return ErrorCode.KAFKA_STORAGE_ERROR  # Kafka: the destination dir is offline
    meta = broker.metadata.get(topic)
    if meta is None or not 0 <= partition < meta.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    plog = broker.partition_log(topic, partition)
    if plog is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    moves = moves_of(broker)
    under_way = moves.get((topic, partition))
    if under_way is not None:
        if _same_dir(under_way.target, target):
            return ErrorCode.NONE  # Kafka: the future log is already there
        # another destination: Kafka drops the future log (and its fetcher) first
        under_way.cancelled = True
        del moves[(topic, partition)]
    if _same_dir(plog.dir.parent, target):
        return ErrorCode.NONE
    try:
        future = await trio.to_thread.run_sync(_open_future_log, broker, plog, target)
    except OSError as exc:
        log.warning("Cannot create the future log of %s-%d in %s: %s", topic, partition, target, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    move = Move(topic, partition, target, future, plog)
    moves[(topic, partition)] = move
    broker.log_manager.future_logs[(topic, partition)] = future
    trio.lowlevel.spawn_system_task(_run_move, broker, move, name=f"move {topic}-{partition} to {target}")
    return ErrorCode.NONE


def _open_future_log(broker: Any, plog: PartitionLog, target: Path) -> PartitionLog:
    name = f"{partition_dir_name(plog.topic, plog.partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
    log.info("Creating future log %s for %s", target / name, plog.name)
    return PartitionLog.open(target / name, plog.config, plog.topic, plog.partition, topic_id=plog.topic_id,
                             validate_records=broker.log_manager.validate_records)


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
    # one request at a time, as Kafka holds replicaStateChangeLock: a second request for the same
    # partition must see the future log the first one is creating
    async with _lock_of(ctx.broker):
        for (topic, partition), path in wanted.items():
            code = await _alter_one(ctx, topic, partition, path)
            by_topic.setdefault(topic, []).append(
                R.AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=int(code)))
    return R(throttle_time_ms=0, results=[R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
                                          for name, parts in by_topic.items()])


# ------------------------------------------------------------------ the move


class _MoveAborted(Exception):
    pass


def _read_bytes(slices: list) -> bytes:
    """The bytes of a read's file slices (blocking: a worker thread, or a small tail on the loop)."""
    return b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in slices)


def append_copied(future: PartitionLog, data: bytes) -> int:
    """Append whole v2 batches to `future` exactly as they are (Kafka's appendAsFollower: offsets,
    leader epochs and timestamps kept); returns the bytes taken (a torn tail is left)."""
    view = memoryview(bytearray(data))
    taken = 0
    for batch in iter_batches(view):
        raw = view[batch.position:batch.position + batch.size_in_bytes]
        rb = RecordBatch(raw)
        rb.ensure_valid()
        h = rb.header()
        first, last = h.base_offset, h.base_offset + h.last_offset_delta
        if future.log_end_offset == future.log_start_offset and first != future.log_end_offset and \
                future.size_in_bytes() == 0:
            # an empty future log starts where the copied log's first batch does
            future.truncate_fully_and_start_at(first)
        if first < future.log_end_offset:
            raise _MoveAborted(f"batch at offset {first} is below the future log's end {future.log_end_offset}")
        append_time = h.max_timestamp if h.attributes & _LOG_APPEND_TIME else -1
        # the batch is stored unchanged: the log store has no follower append, so its placement
        # step is used directly (coordinator origin: no client rules, no sequence checks)
        pending = future._begin_append(raw, first, last, h.max_timestamp, append_time, h, h.partition_leader_epoch,
                                       time.time_ns() // 1_000_000, AppendOrigin.COORDINATOR)
        if isinstance(pending, AppendInfo):
            raise _MoveAborted(f"batch at offset {first} was taken for a duplicate")
        pending.finish()
        taken = batch.position + batch.size_in_bytes
    return taken


def _copy_step(future: PartitionLog, slices: list) -> None:
    data = _read_bytes(slices)
    if data and append_copied(future, data) == 0:
        raise _MoveAborted("no whole batch in a read of the current log")


async def _run_move(broker: Any, move: Move) -> None:
    tp = (move.topic, move.partition)
    manager = broker.log_manager
    paused = False
    interrupted = False  # by the broker stopping, not by a request: the future log stays
    try:
        # Kafka's abortAndPauseCleaning: wait for the cleaner to let go, then keep it (and
        # retention) away until the move is over
        while tp in manager.cleaning_in_progress:
            await trio.sleep(0.1)
        manager.cleaning_in_progress.add(tp)
        paused = True
        await _copy_and_swap(broker, move)
    except Exception as exc:  # noqa: BLE001 - a failed move leaves the replica where it was
        interrupted = manager.stopping and not move.cancelled
        if move.source.closed:  # the broker stopped or the topic went away
            log.info("Moving %s-%d to %s stopped: its log was closed", move.topic, move.partition, move.target)
        elif not move.cancelled:
            log.warning("Moving %s-%d to %s failed: %s", move.topic, move.partition, move.target, exc, exc_info=True)
        move.cancelled = True
    finally:
        if paused:
            manager.cleaning_in_progress.discard(tp)
        moves = moves_of(broker)
        if moves.get(tp) is move:
            del moves[tp]
        if not move.done and (interrupted or (manager.stopping and not move.cancelled)):
            pass  # the broker is stopping: the future log stays, and the move resumes at the next start
        elif not move.done:
            if manager.future_logs.get(tp) is move.future:
                del manager.future_logs[tp]
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_drop_future, move.future)


def _drop_future(future: PartitionLog) -> None:
    future.close_handlers()
    shutil.rmtree(future.dir, ignore_errors=True)


def _current(broker: Any, move: Move) -> PartitionLog:
    plog = broker.partition_log(move.topic, move.partition)
    if move.cancelled or plog is not move.source:
        raise _MoveAborted("the move was cancelled or the partition's log was replaced")
    return plog


async def _copy_and_swap(broker: Any, move: Move) -> None:
    future = move.future
    current = _current(broker, move)
    if current.log_start_offset > 0 and future.size_in_bytes() == 0:
        # Kafka's future log starts at the current one's log start offset
        await trio.to_thread.run_sync(future.truncate_fully_and_start_at, current.log_start_offset)
    while True:
        current = _current(broker, move)
        offset = max(future.log_end_offset, current.log_start_offset)
        if offset >= current.log_end_offset:
            break
        data = current.read(offset, COPY_CHUNK)
        if data.size <= FINAL_BYTES and current.segments[-1].base_offset <= offset:
            break  # a small tail in the active segment: the event loop copies it with the swap
        await trio.to_thread.run_sync(_copy_step, future, data.slices)
    # what is copied so far reaches the disk before the event loop takes over
    await trio.to_thread.run_sync(future.flush)
    current = _current(broker, move)
    old, old_dir = _swap(broker, move, current)
    move.done = True
    if broker.log_manager.future_logs.get((move.topic, move.partition)) is not None:
        del broker.log_manager.future_logs[(move.topic, move.partition)]
    moves = moves_of(broker)
    if moves.get((move.topic, move.partition)) is move:
        del moves[(move.topic, move.partition)]  # no future log any more
    log.info("Moved %s from %s to %s", current.name, current.dir.parent, move.target)
    manager = broker.log_manager
    try:
        # the moved-from dir's checkpoints stop naming the partition
        await trio.to_thread.run_sync(manager.checkpoint_recovery_points)
        await trio.to_thread.run_sync(manager.checkpoint_log_start_offsets)
        store = getattr(broker, "metadata_store", None)
        if store is not None:
            from .topics import admin_lock  # noqa: PLC0415 - topics imports the registry too

            async with admin_lock(broker):
                # the PartitionChangeRecord with the new directory id (Kafka: AssignReplicasToDirs)
                store.reconcile_directories({(move.topic, move.partition): move.target})
        # fetches may still be sending from the old files: they go after file.delete.delay.ms,
        # as Kafka deletes a replaced log (a restart deletes a -delete dir left behind)
        await trio.sleep(old.config.file_delete_delay_ms / 1000)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(old.close_handlers)
            await trio.to_thread.run_sync(shutil.rmtree, old_dir, True)


def _swap(broker: Any, move: Move, current: PartitionLog) -> tuple[PartitionLog, Path]:
    """On the event loop, with no checkpoint in between: copy the tail, then put the future log
    in the current one's place, as Kafka's replaceCurrentWithFutureLog does: the current log's
    dir becomes `<topic>-<p>.<uuid>-delete` (its files stay open), the future log's `<topic>-<p>`.
    Returns the old log and its new dir name."""
    future = move.future
    current.settle()  # an append a worker thread is writing
    while future.log_end_offset < current.log_end_offset:
        offset = max(future.log_end_offset, current.log_start_offset)
        data = current.read(offset, COPY_CHUNK)
        if not data.slices:
            raise _MoveAborted(f"nothing to read at offset {offset} below the log end {current.log_end_offset}")
        _copy_step(future, data.slices)
    if future.log_start_offset < current.log_start_offset:
        future.delete_records_before(current.log_start_offset, delete_segments=False)
    manager = broker.log_manager
    future.close()
    final = move.target / partition_dir_name(move.topic, move.partition)
    os.rename(future.dir, final)
    try:
        new = PartitionLog.open(final, current.config, move.topic, move.partition,
                                recovery_point=future.log_end_offset, log_start_offset=future.log_start_offset,
                                had_clean_shutdown=True, topic_id=current.topic_id,
                                validate_records=manager.validate_records)
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        raise
    deleted = current.dir.with_name(delete_dir_name(move.topic, move.partition))
    try:
        os.rename(current.dir, deleted)
    except BaseException:
        new.close_handlers()
        shutil.rmtree(final, ignore_errors=True)
        raise
    manager.detach_logs([(move.topic, move.partition)])
    manager.add_log(new)
    new.become_leader(broker.partition_epoch_in_metadata(move.topic, move.partition))
    move.future = new
    return current, deleted


def resume_moves(broker: Any) -> list[tuple[str, int]]:
    """Go on with the moves a restart interrupted (Kafka's broker restarts its alter-log-dirs
    fetchers for the future logs it loads): each future log found at startup whose partition has
    its log here and whose dir is online is filled and swapped in as a new move would be; the
    others are dropped. Call it once, from the event loop, after the logs are loaded."""
    manager = broker.log_manager
    moves = moves_of(broker)
    resumed = []
    for tp, future in list(manager.future_logs.items()):
        if tp in moves:
            continue
        current = broker.partition_log(*tp)
        if current is None or not manager.is_dir_online(future.dir.parent) or \
                _same_dir(current.dir.parent, future.dir.parent):
            log.info("Dropping the future log %s: its partition has no log to move here", future.dir)
            del manager.future_logs[tp]
            _drop_future(future)
            continue
        move = Move(tp[0], tp[1], future.dir.parent, future, current)
        moves[tp] = move
        log.info("Resuming the move of %s-%d to %s at offset %d", tp[0], tp[1], move.target, future.log_end_offset)
        trio.lowlevel.spawn_system_task(_run_move, broker, move, name=f"move {tp[0]}-{tp[1]} to {move.target}")
        resumed.append(tp)
    return resumed
