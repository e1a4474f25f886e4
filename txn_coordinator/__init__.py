"""Kafka's transaction coordinator for Odradek (issue #6): transactional ids in ``__transaction_state``,
their state machine, transaction markers, timeouts, transactional offset commits.

`TransactionCoordinator` is what ``broker.coordinators["transactions"]`` holds; the broker creates
it at start-up and calls its ``startup()``/``shutdown()``.
"""

from __future__ import annotations

from .coordinator import TransactionCoordinator, TxnError
from .metadata import TransactionMetadata, TxnState

__all__ = ["TransactionCoordinator", "TransactionMetadata", "TxnError", "TxnState"]
