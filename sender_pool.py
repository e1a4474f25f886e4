"""The broker's side of the sender processes (see ``sender_process``): started when a big or cold
fetch response is first sent, handed jobs over a socket, reaped when the Trio run ends."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import trio

from . import sender_process

log = logging.getLogger(__name__)

# At most this many sender processes (they start one at a time, when every running one is busy):
# one per core lets several consumers' copies run side by side, as Kafka's network threads do.
MAX_PROCESSES = min(os.cpu_count() or 1, 4)
_PROGRAM = str(Path(__file__).with_name("sender_process.py"))
_CONTROL_BUFFER = 4 << 20
STATUS_DIED = -1  # the sender process ended while the job was running


class SenderProcess:
    """One running sender process: its control socket and the jobs it has not answered yet."""

    def __init__(self, proc: subprocess.Popen, control: socket.socket) -> None:
        self.proc = proc
        self.control = control
        self.pending: dict[int, list] = {}  # job id -> [done event, status, message]
        self.alive = True
        self.ready = False  # it said so: from then on it may have written part of a job

    async def read_answers(self) -> None:
        """System task: wake each job's sender with its answer; when the process ends (or the run
        does), fail what is still pending and reap the process."""
        try:
            while True:
                await trio.lowlevel.wait_readable(self.control)
                while True:
                    try:
                        answer = self.control.recv(4096)
                    except BlockingIOError:
                        break
                    except OSError:
                        answer = b""
                    if len(answer) < sender_process.ANSWER.size:
                        if self.proc.poll() is None:
                            log.error("Sender process %d closed its socket", self.proc.pid)
                        else:
                            log.error("Sender process %d exited with %s", self.proc.pid, self.proc.returncode)
                        return
                    job_id, status = sender_process.ANSWER.unpack_from(answer)
                    if job_id == sender_process.READY_JOB:
                        self.ready = True
                        continue
                    slot = self.pending.pop(job_id, None)
                    if slot is not None:
                        slot[1], slot[2] = status, bytes(answer[sender_process.ANSWER.size:]).decode(errors="replace")
                        slot[0].set()
        except Exception:
            log.exception("Reading the sender process's answers failed")
        finally:
            self.stop()

    def stop(self) -> None:
        self.alive = False
        for slot in self.pending.values():
            # before it was ready it read no job: the callers can still send theirs themselves
            slot[1] = STATUS_DIED if self.ready else None
            slot[0].set()
        self.pending.clear()
        self.control.close()  # the process sees end of file and exits
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class SenderPool:
    """The sender processes of one Trio run."""

    def __init__(self) -> None:
        self.processes: list[SenderProcess] = []
        self.next_job = 0
        self.failed = False  # a process could not be started: the caller keeps its own way

    def _process(self) -> SenderProcess | None:
        if any(not p.alive and not p.ready for p in self.processes) and not self.failed:
            # it could not even start (no interpreter, no program file): do not try again and again
            log.error("A sender process ended before it was ready; responses are sent from threads")
            self.failed = True
        self.processes = [p for p in self.processes if p.alive]
        idle = [p for p in self.processes if not p.pending]
        if idle:
            return idle[0]
        if self.failed:
            return None
        if len(self.processes) < MAX_PROCESSES:
            try:
                process = _start()
            except OSError as exc:
                log.error("Cannot start a sender process (%s); responses are sent from threads", exc)
                self.failed = True
            else:
                self.processes.append(process)
                trio.lowlevel.spawn_system_task(process.read_answers, name="sender process answers")
                return process
        return min(self.processes, key=lambda p: len(p.pending), default=None)

    async def send(self, out_fd: int, items: list) -> tuple[int, str] | None:
        """Send ``items`` (buffers and (fd, position, size) slices) to socket ``out_fd`` from a
        sender process: its (status, message) once done, None if no process took the job."""
        process = self._process()
        if process is None:
            return None
        self.next_job = job_id = self.next_job % 0xFFFFFFFF + 1  # never READY_JOB (0)
        job = sender_process.encode_job(job_id, items)
        if job is None:
            return None
        message, fds = job
        slot: list = [trio.Event(), None, ""]
        process.pending[job_id] = slot
        try:
            socket.send_fds(process.control, [message], [out_fd, *fds])
        except OSError:  # full (not with a 4 MiB buffer and 64 KiB jobs) or the process is gone
            del process.pending[job_id]
            return None
        try:
            await slot[0].wait()
        except BaseException:
            if slot[1] is None and process.pending.pop(job_id, None) is not None:
                try:
                    process.control.send(sender_process.encode_abort(job_id))
                except OSError:
                    pass  # gone: its descriptors went with it
            raise
        if slot[1] is None:
            return None
        return slot[1], slot[2]


def _start() -> SenderProcess:
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        parent.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _CONTROL_BUFFER)
        # -I -S: the standard library only, no site-packages to scan (starts in ~15 ms)
        proc = subprocess.Popen([sys.executable, "-I", "-S", _PROGRAM, str(child.fileno())],
                                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
    except OSError:
        parent.close()
        raise
    finally:
        child.close()
    parent.setblocking(False)
    log.info("Started sender process %d", proc.pid)
    return SenderProcess(proc, parent)


_POOL: trio.lowlevel.RunVar = trio.lowlevel.RunVar("odradek_sender_pool")


def current_pool() -> SenderPool | None:
    """This run's pool; None where sender processes cannot work (no SCM_RIGHTS, no SEQPACKET)."""
    if MAX_PROCESSES <= 0 or not hasattr(socket, "send_fds") or not hasattr(socket, "SOCK_SEQPACKET"):
        return None
    try:
        return _POOL.get()
    except LookupError:
        pool = SenderPool()
        _POOL.set(pool)
        return pool
