"""One partition replica's log (Kafka's UnifiedLog + LocalLog + LogLoader), in one directory.

`PartitionLog.open(...)` loads/recovers an existing dir (or starts an empty one); the broker then calls
`append_as_leader`, `read`, the offset lookups, `flush` (blocking, run it in a thread) and `close`.
Everything on disk follows docs/kafka-log-format.md so the dir stays byte-identical to Kafka's.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import NamedTuple

from odradek import faults as _faults
from odradek.wire.records import (
    BATCH_OVERHEAD,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    next_batch_size,
    parse_control_record_key,
    parse_end_txn_marker,
)

from . import files
from .config import LONG_MAX, LogConfig
from .errors import (
    CorruptRecordError as LogCorruptRecordError,
)
from .errors import (
    InconsistentTopicIdError,
    InvalidTimestampError,
    KafkaStorageError,
    LogDeletedError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordError,
)
from .errors import (
    InvalidRecordError as LogInvalidRecordError,
)
from .fileslice import FileSlice
from .index_base import CorruptIndexError
from .leader_epoch import LeaderEpochCache
from .metadata_files import PartitionMetadataFile
from .producer_state import CompletedTxn, ProducerStateManager
from .segment import LogSegment, random_segment_jitter
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

_INDEX_SUFFIXES = (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)


_LOG_APPEND_TIME_BIT = 0x08
_JAVA_LONG = 1 << 64


def _java_long(value: int) -> int:
    """`value` wrapped like Java's long arithmetic (Kafka prints now + Long.MAX_VALUE that way)."""
    return (value + (1 << 63)) % _JAVA_LONG - (1 << 63)


def _refuse_records(rb: RecordBatch, name: str, now: int, cfg: LogConfig, check_timestamps: bool) -> None:
    """Kafka's per-record checks (LogValidator.validateRecord) over every record of a batch; raises
    with the records at fault (KIP-467 record errors) if any, in Kafka's words, else returns.

    A key-less record on a compacted topic is INVALID_RECORD; a CreateTime timestamp outside
    message.timestamp.before/after.max.ms, or a record of a batch that claims LogAppendTime, is
    INVALID_TIMESTAMP (records without a timestamp are not range-checked). One error per record,
    the key first. A v2 record carries no magic or compression of its own, so the other record
    rules of LogValidator cannot fail here."""
    create_time = not cfg.log_append_time
    before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
    claims_append_time = bool(rb.attributes & _LOG_APPEND_TIME_BIT)
    errors: list[RecordError] = []
    timestamp_error = False
    for index, record in enumerate(rb.records(max(cfg.max_message_bytes * 64, 64 * 1024 * 1024))):
        if cfg.compact and record.key is None:
            errors.append(RecordError(index, f"Compacted topic cannot accept message without key in topic "
                                             f"partition {name}"))
        elif not check_timestamps:
            continue
        elif create_time and record.timestamp != -1:
            diff = now - record.timestamp
            if diff > before or -diff > after:
                timestamp_error = True
                errors.append(RecordError(index, (
                    f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                    f"The timestamp should be within [{_java_long(now - before)}, {_java_long(now + after)}]")))
        elif claims_append_time:
            timestamp_error = True
            value = 0 if record.value is None else len(record.value)
            key = 0 if record.key is None else len(record.key)
            errors.append(RecordError(index, (
                f"Invalid timestamp type in message DefaultRecord(offset={record.offset}, "
                f"timestamp={record.timestamp}, key={key} bytes, value={value} bytes). "
                "Producer should not set timestamp type to LogAppendTime.")))
    if not errors:
        return
    # Kafka's processRecordErrors: one timestamp error makes the whole answer INVALID_TIMESTAMP
    if timestamp_error:
        raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(str(e) for e in errors[:3])
    raise LogInvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]", errors)


class AppendOrigin(Enum):
    """Who is appending: decides which checks apply (Kafka's AppendOrigin)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"  # group/txn coordinator batches and txn markers built by the broker
    REPLICATION = "replication"  # a follower appending the leader's batches as they are


@dataclass(slots=True)
class AppendInfo:
    """What an append did; the produce handler builds its response from it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    num_records: int
    size_in_bytes: int
    rolled: bool = False
    # True when the batch repeated one of the producer's last 5 and nothing was written
    duplicate: bool = False


class PendingAppend:
    """An append that is validated and placed but not yet written (`PartitionLog.prepare_append`).

    `write()` is the pwrite alone and may run in a worker thread; `finish()` (on the log's owner,
    the event loop) accounts for it: indexes, producer state, log end offset and high watermark.
    Until then readers see the log as it was. A partition has at most one pending append: whatever
    else changes the log first settles it (writes it, if no thread has, and finishes it).
    """

    __slots__ = ("log", "segment", "view", "position", "first", "last", "max_ts", "append_time", "header",
                 "rolled", "marker", "error", "info", "_written", "_finished", "_lock")

    def __init__(self, log_: PartitionLog, segment: LogSegment, view: memoryview, position: int, first: int,
                 last: int, max_ts: int, append_time: int, header, rolled: bool, marker) -> None:
        self.log = log_
        self.segment = segment
        self.view = view
        self.position = position
        self.first = first
        self.last = last
        self.max_ts = max_ts
        self.append_time = append_time
        self.header = header
        self.rolled = rolled
        self.marker = marker
        self.error: OSError | None = None
        self.info: AppendInfo | None = None
        self._written = False
        self._finished = False
        # held during the pwrite: whoever settles the log waits for a write a thread is doing
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self.view)

    def write(self) -> None:
        """The pwrite (once, whoever calls first). An OSError is kept for `finish` to report."""
        with self._lock:
            if self._written:
                return
            if _faults.SLOW_DISKS:  # a test's slow disk (odradek.faults); this runs in a worker thread
                _faults.disk_wait(self.log.dir.parent)
            try:
                self.segment.write_at(self.position, self.view)
            except OSError as e:
                self.error = e
            self._written = True

    def complete(self) -> None:
        """Write (if no one has) and account for the append: once, whoever comes first. The
        produce path finishes on the event loop; closing the log may settle it in a worker
        thread (a topic deleted meanwhile), hence the lock."""
        self.write()
        with self._lock:
            if not self._finished:
                self._finished = True
                self.log._finish_append(self)

    def finish(self) -> AppendInfo:
        """Account for the written batch (once) and say what the append did.

        Raises KafkaStorageError if the write failed (the log is as if nothing was appended)."""
        self.complete()
        if self.error is not None:
            raise KafkaStorageError(f"I/O error while appending to {self.log.name}: {self.error}") from self.error
        assert self.info is not None
        return self.info


