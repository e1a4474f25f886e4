"""Split a TCP byte stream into Kafka's size-prefixed frames (sans-IO).

Every Kafka request and response is a 4-byte big-endian signed size followed by that many
bytes. ``FrameSplitter`` takes whatever ``recv`` returned, in any chunking, and hands out
complete frames (without the size prefix).
"""

from __future__ import annotations

from collections import deque

from .errors import ProtocolError

DEFAULT_MAX_FRAME_SIZE = 104857600  # Kafka's socket.request.max.bytes default (100 MiB)
# Frames up to this size get their whole buffer when the size prefix arrives; bigger ones grow
# as bytes come in, so a peer that announces 100 MiB and sends nothing costs nothing.
PREALLOCATE_MAX = 1 << 20


class FramePool:
    """Frame buffers of finished requests, for the next big frames of any connection.

    A produce request of a MiB in a fresh buffer costs the kernel a page fault and a page
    zeroing per 4 KiB before `recv_into` can copy a byte, and bytes(...) growth zeroes it once
    more: about as much CPU as the copy from the socket itself. Buffers handed out in frames
    are remembered here; a later frame takes one back only when nothing can still see it: a
    bytearray with a live memoryview (a record set a handler kept, a frame not yet handled)
    refuses to resize, so ``append`` is the probe. Only frames of ``min_size`` to ``max_size``
    bytes take part, and at most ``max_buffers`` are remembered, so what the pool keeps alive is
    bounded (8 x 2 MiB by default). Not thread-safe: one pool per event loop.
    """

    __slots__ = ("min_size", "max_size", "max_buffers", "_buffers")

    def __init__(self, min_size: int = 64 * 1024, max_size: int = 2 << 20, max_buffers: int = 8) -> None:
        self.min_size = min_size
        self.max_size = max_size
        self.max_buffers = max_buffers
        self._buffers: list[bytearray] = []

    def take(self, size: int) -> bytearray | None:
        """A free remembered buffer of at least `size` bytes (its length may be larger), or None."""
        if not self.min_size <= size <= self.max_size:
            return None
        buffers = self._buffers
        for i, buf in enumerate(buffers):
            if len(buf) >= size and _unshared(buf):
                del buffers[i]
                return buf
        return None

    def lend(self, buf: bytearray) -> None:
        """Remember a buffer that is about to be handed out in a frame (the oldest is forgotten)."""
        if self.min_size <= len(buf) <= self.max_size:
            buffers = self._buffers
            if len(buffers) >= self.max_buffers:
                del buffers[0]
            buffers.append(buf)

    def __len__(self) -> int:
        return len(self._buffers)


def _unshared(buf: bytearray) -> bool:
    """True if no buffer export (memoryview) of `buf` is alive."""
    try:
        buf.append(0)
    except BufferError:
        return False
    del buf[-1]
    return True


class FrameSplitter:
    """Incremental frame splitter.

    ``feed(data)`` with bytes as they arrive, then call ``next_frame()`` until it returns None.
    Each frame is copied exactly once, from the fed chunk into a buffer of its own that the
    returned ``memoryview`` covers, so frames stay valid after later ``feed`` calls and the
    caller may reuse its receive buffer. A negative size or one above ``max_frame_size``
    raises ``ProtocolError`` from ``next_frame`` (after the complete frames before it), since
    the stream cannot be resynchronised: the connection must be closed.
    """

    __slots__ = ("max_frame_size", "pool", "_header", "_body", "_filled", "_size", "_ready", "_error")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, pool: FramePool | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.pool = pool  # big frames reuse finished frames' buffers (see FramePool)
        self._header = bytearray()  # partial 4-byte size prefix
        self._body: bytearray | None = None  # frame being filled
        self._filled = 0
        self._size = 0  # size of the frame being filled
        self._ready: deque[memoryview] = deque()
        self._error: ProtocolError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes (any length, including 0)."""
        if self._error is not None:
            return  # the stream is already broken; nothing after the bad prefix means anything
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = len(mv)
        pos = 0
        while pos < n:
            body = self._body
            if body is None:
                header = self._header
                if not header and n - pos >= 4:
                    size = int.from_bytes(mv[pos : pos + 4], "big", signed=True)
                    pos += 4
                else:
                    take = min(4 - len(header), n - pos)
                    header += mv[pos : pos + take]
                    pos += take
                    if len(header) < 4:
                        return
                    size = int.from_bytes(header, "big", signed=True)
                    header.clear()
                if size < 0 or size > self.max_frame_size:
                    self._error = ProtocolError(
                        f"frame size {size} outside 0..{self.max_frame_size}", offset=None
                    )
                    return
                if n - pos >= size:
                    # whole frame in this chunk: one copy straight into its own buffer
                    self._ready.append(memoryview(bytearray(mv[pos : pos + size])))
                    pos += size
                    continue
                body = self.pool.take(size) if self.pool is not None else None
                if body is None:
                    body = bytearray(size) if size <= PREALLOCATE_MAX else bytearray()
                self._body = body
                self._size = size
                self._filled = 0
            take = min(self._size - self._filled, n - pos)
            filled = self._filled
            # recv_buffer may have grown the buffer ahead of the data; a pooled one may be longer
            room = len(body) - filled
            if room >= take:
                body[filled : filled + take] = mv[pos : pos + take]
            else:
                if room:
                    body[filled:] = mv[pos : pos + room]
                body += mv[pos + room : pos + take]
            self._filled += take
            pos += take
            if self._filled == self._size:
                self._complete(body)

    def recv_buffer(self, chunk: int) -> memoryview | None:
        """Where to receive the rest of the frame being filled, to skip `feed`'s copy.

        Returns a writable view of the frame's own buffer after the bytes already filled (at
        most the missing bytes), or None when no frame is in progress (then receive into any
        buffer and `feed` it). After receiving n bytes into it, release the view and call
        ``commit(n)``. A big frame's buffer still grows with the data, at most doubling (and by
        at least `chunk`) per call, so an announced but unsent frame costs little memory.
        """
        body = self._body
        if body is None or self._error is not None:
            return None
        filled = self._filled
        if len(body) == filled:
            grow = min(self._size - filled, max(chunk, filled))
            body += bytes(grow)  # realloc of a large buffer remaps pages rather than copying
        return memoryview(body)[filled : self._size]

    def commit(self, n: int) -> None:
        """`n` bytes were received into the view `recv_buffer` returned."""
        self._filled += n
        if self._filled == self._size:
            body = self._body
            assert body is not None
            self._complete(body)

    def _complete(self, body: bytearray) -> None:
        size = self._size
        self._ready.append(memoryview(body) if len(body) == size else memoryview(body)[:size])
        self._body = None
        if self.pool is not None:
            self.pool.lend(body)

    def next_frame(self) -> memoryview | None:
        """The next complete frame (without size prefix), or None if more bytes are needed."""
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            raise self._error
        return None

    @property
    def buffered(self) -> int:
        """Bytes held for frames not yet complete (for back-pressure/memory accounting)."""
        return len(self._header) + (self._filled if self._body is not None else 0)
