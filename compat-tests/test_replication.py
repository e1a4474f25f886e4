"""Replication between Java and Odradek brokers (issue #25): replicas of either kind follow leaders
of either kind, and every replica's log is the leader's, byte for byte.

One cluster per controller kind: a controller (Kafka 4.4.0, or `odradek serve` with
process.roles=controller), two Kafka 4.4.0 brokers (2 and 5) and two Odradek brokers (3 and 4);
or the Odradek broker 4 is a combined node and the controller of the others.
Topics have replication factor 3 and min.insync.replicas=2; producers use acks=all.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from client_helpers import read_committed
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka_oracle import KAFKA_4_4, free_port
from test_cluster_broker import Cluster

pytestmark = pytest.mark.oracle
METRICS_PORT = free_port("127.0.0.1")
JAVA = {2, 5}
#: broker 3 follows this odradek.faults file (a network partition between it and a leader)
FAULTS_3 = "faults-3.json"
ODRADEK = {3, 4}


@pytest.fixture(scope="module", params=["kafka-controller", "odradek-controller", "combined-controller"])
def cluster(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("replication")
    c = Cluster(root, request.param.split("-")[0], extra_java=(5,),
                # two 1 s windows: a replication throttle bites within a test's few MB
                broker_overrides={3: {"odradek.metrics.port": METRICS_PORT, "replication.quota.window.num": 2,
                                      "odradek.faults.file": str(root / FAULTS_3)},
                                  4: {"replication.quota.window.num": 2}})
    c.faults_3 = root / FAULTS_3
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.java.bootstrap})


def _create(cluster: Cluster, topic: str, partitions: int, assignment: list[list[int]] | None = None,
            min_isr: int = 2) -> None:
    admin = _admin(cluster)
    # (confluent-kafka 2.16 wants the partition count beside an assignment)
    spec = (NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment,
                     config={"min.insync.replicas": str(min_isr)})
            if assignment else NewTopic(topic, partitions, 3, config={"min.insync.replicas": str(min_isr)}))
    admin.create_topics([spec])[topic].result(30)


def _state(cluster: Cluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as the cluster's metadata says."""
    meta = _admin(cluster).list_topics(topic, timeout=10).topics[topic]
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in meta.partitions.values()}


def _wait_in_sync(cluster: Cluster, topic: str, timeout: float = 60.0) -> dict[int, tuple[int, list[int], list[int]]]:
    """Until every partition has a leader and its whole replica set in the ISR, and every replica's
    log ends where the leader's does."""
    deadline = time.time() + timeout
    state: dict = {}
    while time.time() < deadline:
        state = _state(cluster, topic)
        if state and all(leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in state.values()):
            sizes = [{b: _log_bytes(cluster, b, topic, p)[0] for b in replicas}
                     for p, (_l, replicas, _i) in state.items()]
            if all(len(set(s.values())) == 1 for s in sizes):
                return state
        time.sleep(0.5)
    raise AssertionError(f"{topic} not in sync: {state}")


def _log_dir(cluster: Cluster, broker: int) -> Path:
    return cluster.brokers[broker].log_dir


def _log_bytes(cluster: Cluster, broker: int, topic: str, partition: int) -> tuple[bytes, str]:
    """A replica's segments' contents concatenated, and its leader-epoch-checkpoint."""
    d = _log_dir(cluster, broker) / f"{topic}-{partition}"
    data = b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
    checkpoint = d / "leader-epoch-checkpoint"
    return data, checkpoint.read_text() if checkpoint.exists() else ""


def _assert_identical(cluster: Cluster, topic: str, state: dict) -> None:
    for partition, (leader, replicas, _isr) in state.items():
        lead = _log_bytes(cluster, leader, topic, partition)
        assert lead[0], f"{topic}-{partition} is empty"
        for broker in replicas:
            assert _log_bytes(cluster, broker, topic, partition) == lead, (
                f"{topic}-{partition}: broker {broker}'s replica differs from leader {leader}'s")


def _stoppable(cluster: Cluster) -> list[int]:
    """The Odradek brokers a test may stop (not a combined node that is the controller)."""
    return [b for b in sorted(ODRADEK) if cluster.brokers[b] is not cluster.controller]


def _produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    errors: list[object] = []
    producer = CKProducer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions,
                         on_delivery=lambda e, _m: e and errors.append(e))
    assert producer.flush(60) == 0
    assert errors == []


