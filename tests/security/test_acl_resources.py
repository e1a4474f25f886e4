"""ACL checks per resource (issue #13), through the real dispatcher as a SASL principal: groups
(DescribeGroups, ListGroups, DeleteGroups, OffsetFetch, OffsetCommit, OffsetDelete,
FindCoordinator), the config APIs, InitProducerId, Produce with a transactional id and the
transaction APIs; Kafka's KafkaApis rules and error codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "groups"))
from groups_testutil import FakeBroker, run_with_coordinator  # noqa: E402

from odradek.handlers.producer_ids import ProducerIdManager  # noqa: E402
from odradek.handlers.registry import RequestContext, dispatch, load_handlers  # noqa: E402
from odradek.security import Session  # noqa: E402
from odradek.security.acl import (  # noqa: E402
    CLUSTER_NAME,
    OP_ALL,
    OP_ALTER_CONFIGS,
    OP_CLUSTER_ACTION,
    OP_DELETE,
    OP_DESCRIBE,
    OP_DESCRIBE_CONFIGS,
    OP_IDEMPOTENT_WRITE,
    OP_READ,
    OP_WRITE,
    PERM_ALLOW,
    PERM_DENY,
    PT_LITERAL,
    PT_PREFIXED,
    RT_CLUSTER,
    RT_GROUP,
    RT_TOPIC,
    RT_TRANSACTIONAL_ID,
    AclBinding,
    Authorizer,
)
from odradek.wire.errors import ErrorCode as E  # noqa: E402
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class  # noqa: E402
from odradek.wire.records import SimpleRecord, build_batch  # noqa: E402

load_handlers()

ACL_CONFIG = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}


def _broker(tmp_path: Path, *bindings: tuple) -> FakeBroker:
    broker = FakeBroker(tmp_path, **ACL_CONFIG)
    broker.authorizer = Authorizer(broker)
    broker.authorizer.create([AclBinding(rt, name, pt, principal, "*", op, perm)
                              for rt, name, pt, principal, op, perm in bindings])
    broker.producer_ids = ProducerIdManager(-1)
    return broker


def allow(rt: int, name: str, op: int, principal: str = "User:alice", pt: int = PT_LITERAL) -> tuple:
    return (rt, name, pt, principal, op, PERM_ALLOW)


def deny(rt: int, name: str, op: int, principal: str = "User:alice", pt: int = PT_LITERAL) -> tuple:
    return (rt, name, pt, principal, op, PERM_DENY)


async def call(broker: FakeBroker, api_key: int, version: int, principal: str = "User:alice", **fields: Any) -> Any:
    body = request_class(api_key)(**fields)
    frame = join_pieces(encode_request(version, 7, body, client_id="acl-test"))[4:]
    session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", principal=principal, peer="127.0.0.1:5555")
    ctx = RequestContext(broker=broker, peer="127.0.0.1:5555", listener_name="SASL_PLAINTEXT", session=session)
    pieces = await dispatch(ctx, memoryview(bytearray(frame)))
    _, response = decode_response(join_pieces(pieces)[4:], api_key, version)
    return response


def run(broker: FakeBroker, test) -> None:
    run_with_coordinator(broker, lambda _coordinator: test())


async def _commit(broker: FakeBroker, group: str, topic: str = "t") -> Any:
    R = request_class(8)
    return await call(broker, 8, 2, principal="User:admin", group_id=group, generation_id_or_member_epoch=-1,
                      member_id="", retention_time_ms=-1, topics=[R.OffsetCommitRequestTopic(
                          name=topic, partitions=[R.OffsetCommitRequestPartition(partition_index=0,
                                                                                  committed_offset=5)])])


# ---------------------------------------------------------------------------------------- groups


def test_describe_groups_per_group_and_authorized_operations(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "g1", OP_DESCRIBE))
    broker.metadata.create_topic("t", 1, {})

    async def test() -> None:
        await _commit(broker, "g1")
        resp = await call(broker, 15, 5, groups=["g1", "g2"], include_authorized_operations=True)
        # the refused group first (KafkaApis), with Kafka's groupError fields
        assert [(g.group_id, g.error_code) for g in resp.groups] == [
            ("g2", E.GROUP_AUTHORIZATION_FAILED), ("g1", 0)]
        assert resp.groups[0].authorized_operations == -2147483648
        assert resp.groups[1].authorized_operations == 1 << OP_DESCRIBE  # DESCRIBE only: not READ, not DELETE

    run(broker, test)


def test_consumer_group_describe_reports_the_principals_operations(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "cg", OP_DESCRIBE), allow(RT_TOPIC, "t", OP_DESCRIBE))
    broker.metadata.create_topic("t", 1, {})

    async def test() -> None:
        await _commit(broker, "other")  # the coordinator's internal topic, as in the tests above
        joined = await call(broker, 68, 0, principal="User:admin", group_id="cg", member_id="", member_epoch=0,
                            rebalance_timeout_ms=5000, subscribed_topic_names=["t"], server_assignor="range",
                            topic_partitions=[])
        assert joined.error_code == 0
        for principal, ops in (("User:alice", (OP_DESCRIBE,)), ("User:admin", (OP_READ, OP_DELETE, OP_DESCRIBE,
                                                                               OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS))):
            described = await call(broker, 69, 0, principal=principal, group_ids=["cg"],
                                   include_authorized_operations=True)
            assert described.groups[0].error_code == 0
            assert described.groups[0].authorized_operations == sum(1 << op for op in ops), principal

    run(broker, test)


def test_consumer_group_describe_hides_groups_with_topics_the_principal_cannot_describe(tmp_path: Path) -> None:
    """KafkaApis: a group whose members are assigned a topic the client may not DESCRIBE is answered
    TOPIC_AUTHORIZATION_FAILED with no members; operations only for groups found without an error."""
    broker = _broker(tmp_path, allow(RT_GROUP, "g", OP_DESCRIBE, pt=PT_PREFIXED), allow(RT_TOPIC, "open", OP_DESCRIBE))
    broker.metadata.create_topic("open", 1, {})
    broker.metadata.create_topic("secret", 1, {})

    async def test() -> None:
        await _commit(broker, "other", topic="open")
        for group, topics in (("g-open", ["open"]), ("g-secret", ["open", "secret"])):
            joined = await call(broker, 68, 0, principal="User:admin", group_id=group, member_id="", member_epoch=0,
                                rebalance_timeout_ms=5000, subscribed_topic_names=topics, server_assignor="range",
                                topic_partitions=[])
            assert joined.error_code == 0
        described = await call(broker, 69, 0, group_ids=["g-open", "g-secret", "g-missing"],
                               include_authorized_operations=True)
        by_id = {g.group_id: g for g in described.groups}
        assert by_id["g-open"].error_code == 0 and by_id["g-open"].members
        assert by_id["g-open"].authorized_operations == 1 << OP_DESCRIBE
        hidden = by_id["g-secret"]
        assert (hidden.error_code, hidden.members) == (E.TOPIC_AUTHORIZATION_FAILED, [])
        assert hidden.error_message == "The group has described topic(s) that the client is not authorized to describe."
        assert hidden.authorized_operations == -2147483648
        missing = by_id["g-missing"]
        assert (missing.error_code, missing.authorized_operations) == (E.GROUP_ID_NOT_FOUND, -2147483648)
        # the super user sees both groups in full
        described = await call(broker, 69, 0, principal="User:admin", group_ids=["g-secret"])
        assert described.groups[0].error_code == 0
        assert {tp.topic_name for m in described.groups[0].members for tp in m.assignment.topic_partitions} == {
            "open", "secret"}

    run(broker, test)


def test_delete_groups_needs_delete(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "g1", OP_DESCRIBE), allow(RT_GROUP, "g2", OP_DELETE))
    broker.metadata.create_topic("t", 1, {})

    async def test() -> None:
        await _commit(broker, "g1")
        await _commit(broker, "g2")
        resp = await call(broker, 42, 2, groups_names=["g1", "g2"])
        assert [(r.group_id, r.error_code) for r in resp.results] == [
            ("g2", 0), ("g1", E.GROUP_AUTHORIZATION_FAILED)]

    run(broker, test)


def test_list_groups_filtered_unless_cluster_describe(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "g1", OP_READ),
                     allow(RT_CLUSTER, CLUSTER_NAME, OP_DESCRIBE, principal="User:ops"))
    broker.metadata.create_topic("t", 1, {})

    async def test() -> None:
        for g in ("g1", "g2", "g3"):
            await _commit(broker, g)
        resp = await call(broker, 16, 4, states_filter=[])
        assert [g.group_id for g in resp.groups] == ["g1"]  # READ implies DESCRIBE
        resp = await call(broker, 16, 4, principal="User:ops", states_filter=[])
        assert sorted(g.group_id for g in resp.groups) == ["g1", "g2", "g3"]
        resp = await call(broker, 16, 4, principal="User:bob", states_filter=[])
        assert resp.error_code == 0 and resp.groups == []

    run(broker, test)


def test_offset_fetch_group_and_topic_checks(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "g1", OP_DESCRIBE), allow(RT_TOPIC, "t", OP_DESCRIBE))
    broker.metadata.create_topic("t", 1, {})
    broker.metadata.create_topic("secret", 1, {})
    R = request_class(9)

    async def test() -> None:
        await _commit(broker, "g1")
        await _commit(broker, "g1", "secret")
        # v7: one group; a refused group answers at the top with no topics
        resp = await call(broker, 9, 7, group_id="g2", topics=None)
        assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED and resp.topics == []
        # all topics: the undescribable one is left out
        resp = await call(broker, 9, 7, group_id="g1", topics=None)
        assert resp.error_code == 0
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in resp.topics] == [("t", [5])]
        # named topics: the undescribable one comes last with TOPIC_AUTHORIZATION_FAILED
        resp = await call(broker, 9, 7, group_id="g1", topics=[
            R.OffsetFetchRequestTopic(name="secret", partition_indexes=[0]),
            R.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])
        assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in resp.topics] == [
            ("t", 0, 5), ("secret", E.TOPIC_AUTHORIZATION_FAILED, -1)]
        # v1: no top-level error, each partition carries the group's
        resp = await call(broker, 9, 1, group_id="g2", topics=[R.OffsetFetchRequestTopic(name="t",
                                                                                          partition_indexes=[0])])
        assert resp.topics[0].partitions[0].error_code == E.GROUP_AUTHORIZATION_FAILED
        # v8: per group
        resp = await call(broker, 9, 8, require_stable=False, groups=[
            R.OffsetFetchRequestGroup(group_id="g1", topics=None), R.OffsetFetchRequestGroup(group_id="g2",
                                                                                             topics=None)])
        assert [(g.group_id, g.error_code) for g in resp.groups] == [("g1", 0), ("g2", E.GROUP_AUTHORIZATION_FAILED)]

    run(broker, test)


def test_offset_commit_and_delete_topic_checks(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "g1", OP_READ), allow(RT_TOPIC, "t", OP_READ))
    broker.metadata.create_topic("t", 1, {})
    broker.metadata.create_topic("secret", 1, {})
    C = request_class(8)
    D = request_class(47)

    async def test() -> None:
        resp = await call(broker, 8, 2, group_id="g1", generation_id_or_member_epoch=-1, member_id="",
                          retention_time_ms=-1, topics=[
                              C.OffsetCommitRequestTopic(name=n, partitions=[
                                  C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])
                              for n in ("t", "secret")])
        # Kafka's order: the refused topic as it is met, then the coordinator's results
        assert [(t.name, t.partitions[0].error_code) for t in resp.topics] == [
            ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("t", 0)]
        topics = [D.OffsetDeleteRequestTopic(name=n, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])
                  for n in ("t", "secret")]
        # OffsetDelete needs DELETE on the group (READ is not enough)
        resp = await call(broker, 47, 0, group_id="g1", topics=topics)
        assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED and resp.topics == []
        broker.authorizer.create([AclBinding(RT_GROUP, "g1", PT_LITERAL, "User:alice", "*", OP_DELETE, PERM_ALLOW)])
        resp = await call(broker, 47, 0, group_id="g1", topics=topics)
        assert resp.error_code == 0
        assert [(t.name, t.partitions[0].error_code) for t in resp.topics] == [
            ("t", 0), ("secret", E.TOPIC_AUTHORIZATION_FAILED)]

    run(broker, test)


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_describe_on_group_and_transactional_id(tmp_path: Path, version: int) -> None:
    broker = _broker(tmp_path, allow(RT_GROUP, "g1", OP_READ), allow(RT_TRANSACTIONAL_ID, "tx1", OP_WRITE))

    async def test() -> None:
        for key_type, ok, refused, code in ((0, "g1", "g2", E.GROUP_AUTHORIZATION_FAILED),
                                            (1, "tx1", "tx2", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)):
            if version >= 4:
                resp = await call(broker, 10, version, key_type=key_type, coordinator_keys=[ok, refused])
                got = [(c.key, c.error_code, c.node_id) for c in resp.coordinators]
                assert got[1] == (refused, code, -1)
                assert got[0][1] != code
                assert resp.coordinators[1].error_message == ""  # KafkaApis sets no message from v4
            else:
                resp = await call(broker, 10, version, key_type=key_type, key=refused)
                assert (resp.error_code, resp.node_id, resp.host, resp.port) == (code, -1, "", -1)
                resp = await call(broker, 10, version, key_type=key_type, key=ok)
                assert resp.error_code != code

    run(broker, test)


# ---------------------------------------------------------------------------------------- configs


def test_describe_configs_per_resource(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_TOPIC, "t", OP_ALTER_CONFIGS))  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    R = request_class(32)

    async def test() -> None:
        resp = await call(broker, 32, 4, include_synonyms=False, include_documentation=False, resources=[
            R.DescribeConfigsResource(resource_type=2, resource_name="secret", configuration_keys=None),
            R.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None),
            R.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None)])
        # authorized resources first, then the refused ones (ConfigHelper)
        assert [(r.resource_name, r.error_code, r.error_message) for r in resp.results] == [
            ("t", E.UNKNOWN_TOPIC_OR_PARTITION, "Topic t does not exist"),
            ("secret", E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
            ("1", E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")]

    run(broker, test)


@pytest.mark.parametrize("api_key", [33, 44])
def test_alter_configs_per_resource(tmp_path: Path, api_key: int) -> None:
    broker = _broker(tmp_path, allow(RT_TOPIC, "t", OP_DESCRIBE_CONFIGS), allow(RT_TOPIC, "u", OP_ALTER_CONFIGS))
    broker.metadata.create_topic("u", 1, {})
    broker.metadata.set_configs = lambda topic, configs: setattr(topic, "configs", configs)
    R = request_class(api_key)

    def config() -> Any:
        if api_key == 44:
            return R.AlterableConfig(name="retention.ms", config_operation=0, value="1000")
        return R.AlterableConfig(name="retention.ms", value="1000")

    async def test() -> None:
        resp = await call(broker, api_key, 1, validate_only=False, resources=[
            R.AlterConfigsResource(resource_type=2, resource_name=n, configs=[config()]) for n in ("t", "u")
        ] + [R.AlterConfigsResource(resource_type=4, resource_name="1", configs=[config()])])
        assert [(r.resource_name, r.error_code) for r in resp.responses] == [
            ("t", E.TOPIC_AUTHORIZATION_FAILED), ("u", 0), ("1", E.CLUSTER_AUTHORIZATION_FAILED)]
        assert resp.responses[0].error_message == "Topic authorization failed."
        assert broker.metadata.get("u").configs == {"retention.ms": "1000"}

    run(broker, test)


# ---------------------------------------------------------------------------------------- producers


def test_init_producer_id_rules(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_TRANSACTIONAL_ID, "tx1", OP_WRITE),
                     allow(RT_TOPIC, "orders-", OP_WRITE, pt=PT_PREFIXED),
                     allow(RT_CLUSTER, CLUSTER_NAME, OP_IDEMPOTENT_WRITE, principal="User:idem"))

    async def test() -> None:
        resp = await call(broker, 22, 4, transactional_id="tx2", transaction_timeout_ms=60000, producer_id=-1,
                          producer_epoch=-1)
        assert resp.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # idempotent: WRITE on some topic is enough (authorizeByResourceType) ...
        resp = await call(broker, 22, 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                          producer_epoch=-1)
        assert resp.error_code == 0 and resp.producer_id >= 0
        # ... as is IDEMPOTENT_WRITE on the cluster; neither: CLUSTER_AUTHORIZATION_FAILED
        resp = await call(broker, 22, 4, principal="User:idem", transactional_id=None,
                          transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
        assert resp.error_code == 0
        resp = await call(broker, 22, 4, principal="User:bob", transactional_id=None,
                          transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
        assert resp.error_code == E.CLUSTER_AUTHORIZATION_FAILED

    run(broker, test)


def test_transactional_produce_needs_write_on_transactional_id(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_TOPIC, "t", OP_WRITE))
    broker.metadata.create_topic("t", 2, {})
    P = request_class(0)
    batch = build_batch([SimpleRecord(key=None, value=b"v", timestamp=0)], producer_id=1, producer_epoch=0,
                        base_sequence=0, is_transactional=True)

    async def test() -> None:
        resp = await call(broker, 0, 9, transactional_id="tx", acks=-1, timeout_ms=1000, topic_data=[
            P.TopicProduceData(name="t", partition_data=[P.PartitionProduceData(index=i, records=batch)
                                                         for i in (0, 1)])])
        assert [(p.index, p.error_code) for t in resp.responses for p in t.partition_responses] == [
            (0, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), (1, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
        assert broker.logs[("t", 0)].log_end_offset == 0

    run(broker, test)


def test_transaction_apis(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_TRANSACTIONAL_ID, "tx1", OP_WRITE), allow(RT_GROUP, "g1", OP_READ),
                     allow(RT_TOPIC, "t", OP_WRITE), allow(RT_TOPIC, "t", OP_READ))
    broker.metadata.create_topic("t", 1, {})
    broker.metadata.create_topic("secret", 1, {})
    A = request_class(24)
    T = request_class(28)

    def topics(*names: str) -> list:
        return [A.AddPartitionsToTxnTopic(name=n, partitions=[0]) for n in names]

    def codes(resp: Any) -> list:
        return [(t.name, p.partition_error_code) for t in resp.results_by_topic_v3_and_below
                for p in t.results_by_partition]

    async def test() -> None:
        kw = dict(v3_and_below_producer_id=1, v3_and_below_producer_epoch=0)
        resp = await call(broker, 24, 3, v3_and_below_transactional_id="tx2", v3_and_below_topics=topics("t"), **kw)
        assert codes(resp) == [("t", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
        resp = await call(broker, 24, 3, v3_and_below_transactional_id="tx1",
                          v3_and_below_topics=topics("t", "secret"), **kw)
        assert codes(resp) == [("t", E.OPERATION_NOT_ATTEMPTED), ("secret", E.TOPIC_AUTHORIZATION_FAILED)]
        # v4+ comes from brokers: CLUSTER_ACTION on the cluster
        resp = await call(broker, 24, 4, transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id="tx1", producer_id=1, producer_epoch=0, verify_only=True, topics=topics("t"))])
        assert resp.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        broker.authorizer.create([AclBinding(RT_CLUSTER, CLUSTER_NAME, PT_LITERAL, "User:alice", "*",
                                             OP_CLUSTER_ACTION, PERM_ALLOW)])
        resp = await call(broker, 24, 4, transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id="tx1", producer_id=1, producer_epoch=0, verify_only=True, topics=topics("t"))])
        assert resp.error_code == 0

        for txn, group, code in (("tx2", "g1", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                 ("tx1", "g2", E.GROUP_AUTHORIZATION_FAILED)):
            resp = await call(broker, 25, 3, transactional_id=txn, producer_id=1, producer_epoch=0, group_id=group)
            assert resp.error_code == code
            resp = await call(broker, 28, 3, transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0,
                              generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
                                  T.TxnOffsetCommitRequestTopic(name="t", partitions=[
                                      T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
            assert resp.topics[0].partitions[0].error_code == code
        resp = await call(broker, 28, 3, transactional_id="tx1", group_id="g1", producer_id=1, producer_epoch=0,
                          generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
                              T.TxnOffsetCommitRequestTopic(name="secret", partitions=[
                                  T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
        assert resp.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        resp = await call(broker, 26, 3, transactional_id="tx2", producer_id=1, producer_epoch=0, committed=True)
        assert resp.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        resp = await call(broker, 26, 3, transactional_id="tx1", producer_id=1, producer_epoch=0, committed=True)
        assert resp.error_code != E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        resp = await call(broker, 65, 0, transactional_ids=["tx1", "tx2"])
        assert [(s.transactional_id, s.error_code) for s in resp.transaction_states][1] == (
            "tx2", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    run(broker, test)


# ---------------------------------------------------------------------------------------- decisions


class _Config:
    def __init__(self, values: dict[str, object]) -> None:
        self.values = values

    def get(self, key: str) -> object:
        return self.values.get(key)


class _Bare:
    def __init__(self, **values: object) -> None:
        self.config = _Config(values)
        self.metadata_store = None


def test_authorize_by_resource_type() -> None:
    """Kafka's Authorizer.authorizeByResourceType (what InitProducerId without a transactional id uses)."""
    auth = Authorizer(_Bare(**{"super.users": "User:root"}))
    assert auth.authorize_by_resource_type("User:root", "h", OP_WRITE, RT_TOPIC)
    assert not auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)
    auth.create([AclBinding(RT_TOPIC, "x", PT_LITERAL, "User:a", "*", OP_WRITE, PERM_ALLOW)])
    assert auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)
    assert not auth.authorize_by_resource_type("User:a", "h", OP_READ, RT_TOPIC)
    assert not auth.authorize_by_resource_type("User:b", "h", OP_WRITE, RT_TOPIC)
    auth.create([AclBinding(RT_TOPIC, "x", PT_LITERAL, "User:a", "*", OP_WRITE, PERM_DENY)])
    assert not auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)  # dominated by a literal deny
    auth.create([AclBinding(RT_TOPIC, "abc", PT_PREFIXED, "User:a", "*", OP_ALL, PERM_ALLOW),
                 AclBinding(RT_TOPIC, "ab", PT_PREFIXED, "User:a", "*", OP_WRITE, PERM_DENY)])
    assert not auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)  # dominated by a prefix deny
    auth.create([AclBinding(RT_TOPIC, "*", PT_LITERAL, "User:*", "*", OP_WRITE, PERM_ALLOW)])
    assert auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)  # wildcard allow
    auth.create([AclBinding(RT_TOPIC, "*", PT_LITERAL, "User:a", "*", OP_WRITE, PERM_DENY)])
    assert not auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)  # wildcard deny wins
    open_auth = Authorizer(_Bare(**{"allow.everyone.if.no.acl.found": True}))
    assert open_auth.authorize_by_resource_type("User:a", "h", OP_WRITE, RT_TOPIC)


