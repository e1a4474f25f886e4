"""Headers, version rules and the piece list of encode_response (records, FileSlice)."""

from __future__ import annotations

import struct

import pytest

from odradek.wire.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from odradek.wire.messages import ApiVersionsResponse, FetchResponse, MetadataRequest, ProduceRequest
from odradek.wire.protocol import (
    API_KEYS,
    API_NAMES,
    FileSlice,
    api_versions,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    frame_size,
    join_pieces,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
    supported_versions,
)


def test_error_codes() -> None:
    assert ErrorCode.NONE == 0 and ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3 and ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.MEMBER_ID_REQUIRED == 79 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.INVALID_REQUEST.retriable
    assert max(ErrorCode) >= 133


def test_api_tables() -> None:
    assert API_NAMES[0] == "Produce" and API_KEYS["Fetch"] == 1 and API_KEYS["DescribeTopicPartitions"] == 75
    assert request_class(3) is MetadataRequest and response_class(18) is ApiVersionsResponse
    assert supported_versions(0) == (0, 13)
    assert supported_versions(8) == (0, 10)  # OffsetCommit v10: unstable in 4.1, released in 4.4
    assert supported_versions(22) == (0, 5)  # InitProducerId v6 is still unstable in 4.4
    assert supported_versions(22, include_unstable=True) == (0, 6)
    assert api_versions()[18] == (0, 5)


def test_header_versions() -> None:
    assert request_header_version(0, 8) == 1 and request_header_version(0, 9) == 2
    assert response_header_version(0, 8) == 0 and response_header_version(0, 9) == 1
    assert response_header_version(18, 4) == 0  # ApiVersions: always v0
    assert request_header_version(18, 3) == 2


def test_request_round_trip_and_header() -> None:
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")],
                           allow_auto_topic_creation=False)
    for v in (0, 4, 9, 12, 13):
        if v == 0:
            body.allow_auto_topic_creation = True
        frame = join_pieces(encode_request(v, 77, body, client_id="cli"))
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        header, offset = decode_request_header(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, v, 77, "cli")
        assert header.header_version == (2 if v >= 9 else 1)
        assert offset == 8 + 2 + 3 + (1 if v >= 9 else 0)
        req = decode_request(frame[4:])
        assert req.header == header
        assert req.body.topics[0].name == "t"


def test_unsupported_version_header_still_decodes() -> None:
    frame = struct.pack(">hhih", 3, 99, 5, 1) + b"c" + b"\x00" + b"garbage"
    header, _ = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 99, 5, "c")
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)
    with pytest.raises(ProtocolError):
        decode_request_header(struct.pack(">hhih", 9999, 0, 5, -1))
    with pytest.raises(ProtocolError):
        decode_request_header(b"\x00\x03")


def test_api_versions_response_uses_header_v0() -> None:
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)])
    frame = join_pieces(encode_response(18, 4, 9, body))
    assert frame[4:8] == struct.pack(">i", 9)
    assert frame[8:10] == b"\x00\x00"  # error_code right after the correlation id: no tag byte
    corr, decoded = decode_response(frame[4:], 18, 4)
    assert corr == 9 and decoded == body
    # flexible non-ApiVersions responses get the header tag byte
    frame = join_pieces(encode_response(1, 12, 9, FetchResponse()))
    assert frame[8] == 0 and len(frame) == 4 + 4 + 1 + 4 + 2 + 4 + 1 + 1


def test_encode_response_accepts_header_and_checks_body_type() -> None:
    header, _ = decode_request_header(struct.pack(">hhih", 1, 4, 42, -1))
    pieces = encode_response(header, body=FetchResponse())
    corr, _ = decode_response(join_pieces(pieces)[4:], 1, 4)
    assert corr == 42
    with pytest.raises(TypeError):
        encode_response(1, 4, 42, ApiVersionsResponse())


def _fetch_response(records) -> FetchResponse:
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=10, records=records)])])


def test_fileslice_is_a_separate_piece(tmp_path) -> None:
    payload = bytes(range(256)) * 100
    path = tmp_path / "seg.log"
    path.write_bytes(b"HEAD" + payload)
    with open(path, "rb") as fh:
        sl = FileSlice(fh, 4, len(payload))
        for version in (4, 11, 12, 16):
            pieces = encode_response(1, version, 3, _fetch_response([sl]))
            assert sum(1 for p in pieces if isinstance(p, FileSlice)) == 1
            assert pieces[1] is sl and len(pieces) == (3 if version >= 12 else 2)  # flexible: tag bytes follow
            assert frame_size(pieces) == int.from_bytes(pieces[0][:4], "big") + 4
            # what the server would send: buffers and the file region, in order
            wire = b"".join(bytes(p) if not isinstance(p, FileSlice) else path.read_bytes()[4:] for p in pieces)
            corr, body = decode_response(wire[4:], 1, version)
            assert bytes(body.responses[0].partitions[0].records) == payload
            assert body.responses[0].partitions[0].high_watermark == 10


def test_records_variants_encode_identically() -> None:
    payload = b"x" * 20000
    expected = join_pieces(encode_response(1, 12, 3, _fetch_response(payload)))
    for variant in (memoryview(payload), [payload[:5], memoryview(payload)[5:9000], payload[9000:]], bytearray(payload)):
        assert join_pieces(encode_response(1, 12, 3, _fetch_response(variant))) == expected
    # big buffers are passed through, not copied
    pieces = encode_response(1, 12, 3, _fetch_response(payload))
    assert any(p is payload for p in pieces)
    # null and empty records
    for rec in (None, b"", []):
        frame = join_pieces(encode_response(1, 12, 3, _fetch_response(rec)))
        _, body = decode_response(frame[4:], 1, 12)
        got = body.responses[0].partitions[0].records
        assert (got is None) if rec is None else (bytes(got) == b"")


def test_produce_request_records_zero_copy() -> None:
    payload = b"B" * 50000
    body = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.PartitionProduceData(index=0, records=payload)])])
    frame = memoryview(bytearray(join_pieces(encode_request(11, 1, body))[4:]))
    req = decode_request(frame)
    rec = req.body.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is frame.obj and rec == payload


def test_future_api_versions_request_header() -> None:
    # a client newer than us sends ApiVersions v9 (header v2): the header must still decode so the
    # server can answer UNSUPPORTED_VERSION with a v0 ApiVersionsResponse
    frame = struct.pack(">hhih", 18, 9, 4, 3) + b"cli" + b"\x00" + b"\x01\x02"
    header, offset = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.client_id, header.header_version, offset) == (18, 9, "cli", 2, 14)
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)
    pieces = encode_response(header, api_version=0, body=ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION))
    assert join_pieces(pieces) == struct.pack(">iih", 4 + 2 + 4, 4, 35) + struct.pack(">i", 0)


def test_api_versions_falls_back_to_a_v0_answer() -> None:
    # what a broker without ApiVersions v5 sends to a v5 request: UNSUPPORTED_VERSION in a v0 body
    body = ApiVersionsResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION), api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    frame = join_pieces(encode_response(18, 0, 11, body))[4:]
    corr, got = decode_response(frame, 18, 5)
    assert corr == 11 and got.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.max_version) for k in got.api_keys] == [(18, 4)]
    with pytest.raises(ProtocolError):  # other APIs have no such fallback
        decode_response(b"\0\0\0\x0b\xff", 3, 12)
