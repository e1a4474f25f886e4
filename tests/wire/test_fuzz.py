"""Property tests: truncated, bit-flipped and random frames never raise anything but ProtocolError,
and never allocate from a hostile length."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.wire import primitives as P
from odradek.wire.errors import ProtocolError
from odradek.wire.messages.defs import MESSAGES
from odradek.wire.protocol import API_NAMES, decode_request, decode_response, encode_request, join_pieces
from odradek.wire.sample import sample
from odradek.wire.schema import codec, message_def

CASES = [(name, v) for name in MESSAGES for v in message_def(name).versions()]
API_CASES = [(key, v) for key, api in API_NAMES.items() for v in message_def(api + "Request").versions()]

# every valid frame of every request/response, built once, as mutation seeds
_SEEDS: dict[tuple[str, int], bytes] = {}


def _seed(name: str, version: int, seed: int) -> bytes:
    key = (name, version, seed)
    if key not in _SEEDS:
        _SEEDS[key] = codec(name, version).encode_bytes(sample(name, version, seed=seed, nulls=seed % 2 == 1))
    return _SEEDS[key]


def _decode_only_protocol_error(name: str, version: int, data: bytes) -> None:
    try:
        codec(name, version).decode(data)
    except ProtocolError:
        pass


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.sampled_from(CASES), st.integers(0, 3), st.data())
def test_truncated_bodies(case, seed, data) -> None:
    name, version = case
    good = _seed(name, version, seed)
    cut = data.draw(st.integers(0, max(0, len(good) - 1)))
    if cut < len(good):
        try:
            obj, end = codec(name, version).decode(good[:cut])
        except ProtocolError:
            return
        # a prefix may itself be a valid (shorter) message only if decoding stopped inside it
        assert end <= cut


@FUZZ
@given(st.sampled_from(CASES), st.integers(0, 3), st.data())
def test_bit_flipped_bodies(case, seed, data) -> None:
    name, version = case
    good = bytearray(_seed(name, version, seed))
    if not good:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(good) - 1))
        good[i] ^= 1 << data.draw(st.integers(0, 7))
    _decode_only_protocol_error(name, version, bytes(good))


@FUZZ
@given(st.sampled_from(CASES), st.binary(max_size=200))
def test_random_bodies(case, data) -> None:
    _decode_only_protocol_error(*case, data)


@FUZZ
@given(st.sampled_from(API_CASES), st.binary(max_size=120), st.data())
def test_random_and_flipped_request_frames(case, tail, data) -> None:
    api_key, version = case
    body = sample(API_NAMES[api_key] + "Request", version, seed=1)
    frame = bytearray(join_pieces(encode_request(version, 7, body, client_id="fuzz"))[4:])
    mode = data.draw(st.sampled_from(["flip", "truncate", "tail", "random"]))
    if mode == "flip":
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(frame) - 1))
            frame[i] ^= 1 << data.draw(st.integers(0, 7))
    elif mode == "truncate":
        frame = frame[: data.draw(st.integers(0, len(frame)))]
    elif mode == "tail":
        frame = frame[:8] + tail  # a valid api key/version with garbage after it
    else:
        frame = bytearray(tail)
    try:
        decode_request(bytes(frame))
    except ProtocolError:
        pass


@FUZZ
@given(st.sampled_from(API_CASES), st.binary(max_size=200))
def test_random_response_frames(case, data) -> None:
    try:
        decode_response(data, *case)
    except ProtocolError:
        pass


@pytest.mark.parametrize("compact", [False, True])
def test_huge_array_count_in_small_frame(compact: bool) -> None:
    # Metadata request: topics array first. Count 2**31-1 (classic) / 2**32-2 (compact) in a 40-byte frame.
    version = 9 if compact else 1
    header = struct.pack(">hhih", 3, version, 1, -1) + (b"\x00" if compact else b"")
    count = P.encode_uvarint(2**32 - 1) if compact else struct.pack(">i", 2**31 - 1)
    frame = header + count + b"\x00" * (40 - len(header) - len(count))
    with pytest.raises(ProtocolError):
        decode_request(frame)


def test_huge_string_and_bytes_lengths() -> None:
    # SaslAuthenticate v0 request is one bytes field: claim 2 GiB
    frame = struct.pack(">hhih", 36, 0, 1, -1) + struct.pack(">i", 2**31 - 1) + b"abc"
    with pytest.raises(ProtocolError):
        decode_request(frame)
    # a string length past the end
    frame = struct.pack(">hhih", 3, 0, 1, 30000) + b"x" * 10
    with pytest.raises(ProtocolError):
        decode_request(frame)


def test_overlong_varint() -> None:
    with pytest.raises(ProtocolError):
        P.read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(ProtocolError):
        P.read_uvarint(b"\x80", 0)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    P.write_varint(out, n)
    assert P.read_varint(bytes(out), 0) == (n, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    out = bytearray()
    P.write_varlong(out, n)
    assert P.read_varlong(bytes(out), 0) == (n, len(out))


@given(st.integers(0, 2**32 - 1))
def test_uvarint_size(n: int) -> None:
    assert len(P.encode_uvarint(n)) == P.uvarint_size(n)
    assert P.read_uvarint(P.encode_uvarint(n), 0) == (n, P.uvarint_size(n))


def test_known_varints() -> None:
    # zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3; 300 -> 0xac 0x02 (unsigned)
    for value, encoded in ((0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (150, b"\xac\x02")):
        out = bytearray()
        P.write_varint(out, value)
        assert bytes(out) == encoded
    assert P.encode_uvarint(300) == b"\xac\x02"