def test_authorizer_rules() -> None:
    """Kafka's decision rules: super users, DENY wins, ALL, implied DESCRIBE, wildcards, no-ACL default."""
    auth = Authorizer(_Bare(**{"super.users": "User:root", "allow.everyone.if.no.acl.found": False}))
    auth.create([
        AclBinding(RT_TOPIC, "logs-", PT_PREFIXED, "User:*", "*", OP_READ, PERM_ALLOW),
        AclBinding(RT_TOPIC, "logs-secret", PT_LITERAL, "User:eve", "*", OP_ALL, PERM_DENY),
        AclBinding(RT_TOPIC, "*", PT_LITERAL, "User:ops", "10.0.0.1", OP_ALL, PERM_ALLOW),
        AclBinding(RT_TOPIC, "metrics", PT_LITERAL, "User:ann", "*", OP_WRITE, PERM_ALLOW),
    ])
    assert auth.authorize("User:root", "1.2.3.4", OP_WRITE, RT_TOPIC, "anything")
    assert auth.authorize("User:eve", "h", OP_READ, RT_TOPIC, "logs-app")
    assert not auth.authorize("User:eve", "h", OP_READ, RT_TOPIC, "logs-secret")  # DENY wins
    assert auth.authorize("User:ann", "h", OP_DESCRIBE, RT_TOPIC, "metrics")  # WRITE implies DESCRIBE
    assert not auth.authorize("User:ann", "h", OP_READ, RT_TOPIC, "metrics")
    assert auth.authorize("User:ops", "10.0.0.1", OP_WRITE, RT_TOPIC, "metrics")
    assert not auth.authorize("User:ops", "10.0.0.2", OP_WRITE, RT_TOPIC, "metrics")  # host must match
    # the "*" binding covers every topic, so "no ACL found" does not apply: refused
    assert not auth.authorize("User:ann", "h", OP_READ, RT_TOPIC, "no-acl-topic")
    assert not Authorizer(_Bare(**{"allow.everyone.if.no.acl.found": False})).authorize(
        "User:x", "h", OP_READ, RT_TOPIC, "free")
    open_auth = Authorizer(_Bare(**{"allow.everyone.if.no.acl.found": True}))
    assert open_auth.authorize("User:x", "h", OP_READ, RT_TOPIC, "free")


