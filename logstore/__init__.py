"""Kafka's log dir, byte for byte: segments, indexes, snapshots, checkpoints, recovery.

Public entry points: `LogManager`, `PartitionLog`, `LogConfig`, the result types `AppendInfo`,
`FetchData`, `TimestampAndOffset`, `FileSlice`, and the errors in `odradek.logstore.errors`.
See docs/architecture.md (logstore section).
"""

from .config import LogConfig
from .errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    LogDirLockedError,
    LogStoreError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from .fileslice import FileSlice
from .manager import LogManager
from .partition_log import AppendInfo, AppendOrigin, FetchData, PartitionLog, TimestampAndOffset

__all__ = [
    "AppendInfo",
    "AppendOrigin",
    "CorruptRecordError",
    "FetchData",
    "FileSlice",
    "InconsistentTopicIdError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LogConfig",
    "LogDirLockedError",
    "LogManager",
    "LogStoreError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "TimestampAndOffset",
]
