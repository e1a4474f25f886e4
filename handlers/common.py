"""Small pieces every handler family uses: error mapping of log-store errors, broker endpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..logstore import errors as log_errors
from ..logstore import producer_state as producer_errors
from ..security.acl import authorized_operations
from ..wire.errors import ErrorCode

if TYPE_CHECKING:
    from ..broker import Broker

# Kafka's "authorized operations not requested" marker (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# The operations each resource type supports (Kafka's AclEntry.supportedOperations), by code:
# READ(3) WRITE(4) CREATE(5) DELETE(6) ALTER(7) DESCRIBE(8) CLUSTER_ACTION(9) DESCRIBE_CONFIGS(10)
# ALTER_CONFIGS(11) IDEMPOTENT_WRITE(12)
TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)
CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)
GROUP_OPERATIONS = (3, 6, 8, 10, 11)


def operations_bits(ctx: Any, resource_type: int, name: str, operations: tuple[int, ...]) -> int:
    """Kafka's authorized-operations bit field for a resource: the `operations` the request's
    principal may do on it, or all of them when no authorizer is configured (AuthHelper)."""
    ops = authorized_operations(ctx, resource_type, name, operations)
    return sum(1 << op for op in operations) if ops is None else ops

_LOG_ERROR_CODES: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (log_errors.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (log_errors.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (log_errors.MessageTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (log_errors.RecordBatchTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
    (log_errors.InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (log_errors.OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (log_errors.KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    (log_errors.LogDeletedError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    # producer checks of the produce path (Kafka's ProducerAppendInfo)
    (producer_errors.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (producer_errors.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (producer_errors.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (producer_errors.TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (OSError, ErrorCode.KAFKA_STORAGE_ERROR),
)


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code a log-store exception maps to (UNKNOWN_SERVER_ERROR if none)."""
    for cls, code in _LOG_ERROR_CODES:
        if isinstance(exc, cls):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def advertised_endpoint(broker: Broker, listener_name: str) -> tuple[str, int]:
    """(host, port) clients of this listener should connect to."""
    listeners = broker.config.advertised_listeners
    chosen = next((lst for lst in listeners if lst.name == listener_name), listeners[0])
    port = chosen.port
    if port == 0 and broker.bound_addresses:
        port = broker.bound_addresses[0][1]
    return chosen.advertised_host, port


def partition_leader_epoch(broker: Any, topic: str, index: int) -> int:
    """The leader epoch of a partition this broker leads (0, a new partition's, before its log exists)."""
    plog = broker.partition_log(topic, index)
    return plog.leader_epoch if plog is not None else 0


def leader_epoch_error(requested: int, current: int) -> ErrorCode:
    """Kafka's check of a request's current_leader_epoch against the partition's (-1 = no check)."""
    if requested > current:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if 0 <= requested < current:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.NONE