# ---------------------------------------------------------------------------------------- topics


def test_offset_for_leader_epoch_needs_describe_on_each_topic(tmp_path: Path) -> None:
    """KafkaApis: CLUSTER_ACTION on the cluster passes every topic (replica fetchers); a client needs
    DESCRIBE on each, the others get TOPIC_AUTHORIZATION_FAILED (not a cluster-wide refusal)."""
    broker = _broker(tmp_path, allow(RT_TOPIC, "seen", OP_READ), allow(RT_CLUSTER, CLUSTER_NAME, OP_CLUSTER_ACTION,
                                                                         principal="User:replica"))
    for name in ("seen", "hidden"):
        broker.metadata.create_topic(name, 2, {})
    R = request_class(23)

    def topics() -> list:
        return [R.OffsetForLeaderTopic(topic=name, partitions=[
            R.OffsetForLeaderPartition(partition=p, current_leader_epoch=-1, leader_epoch=0) for p in (0, 1)])
            for name in ("seen", "hidden")]

    async def test() -> None:
        for principal, codes in (("User:alice", {"seen": 0, "hidden": E.TOPIC_AUTHORIZATION_FAILED}),
                                 ("User:replica", {"seen": 0, "hidden": 0})):
            resp = await call(broker, 23, 4, principal=principal, replica_id=-1, topics=topics())
            got = {(t.topic, p.partition): p.error_code for t in resp.topics for p in t.partitions}
            assert got == {(name, p): code for name, code in codes.items() for p in (0, 1)}, principal
            denied = [p for t in resp.topics if t.topic == "hidden" for p in t.partitions]
            if principal == "User:alice":
                assert {(p.leader_epoch, p.end_offset) for p in denied} == {(-1, -1)}

    run(broker, test)


