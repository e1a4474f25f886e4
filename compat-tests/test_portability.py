"""Portable log dirs (issue #9): Kafka's KRaft metadata log is Odradek's metadata store.

1. Odradek starts on a copy of a log dir written by Apache Kafka 4.1 and serves its topics.
2. Topic ids and configs survive an Odradek restart (they live in __cluster_metadata-0).
3. Odradek -> Kafka 4.1 -> Odradek on one directory: each broker serves everything the
   other wrote (records, topics, ids, configs, committed group offsets).
4. Kafka's own DumpLogSegments decodes Odradek's metadata log and its bootstrap snapshot.
5. Kafka 3.9 -> Odradek -> Kafka 3.9 (older metadata.version, older record versions).
"""

from __future__ import annotations

import shutil
import stat
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
from kafka_oracle import CLUSTER_ID, KAFKA_4_4

from odradek.cli import main as odradek_main
from odradek.kraft.log import MetadataLog
from odradek.kraft.quorum_state import QuorumState
from odradek.logstore.metadata_files import MetaProperties
from odradek.wire.primitives import Uuid
from odradek.wire.records import iter_batches

FIXTURE_41 = Path(
    "/work/shared/fixtures/kafka-real/ronem123_rupia-transaction-service@5d88e97/kafka-logs"
)


