"""ACLs per resource (#13) with stock clients against a real Odradek (SASL_PLAINTEXT PLAIN users,
StandardAuthorizer, super user admin): group DESCRIBE vs DELETE, ListGroups filtered to the groups a
user may describe, the transactional producer and TRANSACTIONAL_ID WRITE, DescribeConfigs and
IncrementalAlterConfigs per resource. kafka-python and confluent-kafka (librdkafka) both drive it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as CkConfigResource
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourceType,
)
from kafka.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    NotCoordinatorError,
    TransactionalIdAuthorizationFailedError,
)
from kafka_oracle import free_port, port_accepts
from test_security_acl import JAAS
from test_security_acl import _client as _kp

from odradek.tools.client import BrokerConnection
from odradek.tools.client_security import ClientSecurity
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class


def _ck(bootstrap: str, user: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-pw"}


@pytest.fixture
def secured(odradek_broker_factory) -> str:
    """A started Odradek with a SASL_PLAINTEXT listener and ACLs on; its SASL bootstrap address."""
    broker = odradek_broker_factory(start=False, overrides={
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    })
    port = free_port("127.0.0.1")
    broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}"
    broker.start()
    deadline = time.time() + 30
    while not port_accepts("127.0.0.1", port):
        assert time.time() < deadline
        time.sleep(0.05)
    return f"127.0.0.1:{port}"


def _acl(principal: str, op: ACLOperation, rtype: ResourceType, name: str) -> ACL:
    return ACL(principal, "*", op, ACLPermissionType.ALLOW,
               ResourcePattern(rtype, name, ACLResourcePatternType.LITERAL))


def _grant(bootstrap: str, *acls: ACL) -> None:
    admin = KafkaAdminClient(**_kp(bootstrap, "admin"))
    try:
        result = admin.create_acls(list(acls))
        assert not result["failed"], result
    finally:
        admin.close()


def _commit_group(bootstrap: str, group: str) -> None:
    """Create a consumer group with a committed offset (as the super user)."""
    admin = KafkaAdminClient(**_kp(bootstrap, "admin"))
    try:
        from kafka.structs import OffsetAndMetadata, TopicPartition

        deadline = time.time() + 60
        while True:  # Kafka answers COORDINATOR_NOT_AVAILABLE while it creates __consumer_offsets
            try:
                admin.alter_group_offsets(group, {TopicPartition("orders", 0): OffsetAndMetadata(0, "", -1)})
                break
            except (CoordinatorNotAvailableError, NotCoordinatorError):
                assert time.time() < deadline
                time.sleep(0.5)
    finally:
        admin.close()


def _setup_topics(bootstrap: str) -> None:
    admin = KafkaAdminClient(**_kp(bootstrap, "admin"))
    admin.create_topics([NewTopic("orders", 1, 1), NewTopic("private", 1, 1)])
    admin.close()
    producer = KafkaProducer(**_kp(bootstrap, "admin"))
    producer.send("orders", b"x").get(15)
    producer.close()


def test_group_describe_but_not_delete(secured: str) -> None:
    _setup_topics(secured)
    for group in ("g1", "g2"):
        _commit_group(secured, group)
    _grant(secured, _acl("User:bob", ACLOperation.DESCRIBE, ResourceType.GROUP, "g1"))

    # kafka-python
    bob = KafkaAdminClient(**_kp(secured, "bob"))
    try:
        described = bob.describe_groups(["g1"])
        assert list(described) == ["g1"], described
        with pytest.raises(GroupAuthorizationFailedError):
            bob.describe_groups(["g2"])
        deleted = dict(bob.delete_groups(["g1"]))
        assert "GroupAuthorizationFailed" in str(getattr(deleted["g1"], "__name__", deleted["g1"])), deleted
        listed = bob.list_groups()
        assert "g1" in repr(listed) and "g2" not in repr(listed), listed  # only the describable group
    finally:
        bob.close()

    # confluent-kafka
    admin = AdminClient(_ck(secured, "bob"))
    ok = admin.describe_consumer_groups(["g1"])["g1"].result(20)
    assert ok.group_id == "g1"
    with pytest.raises(KafkaException) as refused:
        admin.describe_consumer_groups(["g2"])["g2"].result(20)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups(["g1"], request_timeout=20)["g1"].result(20)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    listed = admin.list_consumer_groups(request_timeout=20).result(20)
    assert sorted(g.group_id for g in listed.valid) == ["g1"]

    # the group is still there for the super user, who may delete it
    super_admin = AdminClient(_ck(secured, "admin"))
    assert super_admin.delete_consumer_groups(["g1"], request_timeout=20)["g1"].result(20) is None


def test_transactional_producer_needs_transactional_id_write(secured: str) -> None:
    _setup_topics(secured)
    _grant(secured, _acl("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "orders"))

    # confluent-kafka: init_transactions fails with the transactional-id authorization error
    producer = Producer({**_ck(secured, "alice"), "transactional.id": "tx-ck"})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(20)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # kafka-python: the same
    kp = KafkaProducer(**_kp(secured, "alice"), transactional_id="tx-kp", max_block_ms=20000)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        kp.init_transactions()
    kp.close(timeout=5)

    _grant(secured, _acl("User:alice", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-ck"),
           _acl("User:alice", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-kp"))
    producer = Producer({**_ck(secured, "alice"), "transactional.id": "tx-ck"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("orders", b"in-txn")
    producer.commit_transaction(30)

    kp = KafkaProducer(**_kp(secured, "alice"), transactional_id="tx-kp", max_block_ms=20000)
    kp.init_transactions()
    kp.begin_transaction()
    kp.send("orders", b"in-txn-2")
    kp.commit_transaction()
    kp.close(timeout=5)


def test_configs_per_resource(secured: str) -> None:
    _setup_topics(secured)
    _grant(secured, _acl("User:alice", ACLOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "orders"))

    # kafka-python (which does not raise per resource): the refused topic comes back without configs
    alice = KafkaAdminClient(**_kp(secured, "alice"))
    try:
        responses = alice.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "orders"),
                                            ConfigResource(ConfigResourceType.TOPIC, "private")],
                                           config_filter="all")
        assert "retention.ms" in responses["topic"]["orders"]
        assert not responses["topic"].get("private"), responses["topic"].get("private")
    finally:
        alice.close()

    # confluent-kafka: a future per resource
    admin = AdminClient(_ck(secured, "alice"))
    futures = admin.describe_configs([CkConfigResource("TOPIC", "orders"), CkConfigResource("TOPIC", "private"),
                                      CkConfigResource("BROKER", "1")], request_timeout=20)
    by_name = {r.name: f for r, f in futures.items()}
    assert "retention.ms" in by_name["orders"].result(20)
    with pytest.raises(KafkaException) as refused:
        by_name["private"].result(20)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        by_name["1"].result(20)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # altering needs ALTER_CONFIGS on the topic: DESCRIBE_CONFIGS is not enough
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    res = CkConfigResource("TOPIC", "orders", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        list(admin.incremental_alter_configs([res]).values())[0].result(20)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(secured, _acl("User:alice", ACLOperation.ALTER_CONFIGS, ResourceType.TOPIC, "orders"))
    assert list(admin.incremental_alter_configs([res]).values())[0].result(20) is None
    entries = admin.describe_configs([CkConfigResource("TOPIC", "orders")])
    assert list(entries.values())[0].result(20)["retention.ms"].value == "3600000"


# ------------------------------------------------------------------------------------------------
# the same scenario against Kafka 4.1.1 with StandardAuthorizer (the oracle) and Odradek
# ------------------------------------------------------------------------------------------------


def _start_secured(factory, kind: str) -> str:
    sasl_port = free_port("127.0.0.1")
    broker = factory(start=False, overrides={})
    plain = f"PLAINTEXT://127.0.0.1:{broker.port}"
    sasl = f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    broker.overrides.update({
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # the PLAINTEXT (and Kafka's CONTROLLER) listener's User:ANONYMOUS is the broker itself
        "super.users": "User:admin;User:ANONYMOUS",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "offsets.topic.replication.factor": "1",
    })
    if kind == "kafka":
        broker.overrides.update({
            "listeners": f"{plain},CONTROLLER://127.0.0.1:{broker.controller_port},{sasl}",
            "advertised.listeners": f"{plain},{sasl}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        })
    else:
        broker.overrides["listeners"] = f"{plain},{sasl}"
    broker.start()
    deadline = time.time() + 60
    while not port_accepts("127.0.0.1", sasl_port):
        assert time.time() < deadline
        time.sleep(0.05)
    return f"127.0.0.1:{sasl_port}"


def _code(fn) -> object:
    """0 when `fn()` succeeds, else the Kafka error code (or the kafka-python error's name)."""
    try:
        fn()
        return 0
    except KafkaException as exc:
        return exc.args[0].code()
    except Exception as exc:  # noqa: BLE001 - kafka-python errors: compare their names
        return type(exc).__name__


def _scenario(bootstrap: str) -> dict[str, object]:
    _setup_topics(bootstrap)
    for group in ("g1", "g2"):
        _commit_group(bootstrap, group)
    _grant(bootstrap, _acl("User:bob", ACLOperation.DESCRIBE, ResourceType.GROUP, "g1"),
           _acl("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "orders"),
           _acl("User:alice", ACLOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "orders"))
    time.sleep(3)  # Kafka's authorizer sees new ACLs once the broker has published the metadata
    out: dict[str, object] = {}
    bob = AdminClient(_ck(bootstrap, "bob"))
    out["describe g1"] = _code(lambda: bob.describe_consumer_groups(["g1"])["g1"].result(20))
    out["describe g2"] = _code(lambda: bob.describe_consumer_groups(["g2"])["g2"].result(20))
    out["delete g1"] = _code(lambda: bob.delete_consumer_groups(["g1"], request_timeout=20)["g1"].result(20))
    # ListGroups as bob: only the groups he may describe. (Kafka 4.1 lists no group that only has
    # offsets committed by an admin client, Odradek lists them as Empty classic groups: compare the
    # filtering, not the groups.)
    listed = sorted(g.group_id for g in bob.list_consumer_groups(request_timeout=20).result(20).valid)
    root = AdminClient(_ck(bootstrap, "admin"))
    everything = sorted(g.group_id for g in root.list_consumer_groups(request_timeout=20).result(20).valid)
    out["list filtered"] = listed == [g for g in everything if g == "g1"]
    out["offsets g2"] = _code(lambda: bob.list_consumer_group_offsets(
        [__import__("confluent_kafka").ConsumerGroupTopicPartitions("g2")])["g2"].result(20))
    alice = AdminClient(_ck(bootstrap, "alice"))
    futures = alice.describe_configs([CkConfigResource("TOPIC", "orders"), CkConfigResource("TOPIC", "private"),
                                      CkConfigResource("BROKER", "1")], request_timeout=20)
    out["configs"] = {r.name: _code(lambda f=f: f.result(20)) for r, f in futures.items()}
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    res = CkConfigResource("TOPIC", "orders", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    out["alter orders"] = _code(lambda: list(alice.incremental_alter_configs([res]).values())[0].result(20))
    # authorized operations as each principal sees them (Metadata, DescribeCluster, DescribeGroups)
    topics = alice.describe_topics(TopicCollection(["orders"]), request_timeout=20, include_authorized_operations=True)
    out["alice's operations on orders"] = sorted(op.name for op in topics["orders"].result(20).authorized_operations)
    for who, client in (("alice", alice), ("admin", root)):
        cluster = client.describe_cluster(request_timeout=20, include_authorized_operations=True).result(20)
        out[f"{who}'s operations on the cluster"] = sorted(op.name for op in cluster.authorized_operations or [])
    groups = bob.describe_consumer_groups(["g1"], request_timeout=20, include_authorized_operations=True)
    out["bob's operations on g1"] = sorted(op.name for op in groups["g1"].result(20).authorized_operations or [])
    producer = Producer({**_ck(bootstrap, "alice"), "transactional.id": "tx-oracle"})
    out["init txn"] = _code(lambda: producer.init_transactions(20))
    kp = KafkaProducer(**_kp(bootstrap, "bob"), enable_idempotence=True, max_block_ms=15000)
    out["idempotent bob"] = _code(lambda: kp.send("orders", b"x").get(15))
    kp.close(timeout=5)
    kp = KafkaProducer(**_kp(bootstrap, "alice"), enable_idempotence=True, max_block_ms=15000)
    out["idempotent alice"] = _code(lambda: kp.send("orders", b"x").get(15))
    kp.close(timeout=5)
    out["consumer group describe"] = _consumer_group_describe(bootstrap)
    out["describe topic partitions"] = _describe_topic_partitions(bootstrap)
    out["offset commit order"] = _offset_commit_order(bootstrap)
    return out


def _member(bootstrap: str, group: str, topics: list[str]) -> Consumer:
    """A KIP-848 consumer (the admin) of `group` that holds an assignment."""
    consumer = Consumer({**_ck(bootstrap, "admin"), "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe(topics)
    deadline = time.time() + 60
    while len({tp.topic for tp in consumer.assignment()}) < len(topics):
        assert time.time() < deadline, consumer.assignment()
        consumer.poll(0.2)
    return consumer


def _alice_connection(bootstrap: str) -> BrokerConnection:
    """A raw connection as alice (SASL PLAIN), for the APIs the stock clients here do not send."""
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), security=ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="alice-pw";'}))


def _describe_topic_partitions(bootstrap: str) -> list[tuple]:
    """DescribeTopicPartitions and Metadata as alice of a topic she may use, one she may not, and a
    missing one she may describe: each topic's error, id presence, partitions and operations, in
    answer order."""
    _grant(bootstrap, _acl("User:alice", ACLOperation.DESCRIBE, ResourceType.TOPIC, "ghost"))
    time.sleep(3)  # the ACL is published
    conn = _alice_connection(bootstrap)
    try:
        cls = request_class(75)
        response = conn.send(75, cls(topics=[cls.TopicRequest(name=n) for n in ("private", "ghost", "orders")],
                                     response_partition_limit=2000, cursor=None), version=0)
        cls = request_class(3)
        metadata = conn.send(3, cls(topics=[cls.MetadataRequestTopic(name=n) for n in ("private", "ghost", "orders")],
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=True),
                             version=12)
    finally:
        conn.close()
    return [(api, t.name, t.error_code, t.topic_id != Uuid.ZERO, len(t.partitions), t.topic_authorized_operations)
            for api, answer in (("DescribeTopicPartitions", response), ("Metadata", metadata))
            for t in answer.topics]


def _offset_commit_order(bootstrap: str) -> list[tuple]:
    """OffsetCommit as alice (READ on the group, `ledger`, `orders` and the missing `ghost`, not
    `private`) of a topic she may commit to, a refused topic, a known topic with one unknown
    partition, and a missing topic: the answer's topics and partitions in order, with their errors."""
    admin = KafkaAdminClient(**_kp(bootstrap, "admin"))
    admin.create_topics([NewTopic("ledger", 1, 1)])
    admin.close()
    _grant(bootstrap, _acl("User:alice", ACLOperation.READ, ResourceType.GROUP, "cg-commit"),
           _acl("User:alice", ACLOperation.READ, ResourceType.TOPIC, "orders"),
           _acl("User:alice", ACLOperation.READ, ResourceType.TOPIC, "ledger"),
           _acl("User:alice", ACLOperation.READ, ResourceType.TOPIC, "ghost"))
    time.sleep(3)  # the ACLs and the topic are published
    cls = request_class(8)
    wanted = (("ledger", (0,)), ("private", (0,)), ("orders", (0, 5)), ("ghost", (0,)))
    conn = _alice_connection(bootstrap)
    try:
        deadline = time.time() + 60
        while True:
            response = conn.send(8, cls(group_id="cg-commit", generation_id_or_member_epoch=-1, member_id="",
                                        group_instance_id=None, retention_time_ms=-1, topics=[
                cls.OffsetCommitRequestTopic(name=name, partitions=[
                    cls.OffsetCommitRequestPartition(partition_index=i, committed_offset=1, committed_leader_epoch=-1,
                                                     committed_metadata="") for i in indexes])
                for name, indexes in wanted]), version=8)
            codes = {p.error_code for t in response.topics for p in t.partitions}
            # Kafka answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR while it loads the group
            if not codes & {14, 15, 16} or time.time() > deadline:
                break
            time.sleep(0.5)
    finally:
        conn.close()
    return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics]


def _consumer_group_describe(bootstrap: str) -> list[tuple]:
    """ConsumerGroupDescribe as alice (DESCRIBE on the groups and on `orders`, not on `private`):
    each group's error, message, operations and the topics its members are assigned."""
    _grant(bootstrap, _acl("User:alice", ACLOperation.DESCRIBE, ResourceType.GROUP, "cg-open"),
           _acl("User:alice", ACLOperation.DESCRIBE, ResourceType.GROUP, "cg-private"),
           _acl("User:alice", ACLOperation.DESCRIBE, ResourceType.GROUP, "cg-missing"))
    members = [_member(bootstrap, "cg-open", ["orders"]), _member(bootstrap, "cg-private", ["orders", "private"])]
    try:
        time.sleep(3)  # the ACLs are published
        conn = _alice_connection(bootstrap)
        try:
            # one broker: it coordinates every group
            response = conn.send(69, request_class(69)(
                group_ids=["cg-open", "cg-private", "cg-missing"], include_authorized_operations=True), version=0)
        finally:
            conn.close()
    finally:
        for member in members:
            member.close()
    return sorted((g.group_id, g.error_code, g.error_message, g.authorized_operations,
                   sorted({tp.topic_name for m in g.members for tp in m.assignment.topic_partitions}))
                  for g in response.groups)


def test_same_answers_as_kafka(kafka_broker_factory, odradek_broker_factory) -> None:
    theirs = _scenario(_start_secured(kafka_broker_factory, "kafka"))
    ours = _scenario(_start_secured(odradek_broker_factory, "odradek"))
    assert ours == theirs
    assert theirs["delete g1"] == KafkaError.GROUP_AUTHORIZATION_FAILED
    # the KIP-848 group with a member assigned `private` is hidden from alice
    assert [g[:2] for g in theirs["consumer group describe"]] == [
        ("cg-missing", KafkaError.GROUP_ID_NOT_FOUND), ("cg-open", 0), ("cg-private", KafkaError.TOPIC_AUTHORIZATION_FAILED)]