def test_replicas_of_either_kind_are_the_leaders_bytes(cluster, java_client) -> None:
    topic = "rf3-mixed"
    _create(cluster, topic, 8)
    state = _wait_in_sync(cluster, topic)
    leaders = {leader for leader, _r, _i in state.values()}
    assert leaders & JAVA and leaders & ODRADEK, state
    # every kind follows every kind
    follows = {(leader in JAVA, b in JAVA) for leader, replicas, _i in state.values() for b in replicas if b != leader}
    assert follows == {(True, True), (True, False), (False, True), (False, False)}, state
    values = [f"ck-{i}" for i in range(800)]
    _produce(cluster.odradek[3].bootstrap, topic, values, 8)
    result = java_client(cluster.odradek[4].bootstrap, version=KAFKA_4_4).produce(
        topic, 400, key_format="k%d", value_format="java-%d", acks="all")
    assert result["produced"] == 400
    state = _wait_in_sync(cluster, topic)
    _assert_identical(cluster, topic, state)
    got = read_committed(cluster.java.bootstrap, topic, 8)
    assert sorted(got) == sorted([v.encode() for v in values] + [f"java-{i}".encode() for i in range(400)])


def test_a_follower_catches_up_from_far_behind(cluster) -> None:
    topic = "rf3-catch-up"
    _create(cluster, topic, 4)
    _wait_in_sync(cluster, topic)
    behind = cluster.brokers[_stoppable(cluster)[-1]]
    assert behind.stop() == 0
    # the others go on: 2 of 3 replicas in sync meet min.insync.replicas=2
    _produce(cluster.java.bootstrap, topic, [f"while-away-{i}" for i in range(4000)], 4)
    behind.start()
    cluster.wait_unfenced(cluster.broker_ids)
    state = _wait_in_sync(cluster, topic, timeout=120)
    _assert_identical(cluster, topic, state)


def test_leadership_moves_and_no_acknowledged_record_is_lost(cluster) -> None:
    topic = "rf3-failover"
    _create(cluster, topic, 6)
    before = _wait_in_sync(cluster, topic)
    acked = [f"before-{i}" for i in range(600)]
    _produce(cluster.java.bootstrap, topic, acked, 6)
    # the Odradek broker leading the most partitions stops; its partitions get new leaders
    victim_id = max(_stoppable(cluster), key=lambda b: sum(1 for leader, _r, _i in before.values() if leader == b))
    led = [p for p, (leader, _r, _i) in before.items() if leader == victim_id]
    assert led
    victim = cluster.brokers[victim_id]
    assert victim.stop() == 0
    deadline = time.time() + 30
    during = _state(cluster, topic)
    while time.time() < deadline and any(during[p][0] in (-1, victim_id) for p in led):
        time.sleep(0.3)
        during = _state(cluster, topic)
    assert all(during[p][0] not in (-1, victim_id) for p in led), during
    more = [f"during-{i}" for i in range(600)]
    _produce(cluster.java.bootstrap, topic, more, 6)
    victim.start()
    cluster.wait_unfenced(cluster.broker_ids)
    state = _wait_in_sync(cluster, topic, timeout=120)
    _assert_identical(cluster, topic, state)
    got = read_committed(cluster.odradek[3 if victim_id == 4 else 4].bootstrap, topic, 6)
    assert sorted(got) == sorted(v.encode() for v in acked + more)
    assert len(got) == len(set(got))


