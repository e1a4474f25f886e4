"""ACLs per resource (#13) with stock clients against a real Odradek (SASL_PLAINTEXT PLAIN users,
StandardAuthorizer, super user admin): group DESCRIBE vs DELETE, ListGroups filtered to the groups a
user may describe, the transactional producer and TRANSACTIONAL_ID WRITE, DescribeConfigs and
IncrementalAlterConfigs per resource. kafka-python and confluent-kafka (librdkafka) both drive it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
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
from kafka.errors import GroupAuthorizationFailedError, TransactionalIdAuthorizationFailedError
from kafka_oracle import free_port, port_accepts

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
        'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')


def _kp(bootstrap: str, user: str) -> dict[str, object]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": f"{user}-pw"}


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

        admin.alter_group_offsets(group, {TopicPartition("orders", 0): OffsetAndMetadata(0, "", -1)})
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
