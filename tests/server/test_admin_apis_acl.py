"""With an authorizer, the controller and replica admin APIs of issue #23 need Kafka's cluster
operation (ALTER, DESCRIBE, or DESCRIBE_CONFIGS for ListConfigResources), and a refusal is
answered with the body each request's getErrorResponse builds, never a closed connection."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "groups"))
from groups_testutil import FakeBroker  # noqa: E402

from odradek.handlers.registry import RequestContext, dispatch, load_handlers  # noqa: E402
from odradek.security import Session  # noqa: E402
from odradek.security.acl import (  # noqa: E402
    CLUSTER_NAME,
    OP_ALTER_CONFIGS,
    OP_DESCRIBE,
    PERM_ALLOW,
    PT_LITERAL,
    RT_CLUSTER,
    AclBinding,
    Authorizer,
)
from odradek.wire.primitives import Uuid  # noqa: E402
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class  # noqa: E402

load_handlers()

DENIED = 31
ACL_CONFIG = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}


def _broker(tmp_path: Path, *ops: int) -> FakeBroker:
    broker = FakeBroker(tmp_path, **ACL_CONFIG)
    broker.authorizer = Authorizer(broker)
    broker.authorizer.create([AclBinding(RT_CLUSTER, CLUSTER_NAME, PT_LITERAL, "User:alice", "*", op, PERM_ALLOW)
                              for op in ops])
    broker.metadata.create_topic("t", 2, {})
    return broker


def call(broker: FakeBroker, api_key: int, version: int, **fields: Any) -> Any:
    async def run() -> Any:
        body = request_class(api_key)(**fields)
        frame = join_pieces(encode_request(version, 7, body, client_id="acl-test"))[4:]
        session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", principal="User:alice", peer="127.0.0.1:5555")
        ctx = RequestContext(broker=broker, peer="127.0.0.1:5555", listener_name="SASL_PLAINTEXT", session=session)
        pieces = await dispatch(ctx, memoryview(bytearray(frame)))
        return decode_response(join_pieces(pieces)[4:], api_key, version)[1]

    return trio.run(run)


def test_refusals_carry_kafkas_error_bodies(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    E, A, L, Q, AR = (request_class(k) for k in (43, 45, 46, 55, 34))
    r = call(broker, 43, 2, election_type=0, timeout_ms=1000,
             topic_partitions=[E.TopicPartitions(topic="t", partitions=[0, 1])])
    assert r.error_code == DENIED
    assert [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
            for t in r.replica_election_results] == [
        ("t", [(0, DENIED, "Request ElectLeaders needs ALTER permission."),
               (1, DENIED, "Request ElectLeaders needs ALTER permission.")])]
    r = call(broker, 45, 0, timeout_ms=1000, topics=[A.ReassignableTopic(name="t", partitions=[
        A.ReassignablePartition(partition_index=0, replicas=[1])])])
    assert (r.error_code, r.error_message) == (DENIED, "Request AlterPartitionReassignments needs ALTER permission.")
    assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, DENIED)]
    r = call(broker, 46, 0, timeout_ms=1000, topics=[L.ListPartitionReassignmentsTopics(name="t", partition_indexes=[1])])
    assert (r.error_code, [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics]) == (
        DENIED, [("t", [1])])
    r = call(broker, 55, 2, topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[
        Q.PartitionData(partition_index=0)])])
    assert (r.error_code, r.error_message, r.topics) == (DENIED, "Cluster authorization failed.", [])
    for key, fields in ((80, {"cluster_id": None, "voter_id": 2, "voter_directory_id": Uuid(bytes(range(16)))}),
                        (81, {"cluster_id": None, "voter_id": 1, "voter_directory_id": Uuid(bytes(range(16)))})):
        r = call(broker, key, 0, **fields)
        assert (r.error_code, r.error_message) == (DENIED, "Cluster authorization failed.")
    r = call(broker, 64, 0, broker_id=2)
    assert (r.error_code, r.error_message) == (DENIED, "Request UnregisterBroker needs ALTER permission.")
    r = call(broker, 34, 2, dirs=[AR.AlterReplicaLogDir(path="/x", topics=[
        AR.AlterReplicaLogDirTopic(name="t", partitions=[0, 1])])])
    assert [(t.topic_name, p.partition_index, p.error_code) for t in r.results for p in t.partitions] == [
        ("t", 0, DENIED), ("t", 1, DENIED)]
    r = call(broker, 74, 1, resource_types=[2])
    assert (r.error_code, r.config_resources) == (DENIED, [])


def test_list_config_resources_needs_describe_configs(tmp_path: Path) -> None:
    # DESCRIBE is not enough; ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert call(_broker(tmp_path / "a", OP_DESCRIBE), 74, 1, resource_types=[2]).error_code == DENIED
    allowed = call(_broker(tmp_path / "b", OP_ALTER_CONFIGS), 74, 1, resource_types=[2])
    assert (allowed.error_code, [(c.resource_name, c.resource_type) for c in allowed.config_resources]) == (0, [("t", 2)])
    # and DescribeQuorum needs DESCRIBE, which alice then has
    Q = request_class(55)
    r = call(_broker(tmp_path / "c", OP_DESCRIBE), 55, 0, topics=[Q.TopicData(topic_name="other", partitions=[
        Q.PartitionData(partition_index=0)])])
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 3
