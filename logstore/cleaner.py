"""The log cleaner: compaction of `cleanup.policy=compact` logs (Kafka's LogCleaner, LogCleanerManager
and Cleaner), file for file the way Kafka does it so a crash at any moment recovers.

One round (`LogCleaner.clean_filthiest`):

1. pick the compacted log with the highest dirty ratio above `min.cleanable.dirty.ratio` (or one whose
   dirty data is older than `max.compaction.lag.ms`); the dirty section starts at the offset in
   `cleaner-offset-checkpoint` and stops before the active segment, the last stable offset and any
   segment younger than `min.compaction.lag.ms`;
2. build the key -> latest offset map over the dirty section (`offset_map.OffsetMap`, Kafka's capacity
   rules; aborted transactional data and control batches add no keys);
3. group the segments below the end of the map by size (`segment.bytes`, index sizes) and rewrite each
   group into one `<base>.log.cleaned` (+ indexes): a record stays if it is the latest for its key;
   tombstones and the markers of emptied transactions get a delete horizon (batch attribute bit 6,
   baseTimestamp = now + `delete.retention.ms`) the first time they are cleaned and go once it has
   passed; aborted transactional batches go; the last batch of each active producer stays (possibly
   as an empty header) so its sequence and epoch survive. Batches that keep all their records and
   need no horizon are copied byte for byte; others are rebuilt with the same base offset, last
   offset delta, producer fields and codec (MemoryRecords.filterTo);
4. swap: trim/flush the cleaned segment, give it the last source segment's mtime, rename
   `.cleaned` -> `.swap`, rename the replaced segments to `.deleted` (removed after
   `file.delete.delay.ms`), rename `.swap` -> final name. The loader (partition_log) finishes or
   discards an interrupted swap exactly like Kafka's LogLoader;
5. write the end of the map as the next first dirty offset into `cleaner-offset-checkpoint`.

Both passes take batch-level paths where the result cannot differ from the record-by-record one
(`cleaner_scan`): plain data batches' keys go into the map straight from their bytes (with strided
slices when the records have a fixed size), and in the mapped dirty section a plain batch is kept,
dropped or rebuilt by counting the offsets the map holds in its range, without reading a key.
`Cleaner.batch_paths = False` turns them off (the tests compare both).

Compact+delete logs also get their retention here (Kafka runs deleteOldSegments for them in the
cleaner thread). All file work runs in a worker thread, and in the broker both passes run in a
worker process (`cleaner_worker`, so the event loop never waits for the GIL behind them); the swap
and retention deletions change the log's segment list, so they go through `LogManager.run_exclusive`
(the broker runs them on the event loop between appends). `log.cleaner.io.max.bytes.per.second` throttles reads and writes.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from odradek.wire.compression import compress
from odradek.wire.primitives import write_uvarint, write_varint, write_varlong
from odradek.wire.records import (
    BATCH_OVERHEAD,
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    RecordBatch,
    parse_control_record_key,
    read_record_varlong,
)

from ..wire.checksum import crc32c
from . import files
from .checkpoints import fsync_dir
from .cleaner_scan import _uniform_stride, batch_at, kept_records, map_records, plain_batches
from .offset_map import STAGE_LIMIT, OffsetMap
from .segment import LogSegment
from .txn_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from .cleaner_worker import CleanerWorker
    from .manager import LogManager
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
INT32_MAX = 2**31 - 1
_DELETE_HORIZON_BIT = 0x40
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10
_LOG_APPEND_TIME_BIT = 0x08
#: batches the map-offset fast path leaves to the per-record filter
_SLOW_PATH_BITS = _DELETE_HORIZON_BIT | _CONTROL_BIT | _TRANSACTIONAL_BIT
_INDEX_FILES = (files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)


# ---------------------------------------------------------------------------------------------
# configuration, throttling, stats


#: Odradek-only broker key: "true" writes cleaned segments' index entries batch by batch (Kafka 4.x),
#: "false" one per appended chunk (Kafka 3.x). Unset: follows the cluster's metadata.version.
INDEX_PER_BATCH_KEY = "odradek.log.cleaner.index.per.batch"
#: Odradek-only broker key: "false" cleans in a thread of the broker process instead of a worker process
WORKER_PROCESS_KEY = "odradek.log.cleaner.worker.process"
#: metadata.version 4.0-IV0: the first level only Kafka 4 writes
METADATA_VERSION_4_0 = 22


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's `log.cleaner.*` settings, Kafka's defaults."""

    enable: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    max_io_bytes_per_second: float = math.inf
    backoff_ms: int = 15_000
    max_message_size: int = 1024 * 1024 + 12
    #: None: Kafka 4.x's per-batch index entries unless the cluster's metadata.version is 3.x
    index_per_batch: bool | None = None

    @classmethod
    def from_broker_props(cls, props: Mapping[str, object]) -> CleanerConfig:
        """From server.properties names (`log.cleaner.dedupe.buffer.size`, ...); absent keys keep Kafka's defaults."""
        def get(name: str, default: object, conv: Callable[[str], object]) -> object:
            value = props.get(name)
            return default if value is None else conv(str(value).strip())

        d = cls()
        rate = float(get("log.cleaner.io.max.bytes.per.second", math.inf, float))  # type: ignore[arg-type]
        return cls(
            enable=str(get("log.cleaner.enable", "true", str)).lower() == "true",
            num_threads=max(int(get("log.cleaner.threads", 1, int)), 1),  # type: ignore[call-overload]
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size", d.dedupe_buffer_size, int)),  # type: ignore[call-overload]
            io_buffer_size=int(get("log.cleaner.io.buffer.size", d.io_buffer_size, int)),  # type: ignore[call-overload]
            io_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor", 0.9, float)),  # type: ignore[arg-type]
            # Kafka's default is Double.MaxValue: no throttling
            max_io_bytes_per_second=math.inf if rate >= 1.7e308 else rate,
            backoff_ms=int(get("log.cleaner.backoff.ms", d.backoff_ms, int)),  # type: ignore[call-overload]
            max_message_size=int(get("message.max.bytes", d.max_message_size, int)),  # type: ignore[call-overload]
            index_per_batch=(None if props.get(INDEX_PER_BATCH_KEY) is None
                             else str(props[INDEX_PER_BATCH_KEY]).strip().lower() == "true"),
        )


