"""`bootstrap.checkpoint`: the feature levels (and `--add-scram` credentials) `kafka-storage format`
writes into the metadata log dir.

Kafka reads it only when the metadata log is empty and copies its records into the first
data batch of the log. Same layout as a KRaft snapshot, epoch 0, SnapshotHeader with
lastContainedLogTimestamp 0.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .records import new_record
from .snapshot import BOOTSTRAP_FILE, build_snapshot, read_snapshot, write_atomically


def build_bootstrap(levels: Mapping[str, int], timestamp_ms: int | None = None,
                    data_timestamp_ms: int | None = None,
                    extra_records: Sequence[tuple[str, Any]] = ()) -> bytes:
    """The bytes of a bootstrap.checkpoint: one FeatureLevelRecord per feature, in order, then
    `extra_records` ((name, record) pairs, e.g. the UserScramCredentialRecords of --add-scram,
    which Kafka's Formatter appends after the feature levels)."""
    now = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
    records = [("FeatureLevelRecord", new_record("FeatureLevelRecord", name=name, feature_level=level))
               for name, level in levels.items()]
    records += list(extra_records)
    return build_snapshot(records, epoch=0, timestamp=now, data_timestamp=data_timestamp_ms)


def write_bootstrap(metadata_log_dir: Path, levels: Mapping[str, int], timestamp_ms: int | None = None,
                    extra_records: Sequence[tuple[str, Any]] = ()) -> Path:
    """Write `<metadata_log_dir>/bootstrap.checkpoint` (via .tmp + rename, like Kafka)."""
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    write_atomically(path, build_bootstrap(levels, timestamp_ms, extra_records=extra_records))
    return path


def read_bootstrap(metadata_log_dir: Path) -> dict[str, int] | None:
    """Feature levels of the dir's bootstrap.checkpoint, None when there is none."""
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    if not path.exists():
        return None
    return {r.message.name: r.message.feature_level for r in read_snapshot(path)
            if r.name == "FeatureLevelRecord"}


def read_bootstrap_records(metadata_log_dir: Path) -> list[Any]:
    """Every decoded record of the dir's bootstrap.checkpoint (MetadataRecord), [] when there is none."""
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    return list(read_snapshot(path)) if path.exists() else []
