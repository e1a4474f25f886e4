"""Oracle (issue #23): a replica moved live between two log dirs, Odradek against Kafka 4.4.0.

The same batches (fixed timestamps, so the bytes can match) go to a one-partition topic on a
broker with two log dirs; AlterReplicaLogDirs moves the partition to the other dir while more
batches arrive; then both brokers must show the partition in the new dir only, the moved-from
dir with a ``<topic>-0.<uuid>-delete`` dir (or nothing, once deleted), the same files in the
moved dir with the same ``.log`` bytes, and every record readable exactly once.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from kafka_oracle import BrokerProcess, require_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class
from odradek.wire.records import RecordBatch, SimpleRecord, build_batch, iter_batches

KAFKA = "4.4.0"
TOPIC = "jbod"


def _connect(broker: BrokerProcess) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port))


def _produce(conn: BrokerConnection, first: int, count: int) -> list[int]:
    P = request_class(0)
    offsets = []
    for i in range(first, first + count):
        batch = build_batch([SimpleRecord(value=f"value-{i:05d}".encode() * 40, key=str(i).encode(),
                                          timestamp=1_700_000_000_000 + i)])
        r = conn.send(0, P(acks=-1, timeout_ms=10000, topic_data=[P.TopicProduceData(name=TOPIC, partition_data=[
            P.PartitionProduceData(index=0, records=batch)])]), 9)
        [part] = r.responses[0].partition_responses
        assert part.error_code == 0, part
        offsets.append(part.base_offset)
    return offsets


def _where(conn: BrokerConnection) -> dict[str, list[tuple[bool, int]]]:
    """Log dir -> (is_future, size) of the partition's logs there (DescribeLogDirs)."""
    D = request_class(35)
    r = conn.send(35, D(topics=[D.DescribableLogDirTopic(topic=TOPIC, partitions=[0])]), 4)
    return {res.log_dir: [(p.is_future_key, p.partition_size) for t in res.topics for p in t.partitions]
            for res in r.results}


def _scenario(broker: BrokerProcess) -> dict[str, object]:
    conn = _connect(broker)
    try:
        cls = request_class(19)
        created = conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                                    timeout_ms=30000))
        assert [t.error_code for t in created.topics] == [0]
        offsets = _produce(conn, 0, 300)
        where = _where(conn)
        [source] = [d for d, logs in where.items() if logs]
        [target] = [d for d in where if d != source]
        A = request_class(34)
        r = conn.send(34, A(dirs=[A.AlterReplicaLogDir(path=target, topics=[
            A.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])])]), 2)
        assert [(p.partition_index, p.error_code) for t in r.results for p in t.partitions] == [(0, 0)]
        deadline = time.monotonic() + 60
        while True:
            where = _where(conn)
            if not where[source] and [f for f, _ in where[target]] == [False]:
                break
            assert time.monotonic() < deadline, f"the move did not finish: {where}"
            offsets += _produce(conn, len(offsets), 2)  # the load goes on during the move
            time.sleep(0.05)
        offsets += _produce(conn, len(offsets), 20)
        assert offsets == list(range(len(offsets)))
        moved = Path(target) / f"{TOPIC}-0"
        logs = sorted(moved.glob("*.log"))
        data = b"".join(p.read_bytes() for p in logs)
        batches = [RecordBatch(memoryview(data)[b.position:b.position + b.size_in_bytes]) for b in iter_batches(data)]
        return {
            "records": len(offsets),
            "moved files": sorted(p.name for p in moved.iterdir() if not p.name.endswith(".snapshot")),
            "log bytes": data,
            "batch offsets": [b.header().base_offset for b in batches],
            "leader-epoch-checkpoint": (moved / "leader-epoch-checkpoint").read_text(),
            "left in the source dir": sorted(re.sub(r"\.[0-9a-f]{32}-", ".<uuid>-", p.name)
                                             for p in Path(source).iterdir() if p.name.startswith(f"{TOPIC}-0")),
            "future dirs": sorted(str(p) for d in (source, target) for p in Path(d).iterdir()
                                  if p.name.endswith("-future")),
        }
    finally:
        conn.close()


def test_a_replica_moves_between_log_dirs_as_in_kafka(kafka_broker_factory, odradek_broker_factory,
                                                       tmp_path: Path) -> None:
    require_tool(f"kafka-{KAFKA}")
    results = {}
    for kind, factory in (("kafka", kafka_broker_factory), ("odradek", odradek_broker_factory)):
        dirs = [tmp_path / kind / "a", tmp_path / kind / "b"]
        kwargs = {"version": KAFKA} if kind == "kafka" else {}
        broker = factory(overrides={"log.dirs": ",".join(map(str, dirs))}, **kwargs)
        try:
            results[kind] = _scenario(broker)
        finally:
            broker.stop()
    kafka, odradek = results["kafka"], results["odradek"]
    assert kafka["records"] >= 320 and kafka["future dirs"] == []
    for key in kafka:
        if key == "records":
            continue  # how many arrived during the move depends on each broker's speed
        if key == "log bytes":
            # the same batches, stored as they came: byte for byte up to the shorter log
            shorter = min(len(kafka[key]), len(odradek[key]))
            assert odradek[key][:shorter] == kafka[key][:shorter]
            continue
        if key == "batch offsets":
            assert odradek[key] == list(range(odradek["records"])) and kafka[key] == list(range(kafka["records"]))
            continue
        assert odradek[key] == kafka[key], key
