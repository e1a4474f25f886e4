"""Odradek brokers in a KRaft cluster under Apache Kafka 4.4.0's controller, and Kafka's brokers
under Odradek's controller (issue #24).

One cluster per controller kind: a controller (node 1: Kafka 4.4.0, or `odradek serve` with
process.roles=controller), a Kafka 4.4.0 broker (node 2) and two `odradek serve` processes with
process.roles=broker (nodes 3 and 4), all real processes on loopback. The Java broker checks every
step: it must see the Odradek brokers registered and unfenced, serve the same cluster, and hold
the same metadata log; under Odradek's controller it must register, be unfenced and serve its
partitions from the metadata it fetched.
"""

from __future__ import annotations

import time
import uuid

import pytest
from client_helpers import read_committed
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka_cluster import KafkaNode, Quorum, odradek_controller
from kafka_oracle import CLUSTER_ID, KAFKA_4_4, require_tool
from odradek_broker import OdradekBroker

from odradek.wire.records import iter_batches

pytestmark = pytest.mark.oracle
MD = "__cluster_metadata-0"


class Cluster:
    """The module's cluster, by controller kind: `kafka` (a Kafka 4.4.0 controller), `odradek` (an
    Odradek process.roles=controller node), or `combined` (must-show 2: an Odradek combined node,
    broker 4, is the controller; a second Java broker, 5, joins the Java broker 2 and the Odradek
    broker 3)."""

    def __init__(self, root, controller_kind: str = "kafka", extra_java: tuple[int, ...] = (),
                 broker_overrides: dict[int, dict[str, object]] | None = None, java_only: bool = False) -> None:
        require_tool("kafka-4.4.0")
        self.quorum = Quorum()
        self.broker_overrides = broker_overrides or {}
        self.kind = controller_kind
        self.extra_java: dict[int, object] = {}
        if controller_kind == "combined":
            combined = odradek_controller(root / "node4", self.quorum, 4, roles=("broker", "controller"))
            self.controller = combined
            self.odradek = {3: OdradekBroker(root / "node3", overrides=self.odradek_overrides(3)), 4: combined}
        else:
            # formatted as Kafka 4.4 formats by default: transaction.version 2 (KIP-890 part 2)
            self.controller = (KafkaNode(root / "node1", self.quorum, 1, roles=("controller",))
                               if controller_kind == "kafka" else odradek_controller(root / "node1", self.quorum, 1))
            self.odradek = {n: OdradekBroker(root / f"node{n}", overrides=self.odradek_overrides(n)) for n in (3, 4)}
        if java_only:
            # the all-Kafka twin of a mixed cluster: Java brokers with the Odradek brokers' ids
            assert controller_kind == "kafka"
            self.odradek = {}
            extra_java = tuple(dict.fromkeys((3, 4, *extra_java)))
        self.java = KafkaNode(root / "node2", self.quorum, 2, roles=("broker",),
                              overrides=self.broker_overrides.get(2))
        if controller_kind == "combined":
            extra_java = tuple(dict.fromkeys((5, *extra_java)))
        for n in extra_java:
            self.extra_java[n] = KafkaNode(root / f"node{n}", self.quorum, n, roles=("broker",),
                                           overrides=self.broker_overrides.get(n))

    def odradek_overrides(self, node_id: int) -> dict[str, object]:
        return {"process.roles": "broker", "node.id": node_id, "cluster.id": CLUSTER_ID,
                "controller.quorum.voters": self.quorum.voters_config, "controller.listener.names": "CONTROLLER",
                **self.broker_overrides.get(node_id, {})}

    @property
    def brokers(self) -> dict[int, object]:
        return {2: self.java, **self.odradek, **self.extra_java}

    @property
    def broker_ids(self) -> set[int]:
        return set(self.brokers)

    def start(self) -> None:
        self.controller.start()
        for broker in [self.java, *self.extra_java.values(), *self.odradek.values()]:
            if broker is not self.controller:
                broker.start()
        self.wait_unfenced(self.broker_ids)

    def wait_unfenced(self, ids: set[int], timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        seen: dict[int, bool] = {}
        while time.time() < deadline:
            seen = describe(self.java.bootstrap)
            if {i for i, fenced in seen.items() if not fenced} >= ids:
                return
            time.sleep(0.2)
        raise AssertionError(f"brokers {ids} not all unfenced: {seen}")

    def stop(self) -> None:
        nodes = [b for b in [*self.odradek.values(), self.java, *self.extra_java.values()] if b is not self.controller]
        for node in [*nodes, self.controller]:
            try:
                node.stop()
            finally:
                node.kill()

    def java_logs_clean(self) -> list[str]:
        """Lines of the Java brokers' logs about metadata they could not fetch or apply (none
        expected): errors, metadata loading/publishing faults, and warnings of the image loader
        and publishers. (A controller restarting shows up as connection warnings, which are fine.)"""
        bad = []
        for node in [self.java, *self.extra_java.values()]:
            for line in (node.workdir / "server.log").read_text(errors="replace").splitlines():
                lower = line.lower()
                if (" ERROR " in line or ("fault" in lower and "metadata" in lower)
                        or (" WARN " in line and any(c in line for c in (
                            "org.apache.kafka.image", "MetadataLoader", "MetadataPublisher", "BrokerMetadataPublisher",
                            "KRaftMetadataCache", "Invalid", "Unexpected")))):
                    bad.append(line)
        return bad


def describe(bootstrap: str) -> dict[int, bool]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {b["broker_id"]: b["is_fenced"] for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        parts = admin.describe_topics([topic])[0]["partitions"]
        return {p["partition_index"]: p["leader_id"] for p in parts}
    finally:
        admin.close()


@pytest.fixture(scope="module", params=["kafka-controller", "odradek-controller", "combined-controller"])
def cluster(request, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"), request.param.split("-")[0])
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _wait_leaders(cluster: Cluster, topic: str, count: int) -> dict[int, int]:
    deadline = time.time() + 20
    got: dict[int, int] = {}
    while time.time() < deadline:
        got = leaders(cluster.java.bootstrap, topic)
        if len(got) == count and all(v >= 0 for v in got.values()):
            return got
        time.sleep(0.2)
    raise AssertionError(f"{topic}: leaders {got}")


def test_every_broker_sees_the_same_cluster(cluster) -> None:
    for broker in cluster.brokers.values():
        assert describe(broker.bootstrap) == {b: False for b in cluster.broker_ids}
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        consumer.topics()  # a Metadata round trip
        nodes = {b.node_id for b in consumer._client.cluster.brokers()}  # noqa: SLF001 - kafka-python's view
        consumer.close()
        assert nodes == cluster.broker_ids


@pytest.mark.parametrize("through", [3, 2])
def test_topics_created_through_any_broker_get_partitions_on_all_three(cluster, through) -> None:
    topic = f"spread-via-{through}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[through].bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    placed = _wait_leaders(cluster, topic, 6)
    assert set(placed.values()) == cluster.broker_ids
    # every broker answers the same leaders
    for broker in cluster.brokers.values():
        assert leaders(broker.bootstrap, topic) == placed


def test_clients_produce_and_consume_every_partition(cluster, java_client) -> None:
    topic = "clients-everywhere"
    admin = KafkaAdminClient(bootstrap_servers=cluster.odradek[4].bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    _wait_leaders(cluster, topic, 6)
    sent: set[bytes] = set()
    # kafka-python through an Odradek broker, to every partition
    producer = KafkaProducer(bootstrap_servers=cluster.odradek[3].bootstrap, acks="all")
    for i in range(60):
        value = f"kp-{i}".encode()
        producer.send(topic, value=value, partition=i % 6).get(15)
        sent.add(value)
    producer.close()
    # confluent-kafka through the Java broker
    ck = CKProducer({"bootstrap.servers": cluster.java.bootstrap, "acks": "all"})
    errors: list[object] = []
    for i in range(60):
        value = f"ck-{i}".encode()
        ck.produce(topic, value=value, partition=i % 6, on_delivery=lambda e, _m: e and errors.append(e))
        sent.add(value)
    assert ck.flush(30) == 0 and errors == []
    # the Java 4.4 client (idempotent: producer ids from the controller) through the other Odradek broker
    result = java_client(cluster.odradek[4].bootstrap, version=KAFKA_4_4).produce(
        topic, 60, key_format=None, value_format="java-%d")
    assert result["produced"] == 60
    sent |= {f"java-{i}".encode() for i in range(60)}
    # each client reads everything back, each through a different kind of broker
    read = KafkaConsumer(bootstrap_servers=cluster.java.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(6)]
    read.assign(tps)
    read.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.time() + 30
    while len(got) < len(sent) and time.time() < deadline:
        for batch in read.poll(500).values():
            got += [m.value for m in batch]
    read.close()
    assert sorted(got) == sorted(sent)
    ckc = CKConsumer({"bootstrap.servers": cluster.odradek[3].bootstrap, "group.id": f"unused-{uuid.uuid4()}",
                      "enable.auto.commit": False})
    ckc.assign([CKTopicPartition(topic, p, 0) for p in range(6)])
    ck_got: list[bytes] = []
    idle = 0
    while idle < 10 and len(ck_got) < len(sent):
        msg = ckc.poll(0.5)
        if msg is None or msg.error() is not None:
            idle += 1
            continue
        ck_got.append(msg.value())
    ckc.close()
    assert sorted(ck_got) == sorted(sent)
    java_got = java_client(cluster.odradek[4].bootstrap, version=KAFKA_4_4).consume(topic, max_records=len(sent))
    assert sorted(r.value for r in java_got) == sorted(sent)


def test_a_partition_led_elsewhere_is_answered_not_leader_or_follower(cluster) -> None:
    from odradek.tools.client import BrokerConnection  # noqa: PLC0415 - one plain connection
    from odradek.wire.protocol import request_class  # noqa: PLC0415
    from odradek.wire.records import SimpleRecord, build_batch  # noqa: PLC0415

    topic = "who-leads"
    admin = KafkaAdminClient(bootstrap_servers=cluster.java.bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    placed = _wait_leaders(cluster, topic, 3)
    elsewhere = next(p for p, leader in placed.items() if leader != 3)
    ours = [p for p, leader in placed.items() if leader == 3]
    batch = build_batch([SimpleRecord(value=b"x", key=None, timestamp=int(time.time() * 1000))])
    req = request_class(0)
    body = req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[req.TopicProduceData(
        name=topic, partition_data=[req.PartitionProduceData(index=p, records=batch)
                                    for p in [elsewhere, *ours]])])
    host, port = cluster.odradek[3].bootstrap.split(":")
    conn = BrokerConnection(host, int(port))
    try:
        # the broker leads its new partitions once their logs are made (a moment after the
        # metadata names it), as a Java broker does: until then NOT_LEADER_OR_FOLLOWER, which a
        # client retries
        deadline = time.time() + 10
        while True:
            resp = conn.send(0, body, version=9)
            codes = {p.index: p.error_code for t in resp.responses for p in t.partition_responses}
            if all(codes[p] == 0 for p in ours) or time.time() > deadline:
                break
            time.sleep(0.1)
    finally:
        conn.close()
    assert codes[elsewhere] == 6  # NOT_LEADER_OR_FOLLOWER
    assert all(codes[p] == 0 for p in ours)


def test_an_odradek_broker_restarts_and_leads_its_partitions_again(cluster) -> None:
    topic = "restart-me"
    admin = KafkaAdminClient(bootstrap_servers=cluster.java.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    before = _wait_leaders(cluster, topic, 6)
    mine = [p for p, leader in before.items() if leader == 3]
    assert mine
    producer = KafkaProducer(bootstrap_servers=cluster.java.bootstrap, acks="all")
    acked = [producer.send(topic, value=f"before-{i}".encode(), partition=i % 6).get(15) for i in range(30)]
    producer.flush()
    broker = cluster.odradek[3]
    assert broker.stop() == 0  # controlled shutdown: the controller fences it and its partitions lose their leader
    during = leaders(cluster.java.bootstrap, topic)
    assert all(during[p] == -1 for p in mine)
    broker.start()
    cluster.wait_unfenced(cluster.broker_ids)
    after = _wait_leaders(cluster, topic, 6)
    assert after == before
    for meta in acked:
        assert meta.offset >= 0
    acked += [producer.send(topic, value=f"after-{i}".encode(), partition=i % 6).get(15) for i in range(30)]
    producer.close()
    read = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(6)]
    read.assign(tps)
    read.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.time() + 30
    while len(got) < 60 and time.time() < deadline:
        for batch in read.poll(500).values():
            got += [m.value for m in batch]
    read.close()
    assert sorted(got) == sorted([f"before-{i}".encode() for i in range(30)] + [f"after-{i}".encode() for i in range(30)])


def test_odradek_copies_of_the_metadata_log_match_the_java_brokers(cluster) -> None:
    def batches(path):
        out = []
        for seg in sorted(path.glob("*.log")):
            out += [(b.header().base_offset, bytes(b._mv)) for b in iter_batches(seg.read_bytes())]  # noqa: SLF001
        return out

    admin = KafkaAdminClient(bootstrap_servers=cluster.odradek[3].bootstrap)
    admin.create_topics([NewTopic("in-the-metadata-log", 3, 1)])
    admin.close()
    _wait_leaders(cluster, "in-the-metadata-log", 3)
    time.sleep(1.0)
    java = batches(cluster.java.log_dir / MD)
    for broker in cluster.odradek.values():
        ours = batches(broker.log_dir / MD)
        n = min(len(ours), len(java))
        assert n > 10
        assert ours[:n] == java[:n]


def _key_on(cluster: Cluster, node_id: int, prefix: str, topic: str, partition_for) -> str:
    """A group or transactional id whose coordinator (the leader of its partition of the internal
    `topic`, by Kafka's hash `partition_for`) is `node_id`."""
    leaders_of = _wait_leaders(cluster, topic, 50)
    for i in range(10_000):
        key = f"{prefix}-{i}"
        if leaders_of[partition_for(key, 50)] == node_id:
            return key
    raise AssertionError(f"no key of {topic} lands on broker {node_id}")


def _group_on(cluster: Cluster, node_id: int, prefix: str) -> str:
    from odradek.group_coordinator.records import partition_for  # noqa: PLC0415 - Kafka's group hash

    return _key_on(cluster, node_id, prefix, "__consumer_offsets", partition_for)


def _consume_group(bootstrap: str, topic: str, group: str, want: int) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    got: list[bytes] = []
    deadline = time.time() + 60
    while len(got) < want and time.time() < deadline:
        for batch in consumer.poll(500).values():
            got += [m.value for m in batch]
    consumer.commit()
    consumer.close()
    return got


@pytest.mark.parametrize("coordinator", [3, 2])
def test_a_consumer_group_spans_the_brokers_with_its_coordinator_on_either_kind(cluster, coordinator) -> None:
    topic = f"group-topic-{coordinator}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.java.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    assert set(_wait_leaders(cluster, topic, 6).values()) == cluster.broker_ids
    producer = KafkaProducer(bootstrap_servers=cluster.odradek[4].bootstrap, acks="all")
    for i in range(60):
        producer.send(topic, value=f"g-{i}".encode(), partition=i % 6)
    producer.flush()
    # FindCoordinator on any broker makes the controller create __consumer_offsets, then names its leader
    probe = KafkaConsumer(bootstrap_servers=cluster.odradek[3].bootstrap, group_id="probe", enable_auto_commit=False)
    probe.assign([TopicPartition(topic, 0)])
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            probe.committed(TopicPartition(topic, 0))
            break
        except Exception:  # noqa: BLE001 - COORDINATOR_NOT_AVAILABLE while the topic is made
            time.sleep(0.5)
    probe.close()
    group = _group_on(cluster, coordinator, f"grp-{coordinator}")
    first = _consume_group(cluster.odradek[3].bootstrap, topic, group, 60)
    assert sorted(first) == sorted(f"g-{i}".encode() for i in range(60))
    # the committed offsets resume the group where it stopped, through another broker
    for i in range(60, 72):
        producer.send(topic, value=f"g-{i}".encode(), partition=i % 6)
    producer.flush()
    producer.close()
    second = _consume_group(cluster.java.bootstrap, topic, group, 12)
    assert sorted(second) == sorted(f"g-{i}".encode() for i in range(60, 72))
    admin = KafkaAdminClient(bootstrap_servers=cluster.odradek[4].bootstrap)
    committed = admin.list_group_offsets(group)
    admin.close()
    assert {tp.partition: meta.offset for tp, meta in committed[group].items()} == {p: 12 for p in range(6)}


def _txn_id_on(cluster: Cluster, node_id: int, prefix: str) -> str:
    from odradek.txn_coordinator.records import partition_for  # noqa: PLC0415 - Kafka's id hash

    return _key_on(cluster, node_id, prefix, "__transaction_state", partition_for)


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    return read_committed(bootstrap, topic, partitions)


@pytest.mark.parametrize("coordinator", [3, 2])
def test_transactions_span_the_brokers_with_the_coordinator_on_either_kind(cluster, coordinator) -> None:
    topic = f"txn-topic-{coordinator}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.java.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    assert set(_wait_leaders(cluster, topic, 6).values()) == cluster.broker_ids
    # the first transactional producer makes the controller create __transaction_state
    warm = CKProducer({"bootstrap.servers": cluster.odradek[3].bootstrap, "transactional.id": f"warm-{coordinator}"})
    warm.init_transactions(60)
    del warm
    txn_id = _txn_id_on(cluster, coordinator, f"txn-{coordinator}")
    producer = CKProducer({"bootstrap.servers": cluster.odradek[4].bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60)
    expected: list[bytes] = []
    for round_, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        values = [f"{round_}-{i}".encode() for i in range(12)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % 6)
        if commit:
            producer.commit_transaction(60)
            expected += values
        else:
            producer.abort_transaction(60)
    producer.flush(10)
    del producer
    for broker in cluster.brokers.values():
        assert sorted(_read_committed(broker.bootstrap, topic, 6)) == sorted(expected)


def test_a_producer_to_an_unknown_topic_gets_it_created_through_an_odradek_broker(cluster) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.odradek[3].bootstrap, acks="all")
    meta = producer.send("made-on-first-use", value=b"first").get(30)
    producer.close()
    assert meta.offset == 0
    assert len(_wait_leaders(cluster, "made-on-first-use", 1)) == 1  # num.partitions of the broker


def test_a_partition_dir_the_cluster_does_not_place_here_goes_stray(cluster) -> None:
    import shutil  # noqa: PLC0415

    topic = "stray-source"
    admin = KafkaAdminClient(bootstrap_servers=cluster.java.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    placed = _wait_leaders(cluster, topic, 6)
    broker = cluster.odradek[4]
    index = next(p for p, leader in placed.items() if leader == 4)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    producer.send(topic, value=b"kept", partition=index).get(15)
    producer.close()
    assert broker.stop() == 0
    # a dir of a topic the cluster never had (a leftover, a copy by hand)
    shutil.copytree(broker.log_dir / f"{topic}-{index}", broker.log_dir / "ghost-0")
    broker.start()
    cluster.wait_unfenced(cluster.broker_ids)
    deadline = time.time() + 20
    while (broker.log_dir / "ghost-0").exists() and time.time() < deadline:
        time.sleep(0.2)
    assert not (broker.log_dir / "ghost-0").exists()
    assert len(list(broker.log_dir.glob("ghost-0.*-stray"))) == 1
    assert (broker.log_dir / f"{topic}-{index}").is_dir()
    assert _wait_leaders(cluster, topic, 6) == placed


def test_the_java_broker_restarts_and_odradek_brokers_follow_its_leadership(cluster) -> None:
    topic = "java-restarts"
    admin = KafkaAdminClient(bootstrap_servers=cluster.odradek[3].bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    before = _wait_leaders(cluster, topic, 6)
    java_parts = [p for p, leader in before.items() if leader == 2]
    assert java_parts
    producer = KafkaProducer(bootstrap_servers=cluster.odradek[3].bootstrap, acks="all")
    for i in range(30):
        producer.send(topic, value=f"before-{i}".encode(), partition=i % 6).get(15)
    cluster.java.stop()
    # the Odradek brokers see the Java broker's partitions without a leader, and the broker gone
    deadline = time.time() + 20
    during: dict[int, int] = {}
    while time.time() < deadline:
        during = leaders(cluster.odradek[4].bootstrap, topic)
        if all(during[p] == -1 for p in java_parts):
            break
        time.sleep(0.2)
    assert all(during[p] == -1 for p in java_parts) and all(during[p] == before[p] for p in before
                                                             if p not in java_parts)
    assert describe(cluster.odradek[3].bootstrap).get(2, True) is True  # fenced (or gone), as Kafka lists it
    cluster.java.start()
    cluster.wait_unfenced(cluster.broker_ids)
    deadline = time.time() + 20
    while time.time() < deadline and leaders(cluster.odradek[4].bootstrap, topic) != before:
        time.sleep(0.2)
    assert leaders(cluster.odradek[4].bootstrap, topic) == before
    for i in range(30):
        producer.send(topic, value=f"after-{i}".encode(), partition=i % 6).get(30)
    producer.close()
    got = _read_committed(cluster.odradek[4].bootstrap, topic, 6)
    assert sorted(got) == sorted([f"before-{i}".encode() for i in range(30)] + [f"after-{i}".encode() for i in range(30)])


@pytest.mark.parametrize("coordinator", [3, 2])
def test_java_transactions_v2_span_the_brokers(cluster, java_client, coordinator) -> None:
    """A Java 4.4 producer with Transactions V2 (the cluster finalizes transaction.version 2): the
    partition leaders add partitions to the transaction on the coordinator's broker, whichever
    kind either is; commits and aborts, read_committed exact through every broker."""
    topic = f"tv2-topic-{coordinator}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.java.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    admin.close()
    assert set(_wait_leaders(cluster, topic, 6).values()) == cluster.broker_ids
    warm = CKProducer({"bootstrap.servers": cluster.odradek[3].bootstrap, "transactional.id": f"warm2-{coordinator}"})
    warm.init_transactions(60)
    del warm
    txn_id = _txn_id_on(cluster, coordinator, f"tv2-{coordinator}")
    client = java_client(cluster.odradek[4].bootstrap, version=KAFKA_4_4)
    expected: list[bytes] = []
    for round_, commit in enumerate([True, False, True]):
        args = ["produce", "--topic", topic, "--count", "12", "--acks", "all", "--compression", "none",
                "--value-format", f"r{round_}-%d", "--null-keys", "--transactional-id", txn_id]
        client.run(*args, *([] if commit else ["--abort"]))
        if commit:
            expected += [f"r{round_}-{i}".encode() for i in range(12)]
    for broker in cluster.brokers.values():
        assert sorted(_read_committed(broker.bootstrap, topic, 6)) == sorted(expected)


def test_the_java_brokers_log_no_errors_about_the_metadata(cluster) -> None:
    """Whichever kind the controller is, the Java brokers applied every metadata record they fetched."""
    assert cluster.java_logs_clean() == []


def test_the_quorum_tool_lists_the_controller_and_every_broker(cluster) -> None:
    """kafka-metadata-quorum.sh describe --replication against the controller (either kind): the
    controller leads, and every other broker follows the metadata log as an observer."""
    from kafka_oracle import run_java_tool  # noqa: PLC0415

    controller = f"{cluster.quorum.host}:{cluster.controller.controller_port}"
    proc = run_java_tool("org.apache.kafka.tools.MetadataQuorumCommand",
                         ["--bootstrap-controller", controller, "describe", "--replication"], version=KAFKA_4_4)
    assert proc.returncode == 0, proc.stderr
    rows = {int(line.split()[0]): line.split()[-1] for line in proc.stdout.splitlines()[1:] if line.strip()}
    leader = 4 if cluster.kind == "combined" else 1
    assert rows[leader] == "Leader"
    assert {n for n, status in rows.items() if status == "Observer"} == cluster.broker_ids - {leader}
