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


class FrameSplitter:
    """Incremental frame splitter.

    ``feed(data)`` with bytes as they arrive, then call ``next_frame()`` until it returns None.
    Each frame is copied exactly once, from the fed chunk into a buffer of its own that the
    returned ``memoryview`` covers, so frames stay valid after later ``feed`` calls and the
    caller may reuse its receive buffer. A negative size or one above ``max_frame_size``
    raises ``ProtocolError`` from ``next_frame`` (after the complete frames before it), since
    the stream cannot be resynchronised: the connection must be closed.
    """

    __slots__ = ("max_frame_size", "_header", "_body", "_filled", "_size", "_ready", "_error")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
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
                self._body = body = bytearray(size) if size <= PREALLOCATE_MAX else bytearray()
                self._size = size
                self._filled = 0
            take = min(self._size - self._filled, n - pos)
            filled = self._filled
            room = len(body) - filled  # recv_buffer may have grown the buffer ahead of the data
            if room >= take:
                body[filled : filled + take] = mv[pos : pos + take]
            else:
                if room:
                    body[filled:] = mv[pos : pos + room]
                body += mv[pos + room : pos + take]
            self._filled += take
            pos += take
            if self._filled == self._size:
                self._ready.append(memoryview(body))
                self._body = None

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
        return memoryview(body)[filled:]

    def commit(self, n: int) -> None:
        """`n` bytes were received into the view `recv_buffer` returned."""
        self._filled += n
        if self._filled == self._size:
            body = self._body
            assert body is not None
            self._ready.append(memoryview(body))
            self._body = None

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
