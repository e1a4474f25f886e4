"""LogManager: every partition log of one or more log dirs, with startup, checkpoints and clean shutdown.

Kafka's LogManager + the high-watermark part of ReplicaManager. The server owns one instance:
`startup()` once, `checkpoint_*()` and `flush_dirty_logs()` periodically (the flushes block, run them
in a thread), `shutdown(broker_epoch)` at the end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import files
from .checkpoints import ORDER_ANYREFMAP, ORDER_HASHMAP_COPY, OffsetCheckpointFile
from .config import LogConfig
from .errors import KafkaStorageError
from .java_hash import hashmap_order, scala_trie_order, string_hash, topic_partition_hash
from .metadata_files import FileLock, read_clean_shutdown_file, write_clean_shutdown_file
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
#: Threads loading the logs of a dir at start-up (Kafka's num.recovery.threads.per.data.dir).
LOAD_THREADS = 8

TopicPartition = tuple[str, int]


class LogDir:
    """One entry of log.dirs: its lock and checkpoint files."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock = FileLock(self.path)
        self.had_clean_shutdown = False
        self.recovery_points: OffsetCheckpointFile | None = None
        self.log_start_offsets: OffsetCheckpointFile | None = None
        self.high_watermarks: OffsetCheckpointFile | None = None
        self.cleaner_offsets: OffsetCheckpointFile | None = None
        self.all_loaded_ok = True
        #: set once an I/O error hit the dir (Kafka's LogDirFailureChannel): it is never written again
        self.offline = False

    def open_checkpoints(self) -> None:
        p = self.path
        self.recovery_points = OffsetCheckpointFile(p / files.RECOVERY_POINT_CHECKPOINT, ORDER_HASHMAP_COPY)
        self.log_start_offsets = OffsetCheckpointFile(p / files.LOG_START_OFFSET_CHECKPOINT, ORDER_HASHMAP_COPY)
        self.high_watermarks = OffsetCheckpointFile(p / files.REPLICATION_OFFSET_CHECKPOINT, ORDER_ANYREFMAP)
        self.cleaner_offsets = OffsetCheckpointFile(p / files.CLEANER_OFFSET_CHECKPOINT, ORDER_HASHMAP_COPY)


