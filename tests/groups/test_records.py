"""__consumer_offsets records in Kafka's formats: partition choice, schemas, batches byte for byte
against a real Kafka 3.9 log (W5) and decoding of a real Kafka 4.1 log dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.group_coordinator import records as rec
from odradek.wire.records import iter_batches
from odradek.wire.schema import codec

W5_PARTITION = Path("/work/shared/fixtures/kafka-corpus/W5/logdir-clean/__consumer_offsets-11")
KAFKA_41_LOGS = Path("/work/shared/fixtures/kafka-real/ronem123_rupia-transaction-service@5d88e97/kafka-logs")


def _batches(path: Path):
    data = path.read_bytes()
    pos = 0
    for batch in iter_batches(data):
        size = len(batch)
        yield batch, bytearray(data[pos:pos + size])
        pos += size


@pytest.mark.parametrize(("group", "expected"), [
    ("w5-group-consumer", 11),
    ("polygenelubricants", 0),  # hashCode is Integer.MIN_VALUE: Utils.abs gives 0, not a negative number
    ("", 0),
    ("a", 97 % 50),
    # a negative hash (-902286926): Math.abs, not & 0x7fffffff (which gives 0); checked on Kafka 4.1.1
    ("simple", None),
    ("group-ü", None),
])
def test_partition_for_uses_java_string_hash_and_utils_abs(group, expected):
    got = rec.partition_for(group, 50)
    assert 0 <= got < 50
    if expected is not None:
        assert got == expected


def test_partition_for_a_negative_hash_matches_kafka():
    # real Kafka 4.1.1 with offsets.topic.num.partitions=3 put group "simple" in partition 2
    assert rec.partition_for("simple", 3) == 2
    assert rec.partition_for("simple", 50) == 902286926 % 50


def test_w5_records_decode_and_rebuild_byte_for_byte():
    """Every batch of the real 3.9 offsets partition is what this coordinator would write for the same
    content: keys, values (OffsetCommitValue v3, GroupMetadataValue v3) and batch headers
    (baseSequence 0 for offset commits, -1 for group metadata)."""
    assert W5_PARTITION.exists()
    kinds = []
    for batch, original in _batches(W5_PARTITION / "00000000000000000000.log"):
        (record,) = list(batch.records())
        key, value = bytes(record.key), bytes(record.value)
        decoded = rec.decode_record(key, value)
        if isinstance(decoded, rec.OffsetCommitRecord):
            v = decoded.value
            assert decoded.value_version == 3
            new_key = rec.offset_commit_key(decoded.group, decoded.topic, decoded.partition)
            new_value = rec.offset_commit_value(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
            rebuilt = rec.offset_commit_batch([(new_key, new_value)], record.timestamp)
            kinds.append(("offset", v.metadata))
        else:
            assert isinstance(decoded, rec.GroupMetadataRecord) and decoded.value_version == 3
            new_key = rec.group_metadata_key(decoded.group)
            new_value = rec.group_metadata_value(decoded.value)
            rebuilt = rec.group_metadata_batch([(new_key, new_value)], record.timestamp)
            kinds.append(("group", decoded.value.generation))
        assert (new_key, new_value) == (key, value)
        # the log store sets base offset and leader epoch on append (outside the CRC)
        rebuilt[0:8] = original[0:8]
        rebuilt[12:16] = original[12:16]
        assert rebuilt == original
    assert kinds == [("group", 1), *[("offset", f"meta-{n}") for n in range(10)], ("group", 2)]


def test_group_metadata_value_of_an_empty_group_matches_kafkas_last_w5_record():
    from odradek.group_coordinator.classic import ClassicGroup, GroupState
    from odradek.group_coordinator.coordinator import GroupCoordinator

    batches = list(_batches(W5_PARTITION / "00000000000000000000.log"))
    (record,) = list(batches[-1][0].records())
    real = rec.decode_record(bytes(record.key), bytes(record.value)).value
    group = ClassicGroup("w5-group-consumer", state=GroupState.EMPTY, generation_id=2, protocol_type="consumer",
                         current_state_timestamp=real.current_state_timestamp)
    ours = rec.group_metadata_value(GroupCoordinator.group_metadata_value(group))
    assert ours == bytes(record.value)


def test_offset_commit_value_v1_when_an_expire_timestamp_is_set():
    value = rec.offset_commit_value(5, -1, "m", 1000, expire_timestamp=2000)
    assert value[:2] == b"\x00\x01"
    decoded = rec.decode_record(rec.offset_commit_key("g", "t", 0), value)
    assert decoded.value.expire_timestamp == 2000 and decoded.value.commit_timestamp == 1000


def test_tombstones_decode_as_deletions():
    assert rec.decode_record(rec.offset_commit_key("g", "t", 3), None).value is None
    assert rec.decode_record(rec.group_metadata_key("g"), None).value is None
    batch = rec.group_metadata_batch([(rec.offset_commit_key("g", "t", 3), None), (rec.group_metadata_key("g"), None)], 7)
    (parsed,) = list(iter_batches(bytes(batch)))
    assert [r.value for r in parsed.records()] == [None, None]
    assert parsed.header().base_sequence == -1


def test_real_kafka_41_offsets_partitions_decode_and_reencode():
    """Kafka 4.1 wrote OffsetCommitValue v4 (flexible), GroupMetadataValue v3 and tombstones (a deleted
    group's offset and metadata in one batch); every value re-encodes to the same bytes."""
    seen_versions = set()
    tombstones = 0
    for log in sorted(KAFKA_41_LOGS.glob("__consumer_offsets-*/*.log")):
        for batch, _ in _batches(log):
            h = batch.header()
            assert h.producer_id == -1
            for record in batch.records():
                key = bytes(record.key)
                value = None if record.value is None else bytes(record.value)
                decoded = rec.decode_record(key, value)
                assert isinstance(decoded, (rec.OffsetCommitRecord, rec.GroupMetadataRecord))
                if value is None:
                    tombstones += 1
                    continue
                name = "OffsetCommitValue" if isinstance(decoded, rec.OffsetCommitRecord) else "GroupMetadataValue"
                seen_versions.add((name, decoded.value_version))
                assert value[2:] == codec(name, decoded.value_version).encode_bytes(decoded.value)
                if isinstance(decoded, rec.OffsetCommitRecord):
                    assert key == rec.offset_commit_key(decoded.group, decoded.topic, decoded.partition)
                else:
                    assert key == rec.group_metadata_key(decoded.group)
    assert ("GroupMetadataValue", 3) in seen_versions and ("OffsetCommitValue", 4) in seen_versions
    assert tombstones == 2
