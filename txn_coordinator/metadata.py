"""Transaction state of one transactional id (Kafka's TransactionMetadata and TransactionState)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .records import TransactionLogValue, partitions_field

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka's TransactionMetadata.isEpochExhausted: one epoch is kept in reserve for fencing.
MAX_EPOCH = 2**15 - 1


def is_epoch_exhausted(epoch: int) -> bool:
    """True when the epoch cannot be bumped twice more; the producer then gets a new producer id."""
    return epoch >= MAX_EPOCH - 1


class TxnState(enum.IntEnum):
    """Transaction states with the ids Kafka stores in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name Kafka's admin APIs use (DescribeTransactions, ListTransactions)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}

# Kafka's TransactionState.validPreviousStates: a transition from any other state is a bug.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # Empty/Complete* -> PrepareAbort: a TV2 abort with no transaction open
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY,
                                       TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A state change Kafka's state machine does not allow (a coordinator bug, never a client error)."""


@dataclass(slots=True)
class TransactionMetadata:
    """What the coordinator knows of one transactional id; `to_value()` is its log record."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # KIP-360/KIP-588: the epoch before the last bump, so a retried InitProducerId is recognised
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    # Transactions V2 (KIP-890 part 2): the id a commit/abort that exhausted the epoch moves to
    # once it completes, and the transaction version of the client's last state change
    next_producer_id: int = NO_PRODUCER_ID
    client_txn_version: int = 0

    def transition(self, target: TxnState) -> None:
        """Move to `target`, checking Kafka's table of valid previous states."""
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} cannot go from {self.state.display_name} to "
                f"{target.display_name}")
        self.state = target

    def to_value(self, version: int = 0, prev_producer_id: int = NO_PRODUCER_ID) -> Any:
        """The TransactionLogValue describing this state. Version 1 (written once transaction.version
        1+ is finalized) adds the tagged fields Kafka sets: PreviousProducerId (the producer id before
        this change), NextProducerId and ClientTransactionVersion."""
        value = TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=int(self.state),
            # Kafka writes a null partition list for Empty (TransactionLog.valueToBytes)
            transaction_partitions=None if self.state == TxnState.EMPTY else partitions_field(self.partitions),
            transaction_last_update_timestamp_ms=self.txn_last_update_timestamp,
            transaction_start_timestamp_ms=self.txn_start_timestamp,
        )
        if version >= 1:
            value.previous_producer_id = prev_producer_id
            value.next_producer_id = self.next_producer_id
            value.client_transaction_version = self.client_txn_version
        return value

    @classmethod
    def from_value(cls, transactional_id: str, value: Any) -> TransactionMetadata:
        """Rebuild the state from a TransactionLogValue read back from the log."""
        parts = {(p.topic, pid) for p in (value.transaction_partitions or []) for pid in p.partition_ids}
        meta = cls(transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                   TxnState(value.transaction_status), parts, value.transaction_start_timestamp_ms,
                   value.transaction_last_update_timestamp_ms)
        meta.previous_producer_id = getattr(value, "previous_producer_id", NO_PRODUCER_ID)
        meta.next_producer_id = getattr(value, "next_producer_id", NO_PRODUCER_ID)
        meta.client_txn_version = getattr(value, "client_transaction_version", 0)
        return meta