@dataclass(slots=True)
class FetchData:
    """Result of `PartitionLog.read`: zero or more file slices to sendfile, plus offsets."""

    slices: list[FileSlice]
    fetch_offset: int
    first_batch_offset: int  # base offset of the first batch returned (<= fetch_offset), -1 if none
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    first_entry_incomplete: bool = False
    aborted_transactions: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)


class TimestampAndOffset(NamedTuple):
    """ListOffsets answer: timestamp (-1 if none), offset, leader epoch (None if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def _now_ms() -> int:
    return int(time.time() * 1000)


def txn_marker_of(batch: RecordBatch) -> tuple[bool, int] | None:
    """(is_abort, coordinator_epoch) of a COMMIT/ABORT control batch, None for other batches."""
    h = batch.header()
    if not h.attributes & 0x20 or h.record_count < 1:
        return None
    for record in batch.records():
        _v, ctype = parse_control_record_key(record.key)
        if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        marker = parse_end_txn_marker(record)
        return marker.control_type == ControlRecordType.ABORT, marker.coordinator_epoch
    return None


def apply_to_producer_state(psm: ProducerStateManager, batch: RecordBatch | None, h) -> CompletedTxn | None:
    """Feed one batch's producer fields (and its txn marker) to a ProducerStateManager."""
    if h.producer_id < 0:
        return None
    last = h.base_offset + h.last_offset_delta
    is_control = bool(h.attributes & 0x20)
    marker = txn_marker_of(batch) if (is_control and batch is not None) else None
    return psm.update_from_batch(h.producer_id, h.producer_epoch, h.base_sequence, h.base_offset, last,
                                 h.max_timestamp, bool(h.attributes & 0x10), is_control, marker)