class Throttler:
    """Kafka's Throttler: every `check_interval_ms`, sleep long enough to bring the observed rate
    down to `rate_per_sec` (bytes read plus bytes written by the cleaner)."""

    def __init__(self, rate_per_sec: float, check_interval_ms: int = 300,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate_per_sec
        self.check_interval_s = check_interval_ms / 1000
        self.clock = clock
        self.sleep = sleep
        self.period_start = clock()
        self.observed = 0.0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: float) -> None:
        if self.rate == math.inf:
            return
        self.observed += observed
        now = self.clock()
        elapsed = now - self.period_start
        if elapsed > self.check_interval_s and self.observed > 0:
            if self.observed / elapsed > self.rate:
                pause = self.observed / self.rate - elapsed
                if pause > 0:
                    self.sleep(pause)
                    self.slept_s += pause
            self.period_start = self.clock()
            self.observed = 0.0


@dataclass(slots=True)
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats): map and copy volumes and timings."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start_s: float = field(default_factory=time.monotonic)
    map_done_s: float = 0.0
    end_s: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return (self.end_s or time.monotonic()) - self.start_s


class CleaningAbortedError(Exception):
    """The log was closed, deleted or changed underneath the cleaner; the round is dropped."""


class SimulatedCrash(BaseException):  # noqa: N818 - what tests raise from a crash hook
    """Raised by test crash hooks: a BaseException so no `except Exception` in the cleaner swallows it."""


# ---------------------------------------------------------------------------------------------
# which log, which offsets


def segments_between(plog: PartitionLog, from_offset: int, to_offset: int) -> list[LogSegment]:
    """Kafka's logSegments(from, to): the segment holding `from_offset` (if any) and every later
    segment whose base offset is below `to_offset`."""
    segs = list(plog.segments)
    if from_offset >= to_offset:
        return []
    floor = from_offset
    for s in segs:
        if s.base_offset <= from_offset:
            floor = s.base_offset
        else:
            break
    return [s for s in segs if floor <= s.base_offset < to_offset]


def non_active_segments_from(plog: PartitionLog, from_offset: int) -> list[LogSegment]:
    return segments_between(plog, from_offset, plog.segments[-1].base_offset)


def _first_batch_timestamp(seg: LogSegment) -> int:
    for _pos, h in seg.iter_headers(0):
        return h.max_timestamp
    return 2**63 - 1