@pytest.mark.parametrize("kind", ["odradek", "java"])
def test_acks_all_needs_min_insync_replicas(cluster, kind) -> None:
    """A leader whose ISR fell below min.insync.replicas refuses acks=all with NOT_ENOUGH_REPLICAS,
    whichever kind leads (Kafka's own answer is the reference)."""
    leader, other = (3, 4) if kind == "odradek" else (2, 5)
    if kind == "odradek" and cluster.kind == "combined":
        leader, other = 4, 3  # the combined node leads; the broker it loses is the plain one
    topic = f"min-isr-{kind}-{uuid.uuid4().hex[:6]}"
    _create(cluster, topic, 1, assignment=[[leader, other]], min_isr=2)
    _wait_in_sync(cluster, topic)
    stopped = cluster.brokers[other]
    try:
        stopped.stop()  # (a JVM stopped by SIGTERM exits 143)
        deadline = time.time() + 30
        while time.time() < deadline and sorted(_state(cluster, topic)[0][2]) != [leader]:
            time.sleep(0.3)
        assert _state(cluster, topic)[0][2] == [leader]
        errors: list[KafkaError] = []
        producer = CKProducer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": "all",
                               "message.timeout.ms": 3000, "retries": 0})
        producer.produce(topic, value=b"x", partition=0, on_delivery=lambda e, _m: errors.append(e))
        producer.flush(10)
        assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
        ok: list[object] = []
        one = CKProducer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": 1})
        one.produce(topic, value=b"y", partition=0, on_delivery=lambda e, _m: ok.append(e))
        one.flush(10)
        assert ok == [None]  # acks=1 is not held to min.insync.replicas
    finally:
        stopped.start()
        cluster.wait_unfenced(cluster.broker_ids)
    _wait_in_sync(cluster, topic, timeout=60)


def test_more_partitions_of_a_replicated_topic_are_placed_with_its_replication_factor(cluster) -> None:
    topic = "rf3-grow"
    _create(cluster, topic, 2)
    _wait_in_sync(cluster, topic)
    admin = _admin(cluster)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    state = _wait_in_sync(cluster, topic)
    assert len(state) == 5 and all(len(replicas) == 3 for _l, replicas, _i in state.values())


