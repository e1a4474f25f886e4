"""Fixtures of the transaction tests; `txn_testutil` (the fake broker) is made importable here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from txn_testutil import FakeBroker  # noqa: E402

from odradek.txn_coordinator import TransactionCoordinator  # noqa: E402


@pytest.fixture
def broker(tmp_path: Path) -> FakeBroker:
    return FakeBroker(tmp_path)


@pytest.fixture
def coordinator(broker: FakeBroker) -> TransactionCoordinator:
    c = TransactionCoordinator(broker)
    broker.coordinators["transactions"] = c
    c._load_all()
    c.active = True
    return c


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fake_brokers_create_internal_topics_in_place(monkeypatch):
    from fake_metadata import create_internal_topic_in_place

    from odradek.handlers import groups

    monkeypatch.setattr(groups, "ensure_internal_topic", create_internal_topic_in_place)