def _copy_writable(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return dest


def _topic_configs(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    """The topic's overrides (DYNAMIC_TOPIC_CONFIG entries) as name -> value."""
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    entries = result["topic"][topic]
    return {k: v["value"] for k, v in entries.items() if v.get("config_source") == "DYNAMIC_TOPIC_CONFIG"}


def _topic_ids(admin: KafkaAdminClient, topics: list[str]) -> dict[str, tuple[str, int]]:
    """name -> (topic id as text, partition count)."""
    return {t["name"]: (str(t["topic_id"]), len(t["partitions"])) for t in admin.describe_topics(topics)}


def _consume_all(bootstrap: str, partitions: list[TopicPartition], expected: int, timeout: float = 30.0):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign(partitions)
    consumer.seek_to_beginning()
    out: list[tuple[str, int, int, bytes | None, bytes | None]] = []
    deadline = time.time() + timeout
    while len(out) < expected and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=300).values():
            out += [(m.topic, m.partition, m.offset, m.key, m.value) for m in batch]
    # one more poll: nothing beyond the expected records
    for batch in consumer.poll(timeout_ms=500).values():
        out += [(m.topic, m.partition, m.offset, m.key, m.value) for m in batch]
    consumer.close()
    return sorted(out)


def _records_on_disk(log_dir: Path, topic: str) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    """Every data record of a topic's segments (what a consumer reading from the start must get)."""
    out = []
    for pdir in sorted(log_dir.glob(f"{topic}-*")):
        index = int(pdir.name.rpartition("-")[2])
        for seg in sorted(pdir.glob("*.log")):
            for batch in iter_batches(seg.read_bytes()):
                if batch.header().attributes & 0x20:
                    continue
                for r in batch.records():
                    out.append((topic, index, r.offset, None if r.key is None else bytes(r.key),
                                None if r.value is None else bytes(r.value)))
    return sorted(out)


def _metadata_record_names(log_dir: Path) -> list[str]:
    md = MetadataLog.open(log_dir)
    try:
        return [r.name for r in md.replay_records()]
    finally:
        md.plog.close_handlers()


# ---------------------------------------------------------------------------------- 1

def test_starts_on_real_kafka_41_log_dir_and_serves_its_topics(odradek_broker_factory, tmp_path) -> None:
    data = _copy_writable(FIXTURE_41, tmp_path / "kafka-logs")
    meta = MetaProperties.read(data)
    before = QuorumState.read(data / "__cluster_metadata-0")
    expected_offsets = _records_on_disk(data, "__consumer_offsets")
    assert expected_offsets, "the fixture has committed-offset records"

    broker = odradek_broker_factory(overrides={"log.dirs": str(data), "node.id": meta.node_id})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    assert {"topic_transactions", "__consumer_offsets"} <= set(admin.list_topics())
    ids = _topic_ids(admin, ["topic_transactions", "__consumer_offsets"])
    # the ids Kafka gave the topics (TopicRecords in the fixture's snapshot / partition.metadata)
    assert ids["topic_transactions"] == (str(uuid.UUID(bytes=Uuid.from_base64("3aJOBeUFT2i-2s4EZqlyqQ").bytes)), 1)
    assert ids["__consumer_offsets"][1] == 50
    # ConfigRecords Kafka wrote for __consumer_offsets
    assert _topic_configs(admin, "__consumer_offsets") == {
        "compression.type": "producer", "cleanup.policy": "compact", "segment.bytes": "104857600"}
    admin.close()

    # every record Kafka left in __consumer_offsets is served (the group coordinator may append
    # more after them when it expires the fixture's old groups, never in between)
    partitions = [TopicPartition("__consumer_offsets", p) for p in range(50)]
    served = _consume_all(broker.bootstrap, partitions, len(expected_offsets))
    fixture_end = {}
    for _t, p, offset, _k, _v in expected_offsets:
        fixture_end[p] = max(fixture_end.get(p, 0), offset + 1)
    assert [r for r in served if r[2] < fixture_end.get(r[1], 0)] == expected_offsets

    # topic_transactions: retention left it empty at offset 5; new records continue there
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition("topic_transactions", 0)
    assert consumer.beginning_offsets([tp])[tp] == 5 and consumer.end_offsets([tp])[tp] == 5
    consumer.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    sent = producer.send("topic_transactions", value=b"after-the-move").get(15)
    producer.close()
    assert sent.offset == 5
    assert _consume_all(broker.bootstrap, [tp], 1) == [("topic_transactions", 0, 5, None, b"after-the-move")]
    # librdkafka sees the same topic, its log start (5) and the record written after the move
    ck = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "portability-ck",
                     "enable.auto.commit": False})
    low, high = ck.get_watermark_offsets(CKTopicPartition("topic_transactions", 0), timeout=15)
    assert (low, high) == (5, 6)
    ck.assign([CKTopicPartition("topic_transactions", 0, 5)])
    msg = None
    for _ in range(30):
        msg = ck.poll(1.0)
        if msg is not None and msg.error() is None:
            break
    assert msg is not None and (msg.offset(), msg.value()) == (5, b"after-the-move")
    ck.close()

    assert broker.stop() == 0
    # Odradek led a new KRaft epoch in Kafka's shape
    after = QuorumState.read(data / "__cluster_metadata-0")
    assert before is not None and after is not None and after.leader_epoch == before.leader_epoch + 1
    assert after.leader_id == meta.node_id
    names = _metadata_record_names(data)
    assert names.count("TopicRecord") == 2 and "RegisterBrokerRecord" in names


