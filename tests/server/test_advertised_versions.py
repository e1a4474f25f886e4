"""The API versions Odradek serves are chosen, never inherited: regenerating the message
definitions from a newer Kafka must not widen what ApiVersions advertises (each new version
comes with its behaviour and a line here)."""

from __future__ import annotations

from odradek.handlers.registry import REGISTRY, advertised_versions, load_handlers
from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import API_KEYS, API_NAMES, request_class, supported_versions

load_handlers()

#: What Odradek serves of the APIs it had before Kafka 4.4 (advertised min, max).
SERVED = {
    "Produce": (0, 13), "Fetch": (4, 18), "ListOffsets": (1, 11), "Metadata": (0, 13),
    "OffsetCommit": (0, 10), "OffsetFetch": (0, 10), "FindCoordinator": (0, 6), "JoinGroup": (0, 9),
    "Heartbeat": (0, 4), "LeaveGroup": (0, 5), "SyncGroup": (0, 5), "DescribeGroups": (0, 6),
    "ListGroups": (0, 5), "SaslHandshake": (0, 1), "ApiVersions": (0, 5), "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6), "DeleteRecords": (0, 2), "InitProducerId": (0, 5), "OffsetForLeaderEpoch": (2, 4),
    "AddPartitionsToTxn": (0, 5), "AddOffsetsToTxn": (0, 4), "EndTxn": (0, 5), "TxnOffsetCommit": (0, 6),
    "DescribeAcls": (0, 3), "CreateAcls": (0, 3), "DeleteAcls": (0, 3), "DescribeConfigs": (0, 4),
    "AlterConfigs": (0, 2), "DescribeLogDirs": (1, 5), "SaslAuthenticate": (0, 2), "CreatePartitions": (0, 3),
    "DeleteGroups": (0, 3), "IncrementalAlterConfigs": (0, 1), "OffsetDelete": (0, 0),
    "DescribeClientQuotas": (0, 1), "DescribeUserScramCredentials": (0, 0), "AlterUserScramCredentials": (0, 0),
    "DescribeCluster": (0, 2), "DescribeProducers": (0, 0), "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 2), "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 1),
    "DescribeTopicPartitions": (0, 0),
}


def test_served_ranges_are_pinned() -> None:
    served = {API_NAMES[key]: (lo, hi) for key, lo, hi in advertised_versions()}
    assert {name: served.get(name) for name in SERVED} == SERVED


def test_no_handler_claims_a_version_kafka_lacks() -> None:
    for key, handler in REGISTRY.items():
        lo, hi = supported_versions(key)
        assert lo <= handler.advertised_min and handler.max_version <= hi, API_NAMES[key]


def test_api_versions_advertises_the_registry() -> None:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            body = request_class(API_KEYS["ApiVersions"])(client_software_name="t", client_software_version="1")
            response = conn.send(API_KEYS["ApiVersions"], body, 3)
        finally:
            conn.close()
    got = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert got == advertised_versions()
