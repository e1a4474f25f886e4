"""Deleting a topic drops the groups' committed offsets for it, as Kafka does."""

from __future__ import annotations

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata


def test_delete_topic_removes_committed_offsets(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={"group.initial.rebalance.delay.ms": "0"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("doomed", 1, 1), NewTopic("kept", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for topic in ("doomed", "kept"):
        producer.send(topic, b"x").get(15)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g-del", enable_auto_commit=False)
    consumer.commit({TopicPartition("doomed", 0): OffsetAndMetadata(1, "", -1),
                     TopicPartition("kept", 0): OffsetAndMetadata(1, "", -1)})
    consumer.close()
    assert set(admin.list_group_offsets("g-del")["g-del"]) == {TopicPartition("doomed", 0), TopicPartition("kept", 0)}
    admin.delete_topics(["doomed"])
    assert set(admin.list_group_offsets("g-del")["g-del"]) == {TopicPartition("kept", 0)}
    admin.close()