def test_real_kafka_41_dir_goes_back_to_kafka_after_odradek(odradek_broker_factory, kafka_broker_factory,
                                                             tmp_path) -> None:
    # a dynamic-quorum (kraft.version 1) directory: Odradek continues its metadata log, Kafka 4.1
    # takes it back and serves what Odradek wrote
    data = _copy_writable(FIXTURE_41, tmp_path / "kafka-logs")
    odradek = odradek_broker_factory(overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=odradek.bootstrap)
    admin.create_topics([NewTopic("added-by-odradek", 1, 1, topic_configs={"retention.ms": "600000"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=odradek.bootstrap)
    producer.send("topic_transactions", value=b"via-odradek").get(15)
    producer.send("added-by-odradek", value=b"new-topic").get(15)
    producer.close()
    assert odradek.stop() == 0

    kafka = kafka_broker_factory(overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    assert _topic_configs(admin, "added-by-odradek") == {"retention.ms": "600000"}
    admin.close()
    got = _consume_all(kafka.bootstrap, [TopicPartition("topic_transactions", 0),
                                         TopicPartition("added-by-odradek", 0)], 2)
    assert got == [("added-by-odradek", 0, 0, None, b"new-topic"), ("topic_transactions", 0, 5, None, b"via-odradek")]


def test_refuses_partitions_replicated_on_other_brokers(odradek_broker_factory, tmp_path) -> None:
    data = _copy_writable(FIXTURE_41, tmp_path / "kafka-logs")
    # node.id 2 of the same cluster: every partition's only replica is broker 1
    (data / "meta.properties").write_text((data / "meta.properties").read_text().replace("node.id=1", "node.id=2"))
    broker = odradek_broker_factory(overrides={"log.dirs": str(data), "node.id": 2}, start=False)
    with pytest.raises(Exception):  # noqa: B017 - the harness raises its start error type
        broker.start(timeout=30)
    assert "voters [1]" in broker.log_tail(200) or "other brokers" in broker.log_tail(200)


# ---------------------------------------------------------------------------------- 2

def test_topic_ids_and_configs_survive_restart(odradek_broker_factory) -> None:
    broker = odradek_broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([
        NewTopic("kept", 3, 1, topic_configs={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        NewTopic("plain", 1, 1),
        NewTopic("doomed", 2, 1, topic_configs={"max.message.bytes": "65536"}),
    ])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "plain", configs={"segment.ms": "900000"})])
    admin.create_partitions({"plain": NewPartitions(total_count=4)})
    admin.delete_topics(["doomed"])
    before_ids = _topic_ids(admin, ["kept", "plain"])
    before_configs = {t: _topic_configs(admin, t) for t in ("kept", "plain")}
    admin.close()
    assert before_configs == {"kept": {"retention.ms": "3600000", "cleanup.policy": "compact"},
                              "plain": {"segment.ms": "900000"}}
    assert before_ids["plain"][1] == 4

    assert broker.stop() == 0
    names = _metadata_record_names(broker.log_dir)
    assert names.count("TopicRecord") == 3 and names.count("RemoveTopicRecord") == 1
    # a partition dir the metadata does not know (say, of a topic deleted while its dir survived)
    shutil.copytree(broker.log_dir / "plain-0", broker.log_dir / "ghost-0")
    broker.start()
    assert not (broker.log_dir / "ghost-0").exists()
    assert len(list(broker.log_dir.glob("ghost-0.*-stray"))) == 1

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    assert _topic_ids(admin, ["kept", "plain"]) == before_ids
    assert {t: _topic_configs(admin, t) for t in ("kept", "plain")} == before_configs
    assert not {"doomed", "ghost"} & set(admin.list_topics())
    admin.close()


def test_producer_ids_are_not_reused_after_restart(odradek_broker_factory) -> None:
    broker = odradek_broker_factory()
    first = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    first.send("pids", value=b"a").get(15)
    pid_before = first._transaction_manager.producer_id_and_epoch.producer_id
    first.close()
    # a crash: no clean shutdown, no producer snapshot at the log end
    broker.kill()
    broker.start()
    second = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    second.send("pids", value=b"b").get(15)
    pid_after = second._transaction_manager.producer_id_and_epoch.producer_id
    second.close()
    assert pid_after > pid_before
    assert _metadata_record_names(broker.log_dir).count("ProducerIdsRecord") >= 1


# ---------------------------------------------------------------------------------- 3

@pytest.mark.parametrize("kafka_version", ["4.1.1", KAFKA_4_4])
def test_cross_start_odradek_kafka_odradek(odradek_broker_factory, kafka_broker_factory, tmp_path,
                                           kafka_version) -> None:
    data = tmp_path / "shared-log-dir"
    overrides = {"log.dirs": str(data)}

    # --- Odradek writes the dir (formatted for the Kafka release that takes it next, as with kafka-storage)
    assert odradek_main(["storage", "format", "-t", CLUSTER_ID, "--override", f"log.dirs={data}",
                         "--release-version", kafka_version.rsplit(".", 1)[0]]) == 0
    odradek = odradek_broker_factory(overrides=overrides)
    admin = KafkaAdminClient(bootstrap_servers=odradek.bootstrap)
    admin.create_topics([
        NewTopic("from-odradek", 2, 1, topic_configs={"retention.ms": "86400000", "max.message.bytes": "200000"}),
    ])
    odradek_ids = _topic_ids(admin, ["from-odradek"])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=odradek.bootstrap)
    for i in range(40):
        producer.send("from-odradek", key=f"k{i}".encode(), value=f"odradek-{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    group_consumer = KafkaConsumer(bootstrap_servers=odradek.bootstrap, group_id="portable-group",
                                   enable_auto_commit=False)
    tp0 = TopicPartition("from-odradek", 0)
    group_consumer.assign([tp0])
    group_consumer.commit({tp0: OffsetAndMetadata(7, "", -1)})
    group_consumer.close()
    assert odradek.stop() == 0

    # --- Kafka 4.1 starts on it and serves every record, topic id and config
    kafka = kafka_broker_factory(version=kafka_version, overrides=overrides)
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    assert _topic_ids(admin, ["from-odradek"]) == odradek_ids
    assert _topic_configs(admin, "from-odradek") == {"retention.ms": "86400000", "max.message.bytes": "200000"}
    odradek_parts = [TopicPartition("from-odradek", p) for p in range(2)]
    expected = _records_on_disk(data, "from-odradek")
    assert len(expected) == 40
    assert _consume_all(kafka.bootstrap, odradek_parts, 40) == expected
    committed = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id="portable-group",
                              enable_auto_commit=False)
    assert committed.committed(tp0) == 7
    committed.close()

    # --- Kafka writes more: records, a topic with configs, a config change, a group commit
    admin.create_topics([NewTopic("from-kafka", 3, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "from-odradek",
                                        configs={"retention.ms": "172800000", "max.message.bytes": "200000"})])
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(20):
        producer.send("from-odradek", value=f"kafka-{i}".encode(), partition=i % 2)
    for i in range(9):
        producer.send("from-kafka", key=f"c{i}".encode(), value=f"kafka-{i}".encode(), partition=i % 3)
    producer.flush()
    producer.close()
    group_consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id="portable-group",
                                   enable_auto_commit=False)
    group_consumer.assign([tp0])
    group_consumer.commit({tp0: OffsetAndMetadata(25, "", -1)})
    group_consumer.close()
    kafka_ids = _topic_ids(admin, ["from-odradek", "from-kafka"])
    admin.close()
    kafka.stop()
    assert (data / ".kafka_cleanshutdown").exists()

    # --- Odradek starts on Kafka's result and serves everything
    odradek2 = odradek_broker_factory(overrides=overrides)
    admin = KafkaAdminClient(bootstrap_servers=odradek2.bootstrap)
    assert _topic_ids(admin, ["from-odradek", "from-kafka"]) == kafka_ids == {
        **odradek_ids, "from-kafka": kafka_ids["from-kafka"]}
    assert _topic_configs(admin, "from-odradek") == {"retention.ms": "172800000", "max.message.bytes": "200000"}
    assert _topic_configs(admin, "from-kafka") == {"cleanup.policy": "compact"}
    admin.close()
    all_parts = odradek_parts + [TopicPartition("from-kafka", p) for p in range(3)]
    expected = _records_on_disk(data, "from-odradek") + _records_on_disk(data, "from-kafka")
    assert len(expected) == 40 + 20 + 9
    assert _consume_all(odradek2.bootstrap, all_parts, len(expected)) == sorted(expected)
    committed = KafkaConsumer(bootstrap_servers=odradek2.bootstrap, group_id="portable-group",
                              enable_auto_commit=False)
    assert committed.committed(tp0) == 25
    committed.close()
    # and it keeps writing where Kafka stopped
    producer = KafkaProducer(bootstrap_servers=odradek2.bootstrap)
    meta = producer.send("from-kafka", key=b"again", value=b"odradek-again", partition=0).get(15)
    producer.close()
    assert meta.offset == 3
    # Kafka 4.4 leaves the metadata log's indexes untrimmed at a clean shutdown (first entry real,
    # the rest zeros); like Kafka, Odradek does not call that corrupt (issue #21)
    assert odradek2.stop() == 0
    log_text = odradek2.console_log.read_text(errors="replace")
    warned = [line for line in log_text.splitlines() if "WARN" in line and "index" in line.lower()]
    assert warned == []


