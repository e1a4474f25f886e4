"""ACLs with the stock admin client: create, describe, delete, enforcement on topics and groups,
persistence in the metadata log across a restart (#13)."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from kafka_oracle import free_port, port_accepts

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
        'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')


def _client(bootstrap: str, user: str) -> dict[str, object]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": f"{user}-pw"}


def test_acls_end_to_end(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(start=False, overrides={
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    })
    port = free_port("127.0.0.1")
    broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}"
    broker.start()
    while not port_accepts("127.0.0.1", port):  # the harness waited for the PLAINTEXT port only
        time.sleep(0.05)
    bootstrap = f"127.0.0.1:{port}"
    admin = KafkaAdminClient(**_client(bootstrap, "admin"))
    admin.create_topics([NewTopic("orders", 1, 1), NewTopic("private", 1, 1)])
    acls = [
        ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "ord", ACLResourcePatternType.PREFIXED)),
        ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL)),
        ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.GROUP, "g1", ACLResourcePatternType.LITERAL)),
    ]
    result = admin.create_acls(acls)
    assert not result["failed"], result
    described, error = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                     ResourcePatternFilter(ResourceType.ANY, None,
                                                                           ACLResourcePatternType.ANY)))
    assert error is None or error.errno == 0
    assert {(a.principal, a.operation, a.resource_pattern.resource_name) for a in described} == {
        ("User:alice", ACLOperation.WRITE, "ord"), ("User:alice", ACLOperation.READ, "orders"),
        ("User:alice", ACLOperation.READ, "g1")}

    producer = KafkaProducer(**_client(bootstrap, "alice"), acks="all", max_block_ms=10000)
    assert producer.send("orders", value=b"ok").get(15).offset == 0
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("private", value=b"no").get(15)
    producer.close()

    consumer = KafkaConsumer("orders", **_client(bootstrap, "alice"), group_id="g1", auto_offset_reset="earliest")
    got = []
    deadline = time.time() + 30
    while not got and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got += [m.value for m in batch]
    consumer.close()
    assert got == [b"ok"]
    consumer = KafkaConsumer("orders", **_client(bootstrap, "alice"), group_id="g2", auto_offset_reset="earliest")
    with pytest.raises(GroupAuthorizationFailedError):
        deadline = time.time() + 20
        while time.time() < deadline:
            consumer.poll(timeout_ms=500)
    consumer.close()

    bob = KafkaAdminClient(**_client(bootstrap, "bob"))
    refused = bob.create_acls([ACL("User:bob", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.TOPIC, "*", ACLResourcePatternType.LITERAL))])
    assert not refused["succeeded"]
    assert "ClusterAuthorizationFailed" in repr(refused["failed"]), refused
    bob.close()

    # delete alice's WRITE: her produce is refused from now on
    deleted = admin.delete_acls([ACLFilter("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                                           ResourcePatternFilter(ResourceType.TOPIC, "ord",
                                                                 ACLResourcePatternType.PREFIXED))])
    assert len(deleted[0][1]) == 1
    admin.close()
    # without WRITE on any topic an idempotent producer is refused already at InitProducerId
    # (CLUSTER_AUTHORIZATION_FAILED, as Kafka); a plain producer shows the per-topic refusal
    producer = KafkaProducer(**_client(bootstrap, "alice"), acks="all", max_block_ms=10000,
                             enable_idempotence=False)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("orders", value=b"no").get(15)
    producer.close()

    # the bindings are metadata records: a restart keeps exactly the two that are left
    assert broker.stop() == 0
    broker.start()
    admin = KafkaAdminClient(**_client(bootstrap, "admin"))
    described, _ = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                 ResourcePatternFilter(ResourceType.ANY, None,
                                                                       ACLResourcePatternType.ANY)))
    admin.close()
    assert {(a.operation, a.resource_pattern.resource_name) for a in described} == {
        (ACLOperation.READ, "orders"), (ACLOperation.READ, "g1")}
