"""MetadataStore: changes persist as records, replay rebuilds them, unservable metadata is refused."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from odradek.cluster_metadata import Topic, random_uuid
from odradek.kraft.image import MetadataImage
from odradek.kraft.log import MetadataLog
from odradek.kraft.quorum_state import QuorumState
from odradek.kraft.records import MetadataRecord, new_record
from odradek.kraft.store import MetadataStore, UnservableMetadataError
from odradek.wire.primitives import Uuid
from odradek.wire.records import iter_batches

LOG_41 = Path("/work/shared/fixtures/kafka-real/ronem123_rupia-transaction-service@5d88e97/kafka-logs")
DIR_ID = Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")


def _store(path: Path, node_id: int = 1) -> MetadataStore:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    store = MetadataStore(path, node_id, {path: DIR_ID}, lambda: next(clock))
    store.listeners = [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    store.start()
    return store


def _topics(store: MetadataStore) -> dict[str, tuple[str, int, dict[str, str]]]:
    return {t.name: (t.topic_id.to_base64(), t.partitions, t.configs) for t in store.replay()}


def test_changes_survive_reopen(tmp_path: Path) -> None:
    store = _store(tmp_path)
    kept = Topic("kept", random_uuid(), 2, {"retention.ms": "1000", "cleanup.policy": "compact"})
    doomed = Topic("doomed", random_uuid(), 1, {"segment.ms": "5"})
    store.record("create", kept)
    store.record("create", doomed)
    kept.partitions = 5
    store.record("partitions", kept)
    kept.configs = {"retention.ms": "2000", "max.message.bytes": "100"}
    store.record("configs", kept)
    store.record("delete", doomed)
    expected = {"kept": (kept.topic_id.to_base64(), 5, {"retention.ms": "2000", "max.message.bytes": "100"})}
    assert _topics(store) == expected
    store.close()

    again = _store(tmp_path)
    assert _topics(again) == expected
    # a deleted topic's configs go with it
    assert again.image.topic_configs("doomed") == {}
    assert again.epoch == 2
    again.close()
    # each start is a new KRaft epoch, begun by a LEADER_CHANGE batch
    md = MetadataLog.open(tmp_path)
    assert [e for _o, e in md.leader_changes()] == [1, 2]
    md.plog.close_handlers()
    state = QuorumState.read(tmp_path / "__cluster_metadata-0")
    assert state is not None and (state.leader_epoch, state.data_version, state.voters) == (2, 0, [1])


def test_records_are_kafkas(tmp_path: Path) -> None:
    store = _store(tmp_path)
    topic = Topic("t", random_uuid(), 2, {"retention.ms": "7"})
    store.record("create", topic)
    topic.configs = {}
    store.record("configs", topic)
    store.close()
    md = MetadataLog.open(tmp_path)
    recs = list(md.replay_records())
    md.plog.close_handlers()
    names = [r.name for r in recs]
    assert names[:2] == ["BeginTransactionRecord", "FeatureLevelRecord"]
    assert recs[1].message.name == "metadata.version" and recs[1].message.feature_level == 33  # 4.4-IV2
    assert "EndTransactionRecord" in names and "RegisterBrokerRecord" in names
    # with ELR, Kafka 4.4's first start also writes the cluster's min.insync.replicas in the bootstrap
    end = names.index("EndTransactionRecord")
    cluster_config = recs[end - 1].message
    assert (recs[end - 1].name, cluster_config.resource_type, cluster_config.resource_name, cluster_config.name,
            cluster_config.value) == ("ConfigRecord", 4, "", "min.insync.replicas", "1")
    topic_recs = [r for r in recs[end:] if r.name in ("TopicRecord", "ConfigRecord", "PartitionRecord")]
    assert [r.name for r in topic_recs] == ["TopicRecord", "ConfigRecord", "PartitionRecord", "PartitionRecord",
                                           "ConfigRecord"]
    part = topic_recs[2].message
    assert (part.replicas, part.isr, part.leader, part.leader_epoch, part.partition_epoch, part.directories) == (
        [1], [1], 1, 0, 0, [DIR_ID])
    assert topic_recs[1].message.resource_type == 2 and topic_recs[-1].message.value is None
    reg = next(r.message for r in recs if r.name == "RegisterBrokerRecord")
    assert reg.fenced and reg.log_dirs == [DIR_ID] and reg.end_points[0].port == 9092
    # every batch is stored exactly as built: offsets without gaps, CRCs valid, epoch 1
    data = (tmp_path / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
    next_offset = 0
    for batch in iter_batches(data):
        assert batch.is_valid() and batch.base_offset == next_offset
        assert batch.partition_leader_epoch == 1
        next_offset = batch.base_offset + batch.last_offset_delta + 1


def test_producer_id_blocks_never_repeat(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = store.allocate_producer_ids()
    second = store.allocate_producer_ids()
    store.close()
    again = _store(tmp_path)
    third = again.allocate_producer_ids()
    again.close()
    assert first == 0 and second == 1000 and third == 2000


def test_replays_a_real_kafka_41_metadata_log(tmp_path: Path) -> None:
    data = tmp_path / "logs"
    shutil.copytree(LOG_41, data)
    for p in [data, *data.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    store = _store(data)
    topics = _topics(store)
    assert topics["topic_transactions"][:2] == ("3aJOBeUFT2i-2s4EZqlyqQ", 1)
    assert topics["__consumer_offsets"][1] == 50
    assert topics["__consumer_offsets"][2]["cleanup.policy"] == "compact"
    assert store.image.features["metadata.version"] == 27
    assert store.image.next_producer_id >= 1000
    # partitions were led up to epoch 10+ by Kafka: Odradek continues above that
    assert store.partition_leader_epoch() >= 10
    assert store.allocate_producer_ids() >= 1000
    store.close()
    # a kraft.version 1 log (KRaftVersionRecord in the snapshot) keeps the data_version 1 quorum-state
    state = QuorumState.read(data / "__cluster_metadata-0")
    assert state is not None and (state.leader_epoch, state.data_version, state.voters) == (2, 1, [])


def _write_kafka_like_log(path: Path, records: list[tuple[str, object]]) -> None:
    md = MetadataLog.open(path)
    md.become_leader(1, 1, 1)
    md.append([("FeatureLevelRecord", new_record("FeatureLevelRecord", name="metadata.version",
                                                  feature_level=27))], 1, 2)
    md.append(records, 1, 3)
    md.close()


def test_refuses_replicas_on_other_brokers(tmp_path: Path) -> None:
    tid = random_uuid()
    _write_kafka_like_log(tmp_path, [
        ("TopicRecord", new_record("TopicRecord", name="spread", topic_id=tid)),
        ("PartitionRecord", new_record("PartitionRecord", partition_id=0, topic_id=tid, replicas=[1, 2, 3],
                                       isr=[1, 2, 3], leader=1, leader_epoch=0, partition_epoch=0,
                                       directories=[DIR_ID, DIR_ID, DIR_ID])),
    ])
    with pytest.raises(UnservableMetadataError, match=r"spread-0 has replicas \[1, 2, 3\]"):
        _store(tmp_path)


def test_refuses_tiered_storage(tmp_path: Path) -> None:
    tid = random_uuid()
    _write_kafka_like_log(tmp_path, [
        ("TopicRecord", new_record("TopicRecord", name="tiered", topic_id=tid)),
        ("PartitionRecord", new_record("PartitionRecord", partition_id=0, topic_id=tid, replicas=[1], isr=[1],
                                       leader=1, leader_epoch=0, partition_epoch=0, directories=[DIR_ID])),
        ("ConfigRecord", new_record("ConfigRecord", resource_type=2, resource_name="tiered",
                                    name="remote.storage.enable", value="true")),
    ])
    with pytest.raises(UnservableMetadataError, match="tiered storage"):
        _store(tmp_path)


def test_aborted_and_unfinished_metadata_transactions_are_dropped() -> None:
    image = MetadataImage()
    tid = random_uuid()

    def rec(record_name: str, /, **fields: object) -> MetadataRecord:
        return MetadataRecord(record_name, 0, new_record(record_name, **fields))

    image.replay_all([
        rec("BeginTransactionRecord", name="x"),
        rec("TopicRecord", name="aborted", topic_id=tid),
        rec("AbortTransactionRecord", reason="test"),
        rec("BeginTransactionRecord", name="y"),
        rec("TopicRecord", name="committed", topic_id=tid),
        rec("EndTransactionRecord"),
        rec("BeginTransactionRecord", name="z"),
        rec("TopicRecord", name="unfinished", topic_id=random_uuid()),
    ])
    image.finish()
    assert sorted(image.topic_ids) == ["committed"]


def test_continues_a_kafka_38_log_with_its_record_versions(tmp_path: Path) -> None:
    # 3.8 combined node, copied while running (metadata.version 20 = 3.8-IV0)
    src = Path("/work/shared/fixtures/kafka-real/JitenPalaparthi_youtube-kafka-golang-rust@63330ef/kafka-logs")
    data = tmp_path / "logs"
    shutil.copytree(src, data)
    for p in [data, *data.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    store = _store(data)
    assert store.image.features["metadata.version"] == 20 and _topics(store) == {}
    store.record("create", Topic("new", random_uuid(), 1, {}))
    store.close()
    md = MetadataLog.open(data)
    recs = list(md.replay_records())
    md.plog.close_handlers()
    # directory assignment exists at 3.8-IV0, ELR does not: PartitionRecord v1, RegisterBrokerRecord v3
    assert next(r.version for r in recs if r.name == "PartitionRecord") == 1
    assert [r.version for r in recs if r.name == "RegisterBrokerRecord"][-1] == 3


def test_an_unfinished_kafka_transaction_is_aborted_before_new_records(tmp_path: Path) -> None:
    # Kafka crashed inside a metadata transaction: the records after it must not join it
    tid = random_uuid()
    md = MetadataLog.open(tmp_path)
    md.become_leader(1, 1, 1)
    md.append([("FeatureLevelRecord", new_record("FeatureLevelRecord", name="metadata.version",
                                                  feature_level=27))], 1, 2)
    md.append([("BeginTransactionRecord", new_record("BeginTransactionRecord", name="big change")),
               ("TopicRecord", new_record("TopicRecord", name="half-made", topic_id=tid))], 1, 3)
    md.close()
    store = _store(tmp_path)
    store.record("create", Topic("after", random_uuid(), 1, {}))
    store.close()
    reopened = _store(tmp_path)
    assert set(_topics(reopened)) == {"after"}
    reopened.close()
    md = MetadataLog.open(tmp_path)
    names = [r.name for r in md.replay_records()]
    md.plog.close_handlers()
    assert names.index("AbortTransactionRecord") < names.index("RegisterBrokerRecord")


def test_a_big_change_is_built_in_steps_and_stored_as_one_batch_built_at_once(tmp_path: Path) -> None:
    from odradek.kraft.store import BUILD_CHUNK, Steps, run_steps
    from odradek.wire.records import SimpleRecord, build_batch

    store = _store(tmp_path)
    topic = Topic("wide", random_uuid(), 1000, {"retention.ms": "7"})
    steps = Steps(store.build("create", topic))
    yields = 0
    for _ in steps:
        yields += 1
        assert _topics(store) == {}  # nothing is changed while building
    built = steps.value
    assert built is not None
    # 1002 records: the 1000 PartitionRecords built, then all 1002 encoded, a chunk at a time
    assert len(built.records) == 1002 and yields == 1000 // BUILD_CHUNK + 1002 // BUILD_CHUNK >= 10
    end = store.log.log_end_offset
    base = store.append_built(built, flush=False)
    assert base == end and _topics(store) == {}  # appended, not applied until flushed
    store.flush()
    store.apply(built)
    assert _topics(store)["wide"][1:] == (1000, {"retention.ms": "7"})
    # the batch built at offset 0 and patched at append is the one Kafka's leader builds in place
    data = (tmp_path / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
    (stored,) = [b for b in iter_batches(data) if b.base_offset == base]
    stored_records = list(stored.records())
    expected = build_batch([SimpleRecord(value=r.value, key=None, timestamp=r.timestamp) for r in stored_records],
                           base_offset=base, partition_leader_epoch=store.epoch)
    assert bytes(stored.buffer) == expected and stored.is_valid()
    # the one-step path writes the same records
    again = Topic("wide2", random_uuid(), 1000, {"retention.ms": "7"})
    assert [n for n, _ in run_steps(store.build("create", again)).records] == [n for n, _ in built.records]
    store.close()


def test_replaying_appended_records_matches_replaying_the_log() -> None:
    tid, other = random_uuid(), random_uuid()
    records = [
        ("TopicRecord", new_record("TopicRecord", name="t", topic_id=tid)),
        ("ConfigRecord", new_record("ConfigRecord", resource_type=2, resource_name="t", name="retention.ms", value="5")),
        *[("PartitionRecord", new_record("PartitionRecord", partition_id=i, topic_id=tid, replicas=[1], isr=[1],
                                         removing_replicas=[], adding_replicas=[], leader=1, leader_recovery_state=0,
                                         leader_epoch=0, partition_epoch=0, directories=[DIR_ID])) for i in range(3)],
        ("PartitionChangeRecord", new_record("PartitionChangeRecord", partition_id=1, topic_id=tid, leader=-1)),
        ("BeginTransactionRecord", new_record("BeginTransactionRecord", name="x")),
        ("TopicRecord", new_record("TopicRecord", name="held", topic_id=other)),
        ("EndTransactionRecord", new_record("EndTransactionRecord")),
        ("NoOpRecord", new_record("NoOpRecord")),
    ]
    by_log, appended = MetadataImage(), MetadataImage()
    by_log.replay_all(MetadataRecord(n, 0, m) for n, m in records)
    appended.replay_appended(records)
    for image in (by_log, appended):
        assert sorted(image.topic_ids) == ["held", "t"]
    assert appended.topics_by_id[tid].partitions == by_log.topics_by_id[tid].partitions
    assert appended.topics_by_id[tid].partitions[1].leader == -1
    assert appended.configs == by_log.configs
    assert (appended.records_applied, appended.skipped) == (by_log.records_applied, by_log.skipped)