# ---------------------------------------------------------------------------------- 4 (Kafka's own tools)

def test_kafka_dump_log_decodes_odradek_metadata(odradek_broker_factory, dump_log_segments_tool) -> None:
    broker = odradek_broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("decoded", 2, 1, topic_configs={"retention.ms": "60000"})])
    admin.delete_topics(["decoded"])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    producer.send("other", value=b"x").get(15)
    producer.close()
    assert broker.stop() == 0
    meta_dir = broker.log_dir / "__cluster_metadata-0"
    # Odradek formats with Kafka 4.4's metadata.version: Kafka 4.4's tool reads its record versions
    out, err, rc = dump_log_segments_tool(
        [meta_dir / "00000000000000000000-0000000000.checkpoint", *sorted(meta_dir.glob("*.log"))],
        "--cluster-metadata-decoder", version=KAFKA_4_4)
    assert rc == 0, err
    assert "Exception" not in out + err and "Error" not in err
    for record_type in ("FEATURE_LEVEL_RECORD", "TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD",
                        "REMOVE_TOPIC_RECORD", "REGISTER_BROKER_RECORD", "PRODUCER_IDS_RECORD",
                        "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD"):
        assert f'"type":"{record_type}"' in out, record_type
    assert "LeaderChange" in out
    assert "KRaft bootstrap snapshot" in out or "SnapshotHeader" in out


