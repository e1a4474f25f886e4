"""Share groups (KIP-932, issue #26): stock Java 4.4 ``KafkaShareConsumer``s and confluent-kafka
``ShareConsumer``s share one topic in one share group, on Odradek and on a live Kafka 4.4.0
(share groups are on by default there: a fresh 4.4 format finalizes share.version 2).

Every consumer acknowledges by the same rule (``ShareDriver.ackFor``, :func:`ack_for`): a tenth of
the records is released once, a tenth rejected, one in a hundred released every time. Then:
each record is accepted exactly once overall (none of the rejected or always-released ones);
a released record comes back with its delivery count + 1; a rejected one never comes back; one
released every time is delivered ``group.share.delivery.count.limit`` (5) times and then
archived; and the two brokers give the same counts. Kafka's kafka-share-groups.sh then lists and
describes the group on both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from kafka_oracle import (
    KAFKA_4_4,
    _clients_jar,
    dump_log_segments,
    java_bin,
    kafka_classpath,
    require_tool,
    run_java_tool,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+)", allow_module_level=True)

SOURCE = Path(__file__).resolve().parent / "java-share" / "ShareDriver.java"
TOPIC = "queue"
GROUP = "workers"
RECORDS = 10_000
DELIVERY_LIMIT = 5  # Kafka's group.share.delivery.count.limit default
WARMUP_MS = 7000
IDLE_MS = 8000
SHARE_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def ack_for(value: str, delivery_count: int) -> str:
    """The rule every consumer follows (ShareDriver.ackFor in Java)."""
    i = int(value.split("-", 1)[1])
    if i % 100 == 50:
        return "RELEASE"
    if i % 10 == 7:
        return "REJECT"
    if i % 10 == 3 and delivery_count == 1:
        return "RELEASE"
    return "ACCEPT"


@pytest.fixture(scope="module")
def share_driver() -> Path:
    """ShareDriver compiled against kafka-clients 4.4.0 (a directory for the classpath)."""
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="share-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", _clients_jar(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def _python_consumer(bootstrap: str, name: str, events: list, stop: threading.Event, last: list) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            messages = consumer.poll(0.2)
            for m in messages:
                if m.error() is not None:
                    continue
                count = m.delivery_count()
                ack = ack_for(m.value().decode(), count)
                consumer.acknowledge(m, getattr(AcknowledgeType, ack))
                events.append({"c": name, "p": m.partition(), "o": m.offset(), "v": m.value().decode(),
                               "dc": count, "ack": ack})
                last[0] = time.monotonic()
            if messages:
                consumer.commit_sync()
    finally:
        consumer.close()


def _share(bootstrap: str, classes: Path, tmp: Path) -> tuple[list[dict], dict[str, str]]:
    """Run the scenario against one broker; (every delivery seen, the tool's outputs)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        f.result(30)
    cp = f"{classes}:{kafka_classpath(KAFKA_4_4)}"
    tmp.mkdir(parents=True, exist_ok=True)
    out_path = tmp / "java.out"
    with open(out_path, "w") as out, open(tmp / "java.err", "w") as err:
        java = subprocess.Popen([java_bin("java"), "-Xmx384m", "-cp", cp, "ShareDriver", bootstrap, GROUP, TOPIC,
                                 "3", str(WARMUP_MS), str(IDLE_MS), "240000"],
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    events: list[dict] = []
    stop = threading.Event()
    last = [0.0]
    threads = [threading.Thread(target=_python_consumer, args=(bootstrap, f"python-{n}", events, stop, last))
               for n in range(2)]
    tools: dict[str, str] = {}
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while '"ready"' not in out_path.read_text():
            assert java.poll() is None, (tmp / "java.err").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Java consumers never got ready"
            time.sleep(0.2)
        time.sleep(2)  # every share-partition has been fetched once (share.auto.offset.reset=latest)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=f"m-{i}".encode(), partition=i % 2)
        producer.flush(60)
        time.sleep(3)
        proc = run_java_tool(SHARE_TOOL, ["--bootstrap-server", bootstrap, "--describe", "--group", GROUP,
                                          "--state"], version=KAFKA_4_4)
        tools["state-live"] = proc.stdout + proc.stderr
        java.wait(timeout=300)
        while time.monotonic() - last[0] < IDLE_MS / 1000:
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        if java.poll() is None:
            java.kill()
            java.wait()
    for line in out_path.read_text().splitlines():
        if line.startswith('{"c"'):
            events.append(json.loads(line))
    for name, args in {"list": ["--list"],
                       "describe": ["--describe", "--group", GROUP],
                       "state": ["--describe", "--group", GROUP, "--state"],
                       "reset": ["--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute"],
                       "describe-after-reset": ["--describe", "--group", GROUP, "--verbose"],
                       "delete": ["--delete", "--group", GROUP],
                       "list-after-delete": ["--list"]}.items():
        proc = run_java_tool(SHARE_TOOL, ["--bootstrap-server", bootstrap, *args], version=KAFKA_4_4)
        tools[name] = proc.stdout + proc.stderr
    return events, tools


def _check(events: list[dict]) -> dict[str, int]:
    """The rules of the scenario hold for `events`; returns counts to compare between brokers."""
    by_value: dict[str, list[dict]] = defaultdict(list)
    for e in events:
        by_value[e["v"]].append(e)
    assert set(by_value) == {f"m-{i}" for i in range(RECORDS)}, "records never delivered"
    for i in range(RECORDS):
        seen = sorted(by_value[f"m-{i}"], key=lambda e: e["dc"])
        counts = [e["dc"] for e in seen]
        acks = [e["ack"] for e in seen]
        if i % 100 == 50:  # released every time: delivered up to the limit, then archived
            assert counts == list(range(1, DELIVERY_LIMIT + 1)), (i, seen)
        elif i % 10 == 7:  # rejected: never again
            assert (counts, acks) == ([1], ["REJECT"]), (i, seen)
        elif i % 10 == 3:  # released once: back with delivery count 2, then accepted
            assert (counts, acks) == ([1, 2], ["RELEASE", "ACCEPT"]), (i, seen)
        else:
            assert (counts, acks) == ([1], ["ACCEPT"]), (i, seen)
    summary = Counter(e["ack"] for e in events)
    summary["deliveries"] = len(events)
    summary["consumers"] = len({e["c"] for e in events})
    return dict(summary)


def _normalized(text: str) -> list[str]:
    """The tool's lines without the parts that differ run to run (member ids, hosts, ports)."""
    out = []
    for line in text.splitlines():
        if "WARN" in line or "SLF4J" in line or not line.strip():
            continue
        out.append(" ".join(line.split()))
    return out


def test_share_group_java_and_librdkafka_consumers(share_driver, odradek_broker_factory, kafka_broker_factory,
                                                   tmp_path):
    odradek = odradek_broker_factory()
    o_events, o_tools = _share(odradek.bootstrap, share_driver, tmp_path / "odradek")
    odradek.stop()
    o_summary = _check(o_events)
    # Kafka's DumpLogSegments reads Odradek's __share_group_state files as odradek dump-log does
    files = [str(f) for f in sorted(odradek.log_dir.glob("__share_group_state-*/*.log")) if f.stat().st_size]
    assert files, "no share state was written"
    k_out, k_err, k_rc = dump_log_segments(files, "--share-group-state-decoder", version=KAFKA_4_4)
    assert k_rc == 0, k_err
    o_dump = subprocess.run([sys.executable, "-m", "odradek", "dump-log", "--files", ",".join(files),
                             "--share-group-state-decoder"], capture_output=True, text=True, timeout=300)
    assert o_dump.stdout == k_out
    assert '"type":"1"' in k_out and '"deliveryState":4' in k_out  # updates, with archived records
    kafka = kafka_broker_factory(version=KAFKA_4_4)
    k_events, k_tools = _share(kafka.bootstrap, share_driver, tmp_path / "kafka")
    kafka.stop()
    k_summary = _check(k_events)
    # the same rules give the same numbers of each acknowledgement on both brokers
    assert {k: v for k, v in o_summary.items() if k != "consumers"} == \
        {k: v for k, v in k_summary.items() if k != "consumers"}
    assert o_summary["consumers"] >= 2 and k_summary["consumers"] >= 2
    assert _normalized(o_tools["list"]) == _normalized(k_tools["list"]) == [GROUP]
    # which record completes last (and so the start offset Kafka last wrote) depends on timing:
    # the start offsets are compared after the reset below; the lag is 0 on both
    masked = [[_mask(line, 3) for line in _normalized(t["describe"])] for t in (o_tools, k_tools)]
    assert masked[0] == masked[1], (o_tools["describe"], k_tools["describe"])
    assert _normalized(o_tools["state"])[0] == _normalized(k_tools["state"])[0]
    # GROUP COORDINATOR (ID) STATE #MEMBERS, the coordinator's address aside
    assert _mask(_mask(_normalized(o_tools["state"])[1], 1), 2) == _mask(_mask(_normalized(k_tools["state"])[1], 1), 2)
    # while the five consumers share the records: Stable, 5 members, on both
    live = [_mask(_mask(_normalized(t["state-live"])[1], 1), 2) for t in (o_tools, k_tools)]
    assert live[0] == live[1] == f"{GROUP} * * Stable 5", (o_tools["state-live"], k_tools["state-live"])
    for name in ("reset", "describe-after-reset", "delete", "list-after-delete"):
        assert _normalized(o_tools[name]) == _normalized(k_tools[name]), (name, o_tools[name], k_tools[name])


def _mask(line: str, column: int) -> str:
    words = line.split()
    if len(words) > column and words[0] != "GROUP":
        words[column] = "*"
    return " ".join(words)


RESTART_RECORDS = 2000


def _restart_consumer(bootstrap: str, state: dict, stop: threading.Event) -> None:
    """Accept everything but the first delivery of every tenth record (released); a record counts
    as acknowledged only once commit_sync said its partition's acknowledgements succeeded."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "restarts", "client.id": "restart-py",
                              "share.acknowledgement.mode": "explicit", "reconnect.backoff.max.ms": 500})
    consumer.subscribe(["restarts"])
    try:
        while not stop.is_set():
            try:
                messages = consumer.poll(0.2)
            except Exception:
                continue
            pending = []
            for m in messages:
                if m.error() is not None:
                    continue
                i = int(m.value().decode().split("-")[1])
                ack = "RELEASE" if i % 10 == 3 and m.delivery_count() == 1 else "ACCEPT"
                consumer.acknowledge(m, getattr(AcknowledgeType, ack))
                state["deliveries"].append((i, m.delivery_count(), ack))
                time.sleep(0.01)  # slow enough that the broker goes down mid-stream, twice
                pending.append((m.partition(), i, m.delivery_count(), ack))
            if not pending:
                continue
            try:
                result = consumer.commit_sync(10)
            except Exception as exc:
                state.setdefault("errors", []).append(repr(exc))
                continue
            failed = {tp.partition for tp, err in result.items() if err is not None}
            state.setdefault("errors", []).extend(repr(err) for err in result.values() if err is not None)
            for partition, i, count, ack in pending:
                if partition not in failed:
                    state["acked"].append((i, count, ack))
            state["last"] = time.monotonic()
    finally:
        try:
            consumer.close()
        except Exception:
            pass


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_share_state_survives_sigterm_and_sigkill(kind, odradek_broker_factory, kafka_broker_factory):
    """Must show 2, on Odradek and on a live Kafka 4.4.0 under the same checks: the broker
    stopped (SIGTERM) and killed (SIGKILL) mid-stream loses no record, delivers no accepted
    record again and keeps the delivery counts of confirmed releases."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    if kind == "kafka":
        require_tool(f"kafka-{KAFKA_4_4}")
        broker = kafka_broker_factory(version=KAFKA_4_4)
    else:
        broker = odradek_broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("restarts", 2, 1)]).values():
        f.result(30)
    from test_share_groups_state import group_configs

    from odradek.tools.client import KafkaClient

    # As in Kafka 4.4, a share-partition's start offset is written with its first acknowledgement:
    # with share.auto.offset.reset=latest a restart before that would start it again at the end
    # of the log. The group reads from the earliest offset, so that is not what is measured here.
    with KafkaClient(broker.bootstrap) as client:
        group_configs(client, "restarts", {"share.auto.offset.reset": "earliest"})
    state: dict = {"deliveries": [], "acked": [], "last": 0.0}
    stop = threading.Event()
    thread = threading.Thread(target=_restart_consumer, args=(broker.bootstrap, state, stop))
    thread.start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(RESTART_RECORDS):
            producer.produce("restarts", value=f"r-{i}".encode(), partition=i % 2)
        producer.flush(60)
        for stop_broker in (broker.stop, broker.kill):
            deadline = time.monotonic() + 60
            before = len(state["acked"])
            while len(state["acked"]) < before + RESTART_RECORDS // 4:
                assert time.monotonic() < deadline, (stop_broker.__name__, len(state["acked"]),
                                                     len(state["deliveries"]), state.get("errors", [])[-5:])
                time.sleep(0.05)
            stop_broker()
            broker.start()
        deadline = time.monotonic() + 120
        while len({i for i, _, ack in state["acked"] if ack == "ACCEPT"}) < RESTART_RECORDS:
            assert time.monotonic() < deadline, "records lost after the restarts"
            time.sleep(0.2)
        time.sleep(3)  # nothing more may come
    finally:
        stop.set()
        thread.join(60)
    accepted = Counter(i for i, _, ack in state["acked"] if ack == "ACCEPT")
    # every record accepted, none accepted twice (an accepted record is never delivered again)
    assert set(accepted) == set(range(RESTART_RECORDS)) and max(accepted.values()) == 1
    released = {i: count for i, count, ack in state["acked"] if ack == "RELEASE"}
    assert released, "no record was released"
    for i, count in released.items():
        # a release the broker confirmed is remembered across the restarts: the delivery that was
        # accepted came later, with a higher delivery count
        accepted_counts = [c for j, c, ack in state["acked"] if j == i and ack == "ACCEPT"]
        assert accepted_counts and accepted_counts[0] > count, (i, count, accepted_counts)


