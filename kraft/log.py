"""`__cluster_metadata-0`: the KRaft metadata log of a single voter, read and appended as Kafka does.

The log is an ordinary partition log (segments, indexes, leader-epoch-checkpoint,
partition.metadata with the reserved topic id AAAAAAAAAAAAAAAAAAAAAQ) that the LogManager does
not own. Batches are built complete here (offsets, leader epoch, timestamps) and stored exactly
as built, like Kafka's Raft leader appends: the log store's coordinator append path leaves a
batch unchanged when its base offset is the log end offset and its max timestamp is right,
which :meth:`MetadataLog.append` checks after every append.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..logstore.config import LogConfig
from ..logstore.partition_log import PartitionLog
from ..wire.primitives import Uuid
from ..wire.records import (
    ControlRecordType,
    RecordBatch,
    SimpleRecord,
    build_batch,
    control_record_key,
    iter_batches,
    parse_control_record_key,
)
from .records import (
    FRAME_VERSION,
    MetadataRecord,
    decode_control_value,
    decode_metadata_record,
    encode_control_value,
    encode_metadata_record,
    new_record,
)
from .snapshot import SnapshotId, list_snapshots, read_snapshot, read_snapshot_kraft_version

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = "__cluster_metadata-0"
#: Kafka's Uuid.METADATA_TOPIC_ID
METADATA_TOPIC_ID = Uuid(bytes(15) + b"\x01")

_LOG_OVERHEAD = 12  # baseOffset + batchLength
_NOOP_API_KEY = 20

#: KafkaRaftClient's largest batch (MAX_BATCH_SIZE_BYTES): the metadata log's max.message.bytes.
MAX_BATCH_BYTES = 8 * 1024 * 1024


def metadata_log_config(segment_bytes: int = 1024 * 1024 * 1024, segment_ms: int = 7 * 24 * 3600 * 1000) -> LogConfig:
    """The metadata log's config as KafkaMetadataLog sets it: never deleted by retention (snapshots do that)."""
    return LogConfig(segment_bytes=segment_bytes, segment_ms=segment_ms, retention_ms=-1, retention_bytes=-1,
                     max_message_bytes=MAX_BATCH_BYTES)


class MetadataLogError(RuntimeError):
    """The metadata log cannot be used (gap before its first offset, a batch not stored as built, ...)."""


