"""quota.window.num / quota.window.size.seconds are known broker configs and size the quota samples."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from odradek.config import BROKER_CONFIGS, BrokerConfig
from odradek.quota import quota_managers


def test_quota_window_keys_are_known_with_kafkas_defaults(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.config"):
        config = BrokerConfig.load(None, ["quota.window.num=5", "quota.window.size.seconds=2"])
    assert config.unknown == []
    assert not [r for r in caplog.records if "Unknown configuration" in r.getMessage()]
    assert config.get("quota.window.num") == 5 and config.get("quota.window.size.seconds") == 2
    assert BROKER_CONFIGS["quota.window.num"].default == 11
    assert BROKER_CONFIGS["quota.window.size.seconds"].default == 1
    assert {BROKER_CONFIGS[k].kafka_type for k in ("quota.window.num", "quota.window.size.seconds")} == {"INT"}


def test_the_quota_managers_take_the_configured_windows() -> None:
    config = BrokerConfig.load(None, ["quota.window.num=5", "quota.window.size.seconds=2"])
    image = SimpleNamespace(client_quotas={(("user", "alice"),): {"producer_byte_rate": 1000.0}},
                            client_quotas_version=1)
    broker = SimpleNamespace(config=config, metadata_store=SimpleNamespace(image=image), broker_role=None)
    managers = quota_managers(broker)
    assert managers is not None
    assert (managers.produce.samples, managers.produce.window_ms) == (5, 2000)
    assert (managers.request.samples, managers.request.max_throttle_ms) == (5, 2000)
