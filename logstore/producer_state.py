"""Producer state and its `<offset>.snapshot` files (Kafka's ProducerStateManager).

The file format, entry order (java.util.HashMap iteration order) and the snapshot timing (at every
roll and at clean close, 10-byte files when there are no producers) are implemented here, and so are
Kafka's per-producer checks on the produce path (ProducerAppendInfo): `check_append` looks only at a
batch's header fields and either finds a duplicate of one of the producer's last 5 batches, raises a
typed error (out-of-order sequence, old epoch, non-transactional write inside a transaction, zombie
coordinator), or lets the append go on; `update_from_batch` then records the written batch.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..wire.checksum import crc32c as _crc32c
from . import files
from .errors import LogStoreError
from .java_hash import hashmap_order, long_hash

log = logging.getLogger(__name__)

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc (uint32), entry count
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
NUM_BATCHES_TO_RETAIN = 5
NO_SEQUENCE = -1


class CorruptSnapshotError(Exception):
    """A producer snapshot has an unknown version, a bad CRC or a bad length."""


class ProducerStateError(LogStoreError):
    """Base of the produce-path producer checks (each maps to one Kafka error code)."""


class OutOfOrderSequenceError(ProducerStateError):
    """The batch's first sequence does not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER, 45)."""


class InvalidProducerEpochError(ProducerStateError):
    """The batch's producer epoch is older than the one this partition has seen (INVALID_PRODUCER_EPOCH, 47).

    Kafka answers this (not PRODUCER_FENCED) on the produce path since 2.7 so that a transactional
    producer can abort and go on."""


class InvalidTxnStateError(ProducerStateError):
    """A non-transactional batch from a producer with an open transaction (INVALID_TXN_STATE, 48)."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """A transaction marker from an older coordinator epoch than the last one (TRANSACTION_COORDINATOR_FENCED, 52)."""


@dataclass(slots=True)
class BatchMetadata:
    """What Kafka remembers of one of a producer's recent batches."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return _first_seq(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def _first_seq(last_seq: int, offset_delta: int) -> int:
    # Sequence numbers wrap at Int.MAX_VALUE.
    s = last_seq - offset_delta
    return s + 2**31 if s < 0 else s


_FIELDS = 4  # a remembered batch in ProducerStateEntry.batches: last_seq, last_offset, offset_delta, timestamp
_RETAINED = NUM_BATCHES_TO_RETAIN * _FIELDS


def _no_batches() -> array:
    return array("q")


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id: epoch, recent batches, open transaction.

    The last 5 batches sit packed in one ``array('q')`` (4 values each, oldest first), not as
    BatchMetadata objects: a broker with thousands of partitions keeps tens of thousands of entries
    for its whole life, and packed values cost 8 bytes each where objects and their ints cost ~30x
    that, growing as sequence numbers leave CPython's small-int cache.
    """

    producer_id: int
    producer_epoch: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: array = field(default_factory=_no_batches)

    @property
    def batch_metadata(self) -> list[BatchMetadata]:
        """The remembered batches, oldest first (a copy; add_batch changes them)."""
        b = self.batches
        return [BatchMetadata(*b[i:i + _FIELDS]) for i in range(0, len(b), _FIELDS)]

    def add_batch(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        """Remember a written batch; the oldest is forgotten beyond Kafka's 5."""
        b = self.batches
        b.extend((last_seq, last_offset, offset_delta, timestamp))
        if len(b) > _RETAINED:
            del b[:_FIELDS]

    def clear_batches(self) -> None:
        del self.batches[:]

    @property
    def last_seq(self) -> int:
        b = self.batches
        return b[-4] if b else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        b = self.batches
        return b[-3] if b else -1

    @property
    def first_seq(self) -> int:
        b = self.batches
        return _first_seq(b[0], b[2]) if b else NO_SEQUENCE

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any (a client retry)."""
        if producer_epoch != self.producer_epoch:
            return None
        b = self.batches
        for i in range(0, len(b), _FIELDS):
            if b[i] == last_seq and _first_seq(last_seq, b[i + 2]) == first_seq:
                return BatchMetadata(*b[i:i + _FIELDS])
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """True when `next_seq` directly follows `last_seq` (sequences wrap from Int.MAX_VALUE to 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 2**31 - 1)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """A batch's last sequence (Kafka's DefaultRecordBatch.incrementSequence: wraps at Int.MAX_VALUE)."""
    if base_sequence < 0:
        return NO_SEQUENCE
    s = base_sequence + last_offset_delta
    return s - 2**31 if s > 2**31 - 1 else s


