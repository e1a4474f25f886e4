"""Makes `groups_testutil` (shared helpers of these tests) importable under --import-mode=importlib."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fake_brokers_create_internal_topics_in_place(monkeypatch):
    from fake_metadata import create_internal_topic_in_place

    from odradek.handlers import groups

    monkeypatch.setattr(groups, "ensure_internal_topic", create_internal_topic_in_place)
