"""One log segment: `<base>.log` plus lazily opened `.index`, `.timeindex`, `.txnindex` (Kafka's LogSegment).

The hot path (`append`) does one `os.pwrite` of the caller's (already patched) batch bytes and at
most one index entry every `index.interval.bytes`. Reads never load batches into Python: offsets
are found with the offset index plus a scan of 61-byte batch headers.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from odradek.wire.records import (
    BATCH_OVERHEAD,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    iter_batches,
    parse_batch_header,
)
from odradek.wire.records import BatchHeader as BatchHeader

from . import faults, files, write_pressure
from .config import LogConfig
from .fileslice import FileSlice
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import TransactionIndex

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 16 * 1024


class LogOffsetPosition(NamedTuple):
    """A batch found by offset: its last offset, file position and size."""

    offset: int
    position: int
    size: int


class SegmentReadInfo(NamedTuple):
    """Result of `LogSegment.read`: the slice and whether the first batch is cut short."""

    slice: FileSlice
    first_batch_base_offset: int
    first_entry_incomplete: bool


def random_segment_jitter(config: LogConfig) -> int:
    """Kafka's randomSegmentJitter: 0, or abs(random int) % min(segment.jitter.ms, segment.ms)."""
    if config.segment_jitter_ms == 0:
        return 0
    return random.randrange(0, 2**31) % min(config.segment_jitter_ms, config.segment_ms)