def write_snapshot(path: Path, entries: list[ProducerStateEntry], sync: bool = False) -> None:
    """Write a snapshot file with `entries` in the given order (one write; no .tmp, like Kafka)."""
    body = bytearray(4 + _ENTRY.size * len(entries))
    struct.pack_into(">i", body, 0, len(entries))
    pos = 4
    for e in entries:
        if e.batches:
            last_seq, last_off, delta, _ts = e.batches[-_FIELDS:]
        else:
            last_seq, last_off, delta = NO_SEQUENCE, -1, 0
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        _ENTRY.pack_into(body, pos, e.producer_id, e.producer_epoch, last_seq, last_off, delta,
                         e.last_timestamp, e.coordinator_epoch, txn)
        pos += _ENTRY.size
    data = struct.pack(">hI", SNAPSHOT_VERSION, _crc32c(body)) + bytes(body)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Entries of a snapshot file in file order; CorruptSnapshotError if it does not check out."""
    data = Path(path).read_bytes()
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"Snapshot {path} is too short ({len(data)} bytes)")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = _crc32c(data[6:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"Snapshot {path} has {count} entries but {len(data)} bytes")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn = _ENTRY.unpack_from(data, 10 + i * _ENTRY.size)
        e = ProducerStateEntry(pid, epoch, coord, ts, None if txn < 0 else txn)
        if last_off >= 0:
            e.add_batch(last_seq, last_off, delta, ts)
        out.append(e)
    return out


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: producer, first offset, marker offset, aborted or not."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """Map of producer id -> ProducerStateEntry plus the snapshot files of one partition dir.

    `last_map_offset` is the offset the map is up to date with (exclusive); a snapshot is written at
    that offset only when it is newer than the last one written (so a new log has no 0.snapshot).
    """

    def __init__(self, dir_: Path, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.dir = Path(dir_)
        # producer.id.expiration.ms (broker config, default 1 day)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # insertion-ordered; Kafka's HashMap order is derived at snapshot time
        self.producers: dict[int, ProducerStateEntry] = {}
        self._max_size_ever = 0
        self.last_map_offset = 0
        self.last_snap_offset = 0
        self.ongoing_txns: dict[int, int] = {}  # first offset -> producer id

    # -- map ------------------------------------------------------------------------------
    def put(self, entry: ProducerStateEntry) -> None:
        if entry.producer_id not in self.producers:
            self.producers[entry.producer_id] = entry
            self._max_size_ever = max(self._max_size_ever, len(self.producers))
        else:
            self.producers[entry.producer_id] = entry

    def remove(self, producer_id: int) -> None:
        self.producers.pop(producer_id, None)

    def clear(self) -> None:
        # A java HashMap keeps its table size after clear(); so do we (it decides the snapshot order).
        self.producers.clear()
        self.ongoing_txns.clear()

    def entries_in_kafka_order(self) -> list[ProducerStateEntry]:
        """Entries in java.util.HashMap<Long, ...> iteration order (what Kafka's snapshot contains)."""
        return hashmap_order(list(self.producers.values()), lambda e: long_hash(e.producer_id),
                             max_size_ever=self._max_size_ever)

    def check_append(self, producer_id: int, producer_epoch: int, base_sequence: int, last_offset_delta: int,
                     is_transactional: bool, is_control: bool, *, from_client: bool = True,
                     marker_coordinator_epoch: int | None = None, offset: int = -1) -> BatchMetadata | None:
        """Kafka's produce-path producer checks for one batch, from its header only.

        Returns the remembered batch when this one is a duplicate (a client retry of one of the
        producer's last 5 batches: same epoch and sequence range), meaning "answer with its offsets and
        append nothing". Otherwise raises OutOfOrderSequenceError, InvalidProducerEpochError,
        InvalidTxnStateError or TransactionCoordinatorFencedError, or returns None (go ahead).
        Broker-built batches (`from_client=False`: coordinator records, markers) skip the duplicate and
        sequence checks, as Kafka's AppendOrigin.COORDINATOR does.
        """
        entry = self.producers.get(producer_id)
        if entry is None:
            # An unknown producer (new, or its state expired / was deleted with the log start):
            # Kafka accepts any sequence since KIP-360 (no UNKNOWN_PRODUCER_ID from the produce path).
            return None
        last_seq = last_sequence(base_sequence, last_offset_delta)
        if from_client and not is_control:
            dup = entry.find_duplicate(producer_epoch, base_sequence, last_seq)
            if dup is not None:
                return dup
        current_epoch = entry.producer_epoch
        if producer_epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} at offset {offset} in {self.dir.name} is {producer_epoch}, "
                f"which is smaller than the last seen epoch {current_epoch}")
        if is_control:
            if marker_coordinator_epoch is not None and entry.coordinator_epoch > marker_coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producerId {producer_id} at offset {offset} in "
                    f"{self.dir.name}: {marker_coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")
            return None
        if from_client:
            if producer_epoch != current_epoch:
                # A new epoch must start at sequence 0 (unless the entry never had an epoch).
                if base_sequence != 0 and current_epoch != -1:
                    raise OutOfOrderSequenceError(
                        f"Invalid sequence number for new epoch of producer {producer_id} at offset {offset} in "
                        f"partition {self.dir.name}: {producer_epoch} (request epoch), {base_sequence} "
                        f"(seq. number), {current_epoch} (current producer epoch)")
            else:
                current_last = entry.last_seq
                if current_epoch != -1 and not in_sequence(current_last, base_sequence):
                    raise OutOfOrderSequenceError(
                        f"Out of order sequence number for producer {producer_id} at offset {offset} in "
                        f"partition {self.dir.name}: {base_sequence} (incoming seq. number), {current_last} "
                        "(current end sequence number)")
        if entry.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {producer_id} at offset {offset} in partition "
                f"{self.dir.name}")
        return None

    def update_from_batch(self, producer_id: int, producer_epoch: int, base_sequence: int,
                          first_offset: int, last_offset: int, max_timestamp: int,
                          is_transactional: bool, is_control: bool,
                          marker: tuple[bool, int] | None = None) -> CompletedTxn | None:
        """Record a written batch of an idempotent/transactional producer (validated by `check_append`
        on the produce path; recovery replays the log without checks, as Kafka does).

        For a transaction marker pass `marker=(is_abort, coordinator_epoch)`; the transaction it ends
        is returned so the caller can compute the LSO and update the `.txnindex`.
        """
        if producer_id < 0:
            return None
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id)
            self.put(entry)
        if producer_epoch != entry.producer_epoch:
            entry.clear_batches()
            entry.producer_epoch = producer_epoch
        entry.last_timestamp = max_timestamp
        if is_control:
            completed = None
            if marker is not None:
                is_abort, coordinator_epoch = marker
                entry.coordinator_epoch = coordinator_epoch
                if entry.current_txn_first_offset is not None:
                    completed = CompletedTxn(producer_id, entry.current_txn_first_offset, first_offset, is_abort)
            entry.current_txn_first_offset = None
            return completed
        delta = last_offset - first_offset
        last_seq = last_sequence(base_sequence, delta)
        entry.add_batch(last_seq, last_offset, delta, max_timestamp)
        if is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self.ongoing_txns[first_offset] = producer_id
        return None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """LSO once `completed` ends: the first offset of the oldest other open transaction, else its
        last offset + 1 (what Kafka stores in the `.txnindex` entry)."""
        others = [off for off, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        self.ongoing_txns.pop(completed.first_offset, None)

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    # -- snapshots ------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        """Offsets of the `.snapshot` files on disk, ascending."""
        out = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(files.SNAPSHOT_SUFFIX):
                try:
                    out.append(files.offset_from_file_name(name))
                except ValueError:
                    continue
        return sorted(out)

    def latest_snapshot_offset(self) -> int | None:
        offs = self.snapshot_offsets()
        return offs[-1] if offs else None

    def oldest_snapshot_offset(self) -> int | None:
        offs = self.snapshot_offsets()
        return offs[0] if offs else None

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write `<last_map_offset>.snapshot` if it is newer than the last one written."""
        if self.last_map_offset <= self.last_snap_offset:
            return None
        path = files.snapshot_file(self.dir, self.last_map_offset)
        write_snapshot(path, self.entries_in_kafka_order(), sync)
        self.last_snap_offset = self.last_map_offset
        return path

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Kafka drops idle producers (no open transaction) after producer.id.expiration.ms."""
        return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget idle producers (Kafka runs this every producer.id.expiration.check.interval.ms, 10 min)."""
        for pid in [pid for pid, e in self.producers.items() if self.is_expired(e, now_ms)]:
            del self.producers[pid]

    def load_from_snapshot(self, log_start_offset: int, up_to: int, now_ms: int | None = None) -> None:
        """Load the newest valid snapshot at or below `up_to` (corrupt ones are deleted, expired
        producers skipped, like Kafka)."""
        self.clear()
        for off in reversed(self.snapshot_offsets()):
            if off > up_to:
                continue
            path = files.snapshot_file(self.dir, off)
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as e:
                log.warning("Failed to load producer snapshot %s (%s); deleting it", path, e)
                path.unlink(missing_ok=True)
                continue
            for e in entries:
                if now_ms is not None and self.is_expired(e, now_ms):
                    continue
                self.put(e)
                if e.current_txn_first_offset is not None:
                    self.ongoing_txns[e.current_txn_first_offset] = e.producer_id
            self.last_map_offset = off
            self.last_snap_offset = off
            return
        self.last_map_offset = log_start_offset
        self.last_snap_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None) -> None:
        """Kafka's truncateAndReload: delete snapshots above the end or at/below the log start, then
        reload the newest remaining one unless the map is already at `log_end_offset`."""
        for off in self.snapshot_offsets():
            if off > log_end_offset or off <= log_start_offset:
                files.snapshot_file(self.dir, off).unlink(missing_ok=True)
        if log_end_offset != self.last_map_offset:
            self.load_from_snapshot(log_start_offset, log_end_offset, now_ms)
        else:
            # onLogStartOffsetIncremented
            self.last_map_offset = max(self.last_map_offset, log_start_offset)
            latest = self.latest_snapshot_offset()
            self.last_snap_offset = latest if latest is not None else log_start_offset

    def delete_snapshots_before(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off < offset:
                files.snapshot_file(self.dir, off).unlink(missing_ok=True)

    def delete_snapshots_from(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off >= offset:
                files.snapshot_file(self.dir, off).unlink(missing_ok=True)

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        """Keep snapshots at segment base offsets, plus the newest other one above the last segment.

        That is Kafka's LogLoader rule (a snapshot at the LEO written on clean close survives).
        """
        bases = set(segment_base_offsets)
        last_base = max(segment_base_offsets) if segment_base_offsets else -1
        strays = [o for o in self.snapshot_offsets() if o not in bases]
        newest = max(strays) if strays else None
        for off in strays:
            if off == newest and off > last_base:
                continue
            files.snapshot_file(self.dir, off).unlink(missing_ok=True)

    def flush_snapshot(self, offset: int) -> None:
        """fsync a snapshot written without sync (Kafka does this from the scheduler after a roll)."""
        path = files.snapshot_file(self.dir, offset)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