def test_describe_topic_partitions_needs_describe_on_each_topic(tmp_path: Path) -> None:
    broker = _broker(tmp_path, allow(RT_TOPIC, "b-seen", OP_DESCRIBE))
    for name in ("a-hidden", "b-seen", "c-hidden"):
        broker.metadata.create_topic(name, 1, {})
    R = request_class(75)

    async def test() -> None:
        listed = await call(broker, 75, 0, topics=[], response_partition_limit=100)
        assert [(t.name, t.error_code) for t in listed.topics] == [("b-seen", 0)]
        assert listed.topics[0].topic_authorized_operations == 1 << OP_DESCRIBE  # what alice may do, not all
        named = await call(broker, 75, 0, response_partition_limit=100, topics=[
            R.TopicRequest(name=n) for n in ("c-hidden", "b-seen", "a-hidden")])
        # the describable ones first, the refused ones after them with no topic id (Kafka's handler)
        assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
            ("b-seen", 0, 1), ("a-hidden", E.TOPIC_AUTHORIZATION_FAILED, 0),
            ("c-hidden", E.TOPIC_AUTHORIZATION_FAILED, 0)]
        assert named.topics[1].topic_id == named.topics[1].topic_id.__class__.ZERO
        only_refused = await call(broker, 75, 0, response_partition_limit=100, topics=[R.TopicRequest(name="a-hidden")])
        assert [(t.name, t.error_code) for t in only_refused.topics] == [("a-hidden", E.TOPIC_AUTHORIZATION_FAILED)]

    run(broker, test)


