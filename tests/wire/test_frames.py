"""FrameSplitter: any chunking gives the same frames; bad size prefixes raise ProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.wire.errors import ProtocolError
from odradek.wire.frames import FrameSplitter


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _drain(sp: FrameSplitter) -> list[bytes]:
    out = []
    while (f := sp.next_frame()) is not None:
        out.append(bytes(f))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 50), min_size=1, max_size=40))
def test_any_chunking(frames: list[bytes], cuts: list[int]) -> None:
    data = _stream(frames)
    sp = FrameSplitter(1000)
    got = []
    pos = 0
    i = 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        sp.feed(data[pos : pos + n])
        pos += n
        i += 1
        got += _drain(sp)
    assert got == frames
    assert sp.buffered == 0


def test_frames_survive_reuse_of_the_receive_buffer() -> None:
    buf = bytearray(_stream([b"hello", b"world!"]))
    sp = FrameSplitter(100)
    sp.feed(memoryview(buf))
    a = sp.next_frame()
    buf[:] = b"\0" * len(buf)
    assert bytes(a) == b"hello" and bytes(sp.next_frame()) == b"world!" and sp.next_frame() is None


def test_partial_returns_none() -> None:
    sp = FrameSplitter(100)
    sp.feed(b"\x00\x00")
    assert sp.next_frame() is None
    sp.feed(b"\x00\x03ab")
    assert sp.next_frame() is None and sp.buffered == 2
    sp.feed(b"c")
    assert bytes(sp.next_frame()) == b"abc"


@pytest.mark.parametrize("size", [-1, -2**31, 101, 2**31 - 1])
def test_bad_sizes(size: int) -> None:
    sp = FrameSplitter(100)
    sp.feed(_stream([b"ok"]) + struct.pack(">i", size) + b"rest")
    assert bytes(sp.next_frame()) == b"ok"  # frames before the bad prefix are still delivered
    with pytest.raises(ProtocolError):
        sp.next_frame()
    sp.feed(b"more")
    with pytest.raises(ProtocolError):
        sp.next_frame()


def test_empty_frame_and_max_size() -> None:
    sp = FrameSplitter(3)
    sp.feed(_stream([b"", b"abc"]))
    assert _drain(sp) == [b"", b"abc"]


def test_big_announced_frame_grows_with_the_data() -> None:
    sp = FrameSplitter(100 * 1024 * 1024)
    sp.feed(struct.pack(">i", 50 * 1024 * 1024) + b"x" * 10)
    assert sp.next_frame() is None and sp.buffered == 10
    assert len(sp._body) == 10  # nothing allocated for bytes that have not arrived
    payload = bytes(range(256)) * 8192  # 2 MiB
    sp2 = FrameSplitter(10 * 1024 * 1024)
    data = struct.pack(">i", len(payload)) + payload
    for i in range(0, len(data), 65536):
        sp2.feed(data[i : i + 65536])
    assert bytes(sp2.next_frame()) == payload
