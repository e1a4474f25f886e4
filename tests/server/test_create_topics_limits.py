"""How many partitions one CreateTopics / CreatePartitions may ask for: Kafka 4.4's controller
bounds (10,000 partitions a request, 10,000 metadata records a request), answered by a single
node. compat-tests/test_create_topics_limits_44.py compares the same requests with Kafka 4.4.0."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

CreateTopics = request_class(19)
CreatePartitions = request_class(37)
EXISTING = "limits-existing"
TOO_MANY = "Excessively large number of partitions per request."
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."


@pytest.fixture(scope="module")
def conn() -> Iterator[BrokerConnection]:
    with running_broker() as running:
        c = BrokerConnection(running.host, running.port)
        try:
            assert create(c, [(EXISTING, 1, {})], validate_only=False) == [(EXISTING, 0, None, 1)]
            yield c
        finally:
            c.close()


def create(conn: BrokerConnection, topics, validate_only: bool = True) -> list[tuple[str, int, str | None, int]]:
    answer = conn.send(19, CreateTopics(timeout_ms=30000, validate_only=validate_only, topics=[
        CreateTopics.CreatableTopic(name=name, num_partitions=n, replication_factor=1, configs=[
            CreateTopics.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
        for name, n, configs in topics]), 7)
    return [(t.name, t.error_code, t.error_message, t.num_partitions) for t in answer.topics]


def test_more_than_10000_partitions_refuse_the_whole_request(conn: BrokerConnection) -> None:
    assert create(conn, [("a", 10_001, {}), ("b", 1, {})]) == [("a", 44, TOO_MANY, -1), ("b", 44, TOO_MANY, -1)]
    # an existing topic's count still counts, as in Kafka's controller (checked before anything else)
    assert [e for _, e, _, _ in create(conn, [(EXISTING, 6_000, {}), ("a", 6_000, {})])] == [44, 44]


def test_more_than_10000_records_refuse_the_whole_request(conn: BrokerConnection) -> None:
    # a topic is one TopicRecord, one ConfigRecord per config and one PartitionRecord per partition
    assert create(conn, [("a", 9_999, {})]) == [("a", 0, None, 9_999)]
    assert create(conn, [("a", 10_000, {})]) == [("a", 44, TOO_MANY_RECORDS, -1)]
    assert [e for _, e, _, _ in create(conn, [("a", 9_998, {"cleanup.policy": "compact"})])] == [0]
    two = {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert create(conn, [("a", 9_998, two)]) == [("a", 44, TOO_MANY_RECORDS, -1)]
    assert [e for _, e, _, _ in create(conn, [("a", 4_999, {}), ("b", 4_999, {})])] == [0, 0]
    assert [e for _, e, _, _ in create(conn, [("a", 5_000, {}), ("b", 5_000, {})])] == [44, 44]
    # topics refused for their own reasons write no records
    assert [e for _, e, _, _ in create(conn, [(EXISTING, 5_000, {}), ("a", 5_000, {})])] == [36, 0]


def test_refused_request_creates_nothing(conn: BrokerConnection) -> None:
    assert create(conn, [("big", 10_000, {})], validate_only=False) == [("big", 44, TOO_MANY_RECORDS, -1)]
    assert create(conn, [("big", 1, {})], validate_only=False) == [("big", 0, None, 1)]


def test_create_partitions_bound(conn: BrokerConnection) -> None:
    def grow(count: int) -> list[tuple[int, str | None]]:
        answer = conn.send(37, CreatePartitions(timeout_ms=30000, validate_only=True, topics=[
            CreatePartitions.CreatePartitionsTopic(name=EXISTING, count=count, assignments=None)]), 3)
        return [(r.error_code, r.error_message) for r in answer.results]

    assert grow(10_001) == [(0, None)]  # 10,000 added
    assert grow(10_002) == [(44, "Excessively large number of additional partitions per request.")]


def test_duplicated_names_are_answered_once_after_the_others(conn: BrokerConnection) -> None:
    """As Kafka 4.4's ControllerApis: duplicated names are left out of the count and answered once."""
    answer = create(conn, [("dup", 6_000, {}), ("a", 9_999, {}), ("dup", 6_000, {})])
    assert answer == [("a", 0, None, 9_999), ("dup", 42, "Duplicate topic name.", -1)]
