"""Kafka's transaction coordinator for Odradek (issue #6): transactional ids in ``__transaction_state``,
their state machine, transaction markers, timeouts, transactional offset commits.

`TransactionCoordinator` is what ``broker.coordinators["transactions"]`` holds; `install()` makes
every Broker create one at start-up (the broker then calls its ``startup()``/``shutdown()``).
"""

from __future__ import annotations

from .coordinator import TransactionCoordinator, TxnError
from .metadata import TransactionMetadata, TxnState

__all__ = ["TransactionCoordinator", "TransactionMetadata", "TxnError", "TxnState", "install"]


def install() -> None:
    """Register a TransactionCoordinator on every Broker before its start-up.

    broker.py creates the group coordinator itself; this hook (run when the transaction handlers
    are loaded, before the broker is built) does the same for transactions without touching
    broker.py. A one-line ``coordinators.setdefault("transactions", ...)`` in Broker.startup
    would replace it.
    """
    from ..broker import Broker  # noqa: PLC0415 - import cycle: the broker imports the handlers

    if getattr(Broker.startup, "_registers_transactions", False):
        return
    original = Broker.startup

    async def startup(self: Broker) -> None:
        self.coordinators.setdefault("transactions", TransactionCoordinator(self))
        await original(self)

    startup._registers_transactions = True  # type: ignore[attr-defined]
    startup.__doc__ = original.__doc__
    Broker.startup = startup  # type: ignore[method-assign]
