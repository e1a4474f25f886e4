"""ApiVersions v0-v5 as a Kafka 4.4 node answers it: features (supported and finalized), the
KIP-1242 cluster/node check of v5, Kafka's validation of the request and its UNSUPPORTED_VERSION
reply."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker, running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import ApiVersionsRequest
from odradek.wire.protocol import decode_response, encode_request

API_VERSIONS = 18


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with running_broker() as running:
        yield running


def _ask(broker: RunningBroker, version: int, **fields) -> ApiVersionsRequest:
    conn = BrokerConnection(broker.host, broker.port)
    try:
        if version >= 3:
            fields.setdefault("client_software_name", "odradek-test")
            fields.setdefault("client_software_version", "1.0")
        return conn.send(API_VERSIONS, ApiVersionsRequest(**fields), version)
    finally:
        conn.close()


def test_features_as_kafka_44_reports_them(broker: RunningBroker) -> None:
    r = _ask(broker, 5)
    assert r.error_code == 0
    # a freshly formatted Kafka 4.4.0 node answers with these, in this order
    assert [(f.name, f.min_version, f.max_version) for f in r.supported_features] == [
        ("group.version", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 7, 33), ("share.version", 0, 2),
        ("streams.version", 0, 1), ("transaction.version", 0, 2), ("eligible.leader.replicas.version", 0, 1)]
    # transaction.version 2 too (Transactions V2 is served), as the metadata log holds it
    assert broker.broker.metadata_store.image.features["transaction.version"] == 2
    assert [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features] == [
        ("group.version", 1, 1), ("streams.version", 1, 1), ("transaction.version", 2, 2),
        ("eligible.leader.replicas.version", 1, 1), ("share.version", 2, 2), ("metadata.version", 33, 33)]
    assert r.finalized_features_epoch > 0 and not r.zk_migration_ready
    # below v4 the features whose minimum is 0 are left out (KAFKA-17011)
    r3 = _ask(broker, 3)
    assert [(f.name, f.min_version, f.max_version) for f in r3.supported_features] == [("metadata.version", 7, 33)]
    assert len(r3.finalized_features) == 6
    assert _ask(broker, 2).supported_features == []


def test_v5_checks_cluster_and_node(broker: RunningBroker) -> None:
    cluster = broker.broker.cluster_id
    assert _ask(broker, 5, cluster_id=cluster, node_id=broker.broker.node_id).error_code == 0
    for cluster_id, node_id in ((cluster, 99), ("AAAAAAAAAAAAAAAAAAAAAA", broker.broker.node_id)):
        r = _ask(broker, 5, cluster_id=cluster_id, node_id=node_id)
        assert r.error_code == ErrorCode.REBOOTSTRAP_REQUIRED and r.api_keys == []
    # one without the other is an invalid request
    for fields in ({"cluster_id": cluster}, {"node_id": 1}):
        r = _ask(broker, 5, **fields)
        assert r.error_code == ErrorCode.INVALID_REQUEST and r.api_keys == []


def test_software_name_must_match_kafkas_pattern(broker: RunningBroker) -> None:
    assert _ask(broker, 3, client_software_name="bad name").error_code == ErrorCode.INVALID_REQUEST
    assert _ask(broker, 4, client_software_version="-1").error_code == ErrorCode.INVALID_REQUEST
    assert _ask(broker, 4, client_software_name="a", client_software_version="1.2.3-x").error_code == 0


def test_too_new_a_version_gets_the_range_to_retry_with(broker: RunningBroker) -> None:
    # v6 does not exist yet: the header says 6, the body is v5's
    frame = b"".join(bytes(p) for p in encode_request(5, 9, ApiVersionsRequest(
        client_software_name="a", client_software_version="1"), client_id="t", api_key=API_VERSIONS))
    frame = frame[:6] + (6).to_bytes(2, "big") + frame[8:]
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.sendall(frame)
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        data = sock.recv(size, socket.MSG_WAITALL)
    corr, r = decode_response(data, API_VERSIONS, 0)
    assert corr == 9 and r.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in r.api_keys] == [(18, 0, 5)]