def test_missing_topics_get_the_principals_operations_and_come_after_the_found_ones(tmp_path: Path) -> None:
    """KafkaApis sets topic_authorized_operations on every topic answered by name, a missing one
    too, and Metadata lists unknown topic ids, the topics found, then the ones not found."""
    broker = _broker(tmp_path, allow(RT_TOPIC, "ghost", OP_DESCRIBE), allow(RT_TOPIC, "orders", OP_WRITE))
    broker.metadata.create_topic("orders", 1, {})
    broker.cluster_id = "acl-test-cluster"
    M, D = request_class(3), request_class(75)

    async def test() -> None:
        meta = await call(broker, 3, 12, topics=[M.MetadataRequestTopic(name=n) for n in ("ghost", "orders")],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=True)
        assert [(t.name, t.error_code, t.topic_authorized_operations) for t in meta.topics] == [
            ("orders", 0, (1 << OP_WRITE) | (1 << OP_DESCRIBE)),
            ("ghost", E.UNKNOWN_TOPIC_OR_PARTITION, 1 << OP_DESCRIBE)]
        described = await call(broker, 75, 0, response_partition_limit=100, topics=[D.TopicRequest(name="ghost")])
        assert [(t.name, t.error_code, t.topic_authorized_operations) for t in described.topics] == [
            ("ghost", E.UNKNOWN_TOPIC_OR_PARTITION, 1 << OP_DESCRIBE)]

    run(broker, test)


