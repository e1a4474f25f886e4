"""Group configs checked as Kafka 4.4's GroupConfig.validate checks them (each value's least
value, then the broker's group.share.min/max.* bounds, then session above heartbeat), and a
share group's own heartbeat interval answered to its members."""

from __future__ import annotations

import time
import uuid

from odradek.testing import running_broker
from odradek.tools.client import KafkaClient
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import request_class

ALTER, HEARTBEAT, FIND_COORDINATOR = 44, 76, 10


def _alter(client: KafkaClient, group: str, configs: dict[str, str]) -> tuple[int, str | None]:
    cls = request_class(ALTER)
    r = client.send(ALTER, cls(resources=[cls.AlterConfigsResource(
        resource_type=32, resource_name=group,
        configs=[cls.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])],
        validate_only=False))
    return r.responses[0].error_code, r.responses[0].error_message


def test_group_config_values_and_the_groups_own_heartbeat_interval():
    with running_broker(configs={"group.share.max.record.lock.duration.ms": "90000"}) as broker, \
            KafkaClient(broker.bootstrap_servers) as client:
        invalid = ErrorCode.INVALID_CONFIG
        assert _alter(client, "g", {"share.record.lock.duration.ms": "500"}) == (
            invalid, "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000")
        assert _alter(client, "g", {"share.record.lock.duration.ms": "5000"}) == (
            invalid, "share.record.lock.duration.ms must be in the range 15000 to 90000 inclusive.")
        assert _alter(client, "g", {"share.record.lock.duration.ms": "90000"}) == (0, None)
        assert _alter(client, "g", {"share.delivery.count.limit": "11"}) == (
            invalid, "share.delivery.count.limit must be in the range 2 to 10 inclusive.")
        assert _alter(client, "g", {"share.partition.max.record.locks": "5000"}) == (
            invalid, "share.partition.max.record.locks must be in the range 100 to 4000 inclusive.")
        assert _alter(client, "g", {"share.heartbeat.interval.ms": "x"}) == (
            invalid, "Invalid value x for configuration share.heartbeat.interval.ms: Not a number of type INT")
        assert _alter(client, "g", {"share.heartbeat.interval.ms": "7000"}) == (0, None)
        # the group's own interval is what its members are told
        create = request_class(19)
        client.send(19, create(topics=[create.CreatableTopic(name="t", num_partitions=1, replication_factor=1,
                                                             assignments=[], configs=[])],
                               timeout_ms=30000, validate_only=False))
        hb = request_class(HEARTBEAT)
        deadline = time.monotonic() + 20
        while True:
            r = client.send(HEARTBEAT, hb(group_id="g", member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None,
                                          subscribed_topic_names=["t"]))
            if r.error_code not in (14, 15, 16) or time.monotonic() > deadline:
                break
            client.send(FIND_COORDINATOR, request_class(FIND_COORDINATOR)(key="g", key_type=0))
            time.sleep(0.1)
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 7000)
