"""Fault injection in `odradek.testing` (issue #25): what a user's failover test does with it.

A three-broker cluster of `odradek serve` processes (RF 3, min.insync.replicas 2), real
confluent-kafka clients: a partition between a leader and a follower takes the follower out of
the ISR while acks=all keeps working, healing brings it back; killing or pausing a leader's
process moves leadership and the clients go on with nothing acknowledged lost; a slow disk slows
the leader's writes (seen on the fault's counter). The in-process cluster takes the same
partition and slow-disk faults directly.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningCluster, running_cluster

DOCS = Path(__file__).resolve().parents[1] / "docs" / "testing-fixture.md"

# fast failure detection so the test spends seconds, not minutes, per fault
SETTINGS = {"replica.lag.time.max.ms": "1500", "broker.session.timeout.ms": "2500"}


def _wait(check: Callable[[], Any], what: str, timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _admin(cluster: RunningCluster, via: int = 1) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.node(via).bootstrap_servers})


def _create(cluster: RunningCluster, topic: str, replicas: list[int]) -> None:
    """One partition on `replicas` (the first leads), min.insync.replicas=2."""
    admin = _admin(cluster)  # kept alive until the answer comes
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    _wait(lambda: _isr(cluster, topic) == set(replicas), f"{topic} fully in sync")


def _partition_info(cluster: RunningCluster, topic: str, via: int = 1) -> Any:
    meta = _admin(cluster, via).list_topics(topic, timeout=10)
    t = meta.topics.get(topic)
    return None if t is None or t.error is not None or 0 not in t.partitions else t.partitions[0]


def _isr(cluster: RunningCluster, topic: str, via: int = 1) -> set[int]:
    p = _partition_info(cluster, topic, via)
    return set(p.isrs) if p is not None else set()


def _leader(cluster: RunningCluster, topic: str, via: int = 1) -> int:
    p = _partition_info(cluster, topic, via)
    return p.leader if p is not None else -1


class _Acked:
    """An idempotent acks=all producer remembering what the cluster acknowledged, in order."""

    def __init__(self, cluster: RunningCluster, nodes: tuple[int, ...] = (1, 2, 3)) -> None:
        bootstrap = ",".join(cluster.node(n).bootstrap_servers for n in nodes)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                                  # a request to a paused broker is given up (and retried) after 10 s
                                  "request.timeout.ms": 10000, "socket.timeout.ms": 10000})
        self.acked: list[bytes] = []
        self.errors: list[Any] = []

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(err)

    def produce(self, topic: str, values: list[bytes]) -> None:
        for v in values:
            self.producer.produce(topic, value=v, partition=0, on_delivery=self._done)
        self.producer.poll(0)

    def flush(self, timeout: float = 60.0) -> None:
        assert self.producer.flush(timeout) == 0

    def send(self, topic: str, values: list[bytes], timeout: float = 60.0) -> None:
        self.produce(topic, values)
        self.flush(timeout)


def _consumer(cluster: RunningCluster, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    return consumer


def _read(consumer: Consumer, into: list[bytes], want: int, timeout: float = 60.0) -> list[bytes]:
    deadline = time.monotonic() + timeout
    while len(into) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            into.append(msg.value())
    return into


def _values(prefix: str, start: int, end: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(start, end)]


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(brokers=3, in_process=False, **{k.replace(".", "_"): v for k, v in SETTINGS.items()}) as c:
        yield c


def test_a_partitioned_follower_leaves_the_isr_and_returns_after_heal(cluster: RunningCluster) -> None:
    _create(cluster, "split", [2, 3, 1])
    acked = _Acked(cluster)
    acked.send("split", _values("a", 0, 50))
    cluster.partition(2, 3)
    try:
        # as in Kafka, a follower falls out of the ISR once the leader's log end moves on without it:
        # these acks=all records wait for that, then succeed with 2 in sync (= min.insync.replicas)
        acked.produce("split", _values("a", 50, 100))
        _wait(lambda: _isr(cluster, "split") == {1, 2}, "broker 3 out of the ISR")
        acked.flush()
        assert cluster.fault_counters(3)["skipped_fetches"] > 0  # its fetcher stopped asking broker 2
        # both stay registered: the controller still lists broker 3 (a split between brokers only)
        assert {b for b in _admin(cluster).list_topics(timeout=10).brokers} == {1, 2, 3}
        acked.send("split", _values("a", 100, 120))
    finally:
        cluster.heal()
    _wait(lambda: _isr(cluster, "split") == {1, 2, 3}, "broker 3 back in the ISR")
    assert acked.errors == [] and acked.acked == _values("a", 0, 120)
    consumer = _consumer(cluster, "split")
    try:
        assert _read(consumer, [], 120) == _values("a", 0, 120)
    finally:
        consumer.close()


def test_killing_the_leader_loses_nothing_acknowledged(cluster: RunningCluster) -> None:
    _create(cluster, "failover", [2, 3, 1])
    acked = _Acked(cluster)
    consumer = _consumer(cluster, "failover")
    got: list[bytes] = []
    try:
        acked.send("failover", _values("k", 0, 100))
        _read(consumer, got, 100)
        cluster.kill(2)
        # the producer and the consumer go on with the new leader
        acked.send("failover", _values("k", 100, 200))
        assert _leader(cluster, "failover") in (1, 3)
        _read(consumer, got, 200)
    finally:
        consumer.close()
        cluster.restart(2)
    assert acked.errors == []
    assert acked.acked == _values("k", 0, 200)
    assert got == acked.acked  # nothing lost, no duplicate, in order
    _wait(lambda: _isr(cluster, "failover") == {1, 2, 3}, "the restarted broker back in the ISR")


def test_a_paused_leader_is_fenced_and_rejoins_when_resumed(cluster: RunningCluster) -> None:
    _create(cluster, "paused", [3, 2, 1])
    acked = _Acked(cluster)
    acked.send("paused", _values("p", 0, 50))
    cluster.pause(3)
    try:
        _wait(lambda: _leader(cluster, "paused") in (1, 2), "a new leader while broker 3 is paused")
        # an application that starts now (bootstrapping from the brokers that answer) writes on
        later = _Acked(cluster, nodes=(1, 2))
        later.send("paused", _values("p", 50, 100))
    finally:
        cluster.resume(3)
    _wait(lambda: _isr(cluster, "paused") == {1, 2, 3}, "the resumed broker back in the ISR", timeout=60)
    assert acked.errors == later.errors == []
    assert acked.acked + later.acked == _values("p", 0, 100)
    consumer = _consumer(cluster, "paused")
    try:
        assert _read(consumer, [], 100) == _values("p", 0, 100)
    finally:
        consumer.close()


def test_a_slow_disk_slows_the_writes_of_that_broker_only(cluster: RunningCluster) -> None:
    _create(cluster, "slow", [2, 3, 1])
    before = {n: cluster.fault_counters(n)["disk_waits"] for n in (1, 2, 3)}
    cluster.slow_disk(2, 30)
    try:
        acked = _Acked(cluster)
        for i in range(10):  # one batch each: every produce makes its own write on broker 2
            acked.send("slow", _values("s", i, i + 1))
        _wait(lambda: cluster.fault_counters(2)["disk_waits"] - before[2] >= 10, "broker 2's counted disk waits",
              timeout=10)
    finally:
        cluster.slow_disk(2, 0)
    assert acked.errors == [] and acked.acked == _values("s", 0, 10)
    # the other brokers' disks are normal: their follower writes were not slowed
    assert all(cluster.fault_counters(n)["disk_waits"] == before[n] for n in (1, 3))


def test_in_process_cluster_takes_the_same_faults() -> None:
    with running_cluster(brokers=3, **{k.replace(".", "_"): v for k, v in SETTINGS.items()}) as cluster:
        _create(cluster, "inproc", [2, 3, 1])
        # only the leader drops the follower's fetches: the follower keeps asking and gets nothing
        cluster.node(2).broker.faults.update(partitioned=[3])
        acked = _Acked(cluster)
        acked.produce("inproc", _values("i", 0, 5))
        _wait(lambda: _isr(cluster, "inproc") == {1, 2}, "broker 3 out of the ISR")
        acked.flush()
        assert cluster.fault_counters(2)["dropped_fetches"] > 0
        cluster.node(2).broker.faults.clear()
        cluster.slow_disk(2, 5)
        try:
            acked.send("inproc", _values("i", 5, 10))
            assert cluster.fault_counters(2)["disk_waits"] >= 1
        finally:
            cluster.slow_disk(2, 0)
        assert acked.errors == [] and acked.acked == _values("i", 0, 10)


def test_the_docs_failover_example_runs() -> None:
    block = re.search(r"<!-- example: faults -->\n```python\n(.*?)```", DOCS.read_text(), re.S)
    assert block is not None
    exec(compile(block.group(1), str(DOCS), "exec"), {})  # noqa: S102 - our own docs example
