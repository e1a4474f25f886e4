"""Round trip of every message, every version, with a non-default value in every field."""

from __future__ import annotations

import struct

import pytest

from odradek.wire.messages import (
    ApiVersionsRequest,
    ConsumerGroupHeartbeatResponse,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
)
from odradek.wire.messages.defs import MESSAGES
from odradek.wire.primitives import Uuid
from odradek.wire.sample import sample
from odradek.wire.schema import codec, message_def, snake_case

ALL_VERSIONS = [(name, v) for name in MESSAGES for v in message_def(name).versions()]


@pytest.mark.parametrize(("name", "version"), ALL_VERSIONS, ids=[f"{n}-v{v}" for n, v in ALL_VERSIONS])
def test_round_trip_every_version(name: str, version: int) -> None:
    c = codec(name, version)
    for seed in range(2):
        for nulls in (False, True):
            obj = sample(name, version, seed=seed, nulls=nulls)
            data = c.encode_bytes(obj)
            decoded, end = c.decode(data)
            assert end == len(data)
            assert decoded == obj, f"{name} v{version} seed={seed} nulls={nulls}"
            assert c.encode_bytes(decoded) == data


# Everything the brief asks for, requests and responses, with the union of the 3.9.1, 4.1.1 and 4.4.0 ranges.
EXPECTED_RANGES = {
    "ApiVersions": (0, 5), "Metadata": (0, 13), "Produce": (0, 13), "Fetch": (0, 18), "ListOffsets": (0, 11),
    "CreateTopics": (0, 7), "DeleteTopics": (0, 6), "CreatePartitions": (0, 3), "DescribeConfigs": (0, 4),
    "AlterConfigs": (0, 2), "IncrementalAlterConfigs": (0, 1), "DescribeCluster": (0, 2),
    "DescribeTopicPartitions": (0, 0), "DescribeLogDirs": (0, 5), "DeleteRecords": (0, 2),
    "OffsetForLeaderEpoch": (0, 4), "FindCoordinator": (0, 6), "JoinGroup": (0, 9), "SyncGroup": (0, 5),
    "Heartbeat": (0, 4), "LeaveGroup": (0, 5), "OffsetCommit": (0, 10), "OffsetFetch": (0, 10),
    "ListGroups": (0, 5), "DescribeGroups": (0, 6), "DeleteGroups": (0, 3), "OffsetDelete": (0, 0),
    "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 1), "InitProducerId": (0, 6),
    "AddPartitionsToTxn": (0, 5), "AddOffsetsToTxn": (0, 4), "EndTxn": (0, 5), "TxnOffsetCommit": (0, 6),
    "WriteTxnMarkers": (0, 2), "DescribeProducers": (0, 0), "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 2), "SaslHandshake": (0, 1), "SaslAuthenticate": (0, 2), "DescribeAcls": (0, 3),
    "CreateAcls": (0, 3), "DeleteAcls": (0, 3),
}


@pytest.mark.parametrize("api", sorted(EXPECTED_RANGES))
def test_api_set_and_version_ranges(api: str) -> None:
    for kind in ("Request", "Response"):
        d = message_def(api + kind)
        assert d.valid == EXPECTED_RANGES[api], (api, kind, d.valid)


def test_internal_record_schemas_present() -> None:
    for name in ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
                 "ConsumerGroupMetadataKey", "ConsumerGroupMemberMetadataValue", "TransactionLogKey",
                 "TransactionLogValue", "TopicRecord", "PartitionRecord", "ConfigRecord", "FeatureLevelRecord",
                 "RegisterBrokerRecord", "RemoveTopicRecord", "LeaderChangeMessage", "SnapshotHeaderRecord",
                 "SnapshotFooterRecord", "KRaftVersionRecord", "VotersRecord"):
        assert name in MESSAGES, name


def test_snake_case() -> None:
    assert snake_case("ErrorCode") == "error_code"
    assert snake_case("PartitionIndex") == "partition_index"
    assert snake_case("V3AndBelowProducerId") == "v3_and_below_producer_id"
    assert snake_case("ISR") == "isr"
    assert snake_case("ClusterID") == "cluster_id"


def test_constructor_defaults_and_fresh_mutables() -> None:
    a = FetchResponse()
    b = FetchResponse()
    assert a.responses == [] and a.responses is not b.responses
    assert a.session_id == 0 and a.node_endpoints == []
    p = FetchResponse.PartitionData()
    assert p.last_stable_offset == -1 and p.log_start_offset == -1 and p.preferred_read_replica == -1
    assert p.diverging_epoch == FetchResponse.EpochEndOffset(epoch=-1, end_offset=-1)
    assert p.records is None and p.aborted_transactions == []
    assert ProduceRequest().transactional_id is None
    assert MetadataRequest().topics == [] and MetadataRequest().allow_auto_topic_creation is True


