"""Metadata records: Kafka's records in real metadata logs decode and re-encode byte for byte, and
the records Odradek writes decode with the same generated schemas and framing."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.kraft.records import (
    FRAME_VERSION,
    WRITE_VERSIONS,
    decode_control_value,
    decode_metadata_record,
    encode_control_value,
    encode_metadata_record,
    metadata_record_names,
    new_record,
)
from odradek.wire.primitives import Uuid
from odradek.wire.records import ControlRecordType, iter_batches, parse_control_record_key

REAL = Path("/work/shared/fixtures/kafka-real")
LOG_41 = REAL / "ronem123_rupia-transaction-service@5d88e97/kafka-logs"
LOG_38 = REAL / "JitenPalaparthi_youtube-kafka-golang-rust@63330ef/kafka-logs"
METADATA_FILES = [
    LOG_41 / "bootstrap.checkpoint",
    LOG_41 / "__cluster_metadata-0/00000000000001734780-0000000001.checkpoint",
    LOG_41 / "__cluster_metadata-0/00000000000001725413.log",
    LOG_38 / "bootstrap.checkpoint",
    LOG_38 / "__cluster_metadata-0/00000000000000000000.log",
]


def _records(path: Path):
    for batch in iter_batches(path.read_bytes()):
        for rec in batch.records():
            yield batch, rec


@pytest.mark.parametrize("path", METADATA_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_kafka_metadata_record_round_trips(path: Path) -> None:
    names = set()
    for batch, rec in _records(path):
        if batch.header().attributes & 0x20:
            _v, ctype = parse_control_record_key(rec.key)
            message = decode_control_value(int(ctype), rec.value)
            if message is not None:
                assert encode_control_value(int(ctype), message) == bytes(rec.value)
            continue
        assert rec.key is None
        decoded = decode_metadata_record(rec.value)
        assert decoded.message is not None, decoded.name
        assert encode_metadata_record(decoded.name, decoded.message, decoded.version) == bytes(rec.value)
        names.add(decoded.name)
    assert "FeatureLevelRecord" in names or "NoOpRecord" in names


def test_kafka_41_writes_the_versions_odradek_writes() -> None:
    seen: dict[str, int] = {}
    for path in METADATA_FILES[:3]:
        for batch, rec in _records(path):
            if not batch.header().attributes & 0x20:
                d = decode_metadata_record(rec.value)
                seen[d.name] = d.version
    for name in ("TopicRecord", "PartitionRecord", "ConfigRecord", "FeatureLevelRecord", "RegisterBrokerRecord",
                 "ProducerIdsRecord", "PartitionChangeRecord"):
        assert seen[name] == WRITE_VERSIONS[name], name


def test_frame_is_api_message_and_version() -> None:
    topic_id = Uuid.from_base64("3aJOBeUFT2i-2s4EZqlyqQ")
    value = encode_metadata_record("TopicRecord", new_record("TopicRecord", name="t", topic_id=topic_id))
    # frame version 1, api key 2, version 0, compact string "t", uuid, no tagged fields
    assert value == bytes([FRAME_VERSION, 2, 0, 2]) + b"t" + topic_id.bytes + b"\x00"
    assert metadata_record_names()[0] == "RegisterBrokerRecord"  # not the tiered-storage record with key 0


@pytest.mark.parametrize("name,fields", [
    ("TopicRecord", {"name": "orders", "topic_id": Uuid.from_base64("3aJOBeUFT2i-2s4EZqlyqQ")}),
    ("PartitionRecord", {"partition_id": 3, "topic_id": Uuid.from_base64("3aJOBeUFT2i-2s4EZqlyqQ"), "replicas": [1],
                         "isr": [1], "removing_replicas": [], "adding_replicas": [], "leader": 1,
                         "leader_recovery_state": 0, "leader_epoch": 0, "partition_epoch": 0,
                         "directories": [Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")]}),
    ("ConfigRecord", {"resource_type": 2, "resource_name": "orders", "name": "retention.ms", "value": "1000"}),
    ("ConfigRecord", {"resource_type": 2, "resource_name": "orders", "name": "retention.ms", "value": None}),
    ("RemoveTopicRecord", {"topic_id": Uuid.from_base64("3aJOBeUFT2i-2s4EZqlyqQ")}),
    ("FeatureLevelRecord", {"name": "metadata.version", "feature_level": 27}),
    ("ProducerIdsRecord", {"broker_id": 1, "broker_epoch": 5, "next_producer_id": 2000}),
])
def test_odradek_records_decode_with_the_same_schema(name: str, fields: dict) -> None:
    message = new_record(name, **fields)
    decoded = decode_metadata_record(encode_metadata_record(name, message))
    assert decoded.name == name and decoded.version == WRITE_VERSIONS[name]
    assert decoded.message == message


def test_leader_change_value_matches_kafka() -> None:
    # the LEADER_CHANGE record of the 3.8 fixture's first batch (leader 1, voters [1], granted by [1])
    batch, rec = next(_records(LOG_38 / "__cluster_metadata-0/00000000000000000000.log"))
    assert parse_control_record_key(rec.key)[1] == ControlRecordType.LEADER_CHANGE
    cls = type(new_record("LeaderChangeMessage"))
    ours = cls(version=0, leader_id=1, voters=[cls.Voter(voter_id=1)], granting_voters=[cls.Voter(voter_id=1)])
    assert encode_control_value(int(ControlRecordType.LEADER_CHANGE), ours) == bytes(rec.value)


def test_unknown_record_type_is_reported_not_fatal() -> None:
    decoded = decode_metadata_record(bytes([1, 99, 0, 0]))
    assert decoded.message is None and decoded.name == "unknown(99)"
