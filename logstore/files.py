"""Names of the files and directories in a Kafka log dir (Kafka's LogFileUtils / LocalLog naming).

Kept in one place so every module spells file names exactly like Kafka does.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_FILE = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

# Kafka caps a renamed (-delete / -stray) directory name at 255 characters by shortening the topic.
_MAX_DIR_NAME = 255

_DELETE_RE = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(DELETE_DIR_SUFFIX) + "$")
_FUTURE_RE = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(FUTURE_DIR_SUFFIX) + "$")
_STRAY_RE = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(STRAY_DIR_SUFFIX) + "$")


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded decimal form Kafka uses for segment and snapshot file names."""
    return f"{offset:020d}"


def log_file(dir_: Path, base_offset: int, suffix: str = "") -> Path:
    return dir_ / f"{filename_prefix(base_offset)}{LOG_SUFFIX}{suffix}"


def index_file(dir_: Path, base_offset: int, suffix: str = "") -> Path:
    return dir_ / f"{filename_prefix(base_offset)}{INDEX_SUFFIX}{suffix}"


def time_index_file(dir_: Path, base_offset: int, suffix: str = "") -> Path:
    return dir_ / f"{filename_prefix(base_offset)}{TIME_INDEX_SUFFIX}{suffix}"


def txn_index_file(dir_: Path, base_offset: int, suffix: str = "") -> Path:
    return dir_ / f"{filename_prefix(base_offset)}{TXN_INDEX_SUFFIX}{suffix}"


def snapshot_file(dir_: Path, offset: int) -> Path:
    return dir_ / f"{filename_prefix(offset)}{SNAPSHOT_SUFFIX}"


def offset_from_file_name(name: str) -> int:
    """Base offset encoded in a segment/snapshot file name (the digits before the first dot)."""
    return int(name.split(".", 1)[0])


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a normal `<topic>-<partition>` dir; None for anything else.

    Kafka splits at the last '-'. Deleted, stray and future dirs are not normal partition dirs.
    """
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)) and "." in name:
        return None
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def _suffixed_dir_name(topic: str, partition: int, suffix: str) -> str:
    # Kafka: "<topic>-<partition>.<uuid without dashes><suffix>", with the topic shortened so the
    # whole name fits 255 characters.
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: max(0, _MAX_DIR_NAME - len(tail))] + tail


def delete_dir_name(topic: str, partition: int) -> str:
    """A fresh `<topic>-<partition>.<uuid>-delete` name, capped at 255 characters like Kafka's."""
    return _suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX)


def stray_dir_name(topic: str, partition: int) -> str:
    return _suffixed_dir_name(topic, partition, STRAY_DIR_SUFFIX)


def is_delete_dir(name: str) -> bool:
    return _DELETE_RE.match(name) is not None


def is_future_dir(name: str) -> bool:
    return _FUTURE_RE.match(name) is not None


def is_stray_dir(name: str) -> bool:
    return _STRAY_RE.match(name) is not None
