"""FramePool: big frames reuse the buffers of finished frames, never one something still sees."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.wire.frames import FramePool, FrameSplitter


def _receive_one(sp: FrameSplitter, payload: bytes, chunk: int = 65536) -> memoryview:
    """Feed one frame the way the server does (recv_buffer once the size prefix is in)."""
    sp.feed(struct.pack(">i", len(payload)) + payload[:10])
    pos = 10
    while pos < len(payload):
        view = sp.recv_buffer(chunk)
        assert view is not None
        with view:
            n = min(len(view), chunk, len(payload) - pos)
            view[:n] = payload[pos : pos + n]
        sp.commit(n)
        pos += n
    frame = sp.next_frame()
    assert frame is not None
    return frame


def test_a_finished_frame_buffer_is_reused_once_no_view_of_it_is_left() -> None:
    pool = FramePool(min_size=1024)
    sp = FrameSplitter(10 << 20, pool)
    first = _receive_one(sp, b"a" * 300_000)
    buf = first.obj
    del first  # the request is handled: nothing refers to its bytes any more
    second = _receive_one(sp, b"b" * 200_000)  # smaller: fits into the first one's buffer
    assert second.obj is buf and len(second) == 200_000 and bytes(second) == b"b" * 200_000


def test_a_buffer_something_still_sees_is_not_reused() -> None:
    pool = FramePool(min_size=1024)
    sp = FrameSplitter(10 << 20, pool)
    frame = _receive_one(sp, b"a" * 300_000)
    kept = frame[1000:2000]  # e.g. a record set a handler held on to
    del frame
    other = _receive_one(sp, b"b" * 300_000)
    assert other.obj is not kept.obj
    assert bytes(kept) == b"a" * 1000  # untouched by the next frame
    kept.release()
    del other
    third = _receive_one(sp, b"c" * 250_000)
    assert bytes(third) == b"c" * 250_000


def test_pending_frames_keep_their_buffers_and_sizes_outside_the_range_are_not_pooled() -> None:
    pool = FramePool(min_size=1024, max_size=100_000, max_buffers=2)
    sp = FrameSplitter(10 << 20, pool)
    a = _receive_one(sp, b"a" * 50_000)
    b = _receive_one(sp, b"b" * 50_000)  # a is still alive: b gets a fresh buffer
    assert a.obj is not b.obj and bytes(a) == b"a" * 50_000
    big = _receive_one(sp, b"x" * 200_000)  # above max_size: neither taken from nor lent to the pool
    assert len(pool) == 2 and all(buf is not big.obj for buf in pool._buffers)
    small = _receive_one(sp, b"s" * 100)
    assert len(pool) == 2 and bytes(small) == b"s" * 100
    assert bytes(_receive_one(sp, b"c" * 60_000)) == b"c" * 60_000
    assert len(pool) == 2  # bounded: the oldest was forgotten when c was lent


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=12), st.lists(st.integers(1, 3000), min_size=1, max_size=20),
       st.lists(st.booleans(), min_size=1, max_size=12))
def test_any_sizes_chunking_and_holding_pattern(sizes: list[int], cuts: list[int], hold: list[bool]) -> None:
    pool = FramePool(min_size=100, max_size=4000, max_buffers=3)
    sp = FrameSplitter(10_000, pool)
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    held: list[tuple[memoryview, bytes]] = []
    got = 0
    pos = i = 0
    while pos < len(data):
        view = sp.recv_buffer(cuts[i % len(cuts)])
        n = cuts[i % len(cuts)]
        if view is None:
            sp.feed(data[pos : pos + n])
        else:
            with view:
                n = min(n, len(view), len(data) - pos)
                view[:n] = data[pos : pos + n]
            sp.commit(n)
        pos += n
        i += 1
        while (frame := sp.next_frame()) is not None:
            assert bytes(frame) == payloads[got]
            if hold[got % len(hold)]:
                held.append((frame, payloads[got]))
            got += 1
            del frame
    assert got == len(payloads)
    for frame, payload in held:  # frames still referenced were never overwritten
        assert bytes(frame) == payload
