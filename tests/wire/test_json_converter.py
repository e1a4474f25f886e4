"""Kafka-style JSON output (the rules of Kafka's generated *JsonConverter.write)."""

from __future__ import annotations

import json

from odradek.wire.json_converter import camel_case, to_json, to_json_text
from odradek.wire.messages import (
    ApiVersionsRequest,
    FetchResponse,
    JoinGroupResponse,
    OffsetCommitValue,
    TopicRecord,
)
from odradek.wire.primitives import Uuid
from odradek.wire.records_types import FileSlice
from odradek.wire.sample import sample
from odradek.wire.schema import message_def, message_names


def test_camel_case() -> None:
    assert camel_case("ErrorCode") == "errorCode" and camel_case("ISR") == "iSR" and camel_case("isr") == "isr"


def test_simple_request() -> None:
    r = ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="3.9.0")
    assert to_json_text(r, 3) == '{"clientSoftwareName":"apache-kafka-java","clientSoftwareVersion":"3.9.0"}'
    assert to_json(r, 0) == {}  # fields absent at v0 are not printed


def test_records_uuid_bytes_and_tagged_defaults() -> None:
    uid = Uuid(bytes(range(16)))
    part = FetchResponse.PartitionData(partition_index=1, high_watermark=5, records=b"x" * 7)
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic_id=uid, partitions=[part])])
    out = to_json(resp, 13)
    p = out["responses"][0]["partitions"][0]
    assert out["responses"][0]["topicId"] == "AAECAwQFBgcICQoLDA0ODw"
    assert p["recordsSizeInBytes"] == 7 and "records" not in p
    assert "divergingEpoch" not in p and "currentLeader" not in p  # tagged, default
    part.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=3)
    part.records = [FileSlice(None, 0, 10), b"ab"]
    p = to_json(resp, 13)["responses"][0]["partitions"][0]
    assert p["currentLeader"] == {"leaderId": 2, "leaderEpoch": 3}
    assert p["recordsSizeInBytes"] == 12
    assert to_json(resp, 13, serialize_records=True)["responses"][0]["partitions"][0]["records"] == ""
    assert list(p)[:5] == ["partitionIndex", "errorCode", "highWatermark", "lastStableOffset", "logStartOffset"]
    # top-level fields absent before v7
    assert "sessionId" not in to_json(resp, 6) and to_json(resp, 7)["sessionId"] == 0
    part.records = None
    assert to_json(resp, 13)["responses"][0]["partitions"][0]["records"] is None


def test_bytes_are_base64() -> None:
    r = JoinGroupResponse(members=[JoinGroupResponse.JoinGroupResponseMember(member_id="m", metadata=b"\x00\x01\xff")])
    assert to_json(r, 5)["members"][0]["metadata"] == "AAH/"


def test_internal_records() -> None:
    t = TopicRecord(name="t1", topic_id=Uuid(bytes(16)))
    assert to_json_text(t, 0) == '{"name":"t1","topicId":"AAAAAAAAAAAAAAAAAAAAAA"}'
    v = OffsetCommitValue(offset=5, leader_epoch=1, metadata="", commit_timestamp=1700000000000, expire_timestamp=-1)
    assert to_json(v, 3) == {"offset": 5, "leaderEpoch": 1, "metadata": "", "commitTimestamp": 1700000000000}
    assert to_json(v, 1)["expireTimestamp"] == -1


def test_every_message_serialises() -> None:
    for name in message_names():
        for v in message_def(name).versions():
            json.dumps(to_json(sample(name, v), v))
