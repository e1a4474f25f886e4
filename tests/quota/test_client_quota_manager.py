"""Which quota a client gets (Kafka's DefaultQuotaCallback), and the sensors clients share."""

from __future__ import annotations

import pytest

from odradek.quota import QuotaManagers
from odradek.quota.client_quota_manager import ClientQuotaManager


def _entity(**parts: str | None) -> tuple:
    return tuple(sorted((k.replace("_", "-"), v) for k, v in parts.items()))


def manager(*quotas: tuple[tuple, float]) -> ClientQuotaManager:
    m = ClientQuotaManager("producer_byte_rate", 11, 1000)
    m.update({entity: {"producer_byte_rate": value} for entity, value in quotas})
    return m


def test_no_quota_records_nothing() -> None:
    m = manager()
    assert not m.enabled
    assert m.record_and_get_throttle_time_ms("alice", "c1", 1e12, 0) == 0
    assert m.sensors == {}


@pytest.mark.parametrize(("quotas", "expected"), [
    ([(_entity(user="alice", client_id="c1"), 1.0), (_entity(user="alice", client_id=None), 2.0),
      (_entity(user="alice"), 3.0), (_entity(user=None, client_id="c1"), 4.0),
      (_entity(user=None, client_id=None), 5.0), (_entity(user=None), 6.0),
      (_entity(client_id="c1"), 7.0), (_entity(client_id=None), 8.0)], (("alice", "c1"), 1.0)),
    ([(_entity(user="alice", client_id=None), 2.0), (_entity(user="alice"), 3.0),
      (_entity(client_id="c1"), 7.0)], (("alice", "c1"), 2.0)),
    ([(_entity(user="alice"), 3.0), (_entity(user=None, client_id="c1"), 4.0)], (("alice", ""), 3.0)),
    ([(_entity(user=None, client_id="c1"), 4.0), (_entity(user=None), 6.0)], (("alice", "c1"), 4.0)),
    ([(_entity(user=None, client_id=None), 5.0), (_entity(client_id="c1"), 7.0)], (("alice", "c1"), 5.0)),
    ([(_entity(user=None), 6.0), (_entity(client_id="c1"), 7.0)], (("alice", ""), 6.0)),
    ([(_entity(user="bob"), 3.0), (_entity(client_id="c1"), 7.0)], (("", "c1"), 7.0)),
    ([(_entity(user="bob"), 3.0), (_entity(client_id=None), 8.0)], (("", "c1"), 8.0)),
    ([(_entity(user="bob"), 3.0)], (("alice", ""), None)),
    ([(_entity(client_id="c2"), 3.0)], (("", "c1"), None)),
])
def test_the_most_specific_quota_wins(quotas, expected) -> None:
    m = manager(*quotas)
    tags = m.metric_tags("alice", "c1")
    assert (tags, m.quota_limit(tags)) == expected


def test_clients_of_one_user_quota_share_a_rate() -> None:
    m = manager((_entity(user="alice"), 1000.0))
    assert m.record_and_get_throttle_time_ms("alice", "c1", 6000, 0) == 0
    # 12000 bytes over the 10 s span: 1200/s, 20 % over: 2 s
    assert m.record_and_get_throttle_time_ms("alice", "c2", 6000, 0) == 2000
    assert m.record_and_get_throttle_time_ms("bob", "c1", 6000, 0) == 0  # no quota


def test_a_default_quota_gives_each_user_a_rate_of_its_own() -> None:
    m = manager((_entity(user=None), 1000.0))
    assert m.record_and_get_throttle_time_ms("alice", "c", 10000, 0) == 0
    assert m.record_and_get_throttle_time_ms("bob", "c", 10000, 0) == 0
    assert m.record_and_get_throttle_time_ms("alice", "c", 1000, 0) == 1000


def test_a_changed_quota_applies_to_the_existing_rate() -> None:
    m = manager((_entity(user="alice"), 1000.0))
    assert m.record_and_get_throttle_time_ms("alice", "c", 10000, 0) == 0
    m.update({_entity(user="alice"): {"producer_byte_rate": 500.0}})
    assert m.record_and_get_throttle_time_ms("alice", "c", 1, 0) > 0


def test_request_quota_throttle_is_bounded_by_one_window() -> None:
    managers = QuotaManagers(samples=11, window_s=1)
    managers.request.update({_entity(user="alice"): {"request_percentage": 1.0}})
    # 5 s of handling in one request: far over 1 %, but throttled for one window at most
    assert managers.request_throttle_ms("alice", "c", 5.0, 0) == 1000


def test_ip_connection_rate() -> None:
    managers = QuotaManagers(samples=11, window_s=1)
    managers.connections.update({(("ip", "127.0.0.1"),): {"connection_creation_rate": 1.0},
                                 (("ip", None),): {"connection_creation_rate": 100.0}})
    throttles = [managers.connections.record_and_get_throttle_time_ms("127.0.0.1", 0) for _ in range(12)]
    assert throttles[:10] == [0] * 10 and throttles[10] > 0
    assert managers.connections.record_and_get_throttle_time_ms("10.0.0.1", 0) == 0
    assert managers.connections.record_and_get_throttle_time_ms("::1", 0) == 0


def test_fetch_cap_is_one_quota_span() -> None:
    m = ClientQuotaManager("consumer_byte_rate", 11, 1000)
    m.update({_entity(client_id="c"): {"consumer_byte_rate": 1000.0}})
    assert m.max_value_in_quota_window("ANONYMOUS", "c") == 10_000
    assert m.max_value_in_quota_window("ANONYMOUS", "d") == float("inf")