class PartitionLog:
    """The log of one partition: segments, leader-epoch cache, producer state, metadata file.

    Not thread-safe: the broker calls it from one task at a time (fsync via `flush()` may run in a
    worker thread while appends continue; it only touches already-written data).
    """

    def __init__(self, dir_: Path, config: LogConfig, topic: str, partition: int) -> None:
        self.dir = Path(dir_)
        self.config = config
        self.topic = topic
        self.partition = partition
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        #: a partition with followers: the high watermark is the replicas' (Partition), not the log end
        self.replicated = False
        #: set by the leader's Partition: called after each append as leader of a replicated log
        self.on_leader_append: Callable[[], None] | None = None
        self.recovery_point = 0
        self.leader_epoch_cache = LeaderEpochCache(self.dir / files.LEADER_EPOCH_CHECKPOINT)
        # this partition's leader epoch since become_leader (the metadata's PartitionRecord /
        # PartitionChangeRecord epoch): stamped into appended batches, checked against requests
        self.leader_epoch = 0
        self.producer_state = ProducerStateManager(self.dir)
        self.partition_metadata = PartitionMetadataFile(self.dir)
        self.topic_id: bytes | None = None
        self._metadata_dirty = False
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self.closed = False
        self.had_clean_shutdown = True
        # Kafka decodes every record of a produced batch (structure, max timestamp). False trusts the
        # CRC-protected header instead (much faster for small records; see docs/benchmarks-logstore.md).
        self.validate_records = True
        # segments renamed to *.deleted, removed after file.delete.delay.ms (readers may still hold them)
        self._pending_deletes: list[tuple[LogSegment, float]] = []
        # an append prepared but not finished yet (its pwrite may be running in a worker thread)
        self._pending: PendingAppend | None = None

    # =====================================================================================
    # construction / loading
    # =====================================================================================
    @classmethod
    def open(cls, dir_: Path, config: LogConfig, topic: str | None = None, partition: int | None = None, *,
             recovery_point: int = 0, log_start_offset: int | None = None, had_clean_shutdown: bool = True,
             topic_id: bytes | None = None, now_ms: int | None = None,
             validate_records: bool = True) -> PartitionLog:
        """Load (and if needed recover) the partition dir, creating it when missing (Kafka's LogLoader).

        `recovery_point`/`log_start_offset` come from the dir's checkpoint files; `had_clean_shutdown`
        from the `.kafka_cleanshutdown` marker found at startup.
        """
        dir_ = Path(dir_)
        if topic is None or partition is None:
            parsed = files.parse_partition_dir_name(dir_.name)
            if parsed is None:
                raise ValueError(f"cannot parse topic-partition from {dir_}")
            topic, partition = parsed
        dir_.mkdir(parents=True, exist_ok=True)
        self = cls(dir_, config, topic, partition)
        self.had_clean_shutdown = had_clean_shutdown
        self.validate_records = validate_records
        now = _now_ms() if now_ms is None else now_ms
        self._load(recovery_point, log_start_offset, had_clean_shutdown, now)
        if self.partition_metadata.exists():
            try:
                self.topic_id = self.partition_metadata.read()
            except (ValueError, KeyError, OSError) as e:
                log.warning("Ignoring unreadable %s: %s", self.partition_metadata.path, e)
        if topic_id is not None:
            self.assign_topic_id(topic_id)
        return self

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def assign_topic_id(self, topic_id: bytes) -> None:
        """Set the topic id and write partition.metadata (Kafka writes it soon after creation).

        InconsistentTopicIdError if the log already has a different topic id.
        """
        topic_id = bytes(topic_id)
        if self.topic_id is not None and self.topic_id != topic_id:
            raise InconsistentTopicIdError(
                f"Tried to assign topic ID {topic_id.hex()} to log for topic partition {self.name}, but log "
                f"already contained topic ID {self.topic_id.hex()}")
        if self.topic_id == topic_id and self.partition_metadata.exists():
            return
        self.topic_id = topic_id
        self.partition_metadata.write(topic_id)
        self._metadata_dirty = False

    def _new_segment(self, base_offset: int, now_ms: int | None = None) -> LogSegment:
        return LogSegment(self.dir, base_offset, self.config, roll_jitter_ms=random_segment_jitter(self.config),
                          now_ms=now_ms)

    def _set_segments(self, segs: list[LogSegment]) -> None:
        segs.sort(key=lambda s: s.base_offset)
        self.segments = segs
        self._bases = [s.base_offset for s in segs]

    def _remove_temp_files(self) -> list[Path]:
        """Kafka's LogLoader.removeTempFilesAndCollectSwapFiles: clear .deleted/.cleaned, collect .swap."""
        swap: list[Path] = []
        cleaned_min: int | None = None
        for p in sorted(self.dir.iterdir()):
            name = p.name
            if not p.is_file():
                continue
            if name.endswith(files.DELETED_SUFFIX):
                log.info("Deleting stray temporary file %s", p)
                p.unlink(missing_ok=True)
            elif name.endswith(files.CLEANED_SUFFIX):
                off = files.offset_from_file_name(name)
                cleaned_min = off if cleaned_min is None else min(cleaned_min, off)
                log.info("Deleting stray temporary file %s", p)
                p.unlink(missing_ok=True)
            elif name.endswith(files.SWAP_SUFFIX):
                swap.append(p)
        keep = []
        for p in swap:
            if cleaned_min is not None and files.offset_from_file_name(p.name) >= cleaned_min:
                log.info("Deleting invalid swap file %s (cleaner output that was not finished)", p)
                p.unlink(missing_ok=True)
            else:
                keep.append(p)
        return keep

    def _complete_swaps(self, swaps: list[Path]) -> None:
        """Finish an interrupted cleaner/split swap as Kafka's LogLoader does: every file (snapshots
        included) whose offset lies in [lowest `.log.swap` base, highest `.log.swap` next offset) is
        deleted, then every `.swap` file, indexes too, takes its final name (the cleaner flushed them
        before renaming them to `.swap`, so they are complete)."""
        low: int | None = None
        high: int | None = None
        for p in swaps:
            if not p.name.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX):
                continue
            base = files.offset_from_file_name(p.name)
            seg = LogSegment(self.dir, base, self.config, file_suffix=files.SWAP_SUFFIX, create=False)
            next_offset = base
            for _pos, h in seg.iter_headers(0):  # header scan only: no index files get created
                next_offset = h.base_offset + h.last_offset_delta + 1
            seg.close_handlers()
            low = base if low is None else min(low, base)
            high = next_offset if high is None else max(high, next_offset)
        if low is not None and high is not None:
            for p in sorted(self.dir.iterdir()):
                if not p.is_file() or p.name.endswith(files.SWAP_SUFFIX):
                    continue
                try:
                    off = files.offset_from_file_name(p.name)
                except ValueError:
                    continue
                if low <= off < high:
                    log.info("Deleting segment file %s that was compacted but not deleted yet", p)
                    p.unlink(missing_ok=True)
        for p in swaps:
            if p.exists():
                os.rename(p, p.with_name(p.name[: -len(files.SWAP_SUFFIX)]))
                log.info("Recovered %s by renaming it from its .swap file", p.name[: -len(files.SWAP_SUFFIX)])

    def _load(self, recovery_point: int, log_start_checkpoint: int | None, clean: bool, now: int) -> None:
        swaps = self._remove_temp_files()
        if swaps:
            self._complete_swaps(swaps)
        # orphaned index files (no .log) are deleted
        logs = {files.offset_from_file_name(p.name) for p in self.dir.glob("*" + files.LOG_SUFFIX)}
        for p in list(self.dir.iterdir()):
            if p.name.endswith(_INDEX_SUFFIXES) and p.name[:20].isdigit():
                if files.offset_from_file_name(p.name) not in logs:
                    log.warning("Found an orphaned index file %s, with no corresponding log file.", p)
                    p.unlink(missing_ok=True)
        segs: list[LogSegment] = []
        to_recover: list[LogSegment] = []
        for base in sorted(logs):
            seg = LogSegment(self.dir, base, self.config, roll_jitter_ms=random_segment_jitter(self.config),
                             now_ms=now, create=False)
            try:
                seg.sanity_check()
            except FileNotFoundError as e:
                # Kafka only complains when the index should have been there: after a clean shutdown or
                # below the recovery point (an unflushed segment may lose its index in a crash)
                if clean or base < recovery_point:
                    log.error("Could not find index file corresponding to log file %s (%s), recovering "
                              "segment and rebuilding index files...", seg.log_path, e)
                to_recover.append(seg)
            except CorruptIndexError as e:
                # WARN as in Kafka: the preallocated, zero-filled index of a crashed active segment
                # lands here after every kill -9
                log.warning("Found a corrupted index file corresponding to log file %s due to %s, recovering "
                          "segment and rebuilding index files...", seg.log_path, e)
                to_recover.append(seg)
            segs.append(seg)
        self._set_segments(segs)
        self.log_start_offset = log_start_checkpoint if log_start_checkpoint is not None else (
            segs[0].base_offset if segs else 0)
        if segs and log_start_checkpoint is not None:
            self.log_start_offset = max(log_start_checkpoint, segs[0].base_offset)
        for seg in to_recover:
            self._recover_segment(seg)

        if not clean:
            floor = self._floor_index(recovery_point)
            start = max(floor, 0)
            i = start
            while i < len(self.segments):
                seg = self.segments[i]
                log.info("Recovering unflushed segment %d in %s", seg.base_offset, self.dir)
                truncated = self._recover_segment(seg) if seg not in to_recover else 0
                if truncated > 0:
                    later = self.segments[i + 1:]
                    log.warning("Corruption found in segment %d of %s, truncating to offset %d; deleting %d "
                                "later segment(s)", seg.base_offset, self.dir, seg.read_next_offset(), len(later))
                    for s in later:
                        s.delete_files()
                    self._set_segments(self.segments[: i + 1])
                    break
                i += 1

        if self.segments:
            leo = self.segments[-1].read_next_offset()
            if leo < self.log_start_offset:
                log.warning("Deleting all segments of %s because log end offset %d is below the log start "
                            "offset %d", self.dir, leo, self.log_start_offset)
                for s in self.segments:
                    s.delete_files()
                self._set_segments([])
        if not self.segments:
            self._set_segments([self._new_segment(self.log_start_offset, now)])
        active = self.segments[-1]
        active.resize_indexes(self.config.segment_index_bytes)
        self.log_end_offset = active.read_next_offset()
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.remove_stray_snapshots(self._bases)
        self._rebuild_producer_state(self.producer_state, self.log_end_offset, clean)
        self.recovery_point = self.log_end_offset if clean else min(recovery_point, self.log_end_offset)
        self.high_watermark = self.log_end_offset

    def _floor_index(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def _recover_segment(self, seg: LogSegment) -> int:
        """Kafka's LogLoader.recoverSegment: producer state up to the segment, rebuild, snapshot."""
        psm = ProducerStateManager(self.dir)
        self._rebuild_producer_state(psm, seg.base_offset, False)
        cache = self.leader_epoch_cache

        def on_batch(batch: RecordBatch) -> None:
            h = batch.header()
            ple = h.partition_leader_epoch
            latest = cache.latest_epoch
            if ple >= 0 and (latest is None or ple > latest):
                cache.assign(ple, h.base_offset)
            last = h.base_offset + h.last_offset_delta
            completed = apply_to_producer_state(psm, batch, h)
            if completed is not None:
                if completed.is_aborted:
                    seg.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                    completed.last_offset, psm.last_stable_offset(completed)))
                psm.complete_txn(completed)
            psm.update_map_end_offset(last + 1)

        truncated = seg.recover(on_batch)
        psm.take_snapshot(sync=False)
        return truncated

    def _rebuild_producer_state(self, psm: ProducerStateManager, last_offset: int, clean: bool) -> None:
        """Kafka's UnifiedLog.rebuildProducerState (map is only filled for idempotent producers)."""
        segs = [s for s in self.segments if s.base_offset <= last_offset]
        to_snapshot: list[int] = []
        if self.segments:
            if len(self.segments) >= 2:
                to_snapshot.append(self.segments[-2].base_offset)
            to_snapshot.append(self.segments[-1].base_offset)
        to_snapshot.append(last_offset)
        if psm.latest_snapshot_offset() is None and clean:
            # empty snapshots at the last two segment bases and the LEO avoid a full scan
            for off in to_snapshot:
                psm.update_map_end_offset(off)
                psm.take_snapshot(sync=False)
        empty_before = not psm.producers and psm.last_map_offset >= last_offset
        psm.truncate_and_reload(self.log_start_offset, last_offset, _now_ms())
        if last_offset > psm.last_map_offset and not empty_before:
            for seg in segs:
                seg_end_hint = self._bases[self._bases.index(seg.base_offset) + 1] if seg is not self.segments[-1] \
                    else 2**63 - 1
                if seg_end_hint <= psm.last_map_offset:
                    continue
                start = max(seg.base_offset, psm.last_map_offset, self.log_start_offset)
                psm.update_map_end_offset(start)
                if seg.base_offset in to_snapshot:
                    psm.take_snapshot(sync=False)
                found = seg.translate_offset(start)
                if found is None:
                    continue
                for pos, h in seg.iter_headers(found.position):
                    if h.base_offset >= last_offset:
                        break
                    if h.producer_id < 0:
                        continue
                    # only control batches need their record (the txn marker); data batches: header only
                    batch = seg.read_batch_at(pos, h.batch_length + 12) if h.attributes & 0x20 else None
                    completed = apply_to_producer_state(psm, batch, h)
                    if completed is not None:
                        psm.complete_txn(completed)
        psm.update_map_end_offset(last_offset)
        psm.take_snapshot(sync=False)

    # =====================================================================================
    # append
    # =====================================================================================
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def become_leader(self, leader_epoch: int) -> None:
        """Record the start of a leader epoch at the current LEO (Kafka: Partition.makeLeader)."""
        self.settle()
        self.leader_epoch = leader_epoch
        self.leader_epoch_cache.assign(leader_epoch, self.log_end_offset)

    def append_as_leader(self, batch: bytearray | memoryview, leader_epoch: int | None = None,
                         now_ms: int | None = None, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Validate one v2 batch, patch it in place (base offset, leader epoch, max timestamp) and append.

        `prepare_append`, then the pending append's write and finish, in a row. Errors are those of
        `prepare_append`, plus KafkaStorageError when the write fails.
        """
        pending = self.prepare_append(batch, leader_epoch, now_ms, origin)
        if isinstance(pending, AppendInfo):  # a duplicate: nothing to write
            return pending
        return pending.finish()

    def prepare_append(self, batch: bytearray | memoryview, leader_epoch: int | None = None,
                       now_ms: int | None = None,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> PendingAppend | AppendInfo:
        """Everything of `append_as_leader` up to the write: the batch is validated, patched and
        placed (rolling the segment if due). Returns the pending append, whose `write()` may then
        run in a worker thread and whose `finish()` completes it, or the AppendInfo of a duplicate
        batch (nothing to write).

        The batch is stamped with `leader_epoch`, by default this partition's own (`become_leader`).

        `batch` must be writable (bytearray / writable memoryview); it is modified in place and
        written with one pwrite. Errors: CorruptRecordError (CORRUPT_MESSAGE), InvalidRecordError
        (INVALID_RECORD), MessageTooLargeError (MESSAGE_TOO_LARGE), RecordBatchTooLargeError
        (RECORD_LIST_TOO_LARGE), InvalidTimestampError (INVALID_TIMESTAMP) — all from
        `odradek.logstore.errors`.
        """
        if self._pending is not None:
            self.settle()
        if self.closed:
            raise LogDeletedError(f"log {self.name} is closed")
        if leader_epoch is None:
            leader_epoch = self.leader_epoch
        now = _now_ms() if now_ms is None else now_ms
        view = memoryview(batch)
        if view.readonly:
            raise TypeError("append_as_leader needs a writable buffer (bytearray or writable memoryview)")
        cfg = self.config
        size = len(view)
        try:
            rb = RecordBatch(view)
            if len(rb) != size:
                extra = size - len(rb)
                if next_batch_size(view[len(rb):len(rb) + 12], extra) is not None:
                    raise LogInvalidRecordError(
                        f"Compressed outer record has more than one batch (produce data for {self.name} "
                        "holds a second complete batch)")
                # Kafka trims an incomplete tail after the valid batches and appends the rest
                view = view[:len(rb)]
                size = len(view)
            if size > cfg.max_message_bytes:
                raise MessageTooLargeError(
                    f"The record batch size in the append to {self.name} is {size} bytes which exceeds the "
                    f"maximum configured value of {cfg.max_message_bytes}.")
            if origin is AppendOrigin.CLIENT:
                rb.validate_client_batch()
                if rb.base_offset != 0:
                    raise LogInvalidRecordError(
                        f"The baseOffset of the record batch in the append to {self.name} should be 0, "
                        f"but it is {rb.base_offset}")
            else:
                rb.ensure_valid()
            h = rb.header()
            log_append_time = cfg.log_append_time
            # Decoding records is the expensive part of an append in Python; without
            # validate_records the CRC-protected header is trusted (timestamps included) and
            # only compacted topics, which must reject keyless records, are scanned.
            needs_scan = cfg.compact or (
                origin is AppendOrigin.CLIENT and not log_append_time and self.validate_records)
            summary = rb.scan_records(max(cfg.max_message_bytes * 64, 64 * 1024 * 1024)) if needs_scan else None
        except (LogCorruptRecordError, LogInvalidRecordError, MessageTooLargeError):
            raise
        except InvalidRecordError as e:  # subclass of the wire CorruptRecordError: check it first
            raise LogInvalidRecordError(str(e)) from e
        except CorruptRecordError as e:
            raise LogCorruptRecordError(str(e)) from e
        if summary is not None:
            if summary.record_count != h.record_count:
                raise LogInvalidRecordError(f"batch declares {h.record_count} records but holds {summary.record_count}")
            if not summary.offsets_consecutive and origin is AppendOrigin.CLIENT:
                # Kafka would rebuild (and recompress) such a batch; its bytes could not match Kafka's anyway
                raise LogInvalidRecordError("record offset deltas of the batch are not 0..count-1")
        # -- the rules Kafka checks per record (LogValidator.validateRecord) ------------------
        # The summary (or, without a scan, the header) says whether a record may break one; only
        # then are the records decoded one by one to name those that do.
        is_control = bool(h.attributes & 0x20)
        suspect = cfg.compact and summary is not None and summary.has_null_key and not is_control
        if origin is AppendOrigin.CLIENT and h.record_count > 0:
            if h.attributes & _LOG_APPEND_TIME_BIT:
                suspect = True  # a producer may not claim LogAppendTime
            elif not log_append_time and (cfg.message_timestamp_before_max_ms != LONG_MAX
                                          or cfg.message_timestamp_after_max_ms != LONG_MAX):
                # Without a record scan the header's base timestamp stands for the smallest one.
                min_ts = summary.min_timestamp if summary is not None else h.base_timestamp
                max_ts = summary.max_timestamp if summary is not None else h.max_timestamp
                if now - min_ts > cfg.message_timestamp_before_max_ms \
                        or max_ts - now > cfg.message_timestamp_after_max_ms:
                    suspect = True
        if suspect:
            _refuse_records(rb, self.name, now, cfg, check_timestamps=origin is AppendOrigin.CLIENT)

        if size > cfg.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.name} which exceeds the "
                f"maximum configured segment size of {cfg.segment_bytes}.")

        # -- timestamps (LogValidator, in place) ---------------------------------------
        if log_append_time:
            rb.set_max_timestamp(now, True)
            max_ts = now
            append_time = now
        else:
            max_ts = summary.max_timestamp if summary is not None else h.max_timestamp
            # only rewrites (and re-CRCs) when the client's header was wrong
            rb.set_max_timestamp(max_ts, False)
            append_time = -1

        # -- offsets / epoch (not CRC-covered) -------------------------------------------
        # Kafka: setLastOffset(LEO + count - 1), i.e. baseOffset = lastOffset - lastOffsetDelta
        first = self.log_end_offset
        last = first + h.record_count - 1 if h.record_count > 0 else first + h.last_offset_delta
        first = last - h.last_offset_delta
        rb.set_base_offset(first)
        rb.set_partition_leader_epoch(leader_epoch)
        return self._begin_append(view, first, last, max_ts, append_time, h, leader_epoch, now, origin)

    def _begin_append(self, view: memoryview, first: int, last: int, max_ts: int, append_time: int, h,
                      leader_epoch: int, now: int,
                      origin: AppendOrigin = AppendOrigin.CLIENT) -> PendingAppend | AppendInfo:
        size = len(view)
        rolled = False
        seg = self.segments[-1]
        try:
            if seg.should_roll(size, max_ts, last, now):
                self.roll(first, now)
                seg = self.segments[-1]
                rolled = True
        except OSError as e:
            raise KafkaStorageError(f"I/O error while appending to {self.name}: {e}") from e
        marker = None
        if h.producer_id >= 0:
            # Kafka validates producer state after the roll and before the write (UnifiedLog.append):
            # a duplicate is answered with the original offsets, a bad sequence/epoch is refused.
            is_control = bool(h.attributes & 0x20)
            marker = txn_marker_of(RecordBatch(view)) if is_control else None
        if h.producer_id >= 0 and origin is not AppendOrigin.REPLICATION:
            # (a follower takes the leader's batches as they are: the leader has checked them)
            dup = self.producer_state.check_append(
                h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta, bool(h.attributes & 0x10),
                is_control, from_client=origin is AppendOrigin.CLIENT,
                marker_coordinator_epoch=marker[1] if marker is not None else None, offset=first)
            if dup is not None:
                log.debug("Duplicate batch of producer %d (sequences %d..%d) in %s: answering offset %d",
                          h.producer_id, dup.first_seq, dup.last_seq, self.name, dup.first_offset)
                return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, dup.last_offset, -1,
                                  self.log_start_offset, 0, 0, rolled, duplicate=True)
        try:
            if leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, first)
            if self._metadata_dirty and self.topic_id is not None:
                self.partition_metadata.write(self.topic_id)
                self._metadata_dirty = False
            position = seg.begin_append(last, max_ts)
        except OSError as e:
            # disk full, I/O error, ...: Kafka marks the dir offline and answers KAFKA_STORAGE_ERROR
            raise KafkaStorageError(f"I/O error while appending to {self.name}: {e}") from e
        pending = PendingAppend(self, seg, view, position, first, last, max_ts, append_time, h, rolled, marker)
        self._pending = pending
        return pending

    def _finish_append(self, pending: PendingAppend) -> None:
        """Second half of an append, after its write (PendingAppend.finish)."""
        if self._pending is pending:
            self._pending = None
        if pending.error is not None:
            return
        h = pending.header
        first, last, max_ts, seg = pending.first, pending.last, pending.max_ts, pending.segment
        size = len(pending.view)
        seg.finish_append(pending.position, size, last, max_ts, last)
        if h.producer_id >= 0:
            psm = self.producer_state
            is_control = bool(h.attributes & 0x20)
            completed = psm.update_from_batch(h.producer_id, h.producer_epoch, h.base_sequence, first, last,
                                              max_ts, bool(h.attributes & 0x10), is_control, pending.marker)
            if completed is not None:
                if completed.is_aborted:
                    seg.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                    completed.last_offset, psm.last_stable_offset(completed)))
                psm.complete_txn(completed)
        self.log_end_offset = last + 1
        self.producer_state.update_map_end_offset(self.log_end_offset)
        if not self.replicated:
            # one replica: everything appended is committed
            self.high_watermark = self.log_end_offset
        elif self.on_leader_append is not None:
            # a leader with followers: the ISR decides (an ISR of the leader alone: at once)
            self.on_leader_append()
        self.unflushed_messages += last - first + 1
        pending.info = AppendInfo(first, last, max_ts, last, pending.append_time, self.log_start_offset,
                                  h.record_count, size, pending.rolled)

    def settle(self) -> None:
        """Complete the pending append, if any (waiting for a write a worker thread is doing).

        Whatever changes the log (the next append, a roll, retention, close) calls this first, so
        it never sees an append half done. A failed write stays the pending append's to report."""
        pending = self._pending
        if pending is not None:
            pending.complete()

    def append_as_follower(self, batch: bytes | bytearray | memoryview) -> AppendInfo:
        """Append one batch of the leader's as it is (Kafka's UnifiedLog.appendAsFollower): its
        offsets, leader epoch, timestamps and bytes kept, CRC checked, producer state and the
        transaction index built as on the leader. The batch must start at or after the log end."""
        if self._pending is not None:
            self.settle()
        if self.closed:
            raise LogDeletedError(f"log {self.name} is closed")
        view = memoryview(bytearray(batch))
        try:
            rb = RecordBatch(view)
            rb.ensure_valid()
        except CorruptRecordError as e:
            raise LogCorruptRecordError(str(e)) from e
        h = rb.header()
        first, last = h.base_offset, h.base_offset + h.last_offset_delta
        if first < self.log_end_offset:
            raise LogInvalidRecordError(
                f"The leader's batch at offset {first} of {self.name} starts before the log end offset "
                f"{self.log_end_offset}")
        pending = self._begin_append(view[:len(rb)], first, last, h.max_timestamp, -1, h, h.partition_leader_epoch,
                                     _now_ms(), AppendOrigin.REPLICATION)
        assert isinstance(pending, PendingAppend)
        return pending.finish()

    def append_as_coordinator(self, batch: bytearray | memoryview, leader_epoch: int | None = None,
                              now_ms: int | None = None) -> AppendInfo:
        """Append a broker-built batch (group/txn coordinator records, txn markers): same path, control
        batches allowed, no client-only checks."""
        return self.append_as_leader(batch, leader_epoch, now_ms, AppendOrigin.COORDINATOR)

    def needs_flush(self, now_ms: int | None = None) -> bool:
        """True when log.flush.interval.messages/ms say the server should call `flush()`."""
        cfg = self.config
        if self.unflushed_messages >= cfg.flush_interval_messages:
            return True
        if cfg.flush_interval_ms != LONG_MAX and self.log_end_offset > self.recovery_point:
            now = _now_ms() if now_ms is None else now_ms
            return now - self.last_flush_ms >= cfg.flush_interval_ms
        return False

    # =====================================================================================
    # roll
    # =====================================================================================
    def roll(self, expected_next_offset: int | None = None, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, LEO) (Kafka's UnifiedLog.roll)."""
        self.settle()
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments[-1]
        if new_offset == active.base_offset:
            if active.size == 0:
                log.warning("Trying to roll a new log segment with start offset %d while it already exists and "
                            "is active with size 0; replacing it", new_offset)
                active.delete_files()
                self._set_segments(self.segments[:-1])
            else:
                raise RuntimeError(f"Trying to roll a new log segment for {self.name} with start offset "
                                   f"{new_offset} that already exists")
        elif new_offset < active.base_offset:
            raise RuntimeError(f"Trying to roll a new log segment for {self.name} with start offset {new_offset} "
                               f"lower than the active segment's base offset {active.base_offset}")
        for p in (files.log_file(self.dir, new_offset), files.index_file(self.dir, new_offset),
                  files.time_index_file(self.dir, new_offset), files.txn_index_file(self.dir, new_offset)):
            if p.exists():
                log.warning("Newly rolled segment file %s already exists; deleting it first", p)
                p.unlink()
        if self.segments:
            self.segments[-1].on_become_inactive()
        seg = self._new_segment(new_offset, now_ms)
        # open both indexes now (Kafka opens them lazily, at the latest when the segment is flushed);
        # doing it here keeps a flush running in a worker thread from racing to create them
        seg.offset_index  # noqa: B018
        seg.time_index  # noqa: B018
        self._set_segments([*self.segments, seg])
        # producer snapshot named after the new segment: recovery can start from it
        self.producer_state.update_map_end_offset(new_offset)
        self.producer_state.take_snapshot(sync=False)
        self.producer_state.update_map_end_offset(self.log_end_offset)
        log.info("Rolled new log segment at offset %d for %s", new_offset, self.name)
        return seg

    # =====================================================================================
    # read
    # =====================================================================================
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchData:
        """File slices starting at the batch that holds `fetch_offset` (a whole batch even if the offset
        is in its middle), up to `max_bytes` (at least one batch if `min_one_message`), never past
        `max_offset` (exclusive; e.g. the high watermark). OffsetOutOfRangeError outside [start, LEO].
        """
        if self.closed:
            raise LogDeletedError(f"log {self.name} is closed")
        leo = self.log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(fetch_offset, self.log_start_offset, leo, self.name)
        limit = leo if max_offset is None else min(max_offset, leo)

        def empty() -> FetchData:
            return FetchData([], fetch_offset, -1, self.high_watermark, self.log_start_offset, leo)

        if fetch_offset >= limit:
            return empty()
        i = max(self._floor_index(fetch_offset), 0)
        # position bound for max_offset: start of the batch holding it, in the segment holding it
        li = self._floor_index(limit)
        limit_pos: int | None = None
        if limit < leo and li >= 0:
            found = self.segments[li].translate_offset(limit)
            limit_pos = found.position if found is not None else self.segments[li].size
        while i < len(self.segments):
            seg = self.segments[i]
            max_pos = limit_pos if (i == li and limit_pos is not None) else None
            if i > li >= 0 and limit < leo:
                break
            info = seg.read(fetch_offset, max_bytes, max_pos, min_one_message)
            if info is not None:
                slices = [info.slice] if info.slice.size > 0 else []
                return FetchData(slices, fetch_offset, info.first_batch_base_offset, self.high_watermark,
                                 self.log_start_offset, leo, info.first_entry_incomplete)
            i += 1
        return empty()

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch answer: (epoch, end offset), (-1, -1) if unknown."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """LSO: first offset of the oldest open transaction, else the high watermark."""
        ongoing = self.producer_state.ongoing_txns
        return min(min(ongoing), self.high_watermark) if ongoing else self.high_watermark

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset) from the `.txnindex`
        files (for READ_COMMITTED fetches)."""
        out: list[AbortedTxn] = []
        for i in range(max(self._floor_index(fetch_offset), 0), len(self.segments)):
            found = self.segments[i].txn_index.collect_aborted(fetch_offset, upper_bound_offset)
            out += found
            # An entry sits in the segment of its ABORT marker, which may come after the upper bound
            # (Kafka's LocalLog.collectAbortedTransactions): keep going until an entry's LSO shows that
            # every transaction open before the bound has ended.
            if any(t.last_stable_offset >= upper_bound_offset for t in found):
                break
        return out

    def fetch_upper_bound_offset(self, data: FetchData) -> int:
        """Kafka's upper bound of a read for its aborted-transaction list: the offset of the first
        offset-index entry at or after the end of the returned bytes, else the next segment's base
        offset (or the LEO). It may lie beyond the data (index granularity), never before its end."""
        if not data.slices:
            return data.fetch_offset
        last = data.slices[-1]
        end_position = last.position + last.size
        for i, seg in enumerate(self.segments):
            if seg.fileno() != last.file.fileno():
                continue
            index = seg.offset_index
            lo, hi = 0, index.entries - 1
            found = None
            while lo <= hi:  # first entry whose position >= end_position
                mid = (lo + hi) // 2
                offset, position = index.entry(mid)
                if position >= end_position:
                    found = offset
                    hi = mid - 1
                else:
                    lo = mid + 1
            if found is not None:
                return found
            return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset
        return self.log_end_offset

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a READ_COMMITTED fetch of
        [fetch_offset, upper_bound_offset) must list (Fetch's AbortedTransactions)."""
        return [(t.producer_id, t.first_offset) for t in self.aborted_transactions(fetch_offset, upper_bound_offset)]

    # =====================================================================================
    # offsets by timestamp
    # =====================================================================================
    def epoch_for_offset(self, offset: int) -> int | None:
        epoch = None
        for e, start in self.leader_epoch_cache.entries:
            if start <= offset:
                epoch = e
            else:
                break
        return epoch

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets semantics: -2 earliest, -1 latest, -3 max timestamp, -4 earliest local,
        -5 latest tiered, else the first record with timestamp >= target (None if there is none)."""
        if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(-1, self.log_start_offset, self.epoch_for_offset(self.log_start_offset))
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_end_offset, self.leader_epoch_cache.latest_epoch)
        if target_timestamp == LATEST_TIERED_TIMESTAMP:
            return TimestampAndOffset(-1, -1, None)
        if target_timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for seg in self.segments:
            if seg.largest_timestamp >= target_timestamp:
                found = seg.find_offset_by_timestamp(target_timestamp, self.log_start_offset)
                if found is not None:
                    ts, off = found
                    return TimestampAndOffset(ts, off, self.epoch_for_offset(off))
        return None

    def _max_timestamp_offset(self) -> TimestampAndOffset:
        best: LogSegment | None = None
        for seg in self.segments:
            if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return TimestampAndOffset(-1, -1, None)
        ts = best.max_timestamp_so_far
        _o, pos = best.offset_index.lookup(best.offset_of_max_timestamp_so_far)
        for p, h in best.iter_headers(pos):
            if h.max_timestamp == ts:
                batch = best.read_batch_at(p, h.batch_length + 12)
                if h.attributes & 0x08:
                    off = h.base_offset
                else:
                    off = h.base_offset + h.last_offset_delta
                    for r in batch.records():
                        if r.timestamp == ts:
                            off = r.offset
                            break
                return TimestampAndOffset(ts, off, self.epoch_for_offset(off))
        return TimestampAndOffset(-1, -1, None)

    # =====================================================================================
    # retention / truncation
    # =====================================================================================
    def delete_records_before(self, offset: int, delete_segments: bool = True) -> int:
        """DeleteRecords: move the log start offset to `offset` (<= high watermark). Returns the new
        log start offset.

        Kafka's `maybeIncrementLogStartOffset` only moves the start offset; the segments wholly below
        it go at the next retention check (log-start-offset breach). `delete_segments=False` does
        exactly that; the default also drops them now (the log store's older contract)."""
        self.settle()
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.high_watermark, self.name)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self._increment_log_start_offset(offset)
        if delete_segments:
            self.delete_old_segments(only_log_start=True)
        return self.log_start_offset

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)

    def _deletable(self, predicate) -> list[LogSegment]:
        out = []
        segs = self.segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            last_and_empty = nxt is None and seg.size == 0
            # never past the high watermark, so the log start offset cannot pass it
            if self.high_watermark >= upper and not last_and_empty and predicate(seg, nxt):
                out.append(seg)
            else:
                break
        return out

    def _delete_segments(self, deletable: list[LogSegment], reason: str, now_ms: int | None) -> int:
        if not deletable:
            return 0
        to_delete = list(deletable)
        if len(to_delete) == len(self.segments):
            # a log always keeps one segment: roll an empty one at the LEO first
            new = self.roll(now_ms=now_ms)
            if to_delete[-1].base_offset == new.base_offset:
                to_delete.pop()
        keep = [s for s in self.segments if s not in to_delete]
        self._set_segments(keep)
        due = time.monotonic() + self.config.file_delete_delay_ms / 1000
        for seg in to_delete:
            log.info("Deleting segment %s of %s due to %s", seg.base_offset, self.name, reason)
            seg.change_file_suffixes("", files.DELETED_SUFFIX)
            self._pending_deletes.append((seg, due))
        self.producer_state.delete_snapshots_before(self.segments[0].base_offset)
        self._increment_log_start_offset(self.segments[0].base_offset)
        if self.config.file_delete_delay_ms <= 0:
            self.delete_pending_segments(force=True)
        return len(to_delete)

    def _retention_rules(self, now: int, only_log_start: bool = False) -> list[tuple[object, str]]:
        """Kafka's deleteOldSegments order: log-start-offset breach, then retention.bytes, then
        retention.ms (the last two only with cleanup.policy containing `delete`). Each entry is
        (make_predicate, reason): make_predicate() gives a fresh predicate(segment, next) -> bool,
        made when the rule runs (the size rule starts from the size left by the rules before it)."""
        cfg = self.config
        rules: list[tuple[object, str]] = [
            (lambda: lambda _seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
             "log start offset breach")]
        if only_log_start or "delete" not in cfg.cleanup_policy.split(","):
            return rules
        if cfg.retention_bytes >= 0:
            def size_rule():
                diff = self.size_in_bytes() - cfg.retention_bytes
                if diff <= 0 and self.size_in_bytes() < cfg.retention_bytes:
                    return lambda _seg, _nxt: False
                left = [diff]

                def size_breach(seg: LogSegment, _nxt) -> bool:
                    if left[0] - seg.size >= 0:
                        left[0] -= seg.size
                        return True
                    return False

                return size_breach

            rules.append((size_rule, f"retention size {cfg.retention_bytes} breach"))
        if cfg.retention_ms >= 0:
            # the segment's largest timestamp (time index), or its mtime when it has none
            rules.append((lambda: lambda seg, _nxt: now - seg.largest_timestamp > cfg.retention_ms,
                          f"retention time {cfg.retention_ms}ms breach"))
        return rules

    def retention_due(self, now_ms: int | None = None) -> bool:
        """True when `delete_old_segments(now_ms)` would delete something. Only looks at the oldest
        segment (deletable segments are always a prefix), so a retention pass can run it in a worker
        thread (it loads time indexes) and take the log's owner only when there is work."""
        now = _now_ms() if now_ms is None else now_ms
        segs = self.segments
        if not segs:
            return False
        first = segs[0]
        nxt = segs[1] if len(segs) > 1 else None
        upper = nxt.base_offset if nxt is not None else self.log_end_offset
        if self.high_watermark < upper or (nxt is None and first.size == 0):
            return False
        return any(make()(first, nxt) for make, _reason in self._retention_rules(now))

    def delete_old_segments(self, now_ms: int | None = None, only_log_start: bool = False) -> int:
        """Retention (Kafka's deleteOldSegments): segments wholly below the log start offset, beyond
        retention.bytes, or past retention.ms (by their largest timestamp). Files are renamed to
        `.deleted` and removed after file.delete.delay.ms (`delete_pending_segments`); an expired
        active segment with data is rolled first. Returns the number of segments deleted. Call it
        periodically (log.retention.check.interval.ms)."""
        self.settle()
        now = _now_ms() if now_ms is None else now_ms
        n = 0
        for make, reason in self._retention_rules(now, only_log_start):
            n += self._delete_segments(self._deletable(make()), reason, now)
        return n

    def delete_pending_segments(self, force: bool = False) -> None:
        """Remove `.deleted` segment files whose delay has passed (or all of them with force)."""
        now = time.monotonic()
        # item by item (list.remove is atomic): retention may queue more while this runs in a thread
        for item in [it for it in list(self._pending_deletes) if force or it[1] <= now]:
            try:
                self._pending_deletes.remove(item)
            except ValueError:
                continue
            item[0].delete_files()

    # =====================================================================================
    # truncation (a follower whose log diverged from its leader's, or that loads a snapshot)
    # =====================================================================================
    def truncate_to(self, offset: int) -> bool:
        """Kafka's UnifiedLog.truncateTo: drop everything at and after `offset`. Segments that start
        above it go (as `.deleted` files), the one holding it is cut, the leader-epoch cache,
        producer state and high watermark follow. Returns False when there was nothing to drop."""
        self.settle()
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset {offset}")
        if offset >= self.log_end_offset:
            # Kafka truncates the epoch cache all the same: a broker that led may have recorded an
            # epoch at its log end and appended nothing in it before another leader took over
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        log.info("Truncating %s to offset %d (log end offset %d)", self.name, offset, self.log_end_offset)
        if self.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        doomed = [s for s in self.segments if s.base_offset > offset]
        self._set_segments([s for s in self.segments if s.base_offset <= offset])
        self._remove_segments_now(doomed)
        active = self.segments[-1]
        active.truncate_to(offset)
        self.log_end_offset = offset
        self.leader_epoch_cache.truncate_from_end(offset)
        self.log_start_offset = min(self.log_start_offset, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self._rebuild_producer_state(self.producer_state, offset, False)
        self.high_watermark = min(self.high_watermark, offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Kafka's UnifiedLog.truncateFullyAndStartAt: drop every segment and start an empty log
        at `offset` (a follower that loads a snapshot, or whose leader's log starts past its end)."""
        self.settle()
        log.info("Truncating %s fully and starting at offset %d", self.name, offset)
        doomed = list(self.segments)
        self._set_segments([])
        self._remove_segments_now(doomed)
        seg = self._new_segment(offset)
        seg.offset_index  # noqa: B018 - created now, as roll does
        seg.time_index  # noqa: B018
        self._set_segments([seg])
        self.log_end_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.leader_epoch_cache.clear()
        self.producer_state.clear()
        self.producer_state.delete_snapshots_from(0)
        self.producer_state.truncate_and_reload(offset, offset, _now_ms())
        self.producer_state.update_map_end_offset(offset)

    def _remove_segments_now(self, segments: list[LogSegment]) -> None:
        """Rename to `.deleted` and queue for removal after file.delete.delay.ms (Kafka deletes
        truncated segments asynchronously the same way)."""
        due = time.monotonic() + self.config.file_delete_delay_ms / 1000
        for seg in segments:
            seg.change_file_suffixes("", files.DELETED_SUFFIX)
            self._pending_deletes.append((seg, due))
        if self.config.file_delete_delay_ms <= 0:
            self.delete_pending_segments(force=True)

    # =====================================================================================
    # flush / close
    # =====================================================================================
    def flush(self, up_to: int | None = None) -> int:
        """fsync every segment with data below `up_to` (default: the LEO) and advance the recovery point.

        Blocking: the server runs it in a worker thread. Returns the new recovery point.
        """
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target <= self.recovery_point:
            return self.recovery_point
        if _faults.SLOW_DISKS:  # a test's slow disk (odradek.faults)
            _faults.disk_wait(self.dir.parent)
        for i, seg in enumerate(list(self.segments)):
            nxt = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset
            if nxt > self.recovery_point and seg.base_offset < target:
                seg.flush()
        for off in self.producer_state.snapshot_offsets():
            if self.recovery_point < off <= target:
                self.producer_state.flush_snapshot(off)
        self.recovery_point = target
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        return target

    def close(self) -> None:
        """Clean close: snapshot at the LEO, final time-index entry, trimmed indexes (Kafka's UnifiedLog.close)."""
        self.settle()
        if self.closed:
            return
        if self.topic_id is not None and not self.partition_metadata.exists():
            self.partition_metadata.write(self.topic_id)
        self.producer_state.update_map_end_offset(self.log_end_offset)
        self.producer_state.take_snapshot(sync=True)
        for seg in self.segments:
            seg.close()
        self.delete_pending_segments(force=True)
        self.closed = True

    def close_handlers(self) -> None:
        """Drop file handles without writing anything (crash simulation, failed dirs)."""
        self.settle()
        for seg in self.segments:
            seg.close_handlers()
        self.closed = True

    def delete_all_files(self) -> None:
        self.settle()
        for seg in self.segments:
            seg.delete_files()
        self.closed = True

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self.log_start_offset}, leo={self.log_end_offset}, "
                f"segments={len(self.segments)})")


__all__ = [
    "BATCH_OVERHEAD",
    "AppendInfo",
    "AppendOrigin",
    "FetchData",
    "PartitionLog",
    "TimestampAndOffset",
]