class LogSegment:
    """A `.log` file and its indexes. Not thread-safe; the owning PartitionLog serialises access."""

    def __init__(self, dir_: Path, base_offset: int, config: LogConfig, file_suffix: str = "",
                 roll_jitter_ms: int = 0, now_ms: int | None = None, create: bool = True) -> None:
        self.dir = Path(dir_)
        self.base_offset = base_offset
        self.config = config
        self.index_interval_bytes = config.index_interval_bytes
        self.max_index_size = config.segment_index_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.suffix = file_suffix
        self.log_path = files.log_file(self.dir, base_offset, file_suffix)
        self.offset_index_path = files.index_file(self.dir, base_offset, file_suffix)
        self.time_index_path = files.time_index_file(self.dir, base_offset, file_suffix)
        self.txn_index_path = files.txn_index_file(self.dir, base_offset, file_suffix)
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fd = os.open(self.log_path, flags, 0o644)
        # a FileIO so FileSlice consumers get an object with fileno() that keeps the fd alive
        self.file = os.fdopen(fd, "r+b", buffering=0)
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self.txn_index = TransactionIndex(self.txn_index_path, base_offset)
        self.bytes_since_last_index_entry = 0
        # (max timestamp, last offset of the batch holding it); None = not read yet (Kafka's UNKNOWN)
        self._max_ts_and_offset: tuple[int, int] | None = None
        self.rolling_based_timestamp: int | None = None
        self.closed = False

    # -- lazy indexes ---------------------------------------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        """The `.index`, opened (and created, preallocated) on first use like Kafka's LazyIndex."""
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self.offset_index_path, self.base_offset, self.max_index_size)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset, self.max_index_size)
        return self._time_index

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None or self._time_index is not None

    # -- basic facts ----------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes in the `.log`."""
        return self._size

    def fileno(self) -> int:
        return self._fd

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self.time_index.last_entry
        return self._max_ts_and_offset[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self.time_index.last_entry
        return self._max_ts_and_offset[1]

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- append ---------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               data: memoryview | bytes | bytearray) -> int:
        """Write `data` (whole batches) at the end with one pwrite and update the indexes (§3.2/§4.4).

        Returns the file position the data was written at. The same as `begin_append`,
        `write_at` and `finish_append` in a row; the partition log calls those itself so that the
        pwrite of a produce can run in a worker thread (`PartitionLog.prepare_append`).
        """
        n = len(data)
        if n == 0:
            return self._size
        position = self.begin_append(largest_offset, largest_timestamp)
        self.write_at(position, data)
        self.finish_append(position, n, largest_offset, largest_timestamp, offset_of_max_timestamp)
        return position

    def begin_append(self, largest_offset: int, largest_timestamp: int) -> int:
        """Check an append of batches ending at `largest_offset` and get the position it goes to.

        Nothing is written and the segment's size does not move until `finish_append`; only one
        append may be between the two at a time (the partition log sees to that).
        """
        position = self._size
        if position == 0:
            self.rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise InvalidRecordError(
                f"largest offset {largest_offset} cannot be stored in segment {self.log_path} "
                f"(base offset {self.base_offset})"
            )
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            # Index entries go through a shared mapping: writing to a page the file system cannot
            # back (disk full) raises SIGBUS and kills the process. Reserve the blocks first, so a
            # full disk is an OSError here, before anything of this append is written.
            self._reserve_index_blocks()
        return position

    def write_at(self, position: int, data: memoryview | bytes | bytearray) -> None:
        """pwrite `data` at `position`: the only part of an append that may run in another thread
        (it touches nothing but the file). A failed write is cut off again and re-raised."""
        n = len(data)
        started = write_pressure.write_started()
        try:
            written = faults.pwrite(self._fd, data, position)
            if written != n:  # extremely rare on regular files; finish the write rather than tear the batch
                view = memoryview(data)
                while written < n:
                    written += faults.pwrite(self._fd, view[written:], position + written)
        except OSError:
            # disk full / I/O error: cut a torn tail so the file ends at the last whole batch
            # (the caller answers KAFKA_STORAGE_ERROR; a retry then writes at the same position)
            self._truncate_failed_write(position)
            raise
        write_pressure.write_finished(started)

    def finish_append(self, position: int, n: int, largest_offset: int, largest_timestamp: int,
                      offset_of_max_timestamp: int) -> None:
        """Account for `n` bytes written at `position`: size, largest timestamp, index entries."""
        self._size = position + n
        mx = self._max_ts_and_offset
        if mx is None:
            mx = self._max_ts_and_offset = self.time_index.last_entry
        if largest_timestamp > mx[0]:
            mx = self._max_ts_and_offset = (largest_timestamp, offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(mx[0], mx[1])
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += n

    def _reserve_index_blocks(self) -> None:
        """Allocate the blocks of the next offset- and time-index entries (no-op once allocated)."""
        faults.check_index()
        reserved = self.__dict__.setdefault("_index_reserved", {})
        for kind, index, entry_size in (("o", self.offset_index, 8), ("t", self.time_index, 12)):
            start = index.entries * entry_size
            if start + entry_size > index.length:
                continue  # full index: its own append raises the usual error
            # the cache is tied to the current mapping: a trim + resize frees blocks and remaps
            mapping, reserved_to = reserved.get(kind, (None, 0))
            if mapping is index._mm and start + entry_size <= reserved_to:
                continue
            # one call per 64 KiB of index (8192 offset entries), clipped to the file
            end = min(index.length, (start // 65536 + 1) * 65536)
            try:
                index.allocate(start, end - start)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
            reserved[kind] = (index._mm, end)

    def _truncate_failed_write(self, position: int) -> None:
        try:
            if os.fstat(self._fd).st_size > position:
                os.ftruncate(self._fd, position)
        except OSError:
            # the tail stays past _size: reads stop at _size, the next append overwrites it and
            # recovery after a crash cuts it as a torn batch
            log.exception("Could not truncate %s back to %d after a failed write", self.log_path, position)

    # -- roll decisions -------------------------------------------------------------------
    def _load_first_batch_timestamp(self) -> None:
        if self.rolling_based_timestamp is None and self._size > 0:
            for _pos, h in self.iter_headers(0):
                self.rolling_based_timestamp = h.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Record-time (or wall-clock, with no timestamps) age of the segment for segment.ms rolls."""
        self._load_first_batch_timestamp()
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def should_roll(self, messages_size: int, max_timestamp_in_messages: int, max_offset_in_messages: int,
                    now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: size, time (record timestamps), full index, offset overflow."""
        cfg = self.config
        size = self._size
        if size > cfg.segment_bytes - messages_size:
            return True
        if size > 0:
            if self.rolling_based_timestamp is None:
                self._load_first_batch_timestamp()
            first = self.rolling_based_timestamp
            waited = (max_timestamp_in_messages - first) if first is not None and first >= 0 \
                else now_ms - self.created_ms
            if waited > cfg.segment_ms - self.roll_jitter_ms:
                return True
        # touching the indexes opens (creates) them, as Kafka's shouldRoll does
        oi = self._offset_index or self.offset_index
        if oi._entries >= oi._length // 8:
            return True
        ti = self._time_index or self.time_index
        if ti._entries >= ti._length // 12 - 1:
            return True
        return not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX

    # -- scanning -------------------------------------------------------------------------
    def iter_headers(self, start_position: int, end_position: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch from `start_position`, reading only headers.

        Stops quietly at a torn tail (like Kafka's FileLogInputStream).
        """
        end = self._size if end_position is None else min(end_position, self._size)
        pos = start_position
        fd = self._fd
        while end - pos >= BATCH_OVERHEAD:
            chunk = os.pread(fd, min(_SCAN_CHUNK, end - pos), pos)
            off = 0
            clen = len(chunk)
            while clen - off >= BATCH_OVERHEAD:
                h = parse_batch_header(chunk, off)
                size = h.batch_length + 12
                if size < BATCH_OVERHEAD or pos + off + size > end:
                    return
                yield pos + off, h
                off += size
            if off == 0:
                return
            pos += off

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """First batch whose last offset >= `offset` (index lookup, then header scan)."""
        _o, pos = self.offset_index.lookup(offset)
        for p, h in self.iter_headers(max(pos, starting_position)):
            last = h.base_offset + h.last_offset_delta
            if last >= offset:
                return LogOffsetPosition(last, p, h.batch_length + 12)
        return None

    def read_next_offset(self) -> int:
        """Offset after the last batch of the segment (base offset when empty)."""
        if self._size == 0:
            return self.base_offset
        _o, pos = self.offset_index.lookup(2**63 - 1)
        nxt = self.base_offset
        for _p, h in self.iter_headers(pos):
            nxt = h.base_offset + h.last_offset_delta + 1
        return nxt

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> SegmentReadInfo | None:
        """Slice starting at the batch holding `start_offset` (None if the segment has no such batch)."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log_path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_pos = found.position
        # base offset of the first batch, from the header we are standing on
        first_base = parse_batch_header(os.pread(self._fd, BATCH_OVERHEAD, start_pos)).base_offset
        adjusted = max(max_size, found.size) if min_one_message else max_size
        limit = self._size if max_position is None else min(max_position, self._size)
        fetch_size = max(0, min(limit - start_pos, adjusted))
        return SegmentReadInfo(FileSlice(self.file, start_pos, fetch_size), first_base, adjusted < found.size)

    def read_batch_at(self, position: int, size: int) -> RecordBatch:
        """Load one whole batch into memory (for the rare paths that need its records)."""
        return RecordBatch(os.pread(self._fd, size, position))

    # -- timestamps -----------------------------------------------------------------------
    @property
    def largest_timestamp(self) -> int:
        """Max timestamp of the segment, or the file's mtime when no batch has a timestamp."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.stat(self.log_path).st_mtime * 1000)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int = 0) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= `timestamp` and offset >= start."""
        _ts, ts_offset = self.time_index.lookup(timestamp)
        _o, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for p, h in self.iter_headers(pos):
            if h.max_timestamp >= timestamp and h.base_offset + h.last_offset_delta >= start_offset:
                batch = self.read_batch_at(p, h.batch_length + 12)
                for r in batch.records():
                    if r.timestamp >= timestamp and r.offset >= start_offset:
                        return r.timestamp, r.offset
        return None

    # -- recovery -------------------------------------------------------------------------
    def recover(self, on_batch: Callable[[RecordBatch], None] | None = None) -> int:
        """Rebuild the indexes from the `.log`, cutting it at the first invalid batch (§3.3, §6).

        `on_batch` sees every valid batch (leader-epoch cache, producer state). Returns the number of
        bytes cut from the end of the log.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._max_ts_and_offset = None
        valid_bytes = 0
        last_index_entry = 0
        size = self._size
        problem = None
        if size > 0:
            mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
            mv = memoryview(mm)
            batches = iter_batches(mv)
            batch = None
            try:
                for batch in batches:
                    batch.ensure_valid()
                    h = batch.header()
                    last = h.base_offset + h.last_offset_delta
                    if not self.can_convert_to_relative_offset(last):
                        raise InvalidRecordError(
                            f"offset {last} does not fit segment with base offset {self.base_offset}")
                    if h.max_timestamp > self.max_timestamp_so_far:
                        self._max_ts_and_offset = (h.max_timestamp, last)
                    if valid_bytes - last_index_entry > self.index_interval_bytes:
                        self.offset_index.append(last, valid_bytes)
                        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                        last_index_entry = valid_bytes
                    valid_bytes += h.batch_length + 12
                    if on_batch is not None:
                        on_batch(batch)
            except (CorruptRecordError, InvalidRecordError) as e:
                # keep only the text: the traceback would pin views of the mmap we close below
                problem = str(e)
                log.warning("Found invalid messages in log segment %s at byte offset %d: %s",
                            self.log_path, valid_bytes, problem)
            finally:
                # every view of the mmap must be gone before it can be closed
                batch = None
                batches.close()
                mv.release()
                mm.close()
        truncated = size - valid_bytes
        if truncated > 0:
            log.warning("Truncated %d invalid bytes at the end of segment %s during recovery "
                        "(kept %d valid bytes%s)", truncated, self.log_path, valid_bytes,
                        f"; {problem}" if problem else "; incomplete batch at the end")
            os.ftruncate(self._fd, valid_bytes)
            self._size = valid_bytes
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, True)
        self.time_index.trim_to_valid_size()
        self.bytes_since_last_index_entry = 0
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop every batch at or above `offset`; returns bytes removed (Kafka's LogSegment.truncateTo)."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # the active segment's indexes go back to full size so they can take new entries
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        if found is None:
            return 0
        removed = self._size - found.position
        os.ftruncate(self._fd, found.position)
        self._size = found.position
        if found.position == 0:
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._max_ts_and_offset = None
        if self._size > 0:
            # Kafka re-reads the max from the (truncated) time index, falling back to the last batch
            self._max_ts_and_offset = self.time_index.last_entry
        return removed

    # -- lifecycle ------------------------------------------------------------------------
    def sanity_check(self) -> None:
        """Kafka's LogSegment.sanityCheck at load: FileNotFoundError when the offset index is missing;
        a missing time index is created empty; the transaction index is checked.

        Like Kafka 3.x/4.x, the offset and time indexes' contents are not checked here: the
        segments above the recovery point are recovered (indexes rebuilt) anyway, and an index
        left untrimmed by a clean shutdown (Kafka 4.4's metadata log: first entry real, the rest
        zeros) is not corrupt. Only file sizes are read, so the indexes stay lazy.
        """
        if not self.offset_index_path.exists():
            raise FileNotFoundError(f"Offset index file {self.offset_index_path} does not exist")
        if not self.time_index_path.exists():
            # Kafka: timeIndexFileNewlyCreated -> resize(0)
            self.time_index.resize(0)
        self.txn_index.sanity_check()

    def resize_indexes(self, size: int) -> None:
        """Preallocate the indexes again (the active segment after loading)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: final time-index entry, trim the index files."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if self.config.preallocate:
            os.ftruncate(self._fd, self._size)

    def flush(self) -> None:
        """fsync the `.log` and msync the indexes (blocking; run it in a worker thread)."""
        if self.closed:
            return
        os.fsync(self._fd)
        # Like Kafka, flushing opens the lazy indexes: that is how a segment that only ever got one
        # append still ends up with a (0-byte after trimming) .index file.
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Clean close: final time-index entry if the max was known this run, trim indexes, close files."""
        if self.closed:
            return
        if self._max_ts_and_offset is not None:
            self.time_index.maybe_append(self._max_ts_and_offset[0], self._max_ts_and_offset[1], True)
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()
        self.file.close()
        self.closed = True

    def close_handlers(self) -> None:
        """Release file handles without trimming or writing anything (used on errors/crash simulation)."""
        if self.closed:
            return
        if self._offset_index is not None:
            self._offset_index.close_handler()
        if self._time_index is not None:
            self._time_index.close_handler()
        self.file.close()
        self.closed = True

    def paths(self) -> list[Path]:
        return [self.log_path, self.offset_index_path, self.time_index_path, self.txn_index_path]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all files of the segment, e.g. "" -> ".deleted" (open handles stay valid)."""
        def rename(p: Path) -> Path:
            name = p.name
            base = name[: len(name) - len(old_suffix)] if old_suffix and name.endswith(old_suffix) else name
            target = p.with_name(base + new_suffix)
            try:
                os.rename(p, target)
            except FileNotFoundError:
                pass
            return target

        self.log_path = rename(self.log_path)
        self.offset_index_path = rename(self.offset_index_path)
        self.time_index_path = rename(self.time_index_path)
        self.txn_index_path = rename(self.txn_index_path)
        if self._offset_index is not None:
            self._offset_index.path = self.offset_index_path
        if self._time_index is not None:
            self._time_index.path = self.time_index_path
        self.txn_index.path = self.txn_index_path
        self.suffix = new_suffix

    def delete_files(self) -> None:
        """Close and delete every file of the segment."""
        self.close_handlers()
        for p in self.paths():
            p.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path})"
