"""Storage as Kafka 4.4.0 (issue #23): `odradek storage format` writes what `kafka-storage format`
of 4.4.0 writes for the same arguments, and a data dir a real Kafka 4.4.0 wrote (plain, compacted
and transactional topics, a consumer group) is served by Odradek."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_oracle import CLUSTER_ID, KAFKA_4_4, require_tool, run_java_tool

from odradek.cli import main as odradek_main
from odradek.kraft.snapshot import read_snapshot
from odradek.wire.records import iter_batches

pytestmark = pytest.mark.oracle

METADATA = "__cluster_metadata-0"
SNAPSHOT = "00000000000000000000-0000000000.checkpoint"


def _properties(tmp: Path, name: str) -> Path:
    data = tmp / name / "data"
    props = tmp / name / "server.properties"
    props.parent.mkdir(parents=True)
    props.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1", "controller.quorum.voters=1@127.0.0.1:9093",
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER",
        f"log.dirs={data}"]) + "\n")
    return props


def _bootstrap_file(data: Path) -> Path:
    legacy = data / "bootstrap.checkpoint"
    return legacy if legacy.exists() else data / METADATA / SNAPSHOT


def _written(data: Path) -> tuple:
    """The bootstrap metadata format left: batch shapes and records (not the file's place)."""
    raw = _bootstrap_file(data).read_bytes()
    shapes = [(b.header().base_offset, b.header().partition_leader_epoch, b.header().attributes,
               b.header().record_count, b.header().batch_length) for b in iter_batches(raw)]
    return shapes, [(r.name, r.version, r.message) for r in read_snapshot(_bootstrap_file(data))]


def _files(data: Path) -> tuple:
    snap = _bootstrap_file(data)
    return (sorted(p.relative_to(data).as_posix() for p in data.rglob("*")), stat.S_IMODE(snap.stat().st_mode))


def _format_both(tmp: Path, args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    require_tool(f"kafka-{KAFKA_4_4}")
    kafka_props, ours_props = _properties(tmp, "kafka"), _properties(tmp, "odradek")
    proc = run_java_tool("kafka.tools.StorageTool", ["format", "-t", CLUSTER_ID, "-c", str(kafka_props), *args],
                         version=KAFKA_4_4)
    assert proc.returncode == 0, proc.stderr
    assert odradek_main(["storage", "format", "-t", CLUSTER_ID, "-c", str(ours_props), *args]) == 0
    # the same output: "Bootstrap metadata: BootstrapMetadata(records=[...], ...)" and
    # "Formatting metadata directory <dir> with metadata.version <name>."
    kafka_out = proc.stdout.strip().replace(str(kafka_props.parent), "<d>")
    ours_out = capsys.readouterr().out.strip().replace(str(ours_props.parent), "<d>")
    assert ours_out.splitlines()[-2:] == kafka_out.splitlines()[-2:]
    return kafka_props.parent / "data", ours_props.parent / "data"


@pytest.mark.parametrize("args", [
    (), ("--release-version", "4.0"), ("--release-version", "4.2"), ("--release-version", "3.9"),
    ("--release-version", "3.6-IV1"), ("--feature", "share.version=0"),
    ("--release-version", "4.1", "--feature", "group.version=0"),
    ("--add-scram", "SCRAM-SHA-256=[name=alice,salt=MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=,"
                    "saltedpassword=mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=,iterations=8192]"),
])
def test_format_writes_what_kafka_44_writes(tmp_path: Path, args: tuple[str, ...],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    kafka, ours = _format_both(tmp_path, args, capsys)
    assert _written(ours) == _written(kafka)


def test_format_puts_it_where_kafka_44_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kafka, ours = _format_both(tmp_path, (), capsys)
    assert _files(ours) == _files(kafka)


@pytest.mark.parametrize("args", [("--release-version", "4.5"), ("--release-version", "3.2"),
                                  ("--feature", "share.version=3"), ("--feature", "no.such.version=1"),
                                  ("--release-version", "4.0-IV0", "--feature",
                                   "eligible.leader.replicas.version=1")])
def test_format_refuses_what_kafka_44_refuses(tmp_path: Path, args: tuple[str, ...]) -> None:
    require_tool(f"kafka-{KAFKA_4_4}")
    kafka_props, ours_props = _properties(tmp_path, "kafka"), _properties(tmp_path, "odradek")
    proc = run_java_tool("kafka.tools.StorageTool", ["format", "-t", CLUSTER_ID, "-c", str(kafka_props), *args],
                         version=KAFKA_4_4)
    assert proc.returncode != 0
    assert odradek_main(["storage", "format", "-t", CLUSTER_ID, "-c", str(ours_props), *args]) == 1
    assert not (kafka_props.parent / "data" / METADATA).exists()
    assert not (ours_props.parent / "data" / METADATA).exists()


# ------------------------------------------------------------------ a Kafka 4.4.0 data dir, served


def _workload(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([
            NewTopic("plain", 3, 1), NewTopic("txn", 2, 1),
            NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                                 "min.cleanable.dirty.ratio": "0.01"})]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce("plain", key=str(i).encode(), value=f"v{i}".encode(), partition=i % 3)
    for round_ in range(5):
        for k in range(20):
            producer.produce("compacted", key=f"k{k}".encode(), value=f"r{round_}".encode())
        producer.flush()
        time.sleep(0.3)  # new segments (segment.ms), so the cleaner has something to clean
    producer.produce("compacted", key=b"k0", value=None)
    producer.flush()
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1"})
    txn.init_transactions()
    for n, commit in ((0, True), (1, False), (2, True)):
        txn.begin_transaction()
        for i in range(10):
            txn.produce("txn", key=f"{n}-{i}".encode(), value=b"x", partition=i % 2)
        txn.commit_transaction() if commit else txn.abort_transaction()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g1", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe(["plain", "txn"])
    got, deadline = 0, time.monotonic() + 60
    while got < 320 and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and not m.error():
            got += 1
    assert got == 320
    consumer.commit(asynchronous=False)
    consumer.close()


def _read(bootstrap: str, group: str | None, partitions: list[tuple[str, int]]) -> tuple[dict, dict]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    tps = [TopicPartition(t, p) for t, p in partitions]
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(tps, timeout=20)}
    consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
    records: dict[tuple[str, int], list] = {}
    deadline, idle = time.monotonic() + 30, 0
    while time.monotonic() < deadline and idle < 4:
        m = consumer.poll(0.5)
        if m is None or m.error():
            idle += 1
            continue
        idle = 0
        records.setdefault((m.topic(), m.partition()), []).append((m.offset(), m.key(), m.value()))
    consumer.close()
    return committed, records


def test_odradek_serves_a_kafka_44_data_dir(_module_factory) -> None:
    kafka = _module_factory("kafka", version=KAFKA_4_4)
    _workload(kafka.bootstrap)
    partitions = [("plain", 0), ("plain", 1), ("plain", 2), ("txn", 0), ("txn", 1), ("compacted", 0)]
    expected = _read(kafka.bootstrap, "g1", partitions)
    topics = sorted(AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics)
    assert kafka.stop() in (0, 143)  # the JVM exits 143 on SIGTERM after a clean shutdown
    # the same files, now served by Odradek
    odradek = _module_factory("odradek", overrides={"log.dirs": ",".join(str(d) for d in kafka.log_dirs)})
    assert sorted(AdminClient({"bootstrap.servers": odradek.bootstrap}).list_topics(timeout=10).topics) == topics
    served = _read(odradek.bootstrap, "g1", partitions)
    assert served[0] == expected[0]
    differing = {tp: {"kafka": recs, "odradek": served[1].get(tp)} for tp, recs in expected[1].items()
                 if served[1].get(tp) != recs and tp != ("compacted", 0)}
    assert not differing
    # Odradek's cleaner may compact the dirty segments Kafka had not cleaned yet: the same records
    # or fewer, and the same latest value of every key
    kafka_compacted, ours_compacted = expected[1][("compacted", 0)], served[1][("compacted", 0)]
    assert set(ours_compacted) <= set(kafka_compacted)
    assert {k: v for _, k, v in ours_compacted} == {k: v for _, k, v in kafka_compacted}
    committed, _ = expected
    assert committed[("txn", 0)] > 10 and committed[("plain", 0)] == 100
    # and it goes on: the transactional id continues with a new epoch, the group commits again
    txn = Producer({"bootstrap.servers": odradek.bootstrap, "transactional.id": "tx-1"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("txn", key=b"3-0", value=b"x", partition=0)
    txn.commit_transaction(30)
    _, after = _read(odradek.bootstrap, None, [("txn", 0)])
    assert after[("txn", 0)][-1][1] == b"3-0"
