"""Consumers fetching from the closest replica (KIP-392, issue #25 must-show 4): with
replica.selector.class=RackAwareReplicaSelector, a consumer with client.rack is sent by the leader
(Java or Odradek) to the in-sync replica in its rack and reads from it; an Odradek follower serves
it, as its broker metrics show, and a Java follower likewise (Kafka 4.4.0 answers the same way).
"""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from test_cluster_broker import Cluster

pytestmark = pytest.mark.oracle
SELECTOR = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


METRICS_PORT = _free_port()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    overrides = {2: {**SELECTOR, "broker.rack": "rack-java"},
                 3: {**SELECTOR, "broker.rack": "rack-odradek", "odradek.metrics.port": METRICS_PORT},
                 4: {**SELECTOR, "broker.rack": "rack-leaders"}}
    c = Cluster(tmp_path_factory.mktemp("racks"), "kafka", broker_overrides=overrides)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _bytes_out(topic: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read().decode()
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name.startswith("kafka_server_brokertopicmetrics_bytesout") and s.labels.get("topic") == topic)


def _consume(bootstrap: str, topic: str, rack: str, want: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rack-{rack}-{time.time()}",
                         "client.rack": rack, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([CKTopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    idle = 0
    while len(got) < want and idle < 40:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            idle += 1
            continue
        got.append(msg.value())
    consumer.close()
    return got


@pytest.mark.parametrize("leader", [4, 2])
def test_a_consumer_reads_from_the_odradek_follower_in_its_rack(cluster, leader) -> None:
    topic = f"racks-led-by-{leader}"
    admin = AdminClient({"bootstrap.servers": cluster.java.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, 3, 2 if leader == 4 else 4]])])[
        topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.java.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    time.sleep(2)  # the followers' high watermarks catch up
    before = _bytes_out(topic)
    got = _consume(cluster.java.bootstrap, topic, "rack-odradek", 200)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(200))
    # the records came from the Odradek follower (broker 3), not from the leader
    assert _bytes_out(topic) - before > 200 * 4


def test_a_consumer_is_sent_from_an_odradek_leader_to_the_java_follower_in_its_rack(cluster) -> None:
    """The Odradek leader names the Java follower as the preferred read replica; the consumer
    reads everything from it (and not a byte from the leader: its metrics stay as they were)."""
    topic = "racks-java-follower"
    admin = AdminClient({"bootstrap.servers": cluster.java.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[3, 2, 4]])])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.java.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(topic, value=f"w{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    time.sleep(2)
    before = _bytes_out(topic)
    got = _consume(cluster.java.bootstrap, topic, "rack-java", 200)
    assert sorted(got) == sorted(f"w{i}".encode() for i in range(200))
    assert _bytes_out(topic) == before
