"""A start-up that refuses a data dir leaves it exactly as it was (issue #21).

Each refused case starts a real `odradek serve` process on a dir that real brokers wrote (Odradek,
and Apache Kafka 4.1 / 4.4.0) and then damaged or mixed up as users do by mistake. The start must
fail with one clear line, and a hash of every file and dir (name, size, mtime, contents) must be
the same before and after. Next to them, the cases Odradek must still start on: a real torn tail
of the metadata log, and a single partition dir the metadata does not name (renamed -stray as
Kafka does, everything else served).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka_oracle import KAFKA_4_4, free_port

from odradek.kraft.bootstrap import read_bootstrap
from odradek.kraft.records import encode_metadata_record, new_record
from odradek.kraft.snapshot import read_snapshot
from odradek.kraft.store import supported_feature_ranges
from odradek.logstore.metadata_files import MetaProperties
from odradek.wire.primitives import encode_uvarint
from odradek.wire.records import SimpleRecord, build_batch, iter_batches

FIXTURE_41 = Path("/work/shared/fixtures/kafka-real/ronem123_rupia-transaction-service@5d88e97/kafka-logs")
METADATA = "__cluster_metadata-0"


def tree_hash(root: Path) -> dict[str, tuple[str, int, int, str]]:
    """Every file and dir below `root` (and `root`): kind, size, mtime and a hash of the contents."""
    out: dict[str, tuple[str, int, int, str]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            out[str(path.relative_to(root))] = ("dir", 0, st.st_mtime_ns, "")
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(root))] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def serve_once(log_dirs: list[Path], node_id: int = 1, timeout: float = 60.0,
               extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`odradek serve` on these dirs; returns once it exits (a refused start exits at once)."""
    cmd = [sys.executable, "-m", "odradek", "serve",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
           "--override", "log.dirs=" + ",".join(str(d) for d in log_dirs),
           "--override", f"node.id={node_id}"]
    for k, v in (extra or {}).items():
        cmd += ["--override", f"{k}={v}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def assert_refused(dirs: list[Path], *expected: str, node_id: int = 1) -> str:
    before = {d: tree_hash(d) for d in dirs}
    proc = serve_once(dirs, node_id)
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    reason = [line for line in proc.stderr.splitlines() if line.startswith("odradek serve: ")]
    assert len(reason) == 1, proc.stderr[-3000:]
    for text in expected:
        assert text in reason[0], reason[0]
    assert "Nothing" in reason[0] and "changed" in reason[0], reason[0]
    for d in dirs:
        assert tree_hash(d) == before[d], f"{d} changed"
    return reason[0]


def copy_writable(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return dest


def _metadata_segment(data: Path) -> tuple[Path, int, int]:
    """The newest metadata segment, its log end offset and its last leader epoch."""
    seg = sorted((data / METADATA).glob("*.log"))[-1]
    end, epoch = int(seg.name[:20]), 0
    for batch in iter_batches(seg.read_bytes()):
        h = batch.header()
        end, epoch = h.base_offset + h.last_offset_delta + 1, h.partition_leader_epoch
    return seg, end, epoch


def append_metadata_values(data: Path, values: list[bytes]) -> None:
    """Append a well-formed batch (valid CRC, next offset, current epoch) holding these values."""
    seg, end, epoch = _metadata_segment(data)
    records = [SimpleRecord(value=v, key=None, timestamp=int(time.time() * 1000)) for v in values]
    with open(seg, "ab") as f:
        f.write(build_batch(records, base_offset=end, partition_leader_epoch=epoch))


@pytest.fixture(scope="module")
def odradek_dirs(tmp_path_factory, odradek_broker_factory_module) -> Callable[[str], Path]:
    """Two dirs Odradek wrote (two clusters), each with topics, records and a committed offset;
    returns a function that copies one of them to a fresh path."""
    made: dict[str, Path] = {}
    for name in ("a", "b"):
        data = tmp_path_factory.mktemp(f"written-{name}") / "data"
        broker = odradek_broker_factory_module(overrides={"log.dirs": str(data)})
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("orders", 3, 1), NewTopic("state", 1, 1, topic_configs={"cleanup.policy": "compact"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(30):
            producer.send("orders", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3)
            producer.send("state", key=f"k{i % 5}".encode(), value=f"s{i}".encode())
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False)
        tp = TopicPartition("orders", 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(4, "", -1)})
        consumer.close()
        assert broker.stop() == 0
        made[name] = data
    counter = iter(range(1000))

    def copy(name: str) -> Path:
        return copy_writable(made[name], tmp_path_factory.mktemp(f"case-{next(counter)}") / "data")

    return copy


@pytest.fixture(scope="module")
def odradek_broker_factory_module(tmp_path_factory):
    from odradek_broker import OdradekBroker

    started = []

    def make(**kwargs):
        broker = OdradekBroker(tmp_path_factory.mktemp("odradek"), **kwargs)
        started.append(broker)
        broker.start()
        return broker

    yield make
    for broker in started:
        if broker.running:
            broker.stop()


# ------------------------------------------------------------------------------- refused corpus

def test_a_record_type_from_the_future_is_refused(odradek_dirs) -> None:
    data = odradek_dirs("a")
    append_metadata_values(data, [encode_uvarint(1) + encode_uvarint(250) + encode_uvarint(0) + b"\x00"])
    assert_refused([data], "metadata record of type 250", "does not know", f"{METADATA}/")


def test_a_record_version_from_the_future_is_refused(odradek_dirs) -> None:
    data = odradek_dirs("a")
    body = encode_metadata_record("TopicRecord", new_record("TopicRecord", name="x"))[3:]
    append_metadata_values(data, [encode_uvarint(1) + encode_uvarint(2) + encode_uvarint(99) + body])
    assert_refused([data], "TopicRecord version 99", "reads TopicRecord versions 0-")


def test_an_unsupported_feature_level_is_refused(odradek_dirs) -> None:
    data = odradek_dirs("a")
    rec = new_record("FeatureLevelRecord", name="metadata.version", feature_level=999)
    append_metadata_values(data, [encode_metadata_record("FeatureLevelRecord", rec)])
    lo, hi = supported_feature_ranges()["metadata.version"]
    assert_refused([data], "metadata.version is finalized at level 999", f"levels {lo}-{hi}")


def test_a_corrupt_batch_in_the_middle_of_the_metadata_log_is_refused(odradek_dirs) -> None:
    data = odradek_dirs("a")
    seg, _end, _epoch = _metadata_segment(data)
    raw = bytearray(seg.read_bytes())
    first = next(iter(iter_batches(raw)))
    raw[first.size_in_bytes - 1] ^= 0xFF  # last byte of the first batch: its CRC fails
    seg.write_bytes(bytes(raw))
    assert_refused([data], "corrupt in the middle", "CRC")


def test_meta_properties_of_another_node_is_refused(odradek_dirs) -> None:
    data = odradek_dirs("a")
    assert_refused([data], "node id 1", "node.id 5", node_id=5)


def test_log_dirs_of_two_clusters_are_refused(odradek_dirs) -> None:
    a, b = odradek_dirs("a"), odradek_dirs("b")
    ids = {MetaProperties.read(a).cluster_id, MetaProperties.read(b).cluster_id}
    assert len(ids) == 2
    reason = assert_refused([a, b], "different clusters")
    assert all(i in reason for i in ids)


def test_a_dir_whose_metadata_log_is_missing_is_refused(odradek_dirs) -> None:
    data = odradek_dirs("a")
    shutil.rmtree(data / METADATA)
    assert_refused([data], "no metadata log", "odradek.startup.adopt.partition.dirs")


def test_a_metadata_log_that_names_no_partition_dir_is_refused(odradek_dirs) -> None:
    # another cluster's metadata log next to these partitions: every dir would become -stray
    data, other = odradek_dirs("a"), odradek_dirs("b")
    shutil.rmtree(data / METADATA)
    shutil.copytree(other / METADATA, data / METADATA)
    assert_refused([data], "names none of the", "odradek.startup.allow.all.stray")


def test_a_non_empty_dir_that_was_never_formatted_is_refused(tmp_path) -> None:
    data = tmp_path / "not-kafka"
    (data / "photos").mkdir(parents=True)
    (data / "photos" / "cat.jpg").write_bytes(b"\xff\xd8" + os.urandom(100))
    (data / "notes.txt").write_text("not a log dir\n")
    assert_refused([data], "has no meta.properties", "not empty")


def test_a_snapshot_cut_short_is_refused(tmp_path) -> None:
    data = copy_writable(FIXTURE_41, tmp_path / "kafka-logs")
    snap = sorted((data / METADATA).glob("*.checkpoint"))[-1]
    os.truncate(snap, snap.stat().st_size // 2)
    assert_refused([data], snap.name, "cut short")


# ------------------------------------------------------------------------------- still served

def _served(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    end = consumer.end_offsets(tps)
    out: list[tuple[int, int, bytes | None]] = []
    deadline = time.time() + 20
    while sum(1 for _ in out) < sum(end.values()) and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=300).values():
            out += [(m.partition, m.offset, m.value) for m in batch]
    consumer.close()
    return sorted(out)


def test_a_torn_tail_of_the_metadata_log_is_recovered(odradek_dirs, odradek_broker_factory) -> None:
    data = odradek_dirs("a")
    seg, _end, _epoch = _metadata_segment(data)
    size = seg.stat().st_size
    append_metadata_values(data, [encode_metadata_record(
        "TopicRecord", new_record("TopicRecord", name="half-written"))])
    os.truncate(seg, size + (seg.stat().st_size - size) // 2)  # a crash cut the last batch
    broker = odradek_broker_factory(overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    assert {"orders", "state"} <= set(admin.list_topics()) and "half-written" not in admin.list_topics()
    admin.close()
    assert len(_served(broker.bootstrap, "orders", 3)) == 30


def test_one_partition_dir_the_metadata_does_not_name_goes_stray_and_the_rest_is_served(
        odradek_dirs, odradek_broker_factory) -> None:
    data = odradek_dirs("a")
    shutil.copytree(data / "orders-0", data / "ghost-0")
    broker = odradek_broker_factory(overrides={"log.dirs": str(data)})
    assert not (data / "ghost-0").exists()
    stray = list(data.glob("ghost-0.*-stray"))
    assert len(stray) == 1 and (stray[0] / "00000000000000000000.log").stat().st_size > 0
    assert [v for _p, _o, v in _served(broker.bootstrap, "orders", 3)] != []
    assert len(_served(broker.bootstrap, "orders", 3)) == 30
    assert broker.stop() == 0


# ------------------------------------------------------------------------------- Kafka 4.4.0's dir

def _kafka_44_dir(kafka_broker_factory, data: Path) -> dict[str, object]:
    """Write a dir with Kafka 4.4.0: a plain, a compacted and a transactional topic and a group."""
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides={"log.dirs": str(data)})
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    admin.create_topics([NewTopic("plain", 2, 1), NewTopic("compacted", 1, 1, topic_configs={"cleanup.policy": "compact"}),
                         NewTopic("txn", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(20):
        producer.send("plain", key=f"k{i}".encode(), value=f"p{i}".encode(), partition=i % 2)
        producer.send("compacted", key=f"k{i % 4}".encode(), value=f"c{i}".encode())
    producer.flush()
    producer.close()
    txn = CKProducer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "t-44"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce("txn", value=f"committed-{i}".encode())
    txn.commit_transaction(30)
    txn.begin_transaction()
    txn.produce("txn", value=b"aborted")
    txn.abort_transaction(30)
    txn.flush(10)
    del txn
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id="g44", enable_auto_commit=False)
    tp = TopicPartition("plain", 1)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(6, "", -1)})
    consumer.close()
    expected = _read_all(kafka.bootstrap)
    kafka.stop()
    assert (data / ".kafka_cleanshutdown").exists()
    return expected


def _read_all(bootstrap: str) -> dict[str, object]:
    """Every record of the three topics (read_committed) and the group's committed offset."""
    ck = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    parts = [CKTopicPartition("plain", 0, 0), CKTopicPartition("plain", 1, 0), CKTopicPartition("compacted", 0, 0),
             CKTopicPartition("txn", 0, 0)]
    ck.assign(parts)
    got: list[tuple[str, int, int, bytes | None, bytes | None]] = []
    idle = 0
    while idle < 6:
        msg = ck.poll(0.5)
        if msg is None:
            idle += 1
            continue
        if msg.error() is None:
            idle = 0
            got.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))
    ck.close()
    group = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g44", enable_auto_commit=False)
    committed = group.committed(TopicPartition("plain", 1))
    group.close()
    return {"records": sorted(got), "committed": committed}


def test_a_kafka_44_dir_is_refused_untouched_or_served(kafka_broker_factory, odradek_broker_factory,
                                                        tmp_path) -> None:
    data = tmp_path / "kafka-44"
    expected = _kafka_44_dir(kafka_broker_factory, data)
    records = expected["records"]
    assert isinstance(records, list) and len(records) == 20 + 20 + 5 and expected["committed"] == 6
    mv = _formatted_metadata_version(data)
    if mv > supported_feature_ranges()["metadata.version"][1]:
        # the 4.4 definitions are not here: refused, untouched, and Kafka 4.4.0 serves it all again
        assert_refused([data], "Nothing in the log dirs was changed")
        kafka = kafka_broker_factory(version=KAFKA_4_4, overrides={"log.dirs": str(data)})
        assert _read_all(kafka.bootstrap) == expected
        kafka.stop()
    else:
        odradek = odradek_broker_factory(overrides={"log.dirs": str(data)})
        assert _read_all(odradek.bootstrap) == expected
        assert odradek.stop() == 0


def _formatted_metadata_version(data: Path) -> int:
    """The metadata.version `kafka-storage format` finalized: Kafka 4.4 keeps the bootstrap records
    as the snapshot 00000000000000000000-0000000000.checkpoint, older releases as bootstrap.checkpoint."""
    levels = read_bootstrap(data)
    if levels is None:
        snap = data / METADATA / "00000000000000000000-0000000000.checkpoint"
        levels = {r.message.name: r.message.feature_level for r in read_snapshot(snap) if r.name == "FeatureLevelRecord"}
    return levels["metadata.version"]
