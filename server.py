"""The Trio server: listeners, one task per connection, responses in request order.

Kafka handles the requests of one connection one at a time (its socket server mutes a
channel until the response is sent), so clients that pipeline several requests get their
answers in order. Odradek does the same: each connection task reads frames, hands each to
its handler and writes the response before taking the next frame. Record bytes of fetch
responses go from the segment files to the socket with ``os.sendfile``.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import signal
from typing import TYPE_CHECKING

import trio

from . import loop_monitor
from .handlers.registry import RequestContext, dispatch
from .metrics import start_metrics
from .wire.errors import ProtocolError
from .wire.frames import FrameSplitter
from .wire.records import FileSlice

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

# Small writes are joined into one send; bigger ones are sent as they are.
_COALESCE_LIMIT = 64 * 1024
_RECEIVE_SIZE = 256 * 1024


class ConnectionClosed(Exception):
    """The connection must be closed (already logged)."""


class Connection:
    """One client connection: frames in, responses out, strictly in order."""

    def __init__(self, broker: Broker, stream: trio.SocketStream, listener_name: str) -> None:
        self.broker = broker
        self.stream = stream
        self.listener_name = listener_name
        try:
            peer = stream.socket.getpeername()
            self.peer = f"{peer[0]}:{peer[1]}"
        except OSError:
            self.peer = "?"
        self.splitter = FrameSplitter(int(broker.config.get("socket.request.max.bytes")))

    async def run(self) -> None:
        idle_s = int(self.broker.config.get("connections.max.idle.ms")) / 1000
        stream = self.stream
        metrics = getattr(self.broker, "metrics", None)
        if metrics is not None:
            metrics.connection_opened(self.listener_name)
        try:
            while True:
                frame = self.splitter.next_frame()
                if frame is None:
                    with trio.move_on_after(idle_s) as idle:
                        data = await stream.receive_some(_RECEIVE_SIZE)
                    if idle.cancelled_caught:
                        log.info("Closing idle connection from %s", self.peer)
                        return
                    if not data:
                        return
                    self.splitter.feed(data)
                    continue
                await self._process(frame)
        except ProtocolError as exc:
            log.warning("Closing connection from %s: malformed request: %s", self.peer, exc)
        except ConnectionClosed:
            pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        except Exception:
            # A bug in one request must not take the broker down: drop this connection only.
            log.exception("Closing connection from %s after an internal error", self.peer)
        finally:
            if metrics is not None:
                metrics.connection_closed(self.listener_name)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _process(self, frame: memoryview) -> None:
        ctx = RequestContext(broker=self.broker, peer=self.peer, listener_name=self.listener_name)
        response = await dispatch(ctx, frame)
        if response is None:
            return
        await self._send(response)

    async def _send(self, items: list) -> None:
        """Write a response: buffers joined into few sends, file slices with sendfile."""
        pending: list = []
        pending_size = 0
        for item in items:
            if isinstance(item, FileSlice):
                if pending:
                    await self.stream.send_all(b"".join(pending))
                    pending, pending_size = [], 0
                await self._sendfile(item)
                continue
            pending.append(item)
            pending_size += len(item)
            if pending_size >= _COALESCE_LIMIT:
                await self.stream.send_all(b"".join(pending))
                pending, pending_size = [], 0
        if pending:
            await self.stream.send_all(b"".join(pending))

    async def _sendfile(self, item: FileSlice) -> None:
        sock = self.stream.socket
        out_fd = sock.fileno()
        in_fd = item.file.fileno()
        offset, remaining = item.position, item.size
        while remaining > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                    raise ConnectionClosed() from None
                raise
            if sent == 0:
                # The file is shorter than the slice promised: the frame cannot be completed.
                log.error("Segment %s ended early while sending to %s; closing", item.file, self.peer)
                raise ConnectionClosed()
            offset += sent
            remaining -= sent
        await trio.lowlevel.checkpoint()


async def serve_listeners(broker: Broker, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind every listener and serve connections until cancelled (and /metrics when configured)."""
    broker.metrics = start_metrics(broker)
    try:
        await _serve_listeners(broker, task_status)
    finally:
        if broker.metrics is not None:
            broker.metrics.stop_endpoint()


async def _serve_listeners(broker: Broker, task_status) -> None:
    async with trio.open_nursery() as nursery:
        bound: list[tuple[str, int]] = []
        for listener in broker.config.listeners:
            if listener.name not in ("PLAINTEXT",) and not listener.name.startswith("PLAINTEXT"):
                protocol_map = broker.config.get("listener.security.protocol.map") or []
                mapped = dict(item.split(":", 1) for item in protocol_map if ":" in item)
                if mapped.get(listener.name, listener.name) != "PLAINTEXT":
                    log.warning("Listener %s is not PLAINTEXT; it is not served yet", listener.name)
                    continue

            async def handle(stream: trio.SocketStream, name: str = listener.name) -> None:
                await Connection(broker, stream, name).run()

            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, handle, listener.port, host=listener.bind_host)
            )
            for lst in listeners:
                sockname = lst.socket.getsockname()
                bound.append((sockname[0], sockname[1]))
                log.info("Listening on %s:%s (%s)", sockname[0], sockname[1], listener.name)
        broker.bound_addresses = bound
        task_status.started(bound)


async def run_broker(broker: Broker) -> None:
    """Start the broker, serve until SIGTERM/SIGINT, then shut down cleanly.

    The signal receiver stays open during shutdown so that a second signal cannot kill
    the process half-way through writing checkpoints.
    """
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        await broker.startup()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_listeners, broker)
                nursery.start_soon(broker.run_background_tasks)
                # ODRADEK_LOOP_MONITOR=<file>: per-second event-loop stall stats (benchmarks)
                loop_monitor.start_from_env(nursery)
                log.info("Odradek broker %s started", broker.config.node_id)
                async for signum in signals:
                    log.info("Received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
        finally:
            with trio.CancelScope(shield=True):
                await broker.shutdown()