@dataclass(slots=True)
class LogToClean:
    """A candidate log with its dirty section [first_dirty_offset, first_uncleanable_offset)."""

    tp: TopicPartition
    log: PartitionLog
    first_dirty_offset: int
    uncleanable_offset: int
    need_compaction_now: bool = False
    clean_bytes: int = 0
    cleanable_bytes: int = 0
    first_uncleanable_offset: int = 0

    def __post_init__(self) -> None:
        plog = self.log
        self.clean_bytes = sum(s.size for s in segments_between(plog, -1, self.first_dirty_offset))
        # the segment holding the uncleanable offset (or the active one) is where cleaning stops
        candidates = non_active_segments_from(plog, self.uncleanable_offset)
        first_unclean_seg = candidates[0] if candidates else plog.segments[-1]
        self.first_uncleanable_offset = first_unclean_seg.base_offset
        self.cleanable_bytes = sum(s.size for s in segments_between(
            plog, min(self.first_dirty_offset, self.first_uncleanable_offset), self.first_uncleanable_offset))

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(plog: PartitionLog, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """Kafka's LogCleanerManager.cleanableOffsets: (first dirty offset, first uncleanable offset,
    whether the checkpoint must be rewritten because it was out of range)."""
    start = plog.log_start_offset
    checkpointed = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpointed < start:
        first_dirty, force = start, True
    elif checkpointed > plog.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger than the log end "
                    "offset %d. Resetting to the log start offset %d.", plog.name, checkpointed,
                    plog.log_end_offset, start)
        first_dirty, force = start, True
    else:
        first_dirty = checkpointed
    limits = [_last_stable_offset(plog), plog.segments[-1].base_offset]
    lag = max(plog.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in non_active_segments_from(plog, first_dirty):
            if seg.largest_timestamp > now_ms - lag:
                limits.append(seg.base_offset)
                break
    return first_dirty, max(first_dirty, min(limits)), force


def _last_stable_offset(plog: PartitionLog) -> int:
    # read from the cleaner's thread while appends may change the open transactions: a dict
    # changing size under min() raises, and the next try sees a consistent one
    for _ in range(10):
        try:
            return plog.last_stable_offset
        except RuntimeError:
            continue
    return plog.log_start_offset  # never happens in practice; cleaning nothing is always safe


def max_compaction_delay(plog: PartitionLog, first_dirty_offset: int, now_ms: int) -> int:
    """How long the oldest dirty batch has waited past `max.compaction.lag.ms` (0 = not overdue)."""
    clean_until = now_ms - max(plog.config.max_compaction_lag_ms, 0)
    if clean_until <= 0:
        return 0  # the default (forever): no need to read every dirty segment's first batch
    stamps = [t for t in (_first_batch_timestamp(s) for s in non_active_segments_from(plog, first_dirty_offset))
              if t > 0]
    earliest = min(stamps) if stamps else 2**63 - 1
    return clean_until - earliest if earliest < clean_until else 0


# ---------------------------------------------------------------------------------------------
# transactions seen while cleaning (Kafka's CleanedTransactionMetadata)


@dataclass(slots=True)
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Tracks transactions across the batches being cleaned: data of aborted transactions is
    dropped, a marker stays until no batch of its transaction is left, and the aborted
    transactions whose data survives are written to the cleaned segment's `.txnindex`."""

    def __init__(self) -> None:
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seq = 0
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1
            heapq.heappush(self._aborted, (t.first_offset, self._seq, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _first, _seq, txn = heapq.heappop(self._aborted)
            self.ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(self, batch: RecordBatch, producer_id: int, last_offset: int) -> bool:
        """True when the marker may be discarded (its transaction has no batch left)."""
        self._consume_aborted_up_to(last_offset)
        record = next(iter(batch.records()), None)
        if record is None:
            return True  # an empty control batch was already cleaned
        _version, ctype = parse_control_record_key(record.key)
        if ctype == ControlRecordType.ABORT:
            state = self.ongoing_aborted.pop(producer_id, None)
            if state is not None and state.last_observed_batch_offset is not None:
                # data of this aborted transaction is still there: keep the marker and its index entry
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if ctype == ControlRecordType.COMMIT:
            if producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """True when the data batch belongs to an aborted transaction (it can go)."""
        self._consume_aborted_up_to(last_offset)
        if not transactional:
            return False
        state = self.ongoing_aborted.get(producer_id)
        if state is not None:
            state.last_observed_batch_offset = last_offset
            return True
        self.ongoing_committed.add(producer_id)
        return False


# ---------------------------------------------------------------------------------------------
# rewriting batches (MemoryRecords.filterTo with the cleaner's filter)


class BatchRetention(Enum):
    DELETE = 0        # drop the batch whatever its records
    DELETE_EMPTY = 1  # drop it if no record stays
    RETAIN_EMPTY = 2  # keep at least the header (last batch of an active producer)


@dataclass(slots=True)
class LastRecord:
    """An active producer's last data offset (-1 if only markers) and epoch (Kafka's LastRecord)."""

    last_data_offset: int
    producer_epoch: int


_EMPTY_HEADER = struct.Struct(">qiibIhiqqqhii")


def empty_batch_header(h) -> bytes:
    """DefaultRecordBatch.writeEmptyHeader: a 61-byte batch with no records that keeps the original
    offsets, producer fields, leader epoch, max timestamp and flags (no codec, no horizon)."""
    attrs = h.attributes & (_LOG_APPEND_TIME_BIT | _TRANSACTIONAL_BIT | _CONTROL_BIT)
    out = bytearray(_EMPTY_HEADER.pack(h.base_offset, BATCH_OVERHEAD - 12, h.partition_leader_epoch, 2, 0, attrs,
                                       h.last_offset_delta, -1, h.max_timestamp, h.producer_id, h.producer_epoch,
                                       h.base_sequence, 0))
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


class RawRecord(NamedTuple):
    """One record of an inflated records block, located but not decoded: what the cleaner needs
    (offset, timestamp, key, whether the value is null) and where its key/value/headers bytes are."""

    offset: int
    timestamp: int
    key: bytes | None
    null_value: bool
    tail_start: int  # first byte of the key length varint
    end: int


def scan_records(block: bytes, h) -> list[RawRecord]:
    """Locate the records of a batch's inflated block (values and headers are skipped, not decoded).

    Timestamps are baseTimestamp + delta, or the batch max timestamp for LogAppendTime (what
    Kafka's Record.timestamp() returns)."""
    out: list[RawRecord] = []
    pos = 0
    n = len(block)
    base = h.base_offset
    base_ts = h.base_timestamp
    lat_ts = h.max_timestamp if h.attributes & _LOG_APPEND_TIME_BIT else None
    new = RawRecord._make
    zz = read_record_varlong
    try:
        for _ in range(h.record_count):
            # one-byte varints (the usual case for deltas and short keys) are decoded inline
            b = block[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = zz(block, pos)
            end = pos + size
            if size < 0 or end > n:
                raise CorruptRecordError(f"record size {size} runs past the batch")
            p = pos + 1  # after the attributes byte
            b = block[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = zz(block, p)
            b = block[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                offset_delta, p = zz(block, p)
            tail = p
            b = block[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = zz(block, p)
            key = None
            if klen >= 0:
                key = block[p:p + klen]
                p += klen
            # only the sign of the value length matters (null = -1, a 1-byte varint 0x01)
            out.append(new((base + offset_delta, lat_ts if lat_ts is not None else base_ts + ts_delta,
                            key, block[p] == 1, tail, end)))
            pos = end
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left after the declared records")
    return out


def rebuild_batch(h, block: bytes, retained: list[RawRecord], delete_horizon_ms: int | None) -> bytes:
    """Kafka's buildRetainedRecordsInto: the retained records in a new batch with the original base
    offset, leader epoch, producer fields, flags and codec; baseTimestamp is the first record's
    timestamp (or the delete horizon, attribute bit 6), maxTimestamp the largest record timestamp
    (LogAppendTime: the original); the last offset delta stays the original one (overrideLastOffset)
    so the producer's last sequence survives. A retained record keeps its bytes except the
    timestamp delta, which is relative to the new baseTimestamp (what re-encoding it gives)."""
    return rebuild_located(h, block, [(r.offset, r.timestamp, r.tail_start, r.end) for r in retained],
                           delete_horizon_ms)


def rebuild_located(h, block: bytes, retained: list[tuple[int, int, int, int]], delete_horizon_ms: int | None,
                    encoded: bytes | None = None) -> bytes:
    """`rebuild_batch` of records given as (offset, timestamp, tail_start, end). `encoded`: the
    retained records' own bytes joined, when the caller knows re-encoding would give exactly
    them (see `CleanerFilter._rebuild_mapped`)."""
    lat = bool(h.attributes & _LOG_APPEND_TIME_BIT)
    base_ts = retained[0][1] if delete_horizon_ms is None else delete_horizon_ms
    max_ts = h.max_timestamp if lat else max(r[1] for r in retained)
    base_offset = h.base_offset
    records = bytearray()
    append = records.append
    body = bytearray()
    for offset, timestamp, tail_start, end in (() if encoded is not None else retained):
        d = timestamp - base_ts
        o = offset - base_offset
        if -64 <= d < 64 and 0 <= o < 64:
            # the usual record: both deltas fit one byte, the length one or two
            n = (end - tail_start + 3) << 1
            if n < 0x80:
                append(n)
            elif n < 0x4000:
                append((n & 0x7F) | 0x80)
                append(n >> 7)
            else:
                write_uvarint(records, n)
            append(0)  # record attributes: always 0
            append((d << 1) ^ (d >> 63))
            append(o << 1)
            records += block[tail_start:end]
            continue
        body.clear()
        body.append(0)
        write_varlong(body, d)
        write_varint(body, o)
        body += block[tail_start:end]
        write_varint(records, len(body))
        records += body
    if encoded is not None:
        records = encoded  # type: ignore[assignment]
    codec = h.attributes & 0x07
    payload = compress(codec, records) if codec else bytes(records)
    attrs = codec | (h.attributes & (_LOG_APPEND_TIME_BIT | _TRANSACTIONAL_BIT | _CONTROL_BIT))
    if delete_horizon_ms is not None:
        attrs |= _DELETE_HORIZON_BIT
    out = bytearray(_EMPTY_HEADER.pack(base_offset, BATCH_OVERHEAD - 12 + len(payload), h.partition_leader_epoch, 2,
                                       0, attrs, h.last_offset_delta, base_ts, max_ts, h.producer_id,
                                       h.producer_epoch, h.base_sequence, len(retained)))
    out += payload
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def _records_block(batch: RecordBatch, h) -> bytes:
    return batch.inflated_block() if h.attributes & 0x07 else bytes(batch.buffer[BATCH_OVERHEAD:])


@dataclass(slots=True)
class FilterResult:
    """Output of one chunk: bytes consumed, bytes to append, and what LogSegment.append needs."""

    bytes_read: int = 0
    output: bytearray = field(default_factory=bytearray)
    max_offset: int = -1
    max_timestamp: int = -1
    shallow_offset_of_max_timestamp: int = -1
    messages_read: int = 0
    messages_retained: int = 0
    #: (last offset, max timestamp, end position in `output`) of each batch written: the cleaned
    #: segment indexes them without parsing the output again
    out_batches: list[tuple[int, int, int]] = field(default_factory=list)

    def retained(self, max_timestamp: int, shallow_offset: int, max_offset: int, n: int) -> None:
        """After each batch appended to `output` (its last offset is `shallow_offset`)."""
        self.out_batches.append((shallow_offset, max_timestamp, len(self.output)))
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.shallow_offset_of_max_timestamp = shallow_offset
        self.max_offset = max(self.max_offset, max_offset)
        self.messages_retained += n


class CleanerFilter:
    """The cleaner's record filter for one group of segments (Kafka's anonymous RecordFilter in
    Cleaner.cleanInto plus Cleaner.shouldRetainRecord)."""

    def __init__(self, offset_map: OffsetMap, now_ms: int, delete_retention_ms: int,
                 txn: CleanedTransactionMetadata, last_records: dict[int, LastRecord], stats: CleanerStats,
                 dirty_start: int | None = None) -> None:
        self.map = offset_map
        # where the map's keys start (None: decide every record by its key)
        self.dirty_start = dirty_start
        self.now = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.txn = txn
        self.last_records = last_records
        self.stats = stats
        self.discard_batch_records = False

    def check_batch_retention(self, batch: RecordBatch | None, h) -> tuple[BatchRetention, bool]:
        """(retention, contains_marker_for_empty_txn); `batch` is needed for control batches only."""
        last = h.base_offset + h.last_offset_delta
        is_control = bool(h.attributes & _CONTROL_BIT)
        if is_control:
            assert batch is not None
            can_discard = self.txn.on_control_batch_read(batch, h.producer_id, last)
            horizon = h.base_timestamp if h.attributes & _DELETE_HORIZON_BIT else None
            self.discard_batch_records = can_discard and horizon is not None and horizon <= self.now
        else:
            can_discard = self.txn.on_batch_read(h.producer_id, last, bool(h.attributes & _TRANSACTIONAL_BIT))
            self.discard_batch_records = can_discard
        retention = BatchRetention.DELETE_EMPTY
        if h.producer_id >= 0 and self._is_last_of_producer(h, last, is_control):
            retention = BatchRetention.RETAIN_EMPTY
        elif self.discard_batch_records:
            retention = BatchRetention.DELETE
        return retention, can_discard and is_control

    def _is_last_of_producer(self, h, last: int, is_control: bool) -> bool:
        lr = self.last_records.get(h.producer_id)
        if lr is None:
            return False
        if lr.last_data_offset >= 0:
            return last == lr.last_data_offset
        return is_control and h.producer_epoch == lr.producer_epoch

    def should_retain_record(self, h, record: RawRecord) -> bool:
        if self.discard_batch_records:
            return False
        if h.attributes & _CONTROL_BIT:
            return True
        if record.offset > self.map.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages += 1
            return False
        latest = record.offset >= self.map.get(record.key)
        if not record.null_value:
            return latest
        # tombstone: kept until the batch's delete horizon has passed
        retain_delete = not (h.attributes & _DELETE_HORIZON_BIT) or self.now < h.base_timestamp
        return latest and retain_delete

    def filter_chunk(self, chunk: bytes | memoryview) -> FilterResult:
        """Filter the complete batches at the start of `chunk` into a new buffer."""
        res = FilterResult()
        view = memoryview(chunk)
        pos = 0
        while True:
            if self.dirty_start is not None:
                pos = self._filter_mapped(chunk, view, pos, res)
            found = batch_at(chunk, pos)
            if found is None:
                return res
            size, h = found
            res.bytes_read = pos + size
            self._filter_batch(res, view, pos, h)
            pos += size

    def _filter_mapped(self, chunk: bytes | memoryview, view: memoryview, pos: int, res: FilterResult) -> int:
        """Filter the plain data batches (no transaction, marker or delete horizon) of the mapped
        dirty section from `pos` on; returns where it stopped. A record there stays exactly when
        its offset is one the map holds (the latest of its key; keyless records are not there),
        so counting those offsets in [base, last] decides a batch without reading a key; only a
        partly kept batch is walked, for its records' positions and timestamps. What the
        per-record path gives for such a batch: no horizon yet, so a kept tombstone stays and
        needs one; never discarded (not transactional), so the transaction tracker is not asked
        (it catches up at the next transactional or control batch)."""
        dirty_start = self.dirty_start
        assert dirty_start is not None
        latest_offset = self.map.latest_offset
        marks = self.map.latest_marks(dirty_start)
        tombs = bool(self.map.tombstones)
        last_records = self.last_records
        output = res.output
        for p, size, t in plain_batches(chunk, pos, _SLOW_PATH_BITS):
            base = t[0]
            last = base + t[6]
            if base < dirty_start or last > latest_offset:
                break
            pos = p + size
            res.bytes_read = pos
            n = t[12]
            res.messages_read += n
            held = marks[base - dirty_start:last - dirty_start + 1]
            n_kept = len(held) - held.count(0)
            n_tombs = held.count(2) if tombs else 0
            if n_kept == n and n and not n_tombs:
                # (an empty batch, left by an earlier cleaning, keeps nothing: see below)
                output += view[p:pos]
                res.retained(t[8], last, last, n)
            elif n_kept:
                kept_offsets = [base + i for i, m in enumerate(held) if m]
                self._rebuild_mapped(res, view, p, size, BatchHeader._make(t), last, kept_offsets, n_tombs)
            elif t[9] >= 0:
                # the last batch of an active producer stays, as an empty header
                lr = last_records.get(t[9])
                if lr is not None and lr.last_data_offset >= 0 and last == lr.last_data_offset:
                    output += empty_batch_header(BatchHeader._make(t))
                    res.retained(t[8], last, last, 0)
        return pos

    def _rebuild_mapped(self, res: FilterResult, view: memoryview, pos: int, size: int, h, last: int,
                        kept_offsets: list[int], n_tombs: int) -> None:
        block = (RecordBatch(view, pos).inflated_block() if h.attributes & 0x07
                 else view[pos + BATCH_OVERHEAD:pos + size].tobytes())
        lat_ts = h.max_timestamp if h.attributes & _LOG_APPEND_TIME_BIT else None
        kept = kept_records(block, h.record_count, h.base_offset, h.base_timestamp, lat_ts, set(kept_offsets))
        if len(kept) != len(kept_offsets):
            raise CorruptRecordError(f"batch at offset {h.base_offset} holds {len(kept)} of the {len(kept_offsets)} "
                                     "offsets the offset map has in its range")
        horizon = (self.now + self.delete_retention_ms) if n_tombs else None
        encoded = None
        if horizon is None and lat_ts is None and kept[0][1] == h.base_timestamp:
            # The new batch keeps the base timestamp (its first record's delta is 0) and every
            # offset delta, so a kept record re-encodes to its own bytes when its attributes byte
            # is 0 (what the encoder writes) and its deltas are one byte (fixed-size records):
            # then the kept records are copied whole.
            uniform = _uniform_stride(block, h.record_count)
            if uniform is not None:
                stride, head = uniform
                if block[head::stride].count(0) == h.record_count:
                    encoded = b"".join([block[end - stride:end] for _o, _t, _s, end in kept])
        rebuilt = rebuild_located(h, block, kept, horizon, encoded)
        res.output += rebuilt
        res.retained(struct.unpack_from(">q", rebuilt, 35)[0], last, max(r[0] for r in kept), len(kept))

    def _filter_batch(self, res: FilterResult, view: memoryview, pos: int, h) -> None:
        """One batch, record by record (MemoryRecords.filterTo with the cleaner's filter)."""
        # a RecordBatch only where records or a marker are read one by one
        batch = RecordBatch(view, pos)
        retention, marker_for_empty_txn = self.check_batch_retention(batch, h)
        if retention is BatchRetention.DELETE:
            return
        last = h.base_offset + h.last_offset_delta
        kept = []
        write_original = True
        tombstones = False
        max_offset = -1
        block = _records_block(batch, h)
        records = scan_records(block, h)
        for record in records:
            if self.should_retain_record(h, record):
                kept.append(record)
                max_offset = max(max_offset, record.offset)
                if record.null_value:
                    tombstones = True
            else:
                write_original = False
        res.messages_read += len(records)
        if kept:
            has_horizon = bool(h.attributes & _DELETE_HORIZON_BIT)
            need_horizon = (tombstones or marker_for_empty_txn) and not has_horizon
            if write_original and not need_horizon:
                res.output += batch.buffer
                res.retained(h.max_timestamp, last, last, len(kept))
            else:
                horizon = (self.now + self.delete_retention_ms) if need_horizon else (
                    h.base_timestamp if has_horizon else None)
                rebuilt = rebuild_batch(h, block, kept, horizon)
                res.output += rebuilt
                max_ts = struct.unpack_from(">q", rebuilt, 35)[0]
                res.retained(max_ts, last, max_offset, len(kept))
        elif retention is BatchRetention.RETAIN_EMPTY:
            res.output += empty_batch_header(h)
            res.retained(h.max_timestamp, last, last, 0)



# ---------------------------------------------------------------------------------------------
# the cleaner proper (Kafka's Cleaner)


CrashHook = Callable[[str], None]


class Cleaner:
    """Cleans one log at a time: offset map, grouped rewrite, swap (Kafka's Cleaner class).

    `crash_hook(step)` (tests) is called before every file-system step of the rewrite and swap;
    raising there leaves the files exactly as a process killed at that moment would.
    """

    def __init__(self, config: CleanerConfig, throttler: Throttler | None = None,
                 crash_hook: CrashHook | None = None) -> None:
        self.config = config
        self.offset_map = OffsetMap(config.dedupe_buffer_size // config.num_threads)
        self.io_buffer_size = max(config.io_buffer_size // config.num_threads // 2, BATCH_OVERHEAD)
        self.throttler = throttler or Throttler(config.max_io_bytes_per_second)
        self.crash_hook = crash_hook
        # index entries of a cleaned segment: per batch (Kafka 4.x LogSegment.append) or per chunk
        # appended (Kafka 3.x); the LogCleaner sets it from the cluster's metadata.version
        self.index_per_batch = True if config.index_per_batch is None else config.index_per_batch
        self.run_exclusive: Callable[..., object] = lambda fn, *args: fn(*args)
        self.is_aborted: Callable[[PartitionLog], bool] = lambda plog: plog.closed
        self._dirty_start: int | None = None
        #: False: every record through the per-record path (the reference the batch paths are
        #: tested against)
        self.batch_paths = True

    def _step(self, name: str) -> None:
        if self.crash_hook is not None:
            self.crash_hook(name)

    def _check_done(self, plog: PartitionLog) -> None:
        if self.is_aborted(plog):
            raise CleaningAbortedError(f"cleaning of {plog.name} aborted")

    # -- reading chunks -----------------------------------------------------------------------
    def _chunks(self, plog: PartitionLog, seg: LogSegment, start: int, consume: Callable[[bytes], int]) -> int:
        """Feed `consume` chunks of whole batches from `start`; it returns the bytes it used.
        Grows the buffer (up to the largest batch) when a batch does not fit, like Kafka."""
        size = self.io_buffer_size
        position = start
        end = seg.size
        total = 0
        while position < end:
            self._check_done(plog)
            chunk = os.pread(seg.fileno(), min(size, end - position), position)
            if not chunk:
                break
            self.throttler.maybe_throttle(len(chunk))
            used = consume(chunk)
            if used < 0:  # the consumer is done (a full offset map)
                break
            if used == 0:
                if len(chunk) < min(size, end - position):
                    break
                next_size = struct.unpack_from(">i", chunk, 8)[0] + 12 if len(chunk) >= 12 else 0
                if next_size <= size and size >= self.config.max_message_size:
                    raise CorruptRecordError(f"cannot read a batch of {plog.name} at position {position}")
                size = max(min(size * 2, max(self.config.max_message_size, next_size)), next_size)
                continue
            position += used
            total += used
        return total

    # -- offset map ---------------------------------------------------------------------------
    def build_offset_map(self, plog: PartitionLog, start: int, end: int, stats: CleanerStats) -> None:
        """Kafka's buildOffsetMap: keys of the dirty section [start, end), until the map is full."""
        omap = self.offset_map
        omap.clear()
        dirty = segments_between(plog, start, end)
        nexts = [s.base_offset for s in dirty[1:]] + [end]
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(plog.aborted_transactions(start, end))
        max_desired = int(omap.slots * self.config.io_buffer_load_factor)
        entries = omap.entries
        tombstones = omap.tombstones
        batch_paths = self.batch_paths
        full = False
        for seg, next_start in zip(dirty, nexts, strict=True):
            if full:
                break
            found = seg.offset_index.lookup(start)
            state = {"full": False}

            def consume(chunk: bytes, state=state) -> int:
                view = memoryview(chunk)
                pos = 0
                while True:
                    if batch_paths:
                        # runs of plain data batches: keys straight from the bytes, no per-record
                        # "full" check while the whole batch fits; not transactional, so the
                        # transaction tracker has nothing to say (it catches up at the next
                        # transactional or control batch)
                        for p, size, t in plain_batches(chunk, pos, _CONTROL_BIT | _TRANSACTIONAL_BIT):
                            n, base = t[12], t[0]
                            if base < start:
                                break
                            if len(entries) >= STAGE_LIMIT:
                                omap.flush()
                            if not omap.has_room(max_desired - n + 1):
                                break  # near the full point: record by record below
                            if t[5] & 0x07:
                                block = RecordBatch(view, p).inflated_block()
                                map_records(block, 0, len(block), n, base, entries, tombstones)
                            else:
                                map_records(chunk, p + BATCH_OVERHEAD, p + size, n, base, entries, tombstones)
                            omap.latest_offset = base + t[6]
                            stats.map_messages_read += n
                            pos = p + size
                    found = batch_at(chunk, pos)
                    if found is None:
                        break
                    size, h = found
                    last = h.base_offset + h.last_offset_delta
                    if h.attributes & _CONTROL_BIT:
                        txn.on_control_batch_read(RecordBatch(view, pos), h.producer_id, last)
                        stats.map_messages_read += 1
                    elif txn.on_batch_read(h.producer_id, last, bool(h.attributes & _TRANSACTIONAL_BIT)):
                        stats.map_messages_read += h.record_count  # aborted data adds no keys
                    else:
                        for record in scan_records(_records_block(RecordBatch(view, pos), h), h):
                            if record.key is not None and record.offset >= start:
                                if omap.has_room(max_desired):
                                    omap.put(record.key, record.offset, record.null_value)
                                else:
                                    state["full"] = True
                                    return -1
                            stats.map_messages_read += 1
                    if last >= start:
                        omap.update_latest_offset(last)
                    pos += size
                used = pos
                stats.map_bytes_read += used
                return used

            self._chunks(plog, seg, found[1], consume)
            if state["full"]:
                full = True
                log.debug("Offset map of %s is full; segment %d is partially mapped", plog.name, seg.base_offset)
            else:
                # a gap in offsets (cleaned away records) still belongs to this segment
                omap.update_latest_offset(next_start - 1)

    # -- grouping -----------------------------------------------------------------------------
    @staticmethod
    def group_segments_by_size(segs: list[LogSegment], max_size: int, max_index_size: int,
                               first_uncleanable_offset: int) -> list[list[LogSegment]]:
        """Kafka's groupSegmentsBySize: consecutive segments merged while the log and both indexes
        stay within their limits and the offsets still fit one segment's relative range."""
        groups: list[list[LogSegment]] = []
        rest = list(segs)
        while rest:
            group = [rest.pop(0)]
            log_size = group[0].size
            index_size = group[0].offset_index.size_in_bytes()
            time_size = group[0].time_index.size_in_bytes()
            while rest:
                nxt = rest[0]
                last_of_next = (rest[1].base_offset - 1) if len(rest) > 1 else (first_uncleanable_offset - 1)
                if (log_size + nxt.size <= max_size
                        and index_size + nxt.offset_index.size_in_bytes() <= max_index_size
                        and time_size + nxt.time_index.size_in_bytes() <= max_index_size
                        and (nxt.size == 0 or last_of_next - group[-1].base_offset <= INT32_MAX)):
                    group.append(rest.pop(0))
                    log_size += nxt.size
                    index_size += nxt.offset_index.size_in_bytes()
                    time_size += nxt.time_index.size_in_bytes()
                else:
                    break
            groups.append(group)
        return groups

    # -- one cleaning -------------------------------------------------------------------------
    def clean(self, ltc: LogToClean, now_ms: int | None = None) -> tuple[int, CleanerStats]:
        """Clean the log's dirty section; returns (next first dirty offset, stats)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        plog = ltc.log
        stats = CleanerStats()
        upper = ltc.first_uncleanable_offset
        self.build_offset_map(plog, ltc.first_dirty_offset, upper, stats)
        self._dirty_start = ltc.first_dirty_offset if self.batch_paths else None
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done_s = time.monotonic()
        txn = CleanedTransactionMetadata()
        groups = self.group_segments_by_size(segments_between(plog, 0, end_offset), plog.config.segment_bytes,
                                             plog.config.segment_index_bytes, upper)
        for group in groups:
            self.clean_segments(plog, group, now, stats, txn)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_s = time.monotonic()
        return end_offset, stats

    def clean_segments(self, plog: PartitionLog, group: list[LogSegment], now: int, stats: CleanerStats,
                       txn: CleanedTransactionMetadata) -> None:
        """Rewrite one group into `<base>.log.cleaned` and swap it in (Kafka's cleanSegments)."""
        base = group[0].base_offset
        for suffix in _INDEX_FILES:
            stale = plog.dir / (files.filename_prefix(base) + suffix + files.CLEANED_SUFFIX)
            if stale.exists():
                self._step("delete-stale-cleaned")
                stale.unlink()
        self._step("create-cleaned")
        cleaned = LogSegment(plog.dir, base, plog.config, file_suffix=files.CLEANED_SUFFIX)
        try:
            txn.cleaned_index = cleaned.txn_index
            last_records = self.run_exclusive(self._last_records_of_active_producers, plog)
            filt = CleanerFilter(self.offset_map, now, plog.config.delete_retention_ms, txn,
                                 last_records, stats, self._dirty_start)  # type: ignore[arg-type]
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                txn.add_aborted_transactions(plog.aborted_transactions(seg.base_offset, upper))

                def consume(chunk: bytes) -> int:
                    res = filt.filter_chunk(chunk)
                    stats.messages_read += res.messages_read
                    stats.messages_written += res.messages_retained
                    if res.output and self.index_per_batch:
                        # Kafka 4's LogSegment.append: one write of the chunk's batches, then
                        # the indexes batch by batch (each batch accounted as its own append)
                        self._step("append-cleaned")
                        cleaned.write_at(cleaned.size, res.output)
                        begin = 0
                        for last, max_ts, end in res.out_batches:
                            position = cleaned.begin_append(last, max_ts)
                            cleaned.finish_append(position, end - begin, last, max_ts, last)
                            begin = end
                        stats.bytes_written += len(res.output)
                        self.throttler.maybe_throttle(len(res.output))
                    elif res.output:
                        # Kafka 3.x: one append (and at most one index entry) per chunk
                        self._step("append-cleaned")
                        cleaned.append(res.max_offset, res.max_timestamp, res.shallow_offset_of_max_timestamp,
                                       res.output)
                        stats.bytes_written += len(res.output)
                        self.throttler.maybe_throttle(len(res.output))
                    return res.bytes_read

                stats.bytes_read += self._chunks(plog, seg, 0, consume)
            self._step("trim-cleaned")
            cleaned.on_become_inactive()
            self._step("flush-cleaned")
            cleaned.flush()
            mtime = os.stat(group[-1].log_path).st_mtime_ns
            os.utime(cleaned.log_path, ns=(mtime, mtime))
            self.run_exclusive(self._replace_segments, plog, cleaned, group)
        except BaseException:
            if not cleaned.closed and cleaned.suffix == files.CLEANED_SUFFIX:
                cleaned.close_handlers()
            raise
        fsync_dir(plog.dir)

    @staticmethod
    def _last_records_of_active_producers(plog: PartitionLog) -> dict[int, LastRecord]:
        return {pid: LastRecord(e.last_data_offset, e.producer_epoch)
                for pid, e in plog.producer_state.producers.items()}

    def _rename_suffix(self, seg: LogSegment, old: str, new: str, step: str) -> None:
        # file by file, so a crash hook can stop between two renames as a kill would
        for p in seg.paths():
            if p.exists():
                self._step(step)
                target = p.with_name(p.name[: len(p.name) - len(old)] + new if old else p.name + new)
                os.rename(p, target)
        seg.change_file_suffixes(old, new)  # only updates the paths now (the files are already moved)

    def _replace_segments(self, plog: PartitionLog, cleaned: LogSegment, old: list[LogSegment]) -> None:
        """Kafka's LocalLog.replaceSegments for one cleaned segment: `.cleaned` -> `.swap`, the old
        segments -> `.deleted` (async removal), `.swap` -> final name. Runs exclusively."""
        if plog.closed:
            raise CleaningAbortedError(f"{plog.name} was closed before the swap")
        current = {id(s) for s in plog.segments}
        # retention may have removed some of them meanwhile
        old = [s for s in old if id(s) in current]
        self._rename_suffix(cleaned, files.CLEANED_SUFFIX, files.SWAP_SUFFIX, "rename-cleaned-to-swap")
        keep = [s for s in plog.segments if s not in old]
        plog._set_segments([*keep, cleaned])
        due = time.monotonic() + plog.config.file_delete_delay_ms / 1000
        for seg in old:
            self._rename_suffix(seg, "", files.DELETED_SUFFIX, "rename-old-to-deleted")
            plog._pending_deletes.append((seg, due))
        self._rename_suffix(cleaned, files.SWAP_SUFFIX, "", "rename-swap-to-final")
        # producer snapshots of the replaced segments (other than the kept base) go too
        for seg in old:
            if seg.base_offset != cleaned.base_offset:
                snap = files.snapshot_file(plog.dir, seg.base_offset)
                if snap.exists():
                    self._step("delete-snapshot")
                    snap.unlink(missing_ok=True)
        if plog.config.file_delete_delay_ms <= 0:
            plog.delete_pending_segments(force=True)
        log.info("Swapped in cleaned segment %d for %d segment(s) of %s", cleaned.base_offset, len(old), plog.name)


# ---------------------------------------------------------------------------------------------
# the manager side (Kafka's LogCleaner + LogCleanerManager)


class LogCleaner:
    """Chooses logs to clean, cleans them and keeps `cleaner-offset-checkpoint` of every log dir.

    Use `clean_filthiest(now_ms)` from a worker thread (or `run_forever()` in the broker's nursery,
    which does that every `log.cleaner.backoff.ms` when there is nothing to clean).
    """

    def __init__(self, manager: LogManager, config: CleanerConfig | None = None,
                 crash_hook: CrashHook | None = None) -> None:
        self.manager = manager
        self.config = config or CleanerConfig()
        self.cleaner = Cleaner(self.config, crash_hook=crash_hook)
        self.cleaner.run_exclusive = lambda fn, *args: manager.run_exclusive(fn, *args)
        self.cleaner.is_aborted = self._aborted
        self.uncleanable: set[TopicPartition] = set()
        # set when the broker shuts down: a running cleaning stops at its next chunk, as Kafka's
        # shutdown aborts the cleaner threads (the .cleaned files are removed at the next start)
        self.stop_requested = False
        self.last_stats: CleanerStats | None = None
        self.rounds = 0
        self.dirtiest_ratio = 0.0
        #: set by `use_worker_process`: cleanings then run in a worker process (`cleaner_worker`)
        self.worker: CleanerWorker | None = None

    def use_worker_process(self) -> None:
        """Run every cleaning in a worker process from now on (what the broker does: the event
        loop never waits for the GIL behind the cleaner). Crash hooks stay in-thread only."""
        from .cleaner_worker import CleanerWorker  # noqa: PLC0415 - imports this module

        if self.worker is None:
            self.worker = CleanerWorker(self.cleaner, self.config)

    def close(self) -> None:
        """Stop the worker process, if any."""
        if self.worker is not None:
            self.worker.close()

    @classmethod
    def from_broker_config(cls, manager: LogManager, raw: Mapping[str, object],
                           metadata_version: int | None = None) -> LogCleaner:
        """A cleaner for the broker: `log.cleaner.*` settings; cleaned segments' index layout as the
        Kafka version of the cluster's metadata.version writes it (unless configured)."""
        cleaner = cls(manager, CleanerConfig.from_broker_props(raw))
        if cleaner.config.index_per_batch is None and metadata_version is not None:
            cleaner.cleaner.index_per_batch = metadata_version >= METADATA_VERSION_4_0
        if str(raw.get(WORKER_PROCESS_KEY, "true")).strip().lower() != "false":
            cleaner.use_worker_process()
        return cleaner

    def _aborted(self, plog: PartitionLog) -> bool:
        return self.stop_requested or plog.closed or self.manager.get_log(plog.topic, plog.partition) is not plog

    # -- checkpoints --------------------------------------------------------------------------
    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self.manager.dirs:
            if d.cleaner_offsets is None:
                continue
            try:
                out.update(d.cleaner_offsets.read())
            except Exception as e:  # noqa: BLE001 - Kafka logs and treats the dir as having no checkpoint
                log.warning("Failed to read %s: %s", d.cleaner_offsets.path, e)
        return out

    def update_checkpoint(self, tp: TopicPartition, offset: int | None) -> None:
        """Set (or with None remove) a log's first dirty offset in its dir's checkpoint file."""
        d = self.manager.log_dir_of(tp)
        if d is None or d.cleaner_offsets is None:
            return
        try:
            current = d.cleaner_offsets.read()
        except Exception:  # noqa: BLE001
            current = {}
        updated = {k: v for k, v in current.items() if k in self.manager.logs and k != tp}
        if offset is not None:
            updated[tp] = offset
        d.cleaner_offsets.write(updated)

    # -- choosing -----------------------------------------------------------------------------
    def grab_filthiest(self, now_ms: int) -> LogToClean | None:
        """Kafka's grabFilthiestCompactedLog: the compacted log with the highest cleanable ratio
        above its min.cleanable.dirty.ratio (or overdue by max.compaction.lag.ms)."""
        checkpoints = self.all_cleaner_checkpoints()
        candidates: list[LogToClean] = []
        for tp, plog in list(self.manager.logs.items()):
            if not plog.config.compact or plog.closed or tp in self.uncleanable:
                continue
            if tp in self.manager.cleaning_in_progress:
                continue
            try:
                first_dirty, uncleanable, force = cleanable_offsets(plog, checkpoints.get(tp), now_ms)
                if force:
                    self.update_checkpoint(tp, first_dirty)
                delay = max_compaction_delay(plog, first_dirty, now_ms)
                ltc = LogToClean(tp, plog, first_dirty, uncleanable, delay > 0)
            except Exception:
                log.exception("Failed to compute the cleanable offsets of %s; marking it uncleanable", plog.name)
                self.uncleanable.add(tp)
                continue
            if ltc.total_bytes > 0:
                candidates.append(ltc)
        self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        cleanable = [c for c in candidates
                     if (c.need_compaction_now and c.cleanable_bytes > 0)
                     or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
        if not cleanable:
            return None
        return max(cleanable, key=lambda c: c.cleanable_ratio)

    # -- one round ----------------------------------------------------------------------------
    def clean_filthiest(self, now_ms: int | None = None) -> bool:
        """Clean the dirtiest log (if any is due), then apply retention to compact+delete logs.
        Blocking: run it in a worker thread. Returns True if a log was cleaned."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if self.stop_requested:
            return False
        ltc = self.grab_filthiest(now)
        cleaned = False
        if ltc is not None:
            self.manager.cleaning_in_progress.add(ltc.tp)
            end = ltc.first_dirty_offset
            crashed = False
            try:
                if self.worker is not None:
                    end, stats = self.worker.clean(ltc.log, ltc.first_dirty_offset, ltc.first_uncleanable_offset,
                                                   now, self._aborted)
                else:
                    end, stats = self.cleaner.clean(ltc, now)
                self.last_stats = stats
                self.rounds += 1
                cleaned = True
                log.info("Cleaned %s: offsets [%d, %d), %d -> %d bytes read/written, %d/%d messages, %.3f s",
                         ltc.log.name, ltc.first_dirty_offset, end, stats.bytes_read, stats.bytes_written,
                         stats.messages_read, stats.messages_written, stats.elapsed_s)
            except CleaningAbortedError as e:
                log.info("%s", e)
            except SimulatedCrash:
                crashed = True
                raise
            except Exception:
                if self._aborted(ltc.log):
                    # closed or deleted underneath us (its files are gone): not the log's fault
                    log.info("Cleaning of %s stopped: the log was closed", ltc.log.name)
                    return False
                log.exception("Unexpected exception while cleaning %s; it is marked uncleanable", ltc.log.name)
                self.uncleanable.add(ltc.tp)
            finally:
                self.manager.cleaning_in_progress.discard(ltc.tp)
                if not crashed and not ltc.log.closed and self.manager.get_log(*ltc.tp) is ltc.log:
                    self.cleaner._step("write-checkpoint")
                    self.update_checkpoint(ltc.tp, end)
        self.delete_old_segments_of_compacted(now)
        return cleaned

    def delete_old_segments_of_compacted(self, now_ms: int) -> int:
        """Retention of compact+delete logs (Kafka's cleaner thread does it, not the retention task)."""
        n = 0
        for tp, plog in list(self.manager.logs.items()):
            cfg = plog.config
            if plog.closed or not cfg.compact or "delete" not in cfg.cleanup_policy.split(","):
                continue
            if tp in self.manager.cleaning_in_progress or tp in self.uncleanable:
                continue
            n += self.manager.delete_old_segments_exclusive(plog, now_ms)
        return n

    async def run_forever(self) -> None:
        """The cleaner thread: clean in a worker thread, back off `log.cleaner.backoff.ms` when idle."""
        import trio  # noqa: PLC0415 - the log store itself does not need trio

        async def stop_on_cancel() -> None:
            # the worker thread cannot be cancelled; this makes it stop at its next chunk instead
            try:
                await trio.sleep_forever()
            finally:
                self.stop_requested = True

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_on_cancel)
                while True:
                    try:
                        cleaned = await trio.to_thread.run_sync(self.clean_filthiest)
                    except Exception:
                        log.exception("Log cleaner round failed")
                        cleaned = False
                    if not cleaned:
                        await trio.sleep(self.config.backoff_ms / 1000)
        finally:
            self.close()