# ---------------------------------------------------------------------------------- 5 (older Kafka)

def test_starts_on_a_kafka_39_log_dir(odradek_broker_factory, kafka_broker_factory, tmp_path) -> None:
    data = tmp_path / "kafka-39-logs"
    kafka = kafka_broker_factory(version="3.9.1", overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    admin.create_topics([NewTopic("from-39", 2, 1, topic_configs={"retention.bytes": "1048576"})])
    kafka_ids = _topic_ids(admin, ["from-39"])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(10):
        producer.send("from-39", value=f"v{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    kafka.stop()

    odradek = odradek_broker_factory(overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=odradek.bootstrap)
    assert _topic_ids(admin, ["from-39"]) == kafka_ids
    assert _topic_configs(admin, "from-39") == {"retention.bytes": "1048576"}
    admin.create_topics([NewTopic("odradek-on-39", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    parts = [TopicPartition("from-39", p) for p in range(2)]
    assert _consume_all(odradek.bootstrap, parts, 10) == _records_on_disk(data, "from-39")
    producer = KafkaProducer(bootstrap_servers=odradek.bootstrap)
    producer.send("odradek-on-39", key=b"k", value=b"from-odradek").get(15)
    producer.close()
    assert odradek.stop() == 0
    # Odradek continued the 3.9 log in 3.9's record versions (metadata.version 3.9-IV0)
    md = MetadataLog.open(data)
    try:
        recs = list(md.replay_records())
    finally:
        md.plog.close_handlers()
    features = {r.message.name: r.message.feature_level for r in recs if r.name == "FeatureLevelRecord"}
    assert features["metadata.version"] == 21
    assert {r.version for r in recs if r.name == "PartitionRecord"} == {1}
    assert sum(1 for r in recs if r.name == "TopicRecord") == 2

    # and Kafka 3.9 takes the directory back
    kafka = kafka_broker_factory(version="3.9.1", overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    assert _topic_configs(admin, "odradek-on-39") == {"cleanup.policy": "compact"}
    admin.close()
    assert _consume_all(kafka.bootstrap, [TopicPartition("odradek-on-39", 0)], 1) == [
        ("odradek-on-39", 0, 0, b"k", b"from-odradek")]


# ---------------------------------------------------------------------------------- 6 (idempotence)

def test_idempotent_producer_continues_across_the_moves(odradek_broker_factory, kafka_broker_factory,
                                                        tmp_path) -> None:
    # One producer session keeps sending while the directory goes Odradek -> Kafka 4.1 -> Odradek
    # on the same port: each broker must know the producer's id and sequence from the producer
    # snapshots and the ProducerIdsRecord, or the producer would see sequence/id errors.
    data = tmp_path / "shared"
    overrides = {"log.dirs": str(data)}
    odradek = odradek_broker_factory(overrides=overrides)
    port = odradek.port
    producer = KafkaProducer(bootstrap_servers=odradek.bootstrap, enable_idempotence=True, retries=50,
                             reconnect_backoff_max_ms=500)
    sent: list[tuple[bytes, int]] = []

    def send(prefix: str) -> None:
        futures = [(f"{prefix}{i}".encode(), producer.send("idem", value=f"{prefix}{i}".encode(), partition=0))
                   for i in range(10)]
        producer.flush()
        sent.extend((value, future.get(30).offset) for value, future in futures)

    send("odradek-")
    pid = producer._transaction_manager.producer_id_and_epoch
    assert odradek.stop() == 0
    # Odradek formats with Kafka 4.4's metadata.version, which Kafka 4.4 (not 4.1) takes
    kafka = kafka_broker_factory(overrides=overrides, port=port, version=KAFKA_4_4)
    send("kafka-")
    kafka.stop()
    odradek2 = odradek_broker_factory(overrides=overrides, port=port)
    send("again-")
    assert producer._transaction_manager.producer_id_and_epoch == pid
    producer.close()
    assert [offset for _v, offset in sent] == list(range(30))
    got = _consume_all(odradek2.bootstrap, [TopicPartition("idem", 0)], 30)
    assert [(v, o) for _t, _p, o, _k, v in got] == sent
    # a new producer gets an id from a block after every block handed out so far
    fresh = KafkaProducer(bootstrap_servers=odradek2.bootstrap, enable_idempotence=True)
    fresh.send("idem", value=b"new", partition=0).get(15)
    assert fresh._transaction_manager.producer_id_and_epoch.producer_id >= 1000
    fresh.close()


# ---------------------------------------------------------------------------------- 7 (JBOD)

def test_several_log_dirs_and_a_separate_metadata_dir_move_to_kafka(odradek_broker_factory, kafka_broker_factory,
                                                                     tmp_path) -> None:
    # PartitionRecords name the directory.id of the log dir each partition is in; Kafka (JBOD in
    # KRaft) must find every partition where the metadata says
    dirs = [tmp_path / "a", tmp_path / "b"]
    overrides = {"log.dirs": ",".join(str(d) for d in dirs), "metadata.log.dir": str(tmp_path / "meta")}
    odradek = odradek_broker_factory(overrides=overrides)
    admin = KafkaAdminClient(bootstrap_servers=odradek.bootstrap)
    admin.create_topics([NewTopic("spread", 4, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=odradek.bootstrap)
    for i in range(8):
        producer.send("spread", value=f"v{i}".encode(), partition=i % 4)
    producer.flush()
    producer.close()
    assert odradek.stop() == 0
    placed = {p.name: p.parent.name for d in dirs for p in d.glob("spread-*")}
    assert sorted(placed.values()) == ["a", "a", "b", "b"]
    assert (tmp_path / "meta" / "__cluster_metadata-0").is_dir() and (tmp_path / "meta" / "meta.properties").exists()
    assert not (tmp_path / "meta" / ".lock").exists()

    kafka = kafka_broker_factory(overrides=overrides, version=KAFKA_4_4)  # Odradek formats for Kafka 4.4
    parts = [TopicPartition("spread", p) for p in range(4)]
    expected = sorted(r for d in dirs for r in _records_on_disk(d, "spread"))
    assert len(expected) == 8
    assert _consume_all(kafka.bootstrap, parts, 8) == expected
    kafka.stop()
    # Kafka left every partition where it was
    assert {p.name: p.parent.name for d in dirs for p in d.glob("spread-*")} == placed