class MetadataLog:
    """The open `__cluster_metadata-0` log: replay (latest snapshot, then the batches after it) and appends."""

    def __init__(self, partition_log: PartitionLog) -> None:
        self.plog = partition_log

    @classmethod
    def open(cls, metadata_log_dir: Path, config: LogConfig | None = None) -> MetadataLog:
        """Open (creating if needed) `<metadata.log.dir>/__cluster_metadata-0`.

        Kafka opens the metadata log with recovery from its first segment (it keeps no recovery
        point checkpoint for it); so does this, which also truncates a torn tail.
        """
        path = Path(metadata_log_dir) / METADATA_PARTITION_DIR
        plog = PartitionLog.open(path, config or metadata_log_config(), METADATA_TOPIC, 0,
                                 recovery_point=0, had_clean_shutdown=False, topic_id=METADATA_TOPIC_ID.bytes)
        return cls(plog)

    @property
    def dir(self) -> Path:
        return self.plog.dir

    @property
    def log_end_offset(self) -> int:
        return self.plog.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    def latest_snapshot(self) -> SnapshotId | None:
        """The newest complete snapshot that the log can continue from."""
        snaps = [s for s in list_snapshots(self.dir) if s.end_offset <= self.log_end_offset]
        return snaps[-1] if snaps else None

    def last_epoch(self) -> int:
        """Largest leader epoch in the log (its checkpoint) or the snapshots, 0 when none."""
        epochs = [self.plog.leader_epoch_cache.latest_epoch or 0]
        epochs += [s.epoch for s in list_snapshots(self.dir)]
        return max(epochs)

    # ------------------------------------------------------------------ reading

    def replay_records(self) -> Iterator[MetadataRecord]:
        """Every committed metadata record: the newest snapshot's, then the log's after it."""
        snap = self.latest_snapshot()
        start = 0
        if snap is not None:
            log.info("Loading metadata snapshot %s", snap.file_name)
            yield from read_snapshot(self.dir / snap.file_name)
            start = snap.end_offset
        if start < self.log_start_offset:
            raise MetadataLogError(
                f"the metadata log in {self.dir} starts at offset {self.log_start_offset} but no snapshot covers "
                f"the offsets before it (newest snapshot ends at {start})")
        for batch in self._batches_from(start):
            h = batch.header()
            if h.attributes & 0x20:
                continue
            for rec in batch.records():
                if rec.offset < start or rec.value is None or _is_noop(rec.value):
                    continue
                yield decode_metadata_record(rec.value)

    def _batches_from(self, offset: int) -> Iterator[Any]:
        segments = list(self.plog.segments)
        for i, seg in enumerate(segments):
            # a segment's batches all lie below the next segment's base offset
            if i + 1 < len(segments) and segments[i + 1].base_offset <= offset:
                continue
            for batch in _file_batches(seg.log_path, seg.size):
                if batch.header().base_offset + batch.header().last_offset_delta >= offset:
                    yield batch

    def kraft_version(self) -> int:
        """The KRaft protocol version (kraft.version) of the newest snapshot and the log after it:
        0 for a static voter set (what Odradek writes), 1 after KIP-853 formatting/upgrades."""
        version = 0
        snap = self.latest_snapshot()
        start = 0
        if snap is not None:
            version = read_snapshot_kraft_version(self.dir / snap.file_name) or 0
            start = snap.end_offset
        for batch in self._batches_from(start):
            if not batch.header().attributes & 0x20:
                continue
            for rec in batch.records():
                _v, ctype = parse_control_record_key(rec.key)
                if int(ctype) == int(ControlRecordType.KRAFT_VERSION) and rec.value is not None:
                    version = int(decode_control_value(int(ctype), rec.value).k_raft_version)
        return version

    def leader_changes(self) -> Iterator[tuple[int, int]]:
        """(offset, leader epoch) of every LEADER_CHANGE control record (for tests and tools)."""
        for batch in self._batches_from(0):
            if not batch.header().attributes & 0x20:
                continue
            for rec in batch.records():
                _v, ctype = parse_control_record_key(rec.key)
                if int(ctype) == int(ControlRecordType.LEADER_CHANGE):
                    yield rec.offset, batch.header().partition_leader_epoch

    # ------------------------------------------------------------------ appending

    def become_leader(self, epoch: int, node_id: int, now_ms: int) -> int:
        """Start leader epoch `epoch`: the LEADER_CHANGE control batch Kafka writes first in an epoch."""
        self.plog.become_leader(epoch)
        cls = type(new_record("LeaderChangeMessage"))
        message = cls(version=0, leader_id=node_id, voters=[cls.Voter(voter_id=node_id)],
                      granting_voters=[cls.Voter(voter_id=node_id)])
        record = SimpleRecord(key=control_record_key(ControlRecordType.LEADER_CHANGE),
                              value=encode_control_value(int(ControlRecordType.LEADER_CHANGE), message),
                              timestamp=now_ms)
        return self._append(build_batch([record], base_offset=self.log_end_offset, partition_leader_epoch=epoch,
                                        is_control=True), epoch)

    def upgrade_kraft_version(self, version: int, voters: Any, epoch: int, now_ms: int) -> int:
        """KIP-853's upgrade of a static voter set: one control batch with the KRaftVersionRecord
        and the VotersRecord (`voters`, with directory ids and endpoints), as Kafka's Raft leader
        writes it; returns its base offset."""
        message = new_record("KRaftVersionRecord", version=0, k_raft_version=version)
        records = [SimpleRecord(key=control_record_key(ctype), value=encode_control_value(int(ctype), msg),
                                timestamp=now_ms)
                   for ctype, msg in ((ControlRecordType.KRAFT_VERSION, message),
                                      (ControlRecordType.KRAFT_VOTERS, voters))]
        return self._append(build_batch(records, base_offset=self.log_end_offset, partition_leader_epoch=epoch,
                                        is_control=True), epoch)

    def append(self, records: Sequence[tuple[str, Any]], epoch: int, now_ms: int,
               versions: Mapping[str, int] | None = None) -> int:
        """Append metadata records as one batch (one atomic change) and fsync; returns its base offset.

        `versions` picks record versions (default: what Kafka 4.1 writes)."""
        if not records:
            return self.log_end_offset
        chosen = versions or {}
        values = [encode_metadata_record(name, msg, chosen.get(name)) for name, msg in records]
        return self.append_batch(metadata_batch(values, now_ms), epoch)

    def append_batch(self, batch: bytes, epoch: int, *, flush: bool = True) -> int:
        """Append a batch from :func:`metadata_batch` (one atomic change) at the log end offset in
        leader epoch `epoch`, and fsync (unless `flush` is False: then the caller calls `flush`
        before the change counts); returns its base offset."""
        buf = bytearray(batch)
        built = RecordBatch(buf)
        built.set_base_offset(self.log_end_offset)
        built.set_partition_leader_epoch(epoch)
        return self._append(bytes(buf), epoch, flush=flush)

    def _append(self, batch: bytes, epoch: int, *, flush: bool = True) -> int:
        base = self.log_end_offset
        buf = bytearray(batch)
        info = self.plog.append_as_coordinator(buf, epoch)
        if info.first_offset != base or bytes(buf) != batch:
            raise MetadataLogError(f"metadata batch at {base} was not stored as built (got offset {info.first_offset})")
        if flush:
            self.flush()
        return base

    def flush(self) -> None:
        """fsync what is appended: a metadata change counts only once it is on disk (Raft's flush
        before commit). Blocking I/O; safe in a worker thread while the loop appends."""
        self.plog.flush()

    def close(self) -> None:
        self.plog.close()