def test_metadata_and_describe_cluster_report_the_principals_operations(tmp_path: Path) -> None:
    """Kafka's AuthHelper.authorizedOperations: the operations the principal may do (implied ones
    included), not every operation the resource type supports."""
    broker = _broker(tmp_path, allow(RT_TOPIC, "orders", OP_WRITE), allow(RT_TOPIC, "orders", OP_ALTER_CONFIGS),
                     allow(RT_CLUSTER, CLUSTER_NAME, OP_IDEMPOTENT_WRITE))
    broker.metadata.create_topic("orders", 1, {})
    broker.cluster_id = "acl-test-cluster"
    R = request_class(3)

    async def test() -> None:
        for principal, topic_ops, cluster_ops in (
                # WRITE implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS
                ("User:alice", {OP_WRITE, OP_DESCRIBE, OP_ALTER_CONFIGS, OP_DESCRIBE_CONFIGS}, {OP_IDEMPOTENT_WRITE}),
                ("User:admin", {3, 4, 5, 6, 7, 8, 10, 11}, {5, 7, 8, 9, 10, 11, 12})):
            meta = await call(broker, 3, 12, principal=principal, topics=[R.MetadataRequestTopic(name="orders")],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=True)
            assert meta.topics[0].topic_authorized_operations == sum(1 << op for op in topic_ops), principal
            # the cached entry of one principal is not another's
            cluster = await call(broker, 60, 0, principal=principal, include_cluster_authorized_operations=True)
            assert cluster.cluster_authorized_operations == sum(1 << op for op in cluster_ops), principal
        meta = await call(broker, 3, 10, principal="User:alice", topics=[R.MetadataRequestTopic(name="orders")],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=True,
                          include_cluster_authorized_operations=True)
        assert meta.cluster_authorized_operations == 1 << OP_IDEMPOTENT_WRITE

    run(broker, test)