class LogManager:
    """Owns every PartitionLog of the broker's log dirs.

    `default_config` is the broker-wide LogConfig; `topic_config(topic)` (optional callback) returns a
    topic's LogConfig when it has overrides (the broker's metadata knows them); `create_log` also takes
    a config that is then remembered for that topic.
    """

    def __init__(self, log_dirs: list[Path], default_config: LogConfig | None = None,
                 topic_config: Callable[[str], LogConfig | None] | None = None,
                 validate_records: bool = True) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.dirs = [LogDir(Path(d)) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self._topic_config_cb = topic_config
        self.topic_configs: dict[str, LogConfig] = {}
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, LogDir] = {}
        self._pending_deletes: list[tuple[Path, float]] = []
        self.validate_records = validate_records
        self.started = False
        # Runs a structural change of a log (segment list, rolls, renames) where appends and reads
        # happen. Retention and the cleaner work in worker threads; the broker sets this to
        # trio.from_thread.run_sync so those short steps run on the event loop, between appends.
        self.run_exclusive: Callable[..., object] = lambda fn, *args: fn(*args)
        # logs the cleaner is working on: retention leaves them alone (Kafka's in-progress map)
        self.cleaning_in_progress: set[TopicPartition] = set()
        # Checkpoint files and the pending-deletes list are written from worker threads (periodic
        # checkpoints, topic creation and deletion off the event loop): one writer at a time.
        self._files_lock = threading.RLock()
        #: partitions whose log was in a failed dir: served as KAFKA_STORAGE_ERROR, never re-created
        self.offline_partitions: set[TopicPartition] = set()
        #: future logs (`<topic>-<p>.<uuid>-future`) of replicas moving between dirs: loaded at
        #: startup, kept at shutdown, so a move resumes after a restart as in Kafka
        self.future_logs: dict[TopicPartition, PartitionLog] = {}
        #: set when shutdown starts (a move stopped by it keeps its future log)
        self.stopping = False
        #: told (on the event loop) of each dir that failed, with the partitions it took offline:
        #: the metadata then shows them offline (Kafka's broker reports the dir to its controller)
        self.dir_failure_listeners: list[Callable[[Path, list[TopicPartition]], object]] = []

    # -- configs --------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        cfg = self.topic_configs.get(topic)
        if cfg is None and self._topic_config_cb is not None:
            cfg = self._topic_config_cb(topic)
        return cfg or self.default_config

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply a new config to a topic's logs (index/segment settings apply to new segments)."""
        self.topic_configs[topic] = config
        for (t, _p), lg in self.logs.items():
            if t == topic:
                lg.config = config
                # Kafka's shouldRoll reads the log's current config (segment.bytes / segment.ms),
                # so the live segments take the new one too
                for seg in lg.segments:
                    seg.config = config

    # -- startup --------------------------------------------------------------------------
    def lock_dirs(self) -> None:
        """Lock every dir (`.lock`); `LogDirLockedError` if another process holds one. Idempotent."""
        try:
            for d in self.dirs:
                if not d.lock.locked:
                    d.path.mkdir(parents=True, exist_ok=True)
                    d.lock.try_lock()
        except BaseException:
            for d in self.dirs:
                d.lock.unlock()
            raise

    def startup(self) -> None:
        """Lock every dir (unless `lock_dirs` did), load/recover all partition logs, delete the
        clean-shutdown markers."""
        self.lock_dirs()
        try:
            for d in self.dirs:
                self._load_dir(d)
        except BaseException:
            # leave nothing locked or open behind a failed start
            for lg in [*self.logs.values(), *self.future_logs.values()]:
                lg.close_handlers()
            self.logs.clear()
            self.future_logs.clear()
            self._log_dir_of.clear()
            for d in self.dirs:
                d.lock.unlock()
            raise
        self.started = True

    def _load_dir(self, d: LogDir) -> None:
        marker = read_clean_shutdown_file(d.path)
        d.had_clean_shutdown = marker is not None
        if marker is not None:
            # Kafka deletes the marker before loading: a crash during loading must mean "unclean"
            (d.path / files.CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        d.open_checkpoints()
        assert d.recovery_points is not None and d.log_start_offsets is not None
        try:
            recovery_points = d.recovery_points.read()
        except Exception as e:  # noqa: BLE001 - a bad checkpoint means recover everything, like Kafka
            log.warning("Error reading recovery point checkpoint of %s (%s); recovering all logs", d.path, e)
            recovery_points = {}
        try:
            start_offsets = d.log_start_offsets.read()
        except Exception as e:  # noqa: BLE001
            log.warning("Error reading log start offset checkpoint of %s (%s)", d.path, e)
            start_offsets = {}
        # Directory (readdir) order, like Java's File.listFiles: it decides the insertion order of
        # Kafka's log map, which shows in the checkpoint files' line order.
        to_open: list[tuple[Path, TopicPartition]] = []
        for sub in d.path.iterdir():
            if not sub.is_dir():
                continue
            name = sub.name
            if files.is_delete_dir(name):
                log.info("Deleting log dir %s marked for deletion", sub)
                shutil.rmtree(sub, ignore_errors=True)
                continue
            if files.is_future_dir(name):
                self._load_future(d, sub)
                continue
            if files.is_stray_dir(name):
                continue
            tp = files.parse_partition_dir_name(name)
            if tp is None or tp[0] == METADATA_TOPIC:
                continue  # the KRaft metadata log is not a LogManager log
            to_open.append((sub, tp))

        def open_log(item: tuple[Path, TopicPartition]) -> PartitionLog | BaseException:
            sub, tp = item
            try:
                return PartitionLog.open(sub, self.config_for(tp[0]), tp[0], tp[1],
                                         recovery_point=recovery_points.get(tp, 0),
                                         log_start_offset=start_offsets.get(tp),
                                         had_clean_shutdown=d.had_clean_shutdown,
                                         validate_records=self.validate_records)
            except Exception as e:  # noqa: BLE001 - raised below, in readdir order
                return e

        # Several threads, as Kafka's num.recovery.threads.per.data.dir: a log's load is mostly
        # file opens, reads and (recovering) fsyncs, 10,000 of them took 10 s in one thread.
        with ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="log-load") as pool:
            opened = list(pool.map(open_log, to_open))
        failed = next((i for i, r in enumerate(opened) if isinstance(r, BaseException)), None)
        if failed is not None:
            for r in opened:
                if isinstance(r, PartitionLog):
                    r.close_handlers()
            d.all_loaded_ok = False
            error = opened[failed]
            log.error("Error while loading log dir %s", to_open[failed][0], exc_info=error)
            raise error  # type: ignore[misc]
        for (sub, tp), lg in zip(to_open, opened, strict=True):
            assert isinstance(lg, PartitionLog)
            self.logs[tp] = lg
            self._log_dir_of[tp] = d
            log.info("Loaded %s: log start %d, log end %d, %d segment(s)", sub.name, lg.log_start_offset,
                     lg.log_end_offset, len(lg.segments))

    def _load_future(self, d: LogDir, sub: Path) -> None:
        topic, _sep, rest = sub.name.rpartition(".")[0].rpartition("-")
        if not topic or not rest.isdigit():
            return
        tp = (topic, int(rest))
        if tp[0] == METADATA_TOPIC or tp in self.future_logs:
            return
        # always recovered: a stop may have come in the middle of a copy step into it
        lg = PartitionLog.open(sub, self.config_for(topic), topic, tp[1], recovery_point=0,
                               had_clean_shutdown=False, validate_records=self.validate_records)
        self.future_logs[tp] = lg
        log.info("Loaded future log %s: log end %d", sub, lg.log_end_offset)

    # -- lookups / lifecycle of logs --------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def log_dir_of(self, tp: TopicPartition) -> LogDir | None:
        """The log dir holding a partition (its checkpoint files live there)."""
        return self._log_dir_of.get(tp)

    def all_logs(self) -> list[PartitionLog]:
        return list(self.logs.values())

    def log_counts_by_dir(self) -> dict[Path, int]:
        """How many logs each log dir holds (by the dir's path)."""
        counts = {id(d): 0 for d in self.dirs}
        for d in list(self._log_dir_of.values()):
            counts[id(d)] += 1
        return {d.path: counts[id(d)] for d in self.dirs}

    def _next_dir(self) -> LogDir:
        online, counts = self._dirs_and_counts()
        return min(online, key=lambda d: counts[id(d)])

    def _dirs_and_counts(self) -> tuple[list[LogDir], dict[int, int]]:
        """The online dirs in the order Kafka's LogManager.nextLogDirs breaks ties in, and their
        log counts (the first of the fewest is where a new log goes).

        Kafka sorts (stably) a Scala map of dir path -> log count: up to four dirs it keeps the
        `log.dirs` order, so ties go to the dir named first; beyond four it is a hash trie, whose
        order is the paths' hash order."""
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError("no log dir is online")
        counts = {id(d): 0 for d in self.dirs}
        for d in list(self._log_dir_of.values()):
            counts[id(d)] += 1
        if len(online) > 4:
            online = scala_trie_order(online, lambda d: string_hash(str(d.path)))
        return online, counts

    def dirs_for_new_logs(self, topic: str, partitions: list[int]) -> dict[int, Path]:
        """The log dir of each of a topic's partitions: where its log is, else where Kafka 4.4 would
        create it when one metadata change brings them all. Kafka's broker makes the logs in the
        iteration order of the change's HashMap of partitions and puts each in the dir with the
        fewest logs at that moment (a dir named first wins a tie)."""
        out: dict[int, Path] = {}
        missing = []
        for index in partitions:
            existing = self.logs.get((topic, index))
            if existing is not None:
                out[index] = existing.dir.parent
            else:
                missing.append((topic, index))
        if not missing:
            return out
        online, counts = self._dirs_and_counts()
        for _topic, index in hashmap_order(missing, lambda tp: topic_partition_hash(*tp)):
            chosen = min(online, key=lambda d: counts[id(d)])  # the first of the fewest: a stable sort's head
            counts[id(chosen)] += 1
            out[index] = chosen.path
        return out

    def online_dirs(self) -> list[LogDir]:
        """The log dirs no I/O error has taken offline, in `log.dirs` order."""
        return [d for d in self.dirs if not d.offline]

    def is_dir_online(self, path: Path) -> bool:
        """Whether `path` is a log dir of this manager that is online."""
        resolved = Path(path).resolve()
        return any(d.path.resolve() == resolved and not d.offline for d in self.dirs)

    def create_log(self, topic: str, partition: int, topic_id: bytes | uuid.UUID | None = None,
                   config: LogConfig | None = None) -> PartitionLog:
        """Get or create the log of a partition (in the dir with the fewest logs) and write partition.metadata."""
        tp = (topic, partition)
        if tp in self.offline_partitions:
            raise KafkaStorageError(f"the log dir of {topic}-{partition} is offline")
        if config is not None:
            self.topic_configs[topic] = config
        raw_id = topic_id.bytes if isinstance(topic_id, uuid.UUID) else topic_id
        existing = self.logs.get(tp)
        if existing is not None:
            if raw_id is not None and existing.topic_id != raw_id:
                existing.assign_topic_id(raw_id)
            return existing
        d = self._next_dir()
        return self.add_log(self.open_new_log(topic, partition, raw_id, self.config_for(topic), d.path))

    def open_new_log(self, topic: str, partition: int, topic_id: bytes | None, config: LogConfig,
                     log_dir: Path) -> PartitionLog:
        """Create (or load) a partition's log in `log_dir` without registering it.

        The file work of `create_log` (directory, segment, preallocated indexes, partition.metadata
        with its fsyncs) touches no state of the manager, so the broker runs it in a worker thread
        and registers the log with `add_log` on the event loop afterwards: nobody sees a half-made log.
        """
        path = Path(log_dir) / files.partition_dir_name(topic, partition)
        return PartitionLog.open(path, config, topic, partition, topic_id=topic_id,
                                 validate_records=self.validate_records)

    def add_log(self, lg: PartitionLog) -> PartitionLog:
        """Register a log made by `open_new_log` (the one already registered wins; the new one is closed)."""
        tp = (lg.topic, lg.partition)
        existing = self.logs.get(tp)
        if existing is not None:
            if existing is not lg:
                lg.close_handlers()
            return existing
        parent = lg.dir.parent
        d = next((d for d in self.dirs if d.path == parent), None)
        if d is None:
            raise ValueError(f"{lg.dir} is not in a log dir of this manager")
        self.logs[tp] = lg
        self._log_dir_of[tp] = d
        log.info("Created log for partition %s-%d in %s", lg.topic, lg.partition, d.path)
        return lg

    def dir_for_new_log(self) -> Path:
        """The log dir `create_log` would put a new log in (the one with the fewest logs)."""
        return self._next_dir().path

    def delete_log(self, topic: str, partition: int, delay_ms: int | None = None) -> Path | None:
        """Close the log, rename its dir to `<topic>-<p>.<uuid>-delete` and delete it after file.delete.delay.ms."""
        detached = self.detach_logs([(topic, partition)])
        if not detached:
            return None
        return self.finish_delete(detached, delay_ms)[0]

    def detach_logs(self, tps: list[TopicPartition]) -> list[tuple[PartitionLog, LogDir]]:
        """First half of a deletion (on the event loop): the logs leave the manager at once, so no
        request finds them any more; `finish_delete` then does the file work (in a worker thread)."""
        out = []
        for tp in tps:
            lg = self.logs.pop(tp, None)
            d = self._log_dir_of.pop(tp, None)
            if lg is not None and d is not None:
                out.append((lg, d))
        return out

    def finish_delete(self, detached: list[tuple[PartitionLog, LogDir]], delay_ms: int | None = None) -> list[Path]:
        """Close and rename detached logs, then rewrite each dir's checkpoints once (not once per log:
        a checkpoint names every log of the dir, so per-log rewrites made deleting many partitions
        quadratic). Blocking file I/O: call it from a worker thread."""
        with self._files_lock:
            targets = self._close_and_rename(detached, files.delete_dir_name)
            for (lg, _d), target in zip(detached, targets, strict=True):
                delay = lg.config.file_delete_delay_ms if delay_ms is None else delay_ms
                self._pending_deletes.append((target, time.monotonic() + delay / 1000))
            if any(due <= time.monotonic() for _path, due in self._pending_deletes):
                self.delete_pending_dirs()
            self._forget_logs(detached, cleaner=True)
        return targets

    def mark_stray(self, tps: list[TopicPartition]) -> list[Path]:
        """Kafka's handling of stray replicas (3.7+): close each log and rename its dir to
        `<topic>-<p>.<uuid>-stray`, kept on disk for the operator and never served. Blocking file
        I/O; the checkpoints stop naming them."""
        detached = self.detach_logs(tps)
        with self._files_lock:
            targets = self._close_and_rename(detached, files.stray_dir_name)
            for (lg, _d), target in zip(detached, targets, strict=True):
                log.warning("Partition %s-%d is stray (the metadata does not place it on this broker); its "
                            "dir is renamed to %s", lg.topic, lg.partition, target.name)
            self._forget_logs(detached, cleaner=False)
        return targets

    @staticmethod
    def _close_and_rename(detached: list[tuple[PartitionLog, LogDir]],
                          name_of: Callable[[str, int], str]) -> list[Path]:
        targets = []
        for lg, d in detached:
            lg.close()
            target = d.path / name_of(lg.topic, lg.partition)
            os.rename(lg.dir, target)
            targets.append(target)
        return targets

    def _forget_logs(self, detached: list[tuple[PartitionLog, LogDir]], *, cleaner: bool) -> None:
        """The checkpoints of each dir stop naming the detached logs (rewritten once per dir)."""
        dirs = {id(d): d for _lg, d in detached}
        for d in dirs.values():
            self._checkpoint_dir_recovery(d)
            self._checkpoint_dir_start(d)
            if cleaner:
                self._forget_cleaner_offsets(d, {(lg.topic, lg.partition) for lg, ld in detached if ld is d})

    @staticmethod
    def _forget_cleaner_offsets(d: LogDir, tps: set[TopicPartition]) -> None:
        """Drop deleted logs from cleaner-offset-checkpoint (Kafka's updateCheckpoints(partitionToRemove))."""
        if d.cleaner_offsets is None:
            return
        try:
            offsets = d.cleaner_offsets.read()
        except Exception:  # noqa: BLE001 - unreadable: the cleaner rewrites it on its next update
            return
        if tps & offsets.keys():
            for tp in tps:
                offsets.pop(tp, None)
            d.cleaner_offsets.write(offsets)

    def delete_pending_dirs(self, force: bool = False) -> None:
        """Remove `-delete` dirs and `.deleted` segments whose delay has passed (call periodically)."""
        for lg in self.all_logs():
            lg.delete_pending_segments(force)
        with self._files_lock:
            now = time.monotonic()
            keep = []
            for path, due in self._pending_deletes:
                if force or due <= now:
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    keep.append((path, due))
            self._pending_deletes = keep

    # -- log dir failure ------------------------------------------------------------------
    @contextlib.contextmanager
    def _failing_dir(self, d: LogDir, what: str):
        """An OSError in the block takes `d` offline (Kafka: an IOException on a dir's file goes to
        the LogDirFailureChannel); the caller goes on with the other dirs, as Kafka's checkpoints
        log a KafkaStorageException and go on."""
        try:
            yield
        except OSError as exc:
            self.handle_dir_failure(d.path, f"Error while writing the {what} of {d.path}: {exc}")

    def handle_dir_failure(self, path: Path, reason: str = "") -> list[TopicPartition]:
        """Take a log dir offline after an I/O error (Kafka's ReplicaManager/LogManager
        handleLogDirFailure): its logs stop being served (their partitions answer KAFKA_STORAGE_ERROR),
        their file handles are closed, its lock is released, and no new log is placed there; the other
        dirs keep serving. Returns the partitions taken offline (empty if the dir was offline already).
        Safe from a worker thread: the logs leave the manager on the event loop (`run_exclusive`)."""
        resolved = Path(path).resolve()
        d = next((d for d in self.dirs if d.path.resolve() == resolved), None)
        if d is None or d.offline:
            return []
        d.offline = True  # first: no checkpoint or placement uses it any more
        log.error("Stopping serving replicas in dir %s because the log directory has failed: %s", d.path, reason)

        def detach() -> list[tuple[PartitionLog, LogDir]]:
            tps = [tp for tp, ld in list(self._log_dir_of.items()) if ld is d]
            self.offline_partitions.update(tps)
            for tp, future in list(self.future_logs.items()):
                # Kafka drops a future replica in the failed dir (its files stay) and one whose
                # current log failed: the move is over either way
                if future.dir.parent == d.path or tp in tps:
                    del self.future_logs[tp]
            return self.detach_logs(tps)

        try:
            detached = self.run_exclusive(detach)
        except RuntimeError:  # already on the event loop (or no loop at all)
            detached = detach()
        for lg, _d in detached:  # type: ignore[union-attr]
            try:
                lg.close_handlers()
            except OSError:
                pass
        try:
            d.lock.destroy()
        except OSError:
            pass
        tps = sorted((lg.topic, lg.partition) for lg, _d in detached)  # type: ignore[union-attr]
        log.warning("Stopped serving %s: they are in the failed log dir %s",
                    ", ".join(f"{t}-{p}" for t, p in tps) or "no partitions", d.path)
        if not self.online_dirs():
            log.critical("Every log dir has failed")
        for listener in list(self.dir_failure_listeners):
            try:
                try:
                    self.run_exclusive(listener, d.path, tps)
                except RuntimeError:  # already on the event loop (or no loop at all)
                    listener(d.path, tps)
            except Exception:  # noqa: BLE001 - the dir is offline either way
                log.exception("Reporting the failed log dir %s", d.path)
        return tps

    # -- checkpoints ----------------------------------------------------------------------
    def _logs_in(self, d: LogDir) -> dict[TopicPartition, PartitionLog]:
        # list(): checkpoints run in worker threads while the event loop adds and removes logs
        return {tp: lg for tp, lg in list(self.logs.items()) if self._log_dir_of.get(tp) is d}

    def _checkpoint_dir_recovery(self, d: LogDir) -> None:
        assert d.recovery_points is not None
        if d.offline:
            return
        with self._files_lock, self._failing_dir(d, "recovery point checkpoint"):
            d.recovery_points.write({tp: lg.recovery_point for tp, lg in self._logs_in(d).items()})

    def _checkpoint_dir_start(self, d: LogDir) -> None:
        assert d.log_start_offsets is not None
        if d.offline:
            return
        with self._files_lock, self._failing_dir(d, "log start offset checkpoint"):
            d.log_start_offsets.write({tp: lg.log_start_offset for tp, lg in self._logs_in(d).items()
                                       if lg.log_start_offset > lg.segments[0].base_offset})

    def checkpoint_recovery_points(self) -> None:
        """Write recovery-point-offset-checkpoint in every dir (Kafka: every 60 s and at shutdown)."""
        for d in self.dirs:
            self._checkpoint_dir_recovery(d)

    def checkpoint_log_start_offsets(self) -> None:
        """Write log-start-offset-checkpoint (only logs whose start is past their first segment's base)."""
        for d in self.dirs:
            self._checkpoint_dir_start(d)

    def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every dir that holds partitions (Kafka: every 5 s)."""
        for d in self.dirs:
            logs = self._logs_in(d)
            if not logs or d.offline:
                continue  # Kafka leaves it 0 bytes in a dir with no partitions
            assert d.high_watermarks is not None
            with self._files_lock, self._failing_dir(d, "high watermark checkpoint"):
                d.high_watermarks.write({tp: lg.high_watermark for tp, lg in logs.items()})

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention pass (Kafka's LogManager.cleanupLogs, every log.retention.check.interval.ms):
        every log that is not compacted (compact,delete logs are the cleaner's job, as in Kafka)
        and not being cleaned. The check runs here (call it from a worker thread); the deletion
        of a log with work goes through `run_exclusive`. Returns the number of segments deleted."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        deleted = 0
        for tp, lg in list(self.logs.items()):
            if lg.closed or lg.config.compact or tp in self.cleaning_in_progress:
                continue
            deleted += self.delete_old_segments_exclusive(lg, now)
        return deleted

    def delete_old_segments_exclusive(self, lg: PartitionLog, now: int) -> int:
        """Retention of one log: checked here, applied through `run_exclusive` when due."""
        if not lg.retention_due(now):
            return 0

        def run() -> int:
            return 0 if lg.closed else lg.delete_old_segments(now)

        return int(self.run_exclusive(run))  # type: ignore[call-overload]

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """Forget producers idle for producer.id.expiration.ms (Kafka: every 10 min)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for lg in self.all_logs():
            lg.producer_state.remove_expired_producers(now)

    def flush_dirty_logs(self, now_ms: int | None = None) -> list[PartitionLog]:
        """fsync logs whose flush.messages / flush.ms is due (blocking; run it in a thread)."""
        flushed = []
        for lg in self.all_logs():
            if not lg.closed and lg.needs_flush(now_ms):
                try:
                    lg.flush()
                except OSError as exc:  # Kafka: an IOException on a flush takes the dir offline
                    self.handle_dir_failure(lg.dir.parent, f"Error while flushing {lg.name}: {exc}")
                    continue
                flushed.append(lg)
        return flushed

    # -- shutdown -------------------------------------------------------------------------
    def shutdown(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: flush+close every log (snapshot at LEO, trimmed indexes), checkpoints,
        `.kafka_cleanshutdown`, then unlock and delete `.lock`."""
        if not self.started:
            return
        self.stopping = True
        self.checkpoint_high_watermarks()
        for d in self.online_dirs():
            logs = self._logs_in(d)
            for lg in logs.values():
                lg.flush()
                lg.close()
            for lg in list(self.future_logs.values()):
                if lg.dir.parent == d.path and not lg.closed:
                    lg.flush()
                    lg.close()
            self._checkpoint_dir_recovery(d)
            self._checkpoint_dir_start(d)
            if d.all_loaded_ok:
                write_clean_shutdown_file(d.path, broker_epoch)
            d.lock.destroy()
        self.started = False

    def close_without_cleanup(self) -> None:
        """Release everything without writing (a crash stand-in for tests)."""
        for lg in [*self.all_logs(), *self.future_logs.values()]:
            lg.close_handlers()
        for d in self.dirs:
            d.lock.unlock()
        self.started = False