def metadata_batch(values: Sequence[bytes], now_ms: int) -> bytes:
    """The batch that stores these encoded metadata record values, as Kafka's Raft leader builds
    it, but at base offset 0 and without a leader epoch: :meth:`MetadataLog.append_batch` sets both
    (the CRC covers neither), so a big change can be built ahead of its append."""
    return build_batch([SimpleRecord(value=value, key=None, timestamp=now_ms) for value in values])


def _file_batches(path: Path, size: int | None = None) -> Iterator[Any]:
    """The batches of a segment file, read one at a time (a metadata segment may be 1 GiB);
    stops at a batch that runs past `size` (default: the file size) or is malformed."""
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size if size is None else size
        pos = 0
        while pos + _LOG_OVERHEAD <= end:
            head = os.pread(f.fileno(), _LOG_OVERHEAD, pos)
            length = int.from_bytes(head[8:12], "big", signed=True)
            total = _LOG_OVERHEAD + length
            if length <= 0 or pos + total > end:
                return
            data = head + os.pread(f.fileno(), length, pos + _LOG_OVERHEAD)
            if len(data) != total:
                return
            yield from iter_batches(data)
            pos += total


def _is_noop(value: Any) -> bool:
    # NoOpRecord (api key 20, one-byte varints): Kafka writes one every 500 ms, nothing to apply
    return len(value) >= 3 and value[0] == FRAME_VERSION and value[1] == _NOOP_API_KEY


def metadata_log_dir_of(log_dirs: Sequence[Path], metadata_log_dir: Path | None) -> Path:
    """`metadata.log.dir`, defaulting to the first log dir (KafkaConfig.metadataLogDir)."""
    return Path(metadata_log_dir) if metadata_log_dir else Path(log_dirs[0])


__all__ = [
    "METADATA_PARTITION_DIR",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "MetadataLog",
    "MetadataLogError",
    "metadata_log_config",
    "metadata_log_dir_of",
]
