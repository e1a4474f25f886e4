"""KRaft snapshot files: `bootstrap.checkpoint` and `__cluster_metadata-0/<offset>-<epoch>.checkpoint`.

Both have the same layout (Kafka's RecordsSnapshotWriter): a control batch holding the
SnapshotHeader record (plus, for kraft.version >= 1, KRaftVersion and Voters records), the data
batches of metadata records, and a control batch holding the SnapshotFooter. Offsets run from 0
without gaps; every batch carries the snapshot's epoch as partitionLeaderEpoch (0 for the
bootstrap file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..wire.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    control_record_key,
    iter_batches,
    parse_control_record_key,
)
from .records import (
    MetadataRecord,
    decode_control_value,
    decode_metadata_record,
    encode_control_value,
    encode_metadata_record,
    new_record,
)

BOOTSTRAP_FILE = "bootstrap.checkpoint"
SNAPSHOT_SUFFIX = ".checkpoint"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")

#: Kafka's KafkaRaftClient caps a batch at 8 MiB; snapshots are written in batches below that.
MAX_BATCH_RECORDS = 2000


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """A KRaft snapshot's id: it holds everything below `end_offset`, written in leader `epoch`."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    """The id of a `%020d-%010d.checkpoint` file name (None for anything else, e.g. `.part`)."""
    m = _SNAPSHOT_NAME.match(name)
    return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


def list_snapshots(metadata_dir: Path) -> list[SnapshotId]:
    """The complete snapshots of a metadata log dir, oldest first."""
    if not metadata_dir.is_dir():
        return []
    found = [parse_snapshot_name(p.name) for p in metadata_dir.iterdir()]
    return sorted((s for s in found if s is not None), key=lambda s: (s.end_offset, s.epoch))


def _control_batch(offset: int, epoch: int, timestamp: int, items: Sequence[tuple[int, Any]]) -> bytes:
    records = [
        SimpleRecord(key=control_record_key(ctype), value=encode_control_value(ctype, msg), timestamp=timestamp)
        for ctype, msg in items
    ]
    return build_batch(records, base_offset=offset, partition_leader_epoch=epoch, is_control=True)


def build_snapshot(records: Iterable[tuple[str, Any]], *, epoch: int, timestamp: int,
                   last_contained_log_timestamp: int = 0,
                   header_extra: Sequence[tuple[int, Any]] = (), data_timestamp: int | None = None,
                   footer_timestamp: int | None = None) -> bytes:
    """The bytes of a snapshot file holding `records` ((name, message) pairs) in Kafka's layout.

    `timestamp` is the header batch's; data batches get `data_timestamp` and the footer
    `footer_timestamp` (each defaulting to the one before): Kafka takes the clock again for
    each batch it writes.
    """
    header = new_record("SnapshotHeaderRecord", version=0, last_contained_log_timestamp=last_contained_log_timestamp)
    out = bytearray(_control_batch(0, epoch, timestamp,
                                   [(int(ControlRecordType.SNAPSHOT_HEADER), header), *header_extra]))
    offset = 1 + len(header_extra)
    timestamp = timestamp if data_timestamp is None else data_timestamp
    pending: list[SimpleRecord] = []

    def flush() -> None:
        nonlocal offset
        if pending:
            out.extend(build_batch(pending, base_offset=offset, partition_leader_epoch=epoch))
            offset += len(pending)
            pending.clear()

    for name, message in records:
        pending.append(SimpleRecord(value=encode_metadata_record(name, message), key=None, timestamp=timestamp))
        if len(pending) >= MAX_BATCH_RECORDS:
            flush()
    flush()
    footer = new_record("SnapshotFooterRecord", version=0)
    timestamp = timestamp if footer_timestamp is None else footer_timestamp
    out.extend(_control_batch(offset, epoch, timestamp, [(int(ControlRecordType.SNAPSHOT_FOOTER), footer)]))
    return bytes(out)


def write_atomically(path: Path, data: bytes) -> None:
    """Write via a temporary file, fsync, rename and fsync the dir (a crash leaves old or new)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: Path) -> Iterator[MetadataRecord]:
    """The metadata records of a snapshot (or bootstrap) file; control records are checked, not returned.

    Raises ValueError when the file does not start with a SnapshotHeader or lacks the footer
    (an incomplete file must not be mistaken for the whole metadata).
    """
    data = Path(path).read_bytes()
    saw_header = saw_footer = False
    out: list[MetadataRecord] = []
    for batch in iter_batches(data):
        h = batch.header()
        for rec in batch.records():
            if h.attributes & 0x20:
                _v, ctype = parse_control_record_key(rec.key)
                if int(ctype) == int(ControlRecordType.SNAPSHOT_HEADER):
                    saw_header = True
                elif int(ctype) == int(ControlRecordType.SNAPSHOT_FOOTER):
                    saw_footer = True
                continue
            if rec.value is None:
                continue
            out.append(decode_metadata_record(rec.value))
    if not saw_header or not saw_footer:
        raise ValueError(f"{path} is not a complete KRaft snapshot (header {saw_header}, footer {saw_footer})")
    return iter(out)


def read_snapshot_kraft_version(path: Path) -> int | None:
    """The kraft.version of a snapshot's KRaftVersionRecord, None if it has none (kraft.version 0)."""
    data = Path(path).read_bytes()
    for batch in iter_batches(data):
        if not batch.header().attributes & 0x20:
            break
        for rec in batch.records():
            _v, ctype = parse_control_record_key(rec.key)
            if int(ctype) == int(ControlRecordType.KRAFT_VERSION) and rec.value is not None:
                return int(decode_control_value(int(ctype), rec.value).k_raft_version)
    return None


def read_snapshot_voters(path: Path) -> list[int] | None:
    """The voter ids of a snapshot's VotersRecord (kraft.version >= 1), None if it has none."""
    data = Path(path).read_bytes()
    for batch in iter_batches(data):
        if not batch.header().attributes & 0x20:
            break
        for rec in batch.records():
            _v, ctype = parse_control_record_key(rec.key)
            if int(ctype) == int(ControlRecordType.KRAFT_VOTERS) and rec.value is not None:
                msg = decode_control_value(int(ctype), rec.value)
                return [v.voter_id for v in msg.voters]
    return None
