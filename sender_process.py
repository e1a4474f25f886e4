"""The sender process: writes fetch responses' segment data into client sockets for the broker.

Kafka hands socket writes to its network threads. A Python thread would share the GIL with the
broker's event loop, and on a busy machine the loop then waits whenever the OS preempts that
thread while it holds the GIL (measured: 5-8 ms). A child process has its own interpreter, so the
copies into the sockets run on another core and the loop never waits for them.

The broker passes each job over a SOCK_SEQPACKET socket: the client socket and the segment files
as descriptors (SCM_RIGHTS), the response as small buffers and (file, position, size) slices. The
child sends them in order with ``send_steps`` (the broker's own send routine), serving many jobs
at once with poll(2), and answers each job with its status. It exits when the broker's end of the socket
closes. Standard library only: it is run by path, without the ``odradek`` package.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Iterator

# job: id, operation, item count; then per item a kind and its fields
JOB = struct.Struct(">IBH")
OP_SEND = 0
OP_ABORT = 1
BUFFER_ITEM = struct.Struct(">BI")  # kind 0, length; the bytes follow
SLICE_ITEM = struct.Struct(">BBQQ")  # kind 1, index of the file among the passed fds, position, size
KIND_BUFFER = 0
KIND_SLICE = 1
# answer: job id, status, then a message in UTF-8 for STATUS_FAILED; job 0 says the process is
# ready, before it reads any job
ANSWER = struct.Struct(">IB")
READY_JOB = 0
STATUS_SENT = 0
STATUS_CLOSED = 1  # the peer is gone (reset, broken pipe)
STATUS_SHORT_FILE = 2  # a segment ended before its slice did
STATUS_FAILED = 3  # anything else; the message says what
MAX_JOB_BYTES = 64 * 1024
MAX_FDS = 64


def encode_job(job_id: int, items: list) -> tuple[bytes, list[int]] | None:
    """A send job for ``items`` (bytes-like buffers and (fd, position, size) tuples): the message
    and the file descriptors to pass after the socket's; None if it does not fit in one message."""
    parts = [JOB.pack(job_id, OP_SEND, len(items))]
    fds: list[int] = []
    size = JOB.size
    for item in items:
        if isinstance(item, tuple):
            fd, position, length = item
            if fd not in fds:
                fds.append(fd)
            parts.append(SLICE_ITEM.pack(KIND_SLICE, fds.index(fd), position, length))
            size += SLICE_ITEM.size
        else:
            parts.append(BUFFER_ITEM.pack(KIND_BUFFER, len(item)))
            parts.append(item)
            size += BUFFER_ITEM.size + len(item)
        if size > MAX_JOB_BYTES or len(fds) >= MAX_FDS or len(items) > 0xFFFF:
            return None
    return b"".join(parts), fds


def encode_abort(job_id: int) -> bytes:
    return JOB.pack(job_id, OP_ABORT, 0)


class PeerClosed(Exception):
    """The client is gone (reset, broken pipe)."""


class ShortFile(Exception):
    """A segment ended before the slice that was to be sent from it."""

    def __init__(self, in_fd: int) -> None:
        super().__init__(in_fd)
        self.in_fd = in_fd


def send_steps(out_fd: int, items: list) -> Iterator[None]:
    """Write a response's items (bytes-like buffers and (fd, position, size) file slices) to the
    non-blocking socket ``out_fd`` in order; yields each time the socket is full, and the caller
    resumes it once the socket is writable again (the broker's loop awaits, its fallback thread
    and this process poll). Raises PeerClosed or ShortFile; other OSErrors as they are."""
    for item in items:
        if isinstance(item, tuple):
            in_fd, offset, remaining = item
            while remaining > 0:
                try:
                    sent = os.sendfile(out_fd, in_fd, offset, remaining)
                except BlockingIOError:
                    yield
                    continue
                except OSError as exc:
                    if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                        raise PeerClosed() from None
                    raise
                if sent == 0:  # the file is shorter than the slice promised
                    raise ShortFile(in_fd)
                offset += sent
                remaining -= sent
            continue
        view = memoryview(item)
        while view:
            try:
                sent = os.write(out_fd, view)
            except BlockingIOError:
                yield
                continue
            except OSError:  # reset, broken pipe, ...
                raise PeerClosed() from None
            view = view[sent:]


class _Job:
    """One response being sent: its socket, where its sending stands, the descriptors it owns."""

    __slots__ = ("job_id", "out_fd", "steps", "fds")

    def __init__(self, job_id: int, out_fd: int, items: list, fds: list[int]) -> None:
        self.job_id = job_id
        self.out_fd = out_fd
        self.steps = send_steps(out_fd, items)
        self.fds = fds

    def close(self) -> None:
        self.steps.close()
        for fd in self.fds:
            os.close(fd)


def _decode_job(job_id: int, count: int, body: memoryview, fds: list[int]) -> _Job:
    items: list = []
    pos = 0
    for _ in range(count):
        if body[pos] == KIND_BUFFER:
            _, length = BUFFER_ITEM.unpack_from(body, pos)
            pos += BUFFER_ITEM.size
            items.append(body[pos:pos + length])
            pos += length
        else:
            _, index, position, size = SLICE_ITEM.unpack_from(body, pos)
            pos += SLICE_ITEM.size
            items.append((fds[1 + index], position, size))
    return _Job(job_id, fds[0], items, fds)


def _progress(job: _Job) -> int | None:
    """Send what the socket takes; the job's status once it is over, None while it must wait."""
    try:
        next(job.steps)
    except StopIteration:
        return STATUS_SENT
    except PeerClosed:
        return STATUS_CLOSED
    except ShortFile:
        return STATUS_SHORT_FILE
    return None


def serve(control: socket.socket) -> None:
    """Run jobs until the broker closes its end of ``control``."""
    jobs: dict[int, _Job] = {}  # by client socket descriptor (a fresh descriptor for each job)
    by_id: dict[int, _Job] = {}
    poller = select.poll()
    poller.register(control, select.POLLIN)
    control_fd = control.fileno()

    def drop(job: _Job) -> None:
        del jobs[job.out_fd], by_id[job.job_id]
        try:
            poller.unregister(job.out_fd)
        except KeyError:
            pass
        job.close()

    def finish(job: _Job, status: int, message: str = "") -> None:
        drop(job)
        control.send(ANSWER.pack(job.job_id, status) + message.encode())

    def run(job: _Job) -> None:
        try:
            status = _progress(job)
        except OSError as exc:
            finish(job, STATUS_FAILED, f"{type(exc).__name__}: {exc}")
            return
        if status is None:
            poller.register(job.out_fd, select.POLLOUT)
        else:
            finish(job, status)

    while True:
        for fd, _ in poller.poll():
            if fd != control_fd:
                job = jobs.get(fd)
                if job is not None:
                    poller.unregister(fd)
                    run(job)
                continue
            message, fds, _, _ = socket.recv_fds(control, MAX_JOB_BYTES + JOB.size, MAX_FDS)
            if not message:
                return
            job_id, op, count = JOB.unpack_from(message)
            if op == OP_ABORT:
                job = by_id.get(job_id)
                if job is not None:
                    drop(job)
                continue
            job = _decode_job(job_id, count, memoryview(message)[JOB.size:], fds)
            jobs[job.out_fd] = by_id[job_id] = job
            run(job)


def main() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the broker decides when this ends
    # (its end of the socket closes when it stops or dies)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=int(sys.argv[1]))
    control.setblocking(True)
    control.send(ANSWER.pack(READY_JOB, STATUS_SENT))
    serve(control)


if __name__ == "__main__":
    main()
