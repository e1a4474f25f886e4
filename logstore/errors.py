"""Typed errors raised by the log store.

The request handlers map these to Kafka error codes; the mapping is noted on each class so the
handler author does not have to guess.
"""

from __future__ import annotations

from typing import NamedTuple


class LogStoreError(Exception):
    """Base class of every error the log store raises on purpose."""


class RecordError(NamedTuple):
    """One refused record of a batch (KIP-467): its index in the batch and why."""

    batch_index: int
    message: str | None

    def __str__(self) -> str:
        # Java's ProduceResponse.RecordError.toString, which Kafka's error message lists
        message = "null" if self.message is None else f"'{self.message}'"
        return f"RecordError(batchIndex={self.batch_index}, message={message})"


class CorruptRecordError(LogStoreError):
    """A batch failed its size/magic/CRC checks (Kafka CORRUPT_MESSAGE, code 2)."""


class InvalidRecordError(LogStoreError):
    """A batch is well formed but breaks a broker rule, e.g. lastOffsetDelta+1 != count for a client
    batch, or a non-v2 batch (Kafka INVALID_RECORD, code 87).

    `record_errors` names the records at fault when the rule is one Kafka checks per record
    (a key-less record on a compacted topic): the produce response lists them, so clients fail
    only those. Empty for a rule about the whole batch."""

    def __init__(self, message: str = "", record_errors: list[RecordError] | None = None) -> None:
        super().__init__(message)
        self.record_errors: list[RecordError] = record_errors or []


class MessageTooLargeError(LogStoreError):
    """The batch is larger than the topic's max.message.bytes (Kafka MESSAGE_TOO_LARGE, code 10)."""


class RecordBatchTooLargeError(LogStoreError):
    """The batch is larger than segment.bytes and can never fit a segment
    (Kafka RECORD_LIST_TOO_LARGE, code 18)."""


class InvalidTimestampError(LogStoreError):
    """A record timestamp is outside message.timestamp.before/after.max.ms, or a client batch claims
    LogAppendTime (Kafka INVALID_TIMESTAMP, 32). `record_errors` as for InvalidRecordError: Kafka
    answers INVALID_TIMESTAMP when any of a batch's record errors is a timestamp one."""

    def __init__(self, message: str = "", record_errors: list[RecordError] | None = None) -> None:
        super().__init__(message)
        self.record_errors: list[RecordError] = record_errors or []


class OffsetOutOfRangeError(LogStoreError):
    """A fetch offset is outside [log start offset, log end offset] (Kafka OFFSET_OUT_OF_RANGE, code 1)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, name: str = "") -> None:
        super().__init__(
            f"offset {offset} is out of range for {name or 'log'} "
            f"[{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogDirLockedError(LogStoreError):
    """Another process holds `<log dir>/.lock` (Kafka refuses to start in that case too)."""


class KafkaStorageError(LogStoreError):
    """An I/O problem with a log dir (Kafka KAFKA_STORAGE_ERROR, code 56)."""


class InvalidOffsetError(LogStoreError):
    """An offset does not fit a segment (relative offset outside int32), or an index is inconsistent."""


class LogDeletedError(LogStoreError):
    """The partition log was deleted or closed while a caller still held it."""


class InconsistentTopicIdError(LogStoreError):
    """partition.metadata names another topic id than the one assigned (Kafka INCONSISTENT_TOPIC_ID, 103):
    the dir belongs to an older incarnation of the topic."""
