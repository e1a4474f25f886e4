"""The Trio server: listeners, one task per connection, responses in request order.

Kafka handles the requests of one connection one at a time (its socket server mutes a
channel until the response is sent), so clients that pipeline several requests get their
answers in order. Odradek does the same: each connection task reads frames, hands each to
its handler and writes the response before taking the next frame. Record bytes of fetch
responses go from the segment files to the socket with ``os.sendfile`` (plaintext listeners;
TLS listeners read the slice and encrypt it), from a sender process (``sender_process``; a
worker thread where none can run) when a response carries THREAD_SEND_BYTES or more of them, or
when they are not in the page cache.

Limits (Kafka's names, docs/reliability.md):

* ``socket.request.max.bytes`` -- a larger size prefix closes the connection before the body is read;
* ``max.connections`` -- broker-wide; at the limit the acceptor stops accepting (new clients wait
  in the listen backlog) until a connection closes, as Kafka's acceptor does;
* ``max.connections.per.ip`` / ``max.connections.per.ip.overrides`` -- a connection over its
  address's limit is accepted and closed at once, with Kafka's log line;
* ``queued.max.requests`` -- Kafka's bound on requests read but not yet handled. A connection here
  reads its next request only after answering the previous one (TCP backpressure does the rest),
  so this bounds the requests being handled at once across the broker.

Security (SSL, SASL_PLAINTEXT, SASL_SSL per ``listener.security.protocol.map``) lives in
``odradek.security``; this module wraps the stream and runs the SASL exchange before any other
request, like Kafka's SaslServerAuthenticator.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import select
import signal
import socket as stdlib_socket
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

from . import loop_monitor, sender_pool, sender_process
from .handlers.registry import RequestContext, dispatch
from .metrics import start_metrics
from .quota import connection_throttle_ms
from .security import Session, listener_security_protocol
from .wire import schema
from .wire.errors import ProtocolError
from .wire.frames import FramePool, FrameSplitter
from .wire.protocol import API_NAMES, decode_request_header
from .wire.records import FileSlice

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

# Small writes are joined into one send; bigger ones are sent as they are.
_COALESCE_LIMIT = 64 * 1024
# Responses with at least this much segment data are sent by a sender process (see _send): the
# hand-off costs ~0.1 ms, sendfile of 1 MiB about as much.
THREAD_SEND_BYTES = 2 << 20
# Smaller responses go to a thread too when their segment data is not in the page cache: probed
# once per _PROBE_STRIDE (a read-ahead window's order of size) with preadv's RWF_NOWAIT (Linux).
_PROBE_STRIDE = 256 << 10
_RWF_NOWAIT = getattr(os, "RWF_NOWAIT", 0)
_RECEIVE_SIZE = 256 * 1024
# Reads between frames (headers, small requests) go through a reused buffer of this size, one
# per thread (a broker's connections all live on its one Trio thread): `feed` copies out of it
# before the next read, and a buffer per connection cost every idle connection 64 KiB of RSS.
_SMALL_RECEIVE_SIZE = 64 * 1024
_receive_buffers = threading.local()
# Produce-sized frame buffers are reused across a broker's connections (one pool per broker,
# whose connections all live on its one Trio thread).
_frame_pools: weakref.WeakKeyDictionary[Any, FramePool] = weakref.WeakKeyDictionary()


class ConnectionClosed(Exception):
    """The connection must be closed (already logged)."""


# APIs a SASL client may send before it is authenticated (Kafka's SaslServerAuthenticator).
_PRE_AUTH_APIS = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate
# accept() errors that mean "out of resources for now": keep serving the open connections
_ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_TLS_HANDSHAKE_TIMEOUT_S = 30.0
_TLS_READ_CHUNK = 256 * 1024
# APIs whose handlers may wait for a long time (Fetch: max_wait_ms). Group joins are left alone:
# cancelling the coordinator half-way could leave a member half-registered.
_WAITING_APIS = frozenset({1})


# (api_key, api_version) pairs whose request and response codecs are compiled. wire.schema compiles
# a codec on first use (5-10 ms of CPU each); the first request of each version compiles them in a
# worker thread instead of on the event loop, which keeps serving the other connections meanwhile.
_warm_codecs: set[tuple[int, int]] = set()
_codec_lock: trio.lowlevel.RunVar = trio.lowlevel.RunVar("odradek_codec_lock")


def _compile_codecs(api_key: int, api_version: int) -> bool:
    """Compile both codecs; False for a version without schema (dispatch answers UNSUPPORTED_VERSION)."""
    name = API_NAMES.get(api_key)
    if name is None:
        return False
    known = False
    for suffix in ("Request", "Response"):
        try:
            schema.codec(name + suffix, api_version)
            known = True
        except KeyError:
            pass
    return known


async def warm_codecs(api_key: int, api_version: int) -> None:
    """Compile the codecs of one API version in a worker thread (once; one compilation at a time)."""
    try:
        lock = _codec_lock.get()
    except LookupError:
        lock = trio.Lock()
        _codec_lock.set(lock)
    async with lock:
        if (api_key, api_version) not in _warm_codecs and await trio.to_thread.run_sync(
                _compile_codecs, api_key, api_version):
            _warm_codecs.add((api_key, api_version))


class ConnectionQuotas:
    """Kafka's ConnectionQuotas for max.connections and max.connections.per.ip(.overrides)."""

    def __init__(self, config) -> None:
        self.max_connections = int(config.get("max.connections"))
        self.per_ip = int(config.get("max.connections.per.ip"))
        self.overrides: dict[str, int] = {}
        for item in config.get("max.connections.per.ip.overrides") or []:
            host, _, count = item.rpartition(":")
            self.overrides[host.strip()] = int(count)
            try:  # overrides may name hosts; connections are counted by address
                self.overrides.setdefault(socket_gethostbyname(host.strip()), int(count))
            except OSError:
                pass
        self.total = 0
        self.by_ip: dict[str, int] = {}
        self._freed = trio.Event()

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.per_ip)

    async def wait_for_slot(self) -> None:
        """Block the acceptor while the broker holds max.connections connections."""
        while self.total >= self.max_connections:
            await self._freed.wait()

    def admit(self, ip: str) -> bool:
        """Count a new connection from `ip`; False (not counted) if the address is over its limit."""
        count = self.by_ip.get(ip, 0)
        if count >= self.limit_for(ip):
            return False
        self.by_ip[ip] = count + 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        count = self.by_ip.get(ip, 1) - 1
        if count <= 0:
            self.by_ip.pop(ip, None)
        else:
            self.by_ip[ip] = count
        self.total -= 1
        self._freed.set()
        self._freed = trio.Event()


