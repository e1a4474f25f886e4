"""Read-only validation of a metadata log dir, before start-up changes anything on disk.

A broker must never damage data it refuses to serve. Start-up therefore reads the whole
`__cluster_metadata-0` log it is about to replay (the newest snapshot and every batch after it)
without opening, recovering or locking anything, and refuses with one clear line when it meets
something it does not know: a record type or version, a control record, a feature level. Only a
real torn tail is accepted, as Kafka's recovery accepts it: the last batch of the last segment
incomplete (a write cut off by a crash) or failing its CRC with nothing after it. Anything
corrupt before that is a refusal too, because recovery would cut everything after it away.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..wire import schema
from ..wire.errors import ProtocolError
from ..wire.primitives import read_uvarint
from ..wire.records import ControlRecordType, RecordBatch, parse_control_record_key
from .errors import UnservableMetadataError
from .image import MetadataImage
from .records import FRAME_VERSION, MetadataRecord, decode_control_value, metadata_record_names
from .snapshot import SnapshotId, list_snapshots

_LOG_OVERHEAD = 12  # baseOffset + batchLength
_BATCH_OVERHEAD = 61
_NOOP_API_KEY = 20
_CONTROL_TYPES = {int(t) for t in ControlRecordType}


class MetadataRefusedError(UnservableMetadataError):
    """The metadata log holds something Odradek does not know or cannot read safely; nothing was changed."""


@dataclass
class TornTail:
    """Where a crash cut the last batch of the log: recovery truncates the segment there."""

    segment: Path
    position: int
    reason: str


@dataclass
class ValidatedMetadata:
    """What a read-only pass over a metadata log dir found (see :func:`validate_metadata_dir`)."""

    image: MetadataImage
    #: True when the dir holds no metadata at all (no `__cluster_metadata-0`, or no records in it).
    empty: bool
    snapshot: SnapshotId | None = None
    log_end_offset: int = 0
    torn_tail: TornTail | None = None
    #: feature name -> (level, "file offset N") where the finalized level was read.
    feature_sources: dict[str, tuple[int, str]] = field(default_factory=dict)


def _refuse(where: str, what: str) -> MetadataRefusedError:
    return MetadataRefusedError(f"{where}: {what}. Nothing in the log dirs was changed.")


def decode_record_strictly(value: bytes | memoryview, where: str) -> MetadataRecord:
    """Decode a metadata record value, refusing a type or version this build does not know."""
    buf = bytes(value)
    try:
        frame, pos = read_uvarint(buf, 0)
        api_key, pos = read_uvarint(buf, pos)
        version, pos = read_uvarint(buf, pos)
    except (ProtocolError, IndexError, ValueError) as e:
        raise _refuse(where, f"a metadata record whose framing cannot be read ({e})") from None
    if frame != FRAME_VERSION:
        raise _refuse(where, f"a metadata record with frame version {frame}; Odradek reads frame version "
                             f"{FRAME_VERSION}, the one Kafka writes")
    names = metadata_record_names()
    name = names.get(api_key)
    if name is None:
        raise _refuse(where, f"a metadata record of type {api_key}, which Odradek does not know (it knows types "
                             f"0-{max(names)} of Kafka's metadata records; a newer Kafka wrote this log)")
    versions = schema.message_def(name).versions()
    if version not in versions:
        raise _refuse(where, f"{name} version {version}, which Odradek does not know (it reads {name} versions "
                             f"{min(versions)}-{max(versions)}; a newer Kafka wrote this log)")
    try:
        message, end = schema.codec(name, version).decode(buf, pos)
    except (ProtocolError, ValueError) as e:
        raise _refuse(where, f"a {name} v{version} record that cannot be decoded ({e})") from None
    if end != len(buf):
        raise _refuse(where, f"a {name} v{version} record followed by {len(buf) - end} unexpected bytes")
    return MetadataRecord(name, version, message)


def _check_control_record(key: bytes | memoryview | None, value: Any, where: str) -> int:
    try:
        _v, ctype = parse_control_record_key(key)
    except (ProtocolError, ValueError, TypeError) as e:
        raise _refuse(where, f"a control record whose key cannot be read ({e})") from None
    ctype = int(ctype)
    if ctype not in _CONTROL_TYPES:
        raise _refuse(where, f"a control record of type {ctype}, which Odradek does not know (it knows types "
                             f"{min(_CONTROL_TYPES)}-{max(_CONTROL_TYPES)})")
    if value is not None:
        try:
            decode_control_value(ctype, value)
        except (ProtocolError, ValueError) as e:
            raise _refuse(where, f"a {ControlRecordType(ctype).name} control record that cannot be decoded "
                                 f"({e})") from None
    return ctype


def _file_batches(path: Path) -> Iterator[tuple[int, RecordBatch | None, int, str]]:
    """(position, batch or None, end of file, why not) for each batch of a segment file, read one at
    a time; a batch that cannot be used comes back as None with the reason, and ends the scan."""
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < end:
            if end - pos < _LOG_OVERHEAD:
                yield pos, None, end, f"{end - pos} bytes at the end are too few for a batch header"
                return
            head = os.pread(f.fileno(), _LOG_OVERHEAD, pos)
            length = int.from_bytes(head[8:12], "big", signed=True)
            total = _LOG_OVERHEAD + length
            if length < _BATCH_OVERHEAD - _LOG_OVERHEAD:
                yield pos, None, end, f"a batch length of {length} bytes is below the minimum"
                return
            if pos + total > end:
                yield pos, None, end, f"the batch needs {total} bytes but the file ends after {end - pos}"
                return
            data = os.pread(f.fileno(), total, pos)
            batch = RecordBatch(data, 0)
            if batch.magic != 2 or not batch.is_valid():
                yield pos, None, end, "the batch fails its CRC check" if batch.magic == 2 else (
                    f"the batch has magic {batch.magic}")
                return
            yield pos, batch, end, ""
            pos += total


def _zeros_only(path: Path, start: int) -> bool:
    with open(path, "rb") as f:
        f.seek(start)
        while chunk := f.read(1 << 20):
            if chunk.strip(b"\x00"):
                return False
    return True


def _batch_is_final(path: Path, position: int, end: int) -> bool:
    """True when the unreadable batch at `position` is the last thing in the file: its declared
    size reaches the end, or only zero bytes follow where it would end."""
    with open(path, "rb") as f:
        head = os.pread(f.fileno(), _LOG_OVERHEAD, position)
    if len(head) < _LOG_OVERHEAD:
        return True
    total = _LOG_OVERHEAD + max(int.from_bytes(head[8:12], "big", signed=True), 0)
    return position + total >= end or _zeros_only(path, position + total)


def _read_snapshot(path: Path, on_record: Callable[[MetadataRecord, str], None]) -> None:
    """Validate a snapshot file completely (header first, footer last, every CRC, every record) and
    hand each metadata record to `on_record`."""
    size = path.stat().st_size
    saw_header = saw_footer = False
    last_end = 0
    for pos, batch, end, why in _file_batches(path):
        if batch is None:
            raise _refuse(f"{path} position {pos}", f"the snapshot is cut short or corrupt ({why}); Kafka writes "
                                                    "snapshots whole, so this file was damaged after it was written")
        if saw_footer:
            raise _refuse(f"{path} position {pos}", "the snapshot has data after its footer")
        is_control = bool(batch.header().attributes & 0x20)
        for rec in batch.records():
            where = f"{path} offset {rec.offset}"
            if is_control:
                ctype = _check_control_record(rec.key, rec.value, where)
                if ctype == int(ControlRecordType.SNAPSHOT_HEADER):
                    saw_header = True
                elif ctype == int(ControlRecordType.SNAPSHOT_FOOTER):
                    saw_footer = True
                continue
            if not saw_header:
                raise _refuse(where, "the snapshot does not start with a SnapshotHeader control record")
            if rec.value is not None:
                on_record(decode_record_strictly(rec.value, where), where)
        last_end = pos + batch.size_in_bytes
        del end
    if not saw_header or not saw_footer or last_end != size:
        raise _refuse(str(path), f"the snapshot is cut short (header {'found' if saw_header else 'missing'}, "
                                 f"footer {'found' if saw_footer else 'missing'}, {size} bytes); Kafka writes "
                                 "snapshots whole, so this file was damaged after it was written")


def _segments(md_dir: Path) -> list[Path]:
    logs = [p for p in md_dir.glob("*.log") if p.name[:20].isdigit()]
    return sorted(logs, key=lambda p: int(p.name[:20]))


def validate_metadata_dir(metadata_log_dir: Path,
                          supported_features: Mapping[str, tuple[int, int]]) -> ValidatedMetadata:
    """Read `<metadata_log_dir>/__cluster_metadata-0` completely without changing it; refuse
    (MetadataRefusedError) anything start-up could not replay exactly, and return the image.

    `supported_features` maps each feature this build supports to its (min, max) level; a
    finalized level outside it, or a feature with a level above 0 that is not in it, is refused.
    """
    md_dir = Path(metadata_log_dir) / "__cluster_metadata-0"
    image = MetadataImage()
    if not md_dir.is_dir():
        return ValidatedMetadata(image, empty=True)
    segments = _segments(md_dir)
    feature_sources: dict[str, tuple[int, str]] = {}
    # pass 1: framing and CRCs of every batch, and where the log really ends
    torn: TornTail | None = None
    log_end = int(segments[-1].name[:20]) if segments else 0
    for i, seg in enumerate(segments):
        for pos, batch, end, why in _file_batches(seg):
            if batch is None:
                last = i == len(segments) - 1
                if last and _batch_is_final(seg, pos, end):
                    torn = TornTail(seg, pos, why)
                    break
                later = "later segments follow" if not last else "readable data follows it"
                raise _refuse(f"{seg} position {pos}", f"the metadata log is corrupt in the middle ({why}, and "
                                                       f"{later}); recovery would cut everything after it away")
            log_end = batch.base_offset + batch.last_offset_delta + 1
    snaps = [s for s in list_snapshots(md_dir) if s.end_offset <= log_end or not segments]
    snapshot = snaps[-1] if snaps else None

    def on_record(rec: MetadataRecord, where: str) -> None:
        if rec.name == "FeatureLevelRecord":
            feature_sources[rec.message.name] = (int(rec.message.feature_level), where)
        image.replay(rec)

    start = 0
    if snapshot is not None:
        _read_snapshot(md_dir / snapshot.file_name, on_record)
        start = snapshot.end_offset
    first = int(segments[0].name[:20]) if segments else start
    if start < first:
        raise _refuse(str(md_dir), f"the metadata log starts at offset {first} but no snapshot covers the offsets "
                                   f"before it (newest usable snapshot ends at {start})")
    # pass 2: decode every record that start-up replays
    for seg in segments:
        for pos, batch, _end, _why in _file_batches(seg):
            if batch is None or (torn is not None and seg == torn.segment and pos >= torn.position):
                break
            if batch.base_offset + batch.last_offset_delta < start:
                continue
            is_control = bool(batch.header().attributes & 0x20)
            for rec in batch.records():
                where = f"{seg} offset {rec.offset}"
                if is_control:
                    _check_control_record(rec.key, rec.value, where)
                    continue
                if rec.offset < start or rec.value is None or _is_noop(rec.value):
                    continue
                on_record(decode_record_strictly(rec.value, where), where)
    image.finish()
    _check_features(image, feature_sources, supported_features)
    empty = "metadata.version" not in image.features and not image.topics_by_id
    return ValidatedMetadata(image, empty=empty, snapshot=snapshot, log_end_offset=log_end, torn_tail=torn,
                             feature_sources=feature_sources)


def _check_features(image: MetadataImage, sources: Mapping[str, tuple[int, str]],
                    supported: Mapping[str, tuple[int, int]]) -> None:
    for name, level in sorted(image.features.items()):
        where = sources.get(name, (level, "the metadata log"))[1]
        if name not in supported:
            if level > 0:
                raise _refuse(where, f"feature {name} is finalized at level {level}, a feature Odradek does not "
                                     f"support (it supports {', '.join(sorted(supported))})")
            continue
        lo, hi = supported[name]
        if not lo <= level <= hi:
            raise _refuse(where, f"feature {name} is finalized at level {level}; Odradek supports {name} "
                                 f"levels {lo}-{hi}")


def _is_noop(value: bytes | memoryview) -> bool:
    return len(value) >= 3 and value[0] == FRAME_VERSION and value[1] == _NOOP_API_KEY
