"""Retention on a running Odradek (issue #8, must-show 1).

A topic with a small `retention.ms` and small segments: the broker's retention task (every
`log.retention.check.interval.ms`) deletes the expired segments (renamed `.deleted`, gone after
`log.segment.delete.delay.ms`), the log start offset moves, and consumers that fell behind get
OFFSET_OUT_OF_RANGE and reset as their `auto.offset.reset` says (kafka-python and librdkafka).
Also: topic configs set at creation and with IncrementalAlterConfigs show in DescribeConfigs with
their source, survive a restart, and a changed retention applies to the live log; DeleteRecords.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from confluent_kafka.admin import NewTopic as CKNewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import OffsetAndMetadata

OVERRIDES = {
    "log.retention.check.interval.ms": 300,
    "log.initial.task.delay.ms": 300,  # (30 s by default, as on Kafka)
    "log.segment.delete.delay.ms": 300,
    "log.retention.hours": 1,  # a static broker default, to see its source in DescribeConfigs
}


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([CKNewTopic(topic, 1, 1, config=configs)]).values():
        fut.result(30)


def _produce(bootstrap: str, topic: str, n: int, size: int = 200) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, batch_size=size * 3)
    for i in range(n):
        producer.send(topic, key=str(i).encode(), value=f"{i:08d}".encode() * (size // 8))
    producer.flush()
    producer.close()


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(CKTopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def _segment_files(log_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in (log_dir / f"{topic}-0").iterdir() if ".log" in p.name)


def _wait(pred: Callable[[], bool], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


@pytest.fixture
def broker(odradek_broker_factory):
    return odradek_broker_factory(overrides=OVERRIDES)


def test_old_segments_go_on_schedule_and_lagging_consumers_reset(broker) -> None:
    bootstrap = broker.bootstrap
    topic = f"ret-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, {"retention.ms": "4000", "segment.bytes": "4096"})
    _produce(bootstrap, topic, 200)
    low, high = _watermarks(bootstrap, topic)
    assert (low, high) == (0, 200)
    files_before = _segment_files(broker.log_dirs[0], topic)
    assert len([f for f in files_before if f.endswith(".log")]) > 5

    # a consumer that read the first records and then stalled
    lagging = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest",
                            enable_auto_commit=False, max_partition_fetch_bytes=1024, fetch_max_bytes=1024)
    tp = TopicPartition(topic, 0)
    lagging.assign([tp])
    lagging.seek(tp, 0)
    first = lagging.poll(timeout_ms=5000, max_records=3)
    assert [r.offset for r in first[tp]] == [0, 1, 2]
    # It commits its position (3) and stalls; records it already fetched are in its own buffer,
    # so the stalled member is modelled by its committed offset and a new session of the group.
    lagging.commit({tp: OffsetAndMetadata(3, "", -1)})
    lagging.close()

    # retention.ms = 4 s after the records' timestamps, checked every 300 ms: everything expires;
    # Kafka rolls the expired active segment first, so the log ends up empty at offset 200
    _wait(lambda: _watermarks(bootstrap, topic)[0] == 200)
    _wait(lambda: not [f for f in _segment_files(broker.log_dirs[0], topic) if f.endswith(".deleted")])
    files_after = _segment_files(broker.log_dirs[0], topic)
    assert files_after == ["00000000000000000200.log"], files_after

    # more data after the deletion; the group's committed position (3) is out of range
    _produce(bootstrap, topic, 5)
    resumed = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest",
                            enable_auto_commit=False)
    resumed.assign([tp])
    recs = resumed.poll(timeout_ms=10_000)
    for _ in range(10):
        if recs.get(tp):
            break
        recs = resumed.poll(timeout_ms=1000)
    assert [r.offset for r in recs.get(tp, [])][:1] == [200]  # reset to earliest
    resumed.close()

    strict = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="none", enable_auto_commit=False)
    strict.assign([tp])
    strict.seek(tp, 3)
    with pytest.raises(OffsetOutOfRangeError):
        for _ in range(20):
            strict.poll(timeout_ms=500)
    strict.close()

    latest = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="latest", enable_auto_commit=False)
    latest.assign([tp])
    latest.seek(tp, 3)
    latest.poll(timeout_ms=2000)
    _wait(lambda: latest.position(tp) == 205, 10)
    latest.close()

    # librdkafka: earliest resets to the log start, error reports _AUTO_OFFSET_RESET
    ck = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"ck-{topic}", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    ck.assign([CKTopicPartition(topic, 0, 3)])
    msg = None
    for _ in range(30):
        msg = ck.poll(1.0)
        if msg is not None and msg.error() is None:
            break
    assert msg is not None and msg.error() is None and msg.offset() == 200
    ck.close()
    ck = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"ck2-{topic}", "auto.offset.reset": "error",
                     "enable.auto.commit": False})
    ck.assign([CKTopicPartition(topic, 0, 3)])
    err = None
    for _ in range(30):
        msg = ck.poll(1.0)
        if msg is not None and msg.error() is not None:
            err = msg.error()
            break
    assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
    ck.close()


def test_configs_sources_persistence_and_live_change(broker) -> None:
    bootstrap = broker.bootstrap
    topic = f"cfg-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, {"segment.bytes": "4096", "cleanup.policy": "delete"})
    admin = CKAdmin({"bootstrap.servers": bootstrap})

    def describe() -> dict[str, ConfigEntry]:
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        return admin.describe_configs([res])[res].result(30)

    entries = describe()
    assert entries["segment.bytes"].value == "4096"
    assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["retention.ms"].value == str(3600 * 1000)
    # Kafka 4.4 reports it as DEFAULT_CONFIG: only a static log.retention.ms (the primary synonym) would
    # count, log.retention.hours is dropped from the synonyms (checked on a live Kafka 4.4.0)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    _produce(bootstrap, topic, 100)
    assert _watermarks(bootstrap, topic)[0] == 0
    # IncrementalAlterConfigs: a small retention now applies to the live log
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    entries = describe()
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    _wait(lambda: _watermarks(bootstrap, topic)[0] == 100)

    # persisted: the same after a restart
    broker.restart()
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    entries = describe()
    assert (entries["retention.ms"].value, entries["segment.bytes"].value) == ("1000", "4096")
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # deleting the override falls back to the static broker value
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([res])[res].result(30)
    assert describe()["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_the_first_retention_check_comes_log_initial_task_delay_after_start_up(odradek_broker_factory) -> None:
    """As Kafka's kafka-log-retention task: the first check runs log.initial.task.delay.ms after
    start-up, the next ones every log.retention.check.interval.ms (here 5 minutes, never reached)."""
    broker = odradek_broker_factory(overrides={"log.retention.check.interval.ms": 300000,
                                               "log.initial.task.delay.ms": 10000, "log.segment.delete.delay.ms": 300})
    topic = f"first-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic, {"retention.ms": "1000", "segment.bytes": "4096"})
    _produce(broker.bootstrap, topic, 100)
    assert int(_segment_files(broker.log_dirs[0], topic)[0][:20]) == 0
    _wait(lambda: int(_segment_files(broker.log_dirs[0], topic)[0][:20]) > 0)


def test_delete_records_moves_the_start_and_retention_removes_files(broker) -> None:
    bootstrap = broker.bootstrap
    topic = f"dr-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, {"segment.bytes": "4096"})
    _produce(bootstrap, topic, 100)
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    tp = CKTopicPartition(topic, 0, 57)
    result = admin.delete_records([tp])[tp].result(30)
    assert result.low_watermark == 57
    assert _watermarks(bootstrap, topic) == (57, 100)
    # the segments wholly below 57 go at the next retention check
    def first_base() -> int:
        return int(_segment_files(broker.log_dirs[0], topic)[0][:20])

    _wait(lambda: 0 < first_base() <= 57 and not any(
        f.endswith(".deleted") for f in _segment_files(broker.log_dirs[0], topic)))
    # a compacted topic refuses DeleteRecords (POLICY_VIOLATION), as in Kafka
    compacted = f"drc-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, compacted, {"cleanup.policy": "compact"})
    ctp = CKTopicPartition(compacted, 0, 0)
    with pytest.raises(Exception) as info:
        admin.delete_records([ctp])[ctp].result(30)
    assert "POLICY_VIOLATION" in str(info.value) or "policy" in str(info.value).lower()


def test_retention_files_match_kafka_391(kafka_broker_factory, odradek_broker_factory) -> None:
    """Live oracle: the same batches (half of them an hour old) into Kafka 3.9.1 and Odradek; after
    the retention checks the partition dirs and checkpoints are the same (old segments gone, an
    expired active segment rolled and deleted, snapshots, log start offsets)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from test_oracle_logdir import send_all

    from odradek.wire.records import SimpleRecord, build_batch

    overrides = {"num.partitions": "1", "auto.create.topics.enable": "false",
                 "log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "200",
                 # Kafka waits 30 s before its first retention check unless told otherwise
                 "log.initial.task.delay.ms": "500"}
    kafka = kafka_broker_factory(version="3.9.1", overrides=overrides)
    odradek = odradek_broker_factory(overrides=overrides)
    now = int(time.time() * 1000)
    topics = {"ret-half": {"retention.ms": "1800000"}, "ret-all": {"retention.ms": "1800000"},
              "ret-bytes": {"retention.bytes": "5000", "retention.ms": "1800000"}}
    batches = []
    for i in range(60):
        old = now - 3_600_000 + i
        recent = now + i
        recs = [SimpleRecord(b"v%d-%d" % (i, j) * 20, b"k%d" % j, (), old) for j in range(3)]
        batches.append(("ret-half", 0, build_batch(recs if i < 30 else [r._replace(timestamp=recent) for r in recs])))
        batches.append(("ret-all", 0, build_batch(recs)))
        batches.append(("ret-bytes", 0, build_batch([r._replace(timestamp=recent) for r in recs])))
    for b in (kafka, odradek):
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic(t, 1, 1, topic_configs={"segment.bytes": "3000", "retention.ms": "-1"})
                             for t in topics])
        admin.close()
    assert send_all(kafka, batches) == send_all(odradek, batches)
    # retention is switched on once every batch is in: a check during the produce could delete a
    # whole (all old) log and roll at whatever offset it had reached, a timing-dependent layout
    for b in (kafka, odradek):
        admin = CKAdmin({"bootstrap.servers": b.bootstrap})
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in c.items()])
            for t, c in topics.items()]
        for fut in admin.incremental_alter_configs(resources).values():
            fut.result(30)

    def settled(b) -> bool:
        for t in topics:
            names = _segment_files(b.log_dirs[0], t)
            if any(n.endswith(".deleted") for n in names) or names[0].startswith("00000000000000000000"):
                return False
        return True

    for b in (kafka, odradek):
        _wait(lambda b=b: settled(b), 60)
    time.sleep(2)  # more checks: nothing else may go
    for b in (kafka, odradek):
        _wait(lambda b=b: settled(b), 60)
        assert b.stop() in (0, 143)

    def files(b) -> dict[str, bytes]:
        out = {}
        for t in topics:
            d = b.log_dirs[0] / f"{t}-0"
            for f in sorted(d.iterdir()):
                if f.name != "partition.metadata":
                    out[f"{t}/{f.name}"] = f.read_bytes()
        for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint"):
            lines = (b.log_dirs[0] / name).read_text().splitlines()
            out[name] = "\n".join(sorted(line for line in lines if line.startswith("ret-"))).encode()
        return out

    theirs, ours = files(kafka), files(odradek)
    assert sorted(ours) == sorted(theirs)
    assert [n for n in theirs if theirs[n] != ours[n]] == []
    # and what retention did: ret-all is one empty segment at its end offset
    assert [n for n in ours if n.startswith("ret-all/") and n.endswith(".log")] == ["ret-all/00000000000000000180.log"]