def socket_gethostbyname(host: str) -> str:
    return stdlib_socket.gethostbyname(host)


class Connection:
    """One client connection: frames in, responses out, strictly in order."""

    def __init__(self, broker: Broker, stream: trio.abc.Stream, listener_name: str,
                 session: Session | None = None, peer: str | None = None) -> None:
        self.broker = broker
        self.stream = stream
        self.listener_name = listener_name
        self.session = session if session is not None else Session(listener_name, "PLAINTEXT")
        # sendfile needs the raw socket; a TLS stream must encrypt the bytes itself
        self.raw_socket = getattr(stream, "socket", None)
        if peer is None:
            try:
                addr = stream.socket.getpeername()  # type: ignore[attr-defined]
                peer = f"{addr[0]}:{addr[1]}"
            except (OSError, AttributeError):
                peer = "?"
        self.peer = peer
        self.session.peer = peer
        pool = _frame_pools.get(broker)
        if pool is None:
            pool = _frame_pools[broker] = FramePool()
        self.splitter = FrameSplitter(int(broker.config.get("socket.request.max.bytes")), pool)

    async def run(self) -> None:
        idle_s = int(self.broker.config.get("connections.max.idle.ms")) / 1000
        stream = self.stream
        metrics = getattr(self.broker, "metrics", None)
        if metrics is not None:
            metrics.connection_opened(self.listener_name)
        fd = self.raw_socket.fileno() if self.raw_socket is not None else -1
        try:
            while True:
                frame = self.splitter.next_frame()
                if frame is None:
                    # bytes already there are read at once; only an empty socket costs a wait (and
                    # the idle timer): a big request arriving in many reads passes through the
                    # scheduler once, not once per read (fairness: see _process)
                    received = self._receive_ready(fd) if fd >= 0 else None
                    if received is None:
                        with trio.move_on_after(idle_s) as idle:
                            received = await self._receive(stream)
                        if idle.cancelled_caught:
                            log.info("Closing idle connection from %s", self.peer)
                            return
                    if not received:
                        return
                    continue
                if not await self._authenticated_process(frame):
                    return
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

    async def _authenticated_process(self, frame: memoryview) -> bool:
        """Handle one frame; False when the connection must close (failed or unexpected SASL)."""
        auth = self.session.authenticator
        if auth is not None and not auth.complete:
            if auth.expects_raw_token:
                # SaslHandshake v0: the tokens that follow are bare size-prefixed SASL bytes
                reply = auth.evaluate_raw(bytes(frame))
                if reply is None:
                    return False
                await self.stream.send_all(len(reply).to_bytes(4, "big") + reply)
                return True
            header, _ = decode_request_header(frame)
            if header.api_key not in _PRE_AUTH_APIS:
                log.info("Closing connection from %s: unexpected Kafka request of type %s during SASL "
                         "handshake", self.peer, header.api_name)
                return False
        await self._process(frame)
        if self.session.close_after_response:
            await self._close_after_failed_authentication()
            return False
        return True

    async def _close_after_failed_authentication(self) -> None:
        """Let the client read the error before the connection goes, as Kafka does.

        Closing at once, with bytes of the client's still unread here, makes the kernel send a
        reset, and a reset makes the client's kernel drop the error answer it had not read yet
        (kafka-python then reports "socket disconnected" instead of the SASL error). So: end our
        side (FIN after the answer), discard what still comes, and close when the client has closed
        or after ``connection.failed.authentication.delay.ms`` (Kafka's delayed close)."""
        delay_s = int(self.broker.config.get("connection.failed.authentication.delay.ms")) / 1000
        with trio.move_on_after(delay_s):
            try:
                await self.stream.send_eof()
            except (AttributeError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            try:
                while await self.stream.receive_some(65536):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass

    def _receive_ready(self, fd: int) -> int | None:
        """Receive what the plaintext socket already holds, without waiting: the byte count (0 at
        end of stream), or None when nothing is there yet.

        A frame being filled gets the bytes straight into its own buffer, other reads go through
        a reused per-connection buffer: no new bytes object per read and, for produce requests of
        many KiB, no second copy of the records.
        """
        splitter = self.splitter
        try:
            view = splitter.recv_buffer(_RECEIVE_SIZE)
            if view is not None:
                with view:
                    n = os.readv(fd, (view,))
                splitter.commit(n)
                return n
            buf = getattr(_receive_buffers, "buf", None)
            if buf is None:
                buf = _receive_buffers.buf = bytearray(_SMALL_RECEIVE_SIZE)
            n = os.readv(fd, (buf,))
        except BlockingIOError:
            return None
        except OSError as exc:  # reset, ...: what receive_some reports as a broken stream
            raise ConnectionClosed() from exc
        with memoryview(buf) as mv, mv[:n] as data:
            splitter.feed(data)
        return n

    async def _receive(self, stream: trio.abc.Stream) -> int:
        """Wait for bytes and receive them into the frame splitter; 0 at end of stream."""
        sock = getattr(stream, "socket", None)
        if sock is None:  # TLS: the stream decrypts into buffers of its own
            data = await stream.receive_some(_RECEIVE_SIZE)
            self.splitter.feed(data)
            return len(data)
        while True:
            await trio.lowlevel.wait_readable(sock)
            n = self._receive_ready(sock.fileno())
            if n is not None:
                return n

    async def _process(self, frame: memoryview) -> None:
        ctx = RequestContext(broker=self.broker, peer=self.peer, listener_name=self.listener_name,
                             session=self.session)
        limiter = getattr(self.broker, "request_limiter", None)
        api_key = int.from_bytes(frame[0:2], "big", signed=True) if len(frame) >= 2 else -1
        version = int.from_bytes(frame[2:4], "big", signed=True) if len(frame) >= 4 else -1
        if (api_key, version) not in _warm_codecs and api_key in API_NAMES:
            await warm_codecs(api_key, version)
        if loop_monitor.ENABLED:  # slow steps are reported with the request they served
            loop_monitor.set_label(f"{API_NAMES.get(api_key, api_key)} v{version}")
        if limiter is None:
            await trio.lowlevel.checkpoint()  # what acquiring the limiter does: see run()
            response = await self._dispatch(ctx, frame, api_key)
        else:
            # queued.max.requests: requests being handled at once. Acquiring it is also the one
            # point per request where this task lets the others run even when its socket never
            # runs dry (a client pipelining requests): _receive_ready does not yield.
            async with limiter:
                response = await self._dispatch(ctx, frame, api_key)
        if response is not None:
            await self._send(response)
        throttle_ms = ctx.extra.get("throttle_ms")
        if throttle_ms:
            # a client over its quota (odradek.quota): like Kafka's muted channel, nothing more is
            # read from this connection until its throttle time has passed
            await trio.sleep(throttle_ms / 1000)
        if loop_monitor.ENABLED:
            loop_monitor.set_label(loop_monitor.IDLE_LABEL)

    async def _dispatch(self, ctx: RequestContext, frame: memoryview, api_key: int) -> list | None:
        """Dispatch; a request that may wait long (a long-poll Fetch) is
        abandoned when the peer closes meanwhile, so a client that asks for a huge max_wait_ms
        and hangs up does not pin a descriptor and a task until the wait ends."""
        sock = self.raw_socket
        if api_key not in _WAITING_APIS or sock is None:
            return await dispatch(ctx, frame)
        result: list | None = None
        peer_closed = False
        try:
            result, peer_closed = await self._dispatch_watching(ctx, frame, sock)
        except BaseExceptionGroup as group:
            # the nursery wraps what dispatch raised (a ProtocolError of a malformed Fetch must
            # still close the connection as "malformed request", not as an internal error)
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        if peer_closed:
            raise ConnectionClosed()
        return result

    async def _dispatch_watching(self, ctx: RequestContext, frame: memoryview, sock) -> tuple[list | None, bool]:
        result: list | None = None
        peer_closed = False
        async with trio.open_nursery() as nursery:

            async def watch_peer() -> None:
                nonlocal peer_closed
                await trio.lowlevel.wait_readable(sock)
                try:
                    # a Trio socket: recv is a coroutine (it returns at once after wait_readable)
                    peeked = await sock.recv(1, stdlib_socket.MSG_PEEK)
                except BlockingIOError:
                    return
                except OSError:
                    peeked = b""
                if not peeked:  # EOF: nobody will read the answer
                    peer_closed = True
                    nursery.cancel_scope.cancel()
                # else: the client pipelined its next request; leave it for the reader

            nursery.start_soon(watch_peer)
            result = await dispatch(ctx, frame)
            nursery.cancel_scope.cancel()
        return result, peer_closed

    async def _send(self, items: list) -> None:
        """Write a response: buffers joined into few sends, file slices with sendfile.

        On a plaintext socket the bytes go out straight away (non-blocking writes; the task waits
        only when the socket is full), which skips the scheduler passes of Trio's send_all: a woken
        long-poll fetch's header goes out without waiting for every other ready task. A response
        carrying at least THREAD_SEND_BYTES of segment data, or data not in the page cache, is
        sent by a sender process, so that the copies into the sockets of several consumers run
        on several cores and disk reads do not stop the loop. A process, not a thread: a thread
        needs the GIL between system calls, and when the OS preempted one holding it the loop
        waited 5-8 ms (perf sched, mixed workload). Where no process can run, a worker thread.
        """
        sock = self.raw_socket
        if sock is None:
            await self._send_to_stream(items)
            return
        slice_bytes = sum(item.size for item in items if isinstance(item, FileSlice))
        if slice_bytes >= THREAD_SEND_BYTES or (slice_bytes and not _in_page_cache(items)):
            if not await self._send_from_sender_process(sock.fileno(), items):
                await trio.to_thread.run_sync(_send_blocking, sock.fileno(), items, self.peer)
            return
        for _ in _send_steps(sock.fileno(), items, self.peer):
            await trio.lowlevel.wait_writable(sock)

    async def _send_from_sender_process(self, out_fd: int, items: list) -> bool:
        """Have a sender process write the response; False if none took it (the caller sends)."""
        pool = sender_pool.current_pool()
        if pool is None:
            return False
        answer = await pool.send(out_fd, _job_items(items))
        if answer is None:
            return False
        status, message = answer
        if status == sender_process.STATUS_SENT:
            return True
        if status == sender_process.STATUS_SHORT_FILE:
            log.error("A segment ended early while sending to %s; closing", self.peer)
        elif status == sender_process.STATUS_FAILED:
            log.error("Sending to %s failed: %s; closing", self.peer, message)
        elif status == sender_pool.STATUS_DIED:
            log.error("The sender process ended while sending to %s; closing", self.peer)
        raise ConnectionClosed()

    async def _send_to_stream(self, items: list) -> None:
        """TLS: buffers joined into few sends, file slices read and encrypted by the stream."""
        for item in _coalesced(items):
            if isinstance(item, FileSlice):
                await self._send_slice_copy(item)
            else:
                await self.stream.send_all(item)

    async def _send_slice_copy(self, item: FileSlice) -> None:
        """TLS: read the file region in chunks and send it through the encrypting stream."""
        offset, remaining = item.position, item.size
        fd = item.file.fileno()
        while remaining > 0:
            chunk = os.pread(fd, min(remaining, _TLS_READ_CHUNK), offset)
            if not chunk:
                log.error("Segment %s ended early while sending to %s; closing", item.file, self.peer)
                raise ConnectionClosed()
            await self.stream.send_all(chunk)
            offset += len(chunk)
            remaining -= len(chunk)


def _in_page_cache(items: list) -> bool:
    """Whether the segment data of a response is (as far as a cheap probe can tell) in the page
    cache, so that sendfile will copy it without waiting for the disk: a one-byte read with
    RWF_NOWAIT (which fails instead of going to the disk) every _PROBE_STRIDE of each file slice
    and at its last byte. Old data a consumer replays after a restart is not; sending it from the
    loop would stop every other connection for the disk reads. True where the probe is missing."""
    if not _RWF_NOWAIT:
        return True
    probe = (bytearray(1),)
    for item in items:
        if not isinstance(item, FileSlice) or item.size <= 0:
            continue
        fd = item.file.fileno()
        position, last = item.position, item.position + item.size - 1
        while True:
            try:
                os.preadv(fd, probe, position, _RWF_NOWAIT)
            except BlockingIOError:
                return False
            except OSError:
                return True  # the send reports what is wrong with the file
            if position >= last:
                break
            position = min(position + _PROBE_STRIDE, last)
    return True


def _coalesced(items: list) -> Iterator[bytes | FileSlice]:
    """A response's items with runs of small buffers joined (up to _COALESCE_LIMIT) into one."""
    pending: list = []
    pending_size = 0
    for item in items:
        if isinstance(item, FileSlice):
            if pending:
                yield b"".join(pending)
                pending, pending_size = [], 0
            yield item
            continue
        pending.append(item)
        pending_size += len(item)
        if pending_size >= _COALESCE_LIMIT:
            yield b"".join(pending)
            pending, pending_size = [], 0
    if pending:
        yield b"".join(pending)


def _job_items(items: list) -> list:
    """A response's items as `sender_process.send_steps` takes them: small buffers joined, file
    slices as (fd, position, size)."""
    return [(item.file.fileno(), item.position, item.size) if isinstance(item, FileSlice) else item
            for item in _coalesced(items)]


def _send_steps(out_fd: int, items: list, peer: str) -> Iterator[None]:
    """`sender_process.send_steps` for a response on the loop or in a worker thread: yields each
    time the socket is full, and the caller resumes it once the socket is writable again (the loop
    awaits, a thread polls). ConnectionClosed when the peer is gone or a segment ends before its
    slice does."""
    try:
        yield from sender_process.send_steps(out_fd, _job_items(items))
    except sender_process.PeerClosed:
        raise ConnectionClosed() from None
    except sender_process.ShortFile as exc:
        segment = next((item.file for item in items
                        if isinstance(item, FileSlice) and item.file.fileno() == exc.in_fd), None)
        # The file is shorter than the slice promised: the frame cannot be completed.
        log.error("Segment %s ended early while sending to %s; closing", segment, peer)
        raise ConnectionClosed() from None


def _send_blocking(out_fd: int, items: list, peer: str) -> None:
    """`_send_steps` in a worker thread: waits for the socket with poll(2), and gives up (Cancelled)
    within 100 ms of the connection's task being cancelled (broker shutdown)."""
    poller = None
    for _ in _send_steps(out_fd, items, peer):
        if poller is None:
            poller = select.poll()
            poller.register(out_fd, select.POLLOUT)
        while not poller.poll(100):
            trio.from_thread.check_cancelled()


async def serve_listeners(broker: Broker, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind every listener and serve connections until cancelled (and /metrics when configured)."""
    broker.metrics = start_metrics(broker)
    try:
        await _serve_listeners(broker, task_status)
    finally:
        if broker.metrics is not None:
            broker.metrics.stop_endpoint()


async def _serve_listeners(broker: Broker, task_status) -> None:
    from .security import ssl_context as ssl_contexts  # noqa: PLC0415 - ssl only when configured
    from .security.sasl import SaslServerAuthenticator  # noqa: PLC0415

    quotas = ConnectionQuotas(broker.config)
    broker.connection_quotas = quotas
    broker.request_limiter = trio.Semaphore(max(int(broker.config.get("queued.max.requests")), 1))
    async with trio.open_nursery() as nursery:
        bound: list[tuple[str, int]] = []
        # every listener is prepared (TLS contexts, SASL credentials) before any port is bound, so
        # once one port accepts connections, all of them do
        prepared: list[tuple[object, str, object]] = []
        for listener in broker.config.listeners:
            protocol = listener_security_protocol(broker.config, listener.name)
            if protocol is None:
                log.warning("Listener %s has no security protocol in listener.security.protocol.map; "
                            "it is not served", listener.name)
                continue
            tls = ssl_contexts.server_context(broker.config, listener.name) if protocol.endswith("SSL") else None
            sasl = protocol.startswith("SASL_")
            # configuration errors (no credentials, bad key files) fail the start, as in Kafka
            authenticator_factory = (
                SaslServerAuthenticator.factory(broker, listener.name) if sasl else None
            )

            async def handle(stream: trio.SocketStream, ip: str, peer: str, name: str = listener.name,
                             protocol: str = protocol, tls=tls, authenticator_factory=authenticator_factory) -> None:
                session = Session(name, protocol)
                try:
                    throttle_ms = connection_throttle_ms(broker, ip)
                    if throttle_ms:
                        # over the IP's connection_creation_rate: held unserved, then closed (Kafka's acceptor)
                        log.debug("Delaying closing of connection from %s for %d ms", ip, throttle_ms)
                        await trio.sleep(throttle_ms / 1000)
                        await trio.aclose_forcefully(stream)
                        return
                    if tls is not None:
                        stream = trio.SSLStream(stream, tls, server_side=True)
                        with trio.move_on_after(_TLS_HANDSHAKE_TIMEOUT_S) as timeout:
                            try:
                                await stream.do_handshake()
                            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                                log.info("Failed authentication with /%s (SSL handshake failed: %s)",
                                         ip, exc.__cause__ or exc)
                                await trio.aclose_forcefully(stream)
                                return
                        if timeout.cancelled_caught:
                            log.info("Closing connection from %s: SSL handshake timed out", peer)
                            await trio.aclose_forcefully(stream)
                            return
                        session.principal = ssl_contexts.peer_principal(stream)
                    if authenticator_factory is not None:
                        session.authenticator = authenticator_factory(session)
                    await Connection(broker, stream, name, session, peer).run()
                finally:
                    quotas.release(ip)

            prepared.append((listener, protocol, handle))
        for listener, protocol, handle in prepared:
            for lst in await trio.open_tcp_listeners(listener.port, host=listener.bind_host):
                sockname = lst.socket.getsockname()
                bound.append((sockname[0], sockname[1]))
                log.info("Listening on %s:%s (%s, %s)", sockname[0], sockname[1], listener.name, protocol)
                nursery.start_soon(_accept_loop, lst, handle, quotas, nursery)
        broker.bound_addresses = bound
        task_status.started(bound)


async def _accept_loop(listener: trio.SocketListener, handle, quotas: ConnectionQuotas,
                       nursery: trio.Nursery) -> None:
    """Accept connections for one listener socket, within max.connections and the per-IP limits."""
    async with listener:
        while True:
            await quotas.wait_for_slot()
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno in _ACCEPT_RESOURCE_ERRORS:
                    log.error("Cannot accept a connection (%s); retrying in 100 ms", os.strerror(exc.errno))
                    await trio.sleep(0.1)
                    continue
                raise
            try:
                addr = stream.socket.getpeername()
                ip, peer = addr[0], f"{addr[0]}:{addr[1]}"
            except OSError:
                await trio.aclose_forcefully(stream)
                continue
            if not quotas.admit(ip):
                log.info("Rejected connection from /%s, address already has the configured maximum of %d "
                         "connections.", ip, quotas.limit_for(ip))
                await trio.aclose_forcefully(stream)
                continue
            nursery.start_soon(handle, stream, ip, peer)


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
                # Everything loaded at start-up (modules, message definitions, logs) lives as long
                # as the broker: keep it out of the collector's full collections, whose pauses
                # grow with the number of tracked objects (Instagram's gc.freeze recipe).
                gc.freeze()
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
