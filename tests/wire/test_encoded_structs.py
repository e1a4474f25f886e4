"""Structs encoded ahead of time (`wire.schema.Encoded`) encode exactly like the objects they stand for."""

from __future__ import annotations

import pytest

from odradek.wire import schema
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import response_class, supported_versions

METADATA = 3
R = response_class(METADATA)


def _topics() -> list:
    return [R.MetadataResponseTopic(
        error_code=0, name=f"topic-{t}", topic_id=Uuid(bytes(15) + bytes([t + 1])), is_internal=t == 0,
        partitions=[R.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=1, leader_epoch=i % 3,
                                                replica_nodes=[1], isr_nodes=[1], offline_replicas=[])
                    for i in range(7)],
        topic_authorized_operations=-2147483648) for t in range(3)]


def _response(topics: list) -> object:
    return R(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
             cluster_id="c", controller_id=1, topics=topics, cluster_authorized_operations=-2147483648)


def _encode(version: int, obj: object) -> bytes:
    return b"".join(bytes(p) for p in schema.codec("MetadataResponse", version).encode(obj))


@pytest.mark.parametrize("version", range(supported_versions(METADATA)[0], supported_versions(METADATA)[1] + 1))
def test_pre_encoded_topics_encode_like_the_topics(version: int) -> None:
    topics = _topics()
    encoded = [schema.encode_struct("MetadataResponse", version, "MetadataResponseTopic", t) for t in topics]
    assert _encode(version, _response(encoded)) == _encode(version, _response(topics))
    # at another version the bytes do not fit: the object behind them is encoded
    other = version - 1 if version > supported_versions(METADATA)[0] else version + 1
    assert _encode(other, _response(encoded)) == _encode(other, _response(topics))
    # what reads the message reads the object's fields
    assert [t.name for t in encoded] == ["topic-0", "topic-1", "topic-2"]
    assert encoded[0].is_internal and len(encoded[1].partitions) == 7


def test_pre_encoded_bytes_are_used_as_they_are() -> None:
    (topic,) = _topics()[:1]
    encoded = schema.encode_struct("MetadataResponse", 12, "MetadataResponseTopic", topic)
    stale = schema.Encoded(encoded.key, encoded.data.replace(b"topic-0", b"topic-X"), topic)
    assert b"topic-X" in _encode(12, _response([stale]))  # not encoded again from the object
