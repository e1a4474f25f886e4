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

OVERRIDES = {
    "log.retention.check.interval.ms": 300,
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
    lagging.seek(tp, 3)

    # retention.ms = 4 s after the records' timestamps, checked every 300 ms: everything expires;
    # Kafka rolls the expired active segment first, so the log ends up empty at offset 200
    _wait(lambda: _watermarks(bootstrap, topic)[0] == 200)
    _wait(lambda: not [f for f in _segment_files(broker.log_dirs[0], topic) if f.endswith(".deleted")])
    files_after = _segment_files(broker.log_dirs[0], topic)
    assert files_after == ["00000000000000000200.log"], files_after

    # more data after the deletion; the stalled consumer's position (3) is out of range
    _produce(bootstrap, topic, 5)
    recs = lagging.poll(timeout_ms=10_000)
    assert [r.offset for r in recs.get(tp, [])][:1] == [200]  # reset to earliest
    lagging.close()

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
    assert entries["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
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
    assert describe()["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value


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
