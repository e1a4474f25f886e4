"""Oracle (issue #28): how many partitions one CreateTopics or CreatePartitions may ask for, as
Kafka 4.4.0 answers.

Kafka 4.4's controller refuses a whole CreateTopics whose topics ask for more than 10,000
partitions in total ("Excessively large number of partitions per request.", counted before any
other check, topics that already exist included), and one whose records would be more than the
10,000 a user operation may write (a TopicRecord, a ConfigRecord per config and a PartitionRecord
per partition of every topic that passes its checks: "Unable to perform excessively large batch
operation."); both are POLICY_VIOLATION for every topic of the request. CreatePartitions is
refused likewise above 10,000 added partitions. The same raw requests go to a live Kafka 4.4.0
and to Odradek, which must answer the same. Nearly all are validate_only (Kafka builds the records
of those too), so no broker creates thousands of logs.
"""

from __future__ import annotations

import pytest
from kafka_oracle import BrokerProcess, require_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

KAFKA = "4.4.0"
CreateTopics = request_class(19)
CreatePartitions = request_class(37)
EXISTING = "limits-existing"  # 1 partition, created by the fixture


@pytest.fixture(scope="module")
def brokers(_module_factory) -> dict[str, BrokerProcess]:
    require_tool(f"kafka-{KAFKA}")
    out = {"kafka": _module_factory("kafka", version=KAFKA), "odradek": _module_factory("odradek")}
    for broker in out.values():
        answer = create(broker, [(EXISTING, 1, {})], validate_only=False)
        assert answer == [(EXISTING, 0, None, 1)], answer
    return out


def _send(broker: BrokerProcess, key: int, request: object, version: int) -> object:
    host, port = broker.bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    try:
        return conn.send(key, request, version)
    finally:
        conn.close()


def create(broker: BrokerProcess, topics: list[tuple], validate_only: bool = True) -> list[tuple[str, int, str | None, int]]:
    """CreateTopics v7 of (name, partitions, configs[, replication factor]): (name, error code,
    message, partitions) per topic."""
    request = CreateTopics(timeout_ms=60000, validate_only=validate_only, topics=[
        CreateTopics.CreatableTopic(name=t[0], num_partitions=t[1], replication_factor=t[3] if len(t) > 3 else 1,
                                    configs=[CreateTopics.CreatableTopicConfig(name=k, value=v)
                                             for k, v in t[2].items()])
        for t in topics])
    answer = _send(broker, 19, request, 7)
    return [(t.name, t.error_code, t.error_message, t.num_partitions) for t in answer.topics]


def create_partitions(broker: BrokerProcess, counts: list[tuple[str, int]]) -> list[tuple[str, int, str | None]]:
    """CreatePartitions v3, validate_only: (name, error code, message) per topic."""
    request = CreatePartitions(timeout_ms=60000, validate_only=True, topics=[
        CreatePartitions.CreatePartitionsTopic(name=name, count=count, assignments=None) for name, count in counts])
    answer = _send(broker, 37, request, 3)
    return [(r.name, r.error_code, r.error_message) for r in answer.results]


COMPACT = {"cleanup.policy": "compact"}
TWO_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "60000"}

CREATE_CASES = {
    "one topic of 10,001": [("l-a", 10_001, {})],
    "one topic of 10,000 (10,001 records)": [("l-a", 10_000, {})],
    "one topic of 9,999 (10,000 records)": [("l-a", 9_999, {})],
    "two topics of 5,000 (10,002 records)": [("l-a", 5_000, {}), ("l-b", 5_000, {})],
    "two topics of 4,999 (10,000 records)": [("l-a", 4_999, {}), ("l-b", 4_999, {})],
    "9,998 and one config (10,000 records)": [("l-a", 9_998, COMPACT)],
    "9,998 and two configs (10,001 records)": [("l-a", 9_998, TWO_CONFIGS)],
    "an existing topic counts toward the partitions": [(EXISTING, 6_000, {}), ("l-a", 6_000, {})],
    "an existing topic writes no records": [(EXISTING, 5_000, {}), ("l-a", 5_000, {})],
    "a refused topic writes no records": [("l-a", 5_000, {}, 3), ("l-b", 5_000, {})],
    "duplicated names are not counted": [("l-dup", 6_000, {}), ("l-dup", 6_000, {}), ("l-a", 9_999, {})],
    "invalid counts add nothing": [("l-a", -5, {}), ("l-b", 0, {}), ("l-c", 9_999, {})],
}


@pytest.mark.parametrize("case", list(CREATE_CASES))
def test_create_topics_partition_bounds_as_kafka(brokers: dict[str, BrokerProcess], case: str) -> None:
    topics = CREATE_CASES[case]
    kafka = create(brokers["kafka"], topics)
    assert create(brokers["odradek"], topics) == kafka


def test_create_topics_bounds_refuse_the_whole_request(brokers: dict[str, BrokerProcess]) -> None:
    """Kafka's answers themselves: the bound is what the docstring says (so the comparison above
    cannot pass on two brokers that both accept everything)."""
    refused = create(brokers["kafka"], [("l-a", 10_000, {})])
    assert {(code, message) for _, code, message, _ in refused} == {
        (44, "Unable to perform excessively large batch operation.")}
    assert [code for _, code, _, _ in create(brokers["kafka"], [("l-a", 9_999, {})])] == [0]
    refused = create(brokers["odradek"], [("l-a", 10_001, {})], validate_only=False)
    assert refused == [("l-a", 44, "Excessively large number of partitions per request.", -1)]


CREATE_PARTITIONS_CASES = {
    "10,001 added": [(EXISTING, 10_002)],
    "10,000 added": [(EXISTING, 10_001)],
    "an unknown topic adds nothing": [(EXISTING, 10_001), ("l-unknown", 20_000)],
    # not bounds, but the same code's other answers (Kafka 4.4's messages)
    "no increase": [(EXISTING, 1)],
    "a decrease": [(EXISTING, 0)],
}


@pytest.mark.parametrize("case", list(CREATE_PARTITIONS_CASES))
def test_create_partitions_bound_as_kafka(brokers: dict[str, BrokerProcess], case: str) -> None:
    counts = CREATE_PARTITIONS_CASES[case]
    kafka = create_partitions(brokers["kafka"], counts)
    # Kafka answers in the order of a Java HashSet of the names; Odradek in the request's
    assert sorted(create_partitions(brokers["odradek"], counts)) == sorted(kafka)
    if case == "10,001 added":
        assert kafka == [(EXISTING, 44, "Excessively large number of additional partitions per request.")]
