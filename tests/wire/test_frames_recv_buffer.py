"""FrameSplitter.recv_buffer/commit: receiving straight into a frame's buffer gives the same frames."""

from __future__ import annotations

import struct

from odradek.wire.frames import FrameSplitter


def _receive(sp: FrameSplitter, stream: bytes, chunk: int) -> list[bytes]:
    """Feed `stream` like the server does: recv_buffer while a frame is in progress, else feed."""
    pos, frames = 0, []
    while pos < len(stream):
        view = sp.recv_buffer(chunk)
        if view is None:
            sp.feed(stream[pos : pos + chunk])
            pos += chunk
        else:
            with view:
                n = min(len(view), chunk, len(stream) - pos)
                view[:n] = stream[pos : pos + n]
            sp.commit(n)
            pos += n
        while (frame := sp.next_frame()) is not None:
            frames.append(bytes(frame))
    return frames


def test_recv_buffer_small_and_big_frames() -> None:
    payloads = [b"", b"abc", bytes(range(256)) * 4096, b"x" * 3_000_001, b"tail"]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    for chunk in (7, 65536, 256 * 1024):
        assert _receive(FrameSplitter(10 * 1024 * 1024), stream, chunk) == payloads


def test_recv_buffer_grows_with_the_data() -> None:
    sp = FrameSplitter(100 * 1024 * 1024)
    sp.feed(struct.pack(">i", 50 * 1024 * 1024) + b"x" * 10)
    view = sp.recv_buffer(1024)
    assert view is not None and len(view) == 1024  # not 50 MiB for 10 bytes received
    view.release()
    sp.commit(5)
    sp.feed(b"y" * 100)  # feed after a grown buffer keeps the bytes in order
    assert sp.buffered == 115
    assert bytes(sp._body[:115]) == b"x" * 10 + b"\0" * 5 + b"y" * 100