def _reassign(cluster: Cluster, topic: str, plan: dict[int, list[int]], workdir: Path, throttle: int = 0) -> None:
    """kafka-reassign-partitions.sh --execute (with --throttle bytes/s when given), then --verify
    until it reports every move complete (and, with a throttle, that it removed the throttle)."""
    import json  # noqa: PLC0415

    from kafka_oracle import run_java_tool  # noqa: PLC0415

    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    path = workdir / f"{topic}-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(plan.items())]}))
    base = ["--bootstrap-server", cluster.java.bootstrap, "--reassignment-json-file", str(path)]
    proc = run_java_tool(tool, [*base, "--execute", *(["--throttle", str(throttle)] if throttle else [])],
                         version=KAFKA_4_4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if throttle:
        assert "The inter-broker throttle limit was set to" in proc.stdout, proc.stdout
    deadline = time.time() + 120
    out = ""
    while time.time() < deadline:
        out = run_java_tool(tool, [*base, "--verify"], version=KAFKA_4_4).stdout
        if "is still in progress" not in out and "complete" in out:
            assert not throttle or "Clearing broker-level throttles" in out, out
            return
        time.sleep(1)
    raise AssertionError(out)


def test_reassignment_moves_a_topic_between_the_kinds_under_load(cluster, tmp_path) -> None:
    """kafka-reassign-partitions.sh moves every partition from the Odradek brokers to the Java
    brokers and back while a producer writes with acks=all: no error, nothing lost, and the final
    replicas are the leaders' bytes. Either controller carries out the moves."""
    import threading  # noqa: PLC0415

    topic = "rf2-moving"
    _create(cluster, topic, 4, assignment=[[3, 4], [4, 3], [3, 4], [4, 3]], min_isr=1)
    _wait_in_sync(cluster, topic)
    stop = threading.Event()
    sent: list[str] = []
    errors: list[object] = []

    def produce() -> None:
        producer = CKProducer({"bootstrap.servers": cluster.java.bootstrap, "acks": "all", "enable.idempotence": True,
                               "linger.ms": 5})
        i = 0
        while not stop.is_set():
            value = f"moving-{i}"
            producer.produce(topic, value=value.encode(), partition=i % 4,
                             on_delivery=lambda e, _m: e and errors.append(e))
            sent.append(value)
            i += 1
            producer.poll(0)
            time.sleep(0.002)
        assert producer.flush(60) == 0

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        _reassign(cluster, topic, {0: [2, 5], 1: [5, 2], 2: [2, 5], 3: [5, 2]}, tmp_path)
        moved = _wait_in_sync(cluster, topic, timeout=120)
        assert all(set(replicas) == JAVA for _l, replicas, _i in moved.values()), moved
        _reassign(cluster, topic, {0: [3, 4], 1: [4, 3], 2: [3, 4], 3: [4, 3]}, tmp_path)
    finally:
        stop.set()
        writer.join(120)
    back = _wait_in_sync(cluster, topic, timeout=120)
    assert all(set(replicas) == ODRADEK for _l, replicas, _i in back.values()), back
    assert errors == []
    _assert_identical(cluster, topic, back)
    got = read_committed(cluster.odradek[3].bootstrap, topic, 4)
    assert sorted(got) == sorted(v.encode() for v in sent)


def test_preferred_leader_election_brings_the_leaders_back(cluster, tmp_path) -> None:
    """After a failover (test above) the partitions are led by their second replicas;
    kafka-leader-election.sh --election-type preferred gives every one back to its first replica,
    under either controller."""
    from kafka_oracle import run_java_tool  # noqa: PLC0415

    topic = "rf3-failover"
    state = _state(cluster, topic)
    moved = [p for p, (leader, replicas, _i) in state.items() if leader != replicas[0]]
    assert moved, state
    import json  # noqa: PLC0415

    plan = tmp_path / "elect.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p} for p in moved]}))
    proc = run_java_tool("org.apache.kafka.tools.LeaderElectionCommand",
                         ["--bootstrap-server", cluster.java.bootstrap, "--election-type", "preferred",
                          "--path-to-json-file", str(plan)], version=KAFKA_4_4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Successfully completed leader election (PREFERRED) for partitions" in proc.stdout
    deadline = time.time() + 30
    while time.time() < deadline:
        state = _state(cluster, topic)
        if all(leader == replicas[0] for leader, replicas, _i in state.values()):
            break
        time.sleep(0.3)
    assert all(leader == replicas[0] for leader, replicas, _i in state.values()), state
    _produce(cluster.odradek[3].bootstrap, topic, [f"after-election-{i}" for i in range(120)], 6)
    _assert_identical(cluster, topic, _wait_in_sync(cluster, topic))


def _elect_unclean(cluster: Cluster, topic: str, partitions: list[int], workdir: Path) -> str:
    import json  # noqa: PLC0415

    from kafka_oracle import run_java_tool  # noqa: PLC0415

    plan = workdir / f"{topic}-unclean.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p} for p in partitions]}))
    proc = run_java_tool("org.apache.kafka.tools.LeaderElectionCommand",
                         ["--bootstrap-server", cluster.java.bootstrap, "--election-type", "unclean",
                          "--path-to-json-file", str(plan)], version=KAFKA_4_4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _describe_partitions(cluster: Cluster, topic: str) -> list[dict[str, str]]:
    """kafka-topics.sh --describe's partition lines as field -> value."""
    import re  # noqa: PLC0415

    from kafka_oracle import run_java_tool  # noqa: PLC0415

    proc = run_java_tool("org.apache.kafka.tools.TopicCommand",
                         ["--bootstrap-server", cluster.java.bootstrap, "--describe", "--topic", topic],
                         version=KAFKA_4_4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if "Partition:" in ln]
    return [{**dict(re.findall(r"(\w+): ?([^\s]*)", ln)), "line": ln} for ln in lines]


def _wait_state(cluster: Cluster, topic: str, want, timeout: float = 30.0) -> dict:
    deadline = time.time() + timeout
    state = _state(cluster, topic)
    while time.time() < deadline and not want(state):
        time.sleep(0.3)
        state = _state(cluster, topic)
    assert want(state), state
    return state


@pytest.mark.parametrize("survivor", [3, 5], ids=["odradek-elected", "java-elected"])
def test_unclean_leader_election_as_on_kafka(cluster, tmp_path, survivor) -> None:
    """An offline partition whose only in-sync replica is gone: kafka-leader-election.sh
    --election-type unclean makes the out-of-sync replica leader (what only the lost replica had
    is lost, as on Kafka); the old leader comes back, truncates and follows. The Kafka controller
    run is the reference of every state asserted here; Odradek's controller must give the same.
    (The combined node runs the same controller code as the Odradek controller: not repeated.)"""
    if cluster.kind == "combined":
        pytest.skip("same controller code as the odradek-controller run")
    last = 5 if survivor == 3 else 3  # the replica that stays in sync longest, then dies
    topic = f"unclean-{survivor}-{uuid.uuid4().hex[:6]}"
    _create(cluster, topic, 2, assignment=[[survivor, last], [last, survivor]], min_isr=1)
    _wait_in_sync(cluster, topic)
    kept = [f"kept-{i}" for i in range(200)]
    _produce(cluster.java.bootstrap, topic, kept, 2)
    _wait_in_sync(cluster, topic)
    out_of_sync, in_sync = cluster.brokers[survivor], cluster.brokers[last]
    try:
        _unclean_steps(cluster, topic, tmp_path, survivor, last, kept)
    finally:
        for node in (out_of_sync, in_sync):
            if not node.running:
                node.start()
        cluster.wait_unfenced(cluster.broker_ids)


def _unclean_steps(cluster: Cluster, topic: str, tmp_path: Path, survivor: int, last: int, kept: list[str]) -> None:
    out_of_sync, in_sync = cluster.brokers[survivor], cluster.brokers[last]
    out_of_sync.stop()
    _wait_state(cluster, topic, lambda s: all(v[0] == last and v[2] == [last] for v in s.values()))
    _produce(cluster.java.bootstrap, topic, [f"lost-{i}" for i in range(100)], 2)
    in_sync.stop()
    offline = _wait_state(cluster, topic, lambda s: all(v[0] == -1 for v in s.values()))
    # with ELR (Kafka 4.4's default) the last in-sync replica leaves the ISR for the eligible
    # leader replicas of the offline partition, as kafka-topics.sh --describe shows
    assert all(isr == [] for _l, _r, isr in offline.values()), offline
    described = _describe_partitions(cluster, topic)
    assert [(line["Leader"], line["Isr"], line["Elr"], line["LastKnownElr"]) for line in described] == [
        ("none", "", str(last), str(last))] * 2, "\n".join(line["line"] for line in described)
    out_of_sync.start()
    cluster.wait_unfenced(cluster.broker_ids - {last})
    time.sleep(1)
    assert all(v[0] == -1 for v in _state(cluster, topic).values())  # not without an unclean election
    out = _elect_unclean(cluster, topic, [0, 1], tmp_path)
    assert "Successfully completed leader election (UNCLEAN) for partitions" in out, out
    assert f"{topic}-0" in out and f"{topic}-1" in out, out
    _wait_state(cluster, topic, lambda s: all(v[0] == survivor and v[2] == [survivor] for v in s.values()))
    # a second unclean election of a partition that has a leader is refused as Kafka refuses it
    again = _elect_unclean(cluster, topic, [0], tmp_path)
    assert f"Valid replica already elected for partitions {topic}-0" in again, again
    after = [f"after-{i}" for i in range(100)]
    _produce(cluster.java.bootstrap, topic, after, 2)
    in_sync.start()
    cluster.wait_unfenced(cluster.broker_ids)
    state = _wait_in_sync(cluster, topic, timeout=120)
    _assert_identical(cluster, topic, state)
    got = read_committed(cluster.java.bootstrap, topic, 2)
    assert sorted(got) == sorted(v.encode() for v in kept + after)


def _throttled_fetches(side: str) -> float:
    """Broker 3's count of replica fetches a replication throttle held back on `side`."""
    import urllib.request  # noqa: PLC0415

    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read().decode()
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name.startswith("odradek_replication_throttled_fetches") and s.labels.get("side") == side)


def _dynamic_throttles(cluster: Cluster, broker: int) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource, ConfigSource  # noqa: PLC0415

    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    admin = _admin(cluster)  # (kept alive until the answer is in)
    configs = admin.describe_configs([resource])[resource].result(30)
    return {k: v.value for k, v in configs.items()
            if "replication.throttled.rate" in k and v.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}


def test_reassignment_with_a_throttle_holds_back_the_moving_replicas(cluster, tmp_path) -> None:
    """kafka-reassign-partitions.sh --throttle: the tool sets the rates on the brokers and the
    throttled replicas on the topic; the Odradek follower (moving in) and the Odradek leader
    (moving out) hold back the moving replicas' fetches, the moves complete, --verify removes the
    throttles. (The combined node runs the same controller code as the Odradek controller.)"""
    if cluster.kind == "combined":
        pytest.skip("same controller code as the odradek-controller run")
    topic = f"throttled-{uuid.uuid4().hex[:6]}"
    _create(cluster, topic, 2, assignment=[[2, 5], [5, 2]], min_isr=1)
    _wait_in_sync(cluster, topic)
    producer = CKProducer({"bootstrap.servers": cluster.java.bootstrap, "acks": "all", "linger.ms": 20})
    # 2.4 MB a partition: more than one 1 MB replica fetch, so the rate is over the bound
    # while the moving replicas still have data to fetch
    for i in range(4800):
        producer.produce(topic, value=b"%06d" % i + b"t" * 1000, partition=i % 2)
        producer.poll(0)
    assert producer.flush(60) == 0
    follower_before = _throttled_fetches("follower")
    _reassign(cluster, topic, {0: [3, 4], 1: [4, 3]}, tmp_path, throttle=300_000)
    assert _throttled_fetches("follower") > follower_before
    assert _dynamic_throttles(cluster, 3) == {}  # --verify removed them once the moves were done
    # (a follower has a new leader's epoch in its checkpoint once a batch of that epoch arrives)
    _produce(cluster.java.bootstrap, topic, [f"after-move-{i}" for i in range(20)], 2)
    _assert_identical(cluster, topic, _wait_in_sync(cluster, topic))
    leader_before = _throttled_fetches("leader")
    _reassign(cluster, topic, {0: [2, 5], 1: [5, 2]}, tmp_path, throttle=300_000)
    assert _throttled_fetches("leader") > leader_before
    _produce(cluster.java.bootstrap, topic, [f"moved-back-{i}" for i in range(20)], 2)
    _assert_identical(cluster, topic, _wait_in_sync(cluster, topic))


def _cut_broker_3_from(cluster: Cluster, leaders: list[int], version: int) -> None:
    """Broker 3 stops fetching from `leaders` (and leaders drop its fetches) while it stays
    registered with the controller: it leaves the ISR only after replica.lag.time.max.ms."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    path = cluster.faults_3
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": version, "partitioned": leaders}))
    os.replace(tmp, path)
    state = path.with_name(path.name + ".state")
    deadline = time.time() + 10
    while time.time() < deadline:
        if state.exists() and json.loads(state.read_text() or "{}").get("version", 0) >= version:
            return
        time.sleep(0.05)
    raise AssertionError(f"broker 3 did not apply faults version {version}")


def test_an_acks_all_produce_answers_at_once_when_its_leader_leaves_the_replicas(cluster, tmp_path) -> None:
    """A produce waiting for acks=all on a leader that a reassignment moves off the partition
    answers NOT_LEADER_OR_FOLLOWER as soon as the leader drops it, as Kafka's DelayedProduce
    does, not REQUEST_TIMED_OUT at its timeout (after which librdkafka bumps an idempotent
    producer's epoch and sends the batch again under new sequence numbers: a duplicate)."""
    import threading  # noqa: PLC0415

    from odradek.tools.client import BrokerConnection  # noqa: PLC0415
    from odradek.wire.errors import ErrorCode  # noqa: PLC0415
    from odradek.wire.protocol import request_class  # noqa: PLC0415
    from odradek.wire.records import SimpleRecord, build_batch  # noqa: PLC0415

    leader = next(b for b in sorted(ODRADEK) if b != 3)
    topic = f"leaving-{uuid.uuid4().hex[:6]}"
    _create(cluster, topic, 1, assignment=[[leader, 3]], min_isr=1)
    _wait_in_sync(cluster, topic)
    produce = request_class(0)
    answers: list[int] = []

    def send() -> None:
        node = cluster.brokers[leader]
        conn = BrokerConnection(node.host, node.port, timeout=150)
        batch = build_batch([SimpleRecord(b"k", b"held", (), int(time.time() * 1000))])
        answer = conn.send(0, produce(transactional_id=None, acks=-1, timeout_ms=120_000, topic_data=[
            produce.TopicProduceData(name=topic, partition_data=[
                produce.PartitionProduceData(index=0, records=batch)])]), version=9)
        answers.append(answer.responses[0].partition_responses[0].error_code)

    # the follower (in the ISR) stops fetching, so the high watermark cannot pass the batch
    _cut_broker_3_from(cluster, [leader], 1)
    try:
        sender = threading.Thread(target=send)
        sender.start()
        _reassign(cluster, topic, {0: sorted(JAVA)}, tmp_path)
        # answered with the move, long before the produce's own 120 s timeout
        sender.join(15)
    finally:
        _cut_broker_3_from(cluster, [], 2)
    assert answers == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    sender.join()
    _wait_in_sync(cluster, topic)
