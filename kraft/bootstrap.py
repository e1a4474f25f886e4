"""The bootstrap metadata `kafka-storage format` writes: the feature levels (and `--add-scram`
credentials) a new cluster starts with.

Kafka 4.4 writes them as the metadata partition's first snapshot,
`__cluster_metadata-0/00000000000000000000-0000000000.checkpoint` (end offset 0, epoch 0; the
SnapshotHeader carries the format time as lastContainedLogTimestamp; the file is read-only).
Releases up to 4.1 wrote `bootstrap.checkpoint` beside the partition dir instead (same batch
layout, lastContainedLogTimestamp 0); Kafka 4.4 still prefers that file when it exists, and so
does :func:`read_bootstrap`. Either way the controller copies the records into the first data
batch of the log when it starts on an empty log, and Kafka needs them there: its metadata loader
does not read the offset-0 snapshot, so a log without them has no metadata.version.

:func:`write_bootstrap` writes the bootstrap snapshot, as Kafka 4.4 does (:data:`WRITE_SNAPSHOT`);
MetadataStore.start copies its records into the empty log on the first start.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .records import new_record
from .snapshot import BOOTSTRAP_FILE, SnapshotId, build_snapshot, read_snapshot, write_atomically

#: Kafka 4.4's bootstrap snapshot, inside the metadata partition dir.
METADATA_PARTITION_DIR = "__cluster_metadata-0"
BOOTSTRAP_SNAPSHOT = SnapshotId(0, 0).file_name
#: Whether format writes Kafka 4.4's bootstrap snapshot (True) or bootstrap.checkpoint (False).
WRITE_SNAPSHOT = True


def _records(levels: Mapping[str, int], extra_records: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    records = [("FeatureLevelRecord", new_record("FeatureLevelRecord", name=name, feature_level=level))
               for name, level in levels.items()]
    return records + list(extra_records)


def build_bootstrap(levels: Mapping[str, int], timestamp_ms: int | None = None,
                    data_timestamp_ms: int | None = None,
                    extra_records: Sequence[tuple[str, Any]] = ()) -> bytes:
    """The bytes of a Kafka 4.1 bootstrap.checkpoint: one FeatureLevelRecord per feature, in order,
    then `extra_records` ((name, record) pairs, e.g. the UserScramCredentialRecords of --add-scram,
    which Kafka's Formatter appends after the feature levels)."""
    now = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
    return build_snapshot(_records(levels, extra_records), epoch=0, timestamp=now, data_timestamp=data_timestamp_ms)


def build_bootstrap_snapshot(levels: Mapping[str, int], *, format_time_ms: int | None = None,
                             header_ms: int | None = None, data_ms: int | None = None,
                             footer_ms: int | None = None,
                             extra_records: Sequence[tuple[str, Any]] = ()) -> bytes:
    """The bytes of Kafka 4.4's bootstrap snapshot 00000000000000000000-0000000000.checkpoint.
    Kafka reads the clock for the header's lastContainedLogTimestamp and again for each batch;
    unset times are read from the clock the same way."""
    def clock(given: int | None) -> int:
        return time.time_ns() // 1_000_000 if given is None else given

    last_contained = clock(format_time_ms)
    header = clock(header_ms)
    data = clock(data_ms)
    return build_snapshot(_records(levels, extra_records), epoch=0, timestamp=header,
                          last_contained_log_timestamp=last_contained, data_timestamp=data,
                          footer_timestamp=clock(footer_ms))


def bootstrap_snapshot_path(metadata_log_dir: Path) -> Path:
    return Path(metadata_log_dir) / METADATA_PARTITION_DIR / BOOTSTRAP_SNAPSHOT


def bootstrap_path(metadata_log_dir: Path) -> Path:
    """Where :func:`write_bootstrap` writes."""
    return bootstrap_snapshot_path(metadata_log_dir) if WRITE_SNAPSHOT else Path(metadata_log_dir) / BOOTSTRAP_FILE


def write_bootstrap(metadata_log_dir: Path, levels: Mapping[str, int], timestamp_ms: int | None = None,
                    extra_records: Sequence[tuple[str, Any]] = ()) -> Path:
    """Write the bootstrap metadata of `odradek storage format` (see :data:`WRITE_SNAPSHOT`)."""
    if WRITE_SNAPSHOT:
        return write_bootstrap_snapshot(metadata_log_dir, levels, timestamp_ms, extra_records)
    return write_bootstrap_checkpoint(metadata_log_dir, levels, timestamp_ms, extra_records)


def write_bootstrap_snapshot(metadata_log_dir: Path, levels: Mapping[str, int], timestamp_ms: int | None = None,
                             extra_records: Sequence[tuple[str, Any]] = ()) -> Path:
    """Write the bootstrap metadata as Kafka 4.4's format does: the metadata partition dir with the
    read-only snapshot 00000000000000000000-0000000000.checkpoint (via .tmp + rename)."""
    path = bootstrap_snapshot_path(metadata_log_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o600)  # rewritten (--add-scram after the levels): Kafka's file is read-only
    write_atomically(path, build_bootstrap_snapshot(levels, format_time_ms=timestamp_ms,
                                                    extra_records=extra_records))
    path.chmod(0o400)
    return path


def write_bootstrap_checkpoint(metadata_log_dir: Path, levels: Mapping[str, int], timestamp_ms: int | None = None,
                               extra_records: Sequence[tuple[str, Any]] = ()) -> Path:
    """Write `<metadata_log_dir>/bootstrap.checkpoint` as Kafka 4.1's format did (Kafka 4.4 reads it too)."""
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    write_atomically(path, build_bootstrap(levels, timestamp_ms, extra_records=extra_records))
    return path


def _bootstrap_file(metadata_log_dir: Path) -> Path | None:
    """bootstrap.checkpoint if there is one (Kafka 4.4 reads it first), else the bootstrap snapshot."""
    legacy = Path(metadata_log_dir) / BOOTSTRAP_FILE
    if legacy.exists():
        return legacy
    snap = bootstrap_snapshot_path(metadata_log_dir)
    return snap if snap.exists() else None


def read_bootstrap(metadata_log_dir: Path) -> dict[str, int] | None:
    """Feature levels of the dir's bootstrap metadata, None when there is none."""
    path = _bootstrap_file(metadata_log_dir)
    if path is None:
        return None
    return {r.message.name: r.message.feature_level for r in read_snapshot(path)
            if r.name == "FeatureLevelRecord"}


def read_bootstrap_records(metadata_log_dir: Path) -> list[Any]:
    """Every decoded record of the dir's bootstrap metadata (MetadataRecord), [] when there is none."""
    path = _bootstrap_file(metadata_log_dir)
    return list(read_snapshot(path)) if path is not None else []
