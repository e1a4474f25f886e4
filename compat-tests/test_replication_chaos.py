"""The chaos loop of issue #25: acks=all idempotent producers write while the broker leading a
partition is killed with SIGKILL (or paused with SIGSTOP), round after round, in a cluster of a
Kafka 4.4.0 controller, two Java brokers and two Odradek brokers (replication factor 3,
min.insync.replicas=2), while a read_committed consumer reads along. The history check: every
acknowledged record is read back exactly once, in the order it was acknowledged within its
partition; and what the consumer saw during the chaos is exactly the start of each partition's
final log (it never saw a record that a failover later truncated, never skipped or repeated one).

ODRADEK_CHAOS_ROUNDS sets the number of rounds (CI runs a few; the long mode 30 or more).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from test_cluster_broker import Cluster

pytestmark = pytest.mark.oracle
ROUNDS = int(os.environ.get("ODRADEK_CHAOS_ROUNDS", "4"))
TOPIC = "chaos"
PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("chaos"), "kafka", extra_java=(5,))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _leaders(cluster: Cluster) -> dict[int, int]:
    meta = AdminClient({"bootstrap.servers": cluster.java.bootstrap}).list_topics(TOPIC, timeout=10)
    return {p.id: p.leader for p in meta.topics[TOPIC].partitions.values()}


def _wait_all_led(cluster: Cluster, timeout: float = 60) -> dict[int, int]:
    deadline = time.time() + timeout
    leaders: dict[int, int] = {}
    while time.time() < deadline:
        try:
            leaders = _leaders(cluster)
        except Exception:  # noqa: BLE001 - metadata while brokers come and go
            leaders = {}
        if len(leaders) == PARTITIONS and all(v >= 0 for v in leaders.values()):
            return leaders
        time.sleep(0.3)
    raise AssertionError(f"not every partition has a leader: {leaders}")


class Writer:
    """An idempotent acks=all producer in a thread; acked values per partition, in ack order."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.producer = CKProducer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                    "linger.ms": 2, "message.timeout.ms": 120000})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].append(msg.value())

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, value=f"r-{i}".encode(), partition=i % PARTITIONS,
                                      on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.001)
        self.producer.flush(180)


class Reader:
    """A read_committed consumer reading along in a thread (assigned, no group), which must never
    need an offset reset: a reset would mean it had read past what the cluster kept."""

    def __init__(self, bootstrap: str) -> None:
        self.got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self.want = -1  # set when the writer is done: read until this many records
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-live-{time.time()}",
                                    "isolation.level": "read_committed", "enable.auto.commit": False,
                                    "auto.offset.reset": "error"})

    def _run(self) -> None:
        self.consumer.assign([CKTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        idle = 0
        while not self.stop.is_set():
            if 0 <= self.want <= sum(len(v) for v in self.got.values()) or idle > 120:
                break
            msg = self.consumer.poll(0.5)
            if msg is None:
                idle += self.want >= 0
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._AUTO_OFFSET_RESET:
                    self.errors.append(str(msg.error()))
                continue
            idle = 0
            self.got[msg.partition()].append(msg.value())
        self.consumer.close()


def _read_all(bootstrap: str, want: int) -> dict[int, list[bytes]]:
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-check-{time.time()}",
                           "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([CKTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    idle = 0
    while sum(len(v) for v in got.values()) < want and idle < 60:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            idle += 1
            continue
        got[msg.partition()].append(msg.value())
    consumer.close()
    return got


def test_no_acknowledged_record_is_lost_or_duplicated_while_leaders_die(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.java.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    _wait_all_led(cluster)
    writer = Writer(cluster.java.bootstrap)
    reader = Reader(",".join(b.bootstrap for b in cluster.brokers.values()))
    writer.thread.start()
    reader.thread.start()
    rng = random.Random(1234)
    kinds = []
    try:
        for round_ in range(ROUNDS):
            time.sleep(2)
            leaders = _wait_all_led(cluster)
            victim_id = leaders[rng.randrange(PARTITIONS)]
            victim = cluster.brokers[victim_id]
            pause = round_ % 3 == 2
            kinds.append((victim_id, "pause" if pause else "kill"))
            if pause:
                # a paused leader: its session expires, the controller moves leadership away
                victim.proc.send_signal(signal.SIGSTOP)
                time.sleep(12)
                victim.proc.send_signal(signal.SIGCONT)
            else:
                victim.kill()
                time.sleep(3)
                victim.start()
            cluster.wait_unfenced(cluster.broker_ids, timeout=90)
    finally:
        writer.stop.set()
        writer.thread.join(240)
    assert not writer.thread.is_alive()
    total = sum(len(v) for v in writer.acked.values())
    assert total > 0
    reader.want = total
    reader.thread.join(180)
    reader.stop.set()
    got = _read_all(cluster.odradek[3].bootstrap, total)
    assert reader.errors == [], reader.errors
    for p in range(PARTITIONS):
        acked, read = writer.acked[p], got[p]
        assert len(read) == len(set(read)), f"partition {p}: duplicates ({kinds})"
        missing = set(acked) - set(read)
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost ({kinds})"
        # acknowledged order kept: the acked values appear in the log in the order they were acked
        positions = {v: i for i, v in enumerate(read)}
        order = [positions[v] for v in acked]
        assert order == sorted(order), f"partition {p}: order changed ({kinds})"
        live = reader.got[p]
        assert live == read[: len(live)], f"partition {p}: the live read_committed consumer saw another history ({kinds})"
        assert not set(acked) - set(live), f"partition {p}: the live consumer missed acknowledged records ({kinds})"