def test_describe_client_quotas_checks_its_filter_and_describe_configs_on_the_cluster(tmp_path: Path) -> None:
    """No client quotas set: a valid filter matches nothing; a bad one gets Kafka 4.4's error and
    message (ClientQuotasImage); without DESCRIBE_CONFIGS on the cluster, CLUSTER_AUTHORIZATION_FAILED."""
    broker = _broker(tmp_path, allow(RT_CLUSTER, CLUSTER_NAME, OP_DESCRIBE_CONFIGS, principal="User:ops"))
    C = request_class(48).ComponentData

    async def test() -> None:
        for principal in ("User:admin", "User:ops"):
            resp = await call(broker, 48, 1, principal=principal, strict=False,
                              components=[C(entity_type="user", match_type=0, match="alice")])
            assert (resp.error_code, resp.entries) == (0, []), principal
        resp = await call(broker, 48, 1, strict=False, components=[])
        assert (resp.error_code, resp.error_message, resp.entries) == (E.CLUSTER_AUTHORIZATION_FAILED, None, None)
        for types, code, message in (
                (["user", "user"], E.INVALID_REQUEST, "Entity type user cannot appear more than once in the filter."),
                (["group"], E.UNSUPPORTED_VERSION, "Unsupported entity type group"),
                ([""], E.INVALID_REQUEST, "Invalid empty entity type."),
                (["ip", "client-id"], E.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                         "component should not be used with user or clientId filter "
                                                         "component.")):
            resp = await call(broker, 48, 1, principal="User:ops", strict=False,
                              components=[C(entity_type=t, match_type=2, match=None) for t in types])
            assert (resp.error_code, resp.error_message, resp.entries) == (code, message, None), types

    run(broker, test)
