"""Dynamic broker configs (the replication throttles) over the wire: set, described with Kafka's
DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG sources, refused for fixed keys and bad
values, kept in the metadata log across a restart."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

RATE = "leader.replication.throttled.rate"


def _set(admin: AdminClient, name: str, key: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(ConfigResource.Type.BROKER, name,
                              incremental_configs=[ConfigEntry(key, value, incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(10)


def _set_cluster_default(bootstrap: str, key: str, value: str) -> None:
    """The cluster-wide default (BROKER resource ""), which confluent-kafka cannot name: as
    kafka-configs.sh --entity-default sends it."""
    host, port = bootstrap.rsplit(":", 1)
    Request = request_class(44)
    body = Request(resources=[Request.AlterConfigsResource(resource_type=4, resource_name="", configs=[
        Request.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False)
    conn = BrokerConnection(host, int(port))
    try:
        response = conn.send(44, body)
    finally:
        conn.close()
    assert [r.error_code for r in response.responses] == [0]


def _describe(admin: AdminClient, key: str) -> tuple[str, int]:
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entry = admin.describe_configs([resource])[resource].result(10)[key]
    return entry.value, entry.source


def test_throttle_rates_are_set_described_and_kept(tmp_path) -> None:
    data = tmp_path / "data"
    with running_broker(log_dirs=str(data)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert _describe(admin, RATE) == ("9223372036854775807", ConfigSource.DEFAULT_CONFIG.value)
        _set_cluster_default(broker.bootstrap_servers, RATE, "5000")
        assert _describe(admin, RATE) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        _set(admin, "1", RATE, "700")
        assert _describe(admin, RATE) == ("700", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        with pytest.raises(KafkaException) as refused:
            _set(admin, "1", "log.dirs", "/elsewhere")
        assert refused.value.args[0].name() == "INVALID_REQUEST"
        with pytest.raises(KafkaException) as bad:
            _set(admin, "1", RATE, "-5")
        assert bad.value.args[0].name() == "INVALID_CONFIG"
    with running_broker(log_dirs=str(data)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert _describe(admin, RATE) == ("700", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        _set(admin, "1", RATE, None)  # as kafka-reassign-partitions.sh --verify removes it
        assert _describe(admin, RATE) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