def test_hand_encoded_bytes_classic() -> None:
    """ProduceRequest v3 against bytes built by hand from the wire format (not via the codec)."""
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=2, records=b"\x01\x02\x03")])])
    expected = (struct.pack(">hhi", -1, -1, 30000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
                + struct.pack(">i", 1) + struct.pack(">i", 2) + struct.pack(">i", 3) + b"\x01\x02\x03")
    assert codec("ProduceRequest", 3).encode_bytes(req) == expected


def test_hand_encoded_bytes_flexible() -> None:
    """ApiVersionsRequest v3: compact strings (length + 1) and an empty tagged-field section."""
    req = ApiVersionsRequest(client_software_name="ab", client_software_version="1")
    assert codec("ApiVersionsRequest", 3).encode_bytes(req) == b"\x03ab\x021\x00"
    assert codec("ApiVersionsRequest", 0).encode_bytes(req.__class__()) == b""


def test_tagged_fields_only_when_not_default() -> None:
    c = codec("FetchResponse", 12)
    part = FetchResponse.PartitionData(partition_index=0, records=b"")
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])
    plain = c.encode_bytes(resp)
    part.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=3)
    tagged = c.encode_bytes(resp)
    # tag 1 + size 9 + compact struct (int32, int32, empty tags) = 11 more bytes
    assert len(tagged) == len(plain) + 11
    part.current_leader = FetchResponse.LeaderIdAndEpoch()
    assert c.encode_bytes(resp) == plain
    # NodeEndpoints is tag 0 of the top level only from v16: at v12 it is ignored... but not silently
    # dropped if set (it is not ignorable), see test_absent_field_with_value_is_refused
    decoded, _ = c.decode(tagged)
    assert decoded.responses[0].partitions[0].current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=1,
                                                                                                leader_epoch=3)


def test_absent_field_with_value_is_refused() -> None:
    resp = FetchResponse(node_endpoints=[FetchResponse.NodeEndpoint(node_id=1, host="h", port=1)])
    with pytest.raises(ValueError):
        codec("FetchResponse", 12).encode_bytes(resp)
    # ignorable fields are dropped silently, as Kafka does
    resp = FetchResponse(throttle_time_ms=5)
    out = codec("FetchResponse", 0).encode_bytes(resp)
    assert codec("FetchResponse", 0).decode(out)[0].throttle_time_ms == 0


def test_unknown_tagged_fields_are_kept() -> None:
    c = codec("ApiVersionsRequest", 3)
    data = b"\x03ab\x021" + b"\x02" + b"\x05\x02zz" + b"\x07\x01q"
    obj, end = c.decode(data)
    assert end == len(data)
    assert obj._unknown_tagged_fields == [(5, b"zz"), (7, b"q")]
    assert c.encode_bytes(obj) == data


def test_nullable_struct_marker() -> None:
    c = codec("ConsumerGroupHeartbeatResponse", 0)
    r = ConsumerGroupHeartbeatResponse(member_id="m", assignment=None)
    data = c.encode_bytes(r)
    assert c.decode(data)[0].assignment is None
    r.assignment = ConsumerGroupHeartbeatResponse.Assignment()
    data2 = c.encode_bytes(r)
    assert len(data2) == len(data) + 2  # marker 1 instead of -1, + empty array + empty tags
    assert data[-2:-1] == b"\xff"


def test_uuid_base64() -> None:
    u = Uuid(bytes(range(16)))
    assert u.to_base64() == "AAECAwQFBgcICQoLDA0ODw"
    assert len(u.to_base64()) == 22
    assert Uuid.from_base64(u.to_base64()) == u
    assert Uuid.ZERO.to_base64() == "AAAAAAAAAAAAAAAAAAAAAA"


def test_records_decode_is_zero_copy_view() -> None:
    req = ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.PartitionProduceData(index=0, records=b"R" * 100)])])
    frame = bytearray(codec("ProduceRequest", 9).encode_bytes(req))
    obj, _ = codec("ProduceRequest", 9).decode(memoryview(frame))
    rec = obj.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is frame
    assert bytes(rec) == b"R" * 100


def test_null_in_non_nullable_field_is_refused() -> None:
    from odradek.wire.messages import JoinGroupResponse, MetadataResponse

    with pytest.raises(ValueError):
        codec("MetadataResponse", 0).encode_bytes(MetadataResponse(brokers=None))
    with pytest.raises(ValueError):  # topics only became nullable in v1
        codec("MetadataRequest", 0).encode_bytes(MetadataRequest(topics=None))
    assert codec("MetadataRequest", 1).encode_bytes(MetadataRequest(topics=None)) == b"\xff\xff\xff\xff"
    with pytest.raises(ValueError):
        codec("JoinGroupResponse", 0).encode_bytes(JoinGroupResponse(member_id=None))
    member = JoinGroupResponse.JoinGroupResponseMember(member_id="m", metadata=None)
    with pytest.raises(ValueError):
        codec("JoinGroupResponse", 0).encode_bytes(JoinGroupResponse(members=[member]))
