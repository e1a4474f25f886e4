"""Stock clients against a real Odradek process: create, produce, consume (issue #4, item 1).

Each client — kafka-python, confluent-kafka (librdkafka), kcat and the Java kafka-clients —
creates a topic (admin API or auto-create), produces with acks 0/1/all and every compression
codec, keys and headers, and reads back from earliest, from latest and from a timestamp.
Every value, key, header, partition and offset is checked.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import NewTopic as CKNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = [0, 1, -1]
BASE_TS = 1_700_000_000_000


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _expected(prefix: str, n: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int]]:
    return [
        (f"{prefix}-key-{i}".encode(), f"{prefix}-value-{i}".encode() * (1 + i % 3), [("seq", str(i).encode()), ("src", b"test")], BASE_TS + i)
        for i in range(n)
    ]


def _check_partitioned(records, expected, partitions: int) -> None:
    """Every expected record exactly once; offsets per partition 0..n-1 in produce order."""
    by_value = {r[3]: r for r in records}
    assert len(records) == len(expected), (len(records), len(expected))
    per_partition: dict[int, list[int]] = {}
    for key, value, headers, ts in expected:
        partition, offset, got_key, got_value, got_headers, got_ts = by_value[value]
        assert (got_key, got_headers, got_ts) == (key, headers, ts)
        assert 0 <= partition < partitions
        per_partition.setdefault(partition, []).append(offset)
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))


# ----------------------------------------------------------------------------- kafka-python


def _kp_consume(bootstrap: str, topic: str, partitions: int, start: str | int, count: int, timeout: float = 20.0):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        if start == "earliest":
            consumer.seek_to_beginning()
        elif start == "latest":
            consumer.seek_to_end()
        else:
            found = consumer.offsets_for_times({tp: start for tp in tps})
            for tp in tps:
                if found[tp] is None:
                    consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, found[tp].offset)
        out = []
        deadline = time.time() + timeout
        while len(out) < count and time.time() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                for m in batch:
                    out.append((m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_kafka_python_produce_consume(odradek_broker, codec: str, acks: int) -> None:
    bootstrap = odradek_broker.bootstrap
    topic = _topic(f"kp-{codec}-{acks}")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    admin.close()
    expected = _expected("kp", 30)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks={-1: "all", 0: 0, 1: 1}[acks],
        compression_type=None if codec == "none" else codec,
        enable_idempotence=acks == -1,
        linger_ms=5,
    )
    futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts) for k, v, h, ts in expected]
    producer.flush()
    if acks != 0:
        assert all(f.get(10).offset >= 0 for f in futures)
    producer.close()
    records = _kp_consume(bootstrap, topic, 3, "earliest", len(expected))
    _check_partitioned(records, expected, 3)
    # From a timestamp: only the records at or after it (per partition).
    cut = BASE_TS + 20
    later = _kp_consume(bootstrap, topic, 3, cut, 10)
    assert sorted(r[3] for r in later) == sorted(v for _, v, _, ts in expected if ts >= cut)


def test_kafka_python_consume_from_latest_and_auto_create(odradek_broker) -> None:
    bootstrap = odradek_broker.bootstrap
    topic = _topic("kp-auto")
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    first = producer.send(topic, value=b"before").get(15)  # auto-created by Metadata
    assert (first.partition, first.offset) == (0, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_end()
    assert consumer.position(TopicPartition(topic, 0)) == 1
    producer.send(topic, value=b"after").get(10)
    got = []
    deadline = time.time() + 15
    while not got and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got += [(m.offset, m.value) for m in batch]
    assert got == [(1, b"after")]
    consumer.close()
    producer.close()


# ----------------------------------------------------------------------------- confluent-kafka


def _ck_consume(bootstrap: str, topic: str, partitions: int, offsets: list[int], count: int, timeout: float = 20.0):
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([CKTopicPartition(topic, p, offsets[p]) for p in range(partitions)])
        out = []
        deadline = time.time() + timeout
        while len(out) < count and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_confluent_kafka_produce_consume(odradek_broker, codec: str, acks: int) -> None:
    bootstrap = odradek_broker.bootstrap
    topic = _topic(f"ck-{codec}-{acks}")
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CKNewTopic(topic, num_partitions=3, replication_factor=1)]).values():
        future.result(15)
    expected = _expected("ck", 30)
    errors: list = []
    producer = CKProducer({
        "bootstrap.servers": bootstrap,
        "acks": str(acks),
        "compression.type": codec,
        "enable.idempotence": acks == -1,
        "linger.ms": 5,
    })
    for k, v, h, ts in expected:
        producer.produce(topic, key=k, value=v, headers=h, timestamp=ts,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(20) == 0
    assert errors == []
    records = _ck_consume(bootstrap, topic, 3, [0, 0, 0], len(expected))
    _check_partitioned(records, expected, 3)
    # From a timestamp via offsets_for_times.
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    found = consumer.offsets_for_times([CKTopicPartition(topic, p, BASE_TS + 20) for p in range(3)], 10)
    consumer.close()
    later = _ck_consume(bootstrap, topic, 3, [max(tp.offset, 0) if tp.offset >= 0 else 10**9 for tp in found], 10)
    assert sorted(r[3] for r in later) == sorted(v for _, v, _, ts in expected if ts >= BASE_TS + 20)


# ----------------------------------------------------------------------------- kcat


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(odradek_broker, kcat: str, codec: str) -> None:
    bootstrap = odradek_broker.bootstrap
    topic = _topic(f"kcat-{codec}")
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    subprocess.run(
        [kcat, "-b", bootstrap, "-P", "-t", topic, "-K:", "-z", codec, "-H", "h1=x", "-X", "acks=all"],
        input=lines, text=True, check=True, timeout=60,
    )
    out = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p|%o|%k|%s|%h\n"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.splitlines()
    assert out == [f"0|{i}|k{i}|v{i}|h1=x" for i in range(20)]
    # Consuming from the end sees nothing; from offset 15 sees the last five.
    tail = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "15", "-e", "-f", "%o %s\n"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.splitlines()
    assert tail == [f"{i} v{i}" for i in range(15, 20)]


# ----------------------------------------------------------------------------- Java kafka-clients


@pytest.mark.parametrize("codec", CODECS)
def test_java_client_produce_consume(odradek_broker, java_client, codec: str) -> None:
    client = java_client(odradek_broker)
    topic = _topic(f"java-{codec}")
    created = client.create_topic(topic, partitions=3)
    assert created["partitions"] == 3
    summary = client.produce(topic, 40, compression=codec, headers={"seq": "%d"}, timestamp=BASE_TS)
    acks = {a["index"]: (a["partition"], a["offset"]) for a in summary["acks"]}
    assert len(acks) == 40
    records = client.consume(topic, start="earliest", max_records=40)
    assert len(records) == 40
    for r in records:
        index = int(r.value.decode().rsplit("-", 1)[1])
        assert (r.partition, r.offset) == acks[index]
        assert r.key == f"key-{index}".encode()
        assert r.headers == [("seq", str(index).encode())]
        assert r.timestamp == BASE_TS + index
    offsets = client.list_offsets(topic, "latest")
    assert sum(o["offset"] for o in offsets.values()) == 40
    by_time = client.list_offsets(topic, f"timestamp:{BASE_TS + 30}")
    later = [r for r in records if r.timestamp >= BASE_TS + 30]
    for partition, found in by_time.items():
        in_partition = sorted(r.offset for r in later if r.partition == partition)
        assert found["offset"] == (in_partition[0] if in_partition else -1)
