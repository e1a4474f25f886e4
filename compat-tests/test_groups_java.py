"""The stock Java consumer (kafka-clients 4.1.1) in a group: classic protocol, then the same group
with group.protocol=consumer (the empty classic group becomes a consumer group) resuming from the
committed offsets, then classic again (and back)."""

from __future__ import annotations

from test_groups_helpers import GROUP_BROKER_OVERRIDES, produce


def test_java_consumer_classic_then_consumer_protocol_resumes_from_commits(odradek_broker_factory, java_client):
    broker = odradek_broker_factory(overrides={**GROUP_BROKER_OVERRIDES, "group.consumer.heartbeat.interval.ms": "500"})
    client = java_client(broker)

    def consume(*extra: str) -> set[tuple[int, int]]:
        # (commitSync commits what poll returned, so each run reads everything there is)
        lines = client.run("consume", "--topic", "java-grp", "--group", "java-group", "--commit",
                           "--idle-timeout-ms", "3000", *extra)
        return {(int(line["partition"]), int(line["offset"])) for line in lines if "offset" in line}

    produce(broker.bootstrap, "java-grp", [f"a{i}".encode() for i in range(30)])
    first = consume()
    produce(broker.bootstrap, "java-grp", [f"b{i}".encode() for i in range(18)])
    second = consume("--config", "group.protocol=consumer")
    produce(broker.bootstrap, "java-grp", [f"c{i}".encode() for i in range(12)])
    third = consume()
    assert (len(first), len(second), len(third)) == (30, 18, 12)
    assert not first & second and not second & third, "each run resumed from the previous run's commits"