def test_locks_of_a_stalled_member_run_out_and_another_member_gets_the_records(odradek_broker_factory):
    """A member that stops acknowledging loses its record locks after
    ``group.share.record.lock.duration.ms``; another member then gets the records, counted once more."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = odradek_broker_factory(overrides={"group.share.record.lock.duration.ms": "3000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("locks", 1, 1)]).values():
        f.result(30)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "locks", "share.acknowledgement.mode": "explicit"}
    stalled, other = ShareConsumer({**config, "client.id": "stalled"}), ShareConsumer({**config, "client.id": "other"})
    try:
        stalled.subscribe(["locks"])
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            stalled.poll(0.2)  # joins; its share-partition starts at the end of the log (latest)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(20):
            producer.produce("locks", value=f"l-{i}".encode(), partition=0)
        producer.flush(30)
        held: list = []
        deadline = time.monotonic() + 20
        while not held and time.monotonic() < deadline:
            held = [m for m in stalled.poll(0.5) if m.error() is None]
        assert held and all(m.delivery_count() == 1 for m in held)
        acquired_at = time.monotonic()
        # the stalled member keeps its membership (librdkafka heartbeats) but never acknowledges
        other.subscribe(["locks"])
        got: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(got) < len(held) and time.monotonic() < deadline:
            for m in other.poll(0.5):
                if m.error() is None:
                    got[m.offset()] = m.delivery_count()
                    other.acknowledge(m, AcknowledgeType.ACCEPT)
            other.commit_sync()
        assert time.monotonic() - acquired_at >= 2.5  # not before the lock ran out
        assert {m.offset(): 2 for m in held} == {o: c for o, c in got.items() if o in {m.offset() for m in held}}
    finally:
        other.close()
        stalled.close()


def test_share_coordinator_rpcs(odradek_broker_factory):
    """Initialize/Write/Read/ReadSummary/Delete ShareGroupState on the wire, and the state
    written through them read back after a restart."""
    from test_share_groups_state import create_topic

    from odradek.tools.client import KafkaClient
    from odradek.wire.errors import ErrorCode
    from odradek.wire.primitives import Uuid
    from odradek.wire.protocol import request_class

    broker = odradek_broker_factory()
    with KafkaClient(broker.bootstrap) as client:
        create_topic(client, "rpc")
        tid = client.topic("rpc").topic_id
    unknown = Uuid(bytes(range(1, 17)))

    def call(key: int, **body):
        with KafkaClient(broker.bootstrap) as client:
            return client.send(key, request_class(key)(**body))

    Init, W, R, S, D = (request_class(k) for k in (83, 85, 84, 87, 86))
    init = call(83, group_id="g", topics=[Init.InitializeStateData(topic_id=tid, partitions=[
        Init.PartitionData(partition=0, state_epoch=1, start_offset=10)])])
    assert init.results[0].partitions[0].error_code == 0
    write = call(85, group_id="g", topics=[W.WriteStateData(topic_id=tid, partitions=[W.PartitionData(
        partition=0, state_epoch=1, leader_epoch=3, start_offset=12, delivery_complete_count=1,
        state_batches=[W.StateBatch(first_offset=12, last_offset=14, delivery_state=0, delivery_count=2),
                       W.StateBatch(first_offset=15, last_offset=15, delivery_state=2, delivery_count=1)])])])
    assert write.results[0].partitions[0].error_code == 0
    stale = call(85, group_id="g", topics=[W.WriteStateData(topic_id=tid, partitions=[W.PartitionData(
        partition=0, state_epoch=0, leader_epoch=3, start_offset=12, state_batches=[])])])
    assert stale.results[0].partitions[0].error_code == ErrorCode.FENCED_STATE_EPOCH
    # Kafka 4.4's share coordinator checks: a negative leader epoch, a partition never initialized,
    # a topic it does not know
    for topic_id, partition, leader_epoch, code in ((tid, 0, -1, ErrorCode.INVALID_REQUEST),
                                                    (tid, 1, 3, ErrorCode.INVALID_REQUEST),
                                                    (unknown, 0, 3, ErrorCode.INVALID_REQUEST)):
        bad = call(85, group_id="g", topics=[W.WriteStateData(topic_id=topic_id, partitions=[W.PartitionData(
            partition=partition, state_epoch=1, leader_epoch=leader_epoch, start_offset=12, state_batches=[])])])
        assert bad.results[0].partitions[0].error_code == code, (topic_id, partition, leader_epoch)
    broker.restart()
    read = call(84, group_id="g", topics=[R.ReadStateData(topic_id=tid, partitions=[
        R.PartitionData(partition=0, leader_epoch=3)])])
    p = read.results[0].partitions[0]
    assert (p.error_code, p.state_epoch, p.start_offset) == (0, 1, 12)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches] == \
        [(12, 14, 0, 2), (15, 15, 2, 1)]
    summary = call(87, group_id="g", topics=[S.ReadStateSummaryData(topic_id=tid, partitions=[
        S.PartitionData(partition=0, leader_epoch=3)])])
    p = summary.results[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.start_offset, p.delivery_complete_count) == (0, 3, 12, 1)
    deleted = call(86, group_id="g", topics=[D.DeleteStateData(topic_id=tid, partitions=[D.PartitionData(partition=0)])])
    assert deleted.results[0].partitions[0].error_code == 0
    broker.restart()
    read = call(84, group_id="g", topics=[R.ReadStateData(topic_id=tid, partitions=[
        R.PartitionData(partition=0, leader_epoch=3)])])
    assert read.results[0].partitions[0].start_offset == -1


CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh in Kafka 4.4


def _earliest_group(bootstrap: str) -> tuple[str, str, int]:
    """kafka-configs.sh sets share.auto.offset.reset=earliest on a group and describes it; a share
    consumer that joins after 30 records were produced then gets all 30."""
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("cfg", 1, 1)]).values():
        f.result(30)
    alter = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
                                           "--entity-name", "cfg-group", "--add-config",
                                           "share.auto.offset.reset=earliest,share.delivery.count.limit=3"],
                          version=KAFKA_4_4)
    bad = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
                                         "--entity-name", "cfg-group", "--add-config", "share.no.such.config=1"],
                        version=KAFKA_4_4)
    describe = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--describe", "--entity-type",
                                              "groups", "--entity-name", "cfg-group"], version=KAFKA_4_4)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        producer.produce("cfg", value=f"c-{i}".encode())
    producer.flush(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "cfg-group"})
    consumer.subscribe(["cfg"])
    got = set()
    deadline = time.monotonic() + 30
    try:
        while len(got) < 30 and time.monotonic() < deadline:
            got.update(m.offset() for m in consumer.poll(0.5) if m.error() is None)
    finally:
        consumer.close()
    return alter.stdout + alter.stderr, describe.stdout, bad.returncode, len(got)


def test_group_configs_with_kafka_configs_tool(odradek_broker_factory, kafka_broker_factory):
    """Group configs (GROUP resources) set and described with Kafka's kafka-configs.sh, on Odradek
    and on Kafka 4.4.0; share.auto.offset.reset=earliest takes effect for a new share group."""
    require_tool(f"kafka-{KAFKA_4_4}")
    odradek = odradek_broker_factory()
    o_alter, o_describe, o_bad, o_got = _earliest_group(odradek.bootstrap)
    odradek.stop()
    kafka = kafka_broker_factory(version=KAFKA_4_4)
    k_alter, k_describe, k_bad, k_got = _earliest_group(kafka.bootstrap)
    kafka.stop()
    assert o_got == k_got == 30
    assert o_alter == k_alter
    assert o_bad == k_bad != 0
    assert _normalized(o_describe) == _normalized(k_describe), (o_describe, k_describe)
