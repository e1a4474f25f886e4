"""The log cleaner's worker process: both passes of a cleaning (offset map, rewrite into
`.cleaned` files) run in a separate Python process, so the broker's event loop never waits for
the GIL behind them.

Why a process and not native code: the cleaner's hot loops are already batch-level
(`cleaner_scan`), and the remaining cost of running them beside the loop is the GIL, not the
arithmetic: a thread gives the loop the GIL only every switch interval (5 ms), and C calls such
as dict resizes or codec calls hold it longer. A process removes that contention whatever the
Python code does, needs no compiler on the installing machine, and runs the very code the
in-thread cleaner runs, so the files written are the same by construction (the tests compare
them anyway).

The split: the worker runs `Cleaner.clean` on a read-only view of the log (`_LogView`), reading
the segment files through its own descriptors and writing `<base>.log.cleaned` and its indexes
itself. The plan it gets carries the segments' facts (sizes, next offsets, index sizes) and the
aborted transactions of every range the cleaning reads; what needs the broker's live state goes
back to the broker's cleaner thread as a request on the same connection: the active producers'
last batches (for the first group; each swap's answer carries them for the next) and the swap of
each cleaned segment (which runs on the event loop through `LogManager.run_exclusive`, as
in-thread cleaning does). So a cleaning costs one round trip per cleaned group. The broker's side
stops a cleaning by killing the worker (a log closed or deleted meanwhile, a shutdown); the
`.cleaned` files it leaves are removed as after a crash. The worker exits when its connection
closes or when the broker process is gone (a watchdog thread sees the parent change).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cleaner import Cleaner, CleanerConfig, CleanerStats, CleaningAbortedError, LastRecord, segments_between

if TYPE_CHECKING:
    from .config import LogConfig
    from .partition_log import PartitionLog
    from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

#: how often an idle wait checks whether the cleaning must stop (the log closed, a shutdown)
_POLL_S = 0.05
#: how long a starting worker may take to import what it needs
_START_TIMEOUT_S = 60
#: how often the worker checks that the broker process is still its parent
_WATCHDOG_S = 0.05


class CleanerWorkerError(RuntimeError):
    """The worker failed a cleaning (its traceback is the message) or died."""


# ---------------------------------------------------------------------------------------------
# what the worker is told about a log


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment below the first uncleanable offset, as the worker needs it."""

    base_offset: int
    log_path: str
    size: int
    #: position of the batch holding the first dirty offset (0 when the segment starts after it)
    dirty_position: int
    offset_index_bytes: int
    time_index_bytes: int
    #: offset after the segment's last batch (`LogSegment.read_next_offset`)
    next_offset: int


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """One cleaning: the log's dir, config and segments, the dirty section and the clock."""

    dir: str
    name: str
    config: LogConfig
    segments: tuple[SegmentInfo, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    batch_paths: bool
    index_per_batch: bool
    #: `PartitionLog.aborted_transactions` of every range the cleaning asks for: the dirty
    #: section, and each segment to the next one's base and to its own next offset
    aborted: dict[tuple[int, int], list[AbortedTxn]]


def plan_of(cleaner: Cleaner, plog: PartitionLog, first_dirty: int, uncleanable: int, now_ms: int) -> CleaningPlan:
    """The plan of cleaning `plog`'s dirty section [first_dirty, uncleanable) (broker side). It
    carries what the cleaning would otherwise ask for segment by segment, so a cleaning costs one
    round trip per cleaned group (its swap) and one for the first group's producer state: on a busy
    machine each round trip waits for the broker's thread to be scheduled."""
    segs = [s for s in segments_between(plog, 0, uncleanable) if s.base_offset < uncleanable]
    infos = tuple(SegmentInfo(s.base_offset, str(s.log_path), s.size,
                              s.offset_index.lookup(first_dirty)[1] if s.base_offset <= first_dirty else 0,
                              s.offset_index.size_in_bytes(), s.time_index.size_in_bytes(), s.read_next_offset())
                  for s in segs)
    aborted = {(first_dirty, uncleanable): plog.aborted_transactions(first_dirty, uncleanable)}
    for i, info in enumerate(infos):
        for upper in ((infos[i + 1].base_offset,) if i + 1 < len(infos) else ()) + (info.next_offset,):
            aborted[(info.base_offset, upper)] = plog.aborted_transactions(info.base_offset, upper)
    return CleaningPlan(str(plog.dir), plog.name, plog.config, infos, first_dirty, uncleanable, now_ms,
                        cleaner.batch_paths, cleaner.index_per_batch, aborted)


# ---------------------------------------------------------------------------------------------
# the worker's side


class _IndexFacts:
    """The two things the cleaner asks of a segment's indexes: a lookup of the first dirty
    offset (precomputed) and the file size (for grouping)."""

    __slots__ = ("_base", "_bytes", "_dirty_position")

    def __init__(self, base: int, dirty_position: int, size_bytes: int) -> None:
        self._base = base
        self._dirty_position = dirty_position
        self._bytes = size_bytes

    def lookup(self, _offset: int) -> tuple[int, int]:
        # only ever asked for the first dirty offset, which the plan's position is for
        return self._base, self._dirty_position

    def size_in_bytes(self) -> int:
        return self._bytes


class _SegmentView:
    """A source segment as `Cleaner` reads it, through the worker's own descriptor (a swap may
    rename the file; the descriptor stays valid)."""

    def __init__(self, info: SegmentInfo) -> None:
        self.base_offset = info.base_offset
        self.log_path = Path(info.log_path)
        self.size = info.size
        self._fd = os.open(info.log_path, os.O_RDONLY)
        self.offset_index = _IndexFacts(info.base_offset, info.dirty_position, info.offset_index_bytes)
        self.time_index = _IndexFacts(info.base_offset, 0, info.time_index_bytes)
        self._next_offset = info.next_offset

    def fileno(self) -> int:
        return self._fd

    def read_next_offset(self) -> int:
        return self._next_offset

    def close(self) -> None:
        os.close(self._fd)


class _LogView:
    """The log as `Cleaner.clean` uses it, in the worker."""

    def __init__(self, plan: CleaningPlan, rpc: _Rpc) -> None:
        self.dir = Path(plan.dir)
        self.name = plan.name
        self.config = plan.config
        self.closed = False
        self._rpc = rpc
        self._aborted = plan.aborted
        self.segments: list[_SegmentView] = []
        for info in plan.segments:
            self.segments.append(_SegmentView(info))

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        found = self._aborted.get((fetch_offset, upper_bound_offset))
        if found is None:  # a range the plan did not foresee: ask
            return self._rpc.call("aborted", fetch_offset, upper_bound_offset)
        return found

    def close(self) -> None:
        for s in self.segments:
            s.close()


@dataclass(slots=True)
class _Dirty:
    """The part of `LogToClean` that `Cleaner.clean` reads."""

    log: _LogView
    first_dirty_offset: int
    first_uncleanable_offset: int


class _Rpc:
    """Requests from the worker to the broker's cleaner thread, answered in order."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def call(self, kind: str, *args: Any) -> Any:
        self.conn.send((kind, *args))
        status, value = self.conn.recv()
        if status != "ok":
            raise CleaningAbortedError(value)
        return value


class _RemoteExclusive:
    """`Cleaner.run_exclusive` in the worker: the two exclusive steps of a cleaning, done by the
    broker. The active producers' last batches are asked for at the first group, and come with
    each swap's answer for the next one (taken on the broker right after the swap, which is where
    the next group starts)."""

    def __init__(self, rpc: _Rpc) -> None:
        self.rpc = rpc
        self.last_records: dict[int, LastRecord] | None = None

    def __call__(self, fn, plog, *args):  # noqa: ANN001, ANN204
        name = fn.__name__
        if name == "_last_records_of_active_producers":
            cached, self.last_records = self.last_records, None
            return cached if cached is not None else self.rpc.call("last_records")
        if name == "_replace_segments":
            cleaned, group = args
            # the files are complete (trimmed, flushed); the broker opens them for the swap
            cleaned.close_handlers()
            self.last_records = self.rpc.call("swap", cleaned.base_offset, [s.base_offset for s in group])
            return None
        raise AssertionError(f"no remote form of {name}")


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(_WATCHDOG_S)
        if os.getppid() != parent:
            os._exit(1)  # the broker is gone: stop writing into its log dirs at once


def worker_main(fd: int, parent: int) -> None:
    """The worker process: clean what the broker sends until the connection closes."""
    if os.getppid() != parent:
        return
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="parent-watchdog").start()
    conn = Connection(fd)
    rpc = _Rpc(conn)
    cleaner: Cleaner | None = None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "config":
            # the offset map's table needs numpy: load it now, not inside the first cleaning
            import numpy  # noqa: F401, PLC0415

            cleaner = Cleaner(msg[1])
            remote = _RemoteExclusive(rpc)
            cleaner.run_exclusive = remote
            cleaner.is_aborted = lambda _plog: False  # the broker kills the worker instead
            conn.send(("ready", os.getpid()))
            continue
        plan: CleaningPlan = msg[1]
        assert cleaner is not None
        view = None
        try:
            cleaner.batch_paths = plan.batch_paths
            cleaner.index_per_batch = plan.index_per_batch
            remote.last_records = None
            view = _LogView(plan, rpc)
            end, stats = cleaner.clean(_Dirty(view, plan.first_dirty_offset, plan.first_uncleanable_offset),
                                       plan.now_ms)  # type: ignore[arg-type]
            reply: tuple = ("done", end, stats, os.getpid())
        except Exception:  # noqa: BLE001 - reported to the broker, which decides
            reply = ("error", traceback.format_exc())
        finally:
            if view is not None:
                view.close()
        conn.send(reply)


# ---------------------------------------------------------------------------------------------
# the broker's side


class CleanerWorker:
    """Runs `Cleaner.clean` in a worker process on behalf of a `LogCleaner` (one worker per
    cleaner thread). Started on first use, restarted after it was killed. `clean` blocks: call it
    from the cleaner's thread, as `Cleaner.clean`."""

    def __init__(self, cleaner: Cleaner, config: CleanerConfig) -> None:
        self.cleaner = cleaner
        self.config = config
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        #: the pid of the process that did the last cleaning
        self.last_pid: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        """Start the worker now rather than at the first cleaning (benchmarks time cleanings only)."""
        self._start()

    def _start(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            return self._conn
        self.close()
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "odradek.logstore.cleaner_worker", str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send(("config", self.config))
        # wait until it has imported what it needs, so a cleaning's time is the cleaning's
        try:
            ready = self._conn.poll(_START_TIMEOUT_S) and self._conn.recv()[0] == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.close()
            raise CleanerWorkerError(f"the cleaner worker did not start within {_START_TIMEOUT_S} s")
        return self._conn

    def close(self) -> None:
        """Stop the worker (it finishes nothing: `.cleaned` files it leaves are a crash's)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def clean(self, plog: PartitionLog, first_dirty: int, uncleanable: int, now_ms: int,
              is_aborted) -> tuple[int, CleanerStats]:  # noqa: ANN001
        """`Cleaner.clean` of that dirty section, in the worker; stopped (CleaningAbortedError)
        as soon as `is_aborted(plog)` says so."""
        conn = self._start()
        conn.send(("clean", plan_of(self.cleaner, plog, first_dirty, uncleanable, now_ms)))
        try:
            while True:
                while not conn.poll(_POLL_S):
                    if is_aborted(plog):
                        raise CleaningAbortedError(f"cleaning of {plog.name} aborted")
                msg = conn.recv()
                kind = msg[0]
                if kind == "done":
                    _done, end, stats, self.last_pid = msg
                    return end, stats
                if kind == "error":
                    raise CleanerWorkerError(f"the cleaner worker failed on {plog.name}:\n{msg[1]}")
                conn.send(("ok", self._answer(plog, kind, msg[1:])))
        except BaseException:
            # whatever stopped us (abort, an error of ours, a dead worker), the worker may be
            # mid-request: start afresh next time
            self.close()
            raise

    def _answer(self, plog: PartitionLog, kind: str, args: tuple) -> Any:
        cleaner = self.cleaner
        if kind == "last_records":
            return cleaner.run_exclusive(_last_records, plog)
        if kind == "aborted":
            return plog.aborted_transactions(*args)
        if kind == "next_offset":
            (base,) = args
            return _segment_at(plog, base).read_next_offset()
        if kind == "swap":
            from .files import CLEANED_SUFFIX  # noqa: PLC0415
            from .segment import LogSegment  # noqa: PLC0415
            base, old_bases = args
            wanted = set(old_bases)
            old = [s for s in plog.segments if s.base_offset in wanted]
            cleaned = LogSegment(plog.dir, base, plog.config, file_suffix=CLEANED_SUFFIX, create=False)
            try:
                # the swap, then (in the same turn of the event loop) the producers' state the
                # next group starts from
                return cleaner.run_exclusive(_swap_then_last_records, cleaner, plog, cleaned, old)
            except BaseException:
                if not cleaned.closed and cleaned.suffix == CLEANED_SUFFIX:
                    cleaned.close_handlers()
                raise
        raise CleanerWorkerError(f"unknown request {kind!r} from the cleaner worker")


def _last_records(plog: PartitionLog) -> dict[int, LastRecord]:
    return Cleaner._last_records_of_active_producers(plog)


def _swap_then_last_records(cleaner: Cleaner, plog: PartitionLog, cleaned, old) -> dict[int, LastRecord]:  # noqa: ANN001
    cleaner._replace_segments(plog, cleaned, old)
    return Cleaner._last_records_of_active_producers(plog)


def _segment_at(plog: PartitionLog, base: int):  # noqa: ANN202
    for s in plog.segments:
        if s.base_offset == base:
            return s
    raise CleaningAbortedError(f"segment {base} of {plog.name} is gone")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s cleaner-worker %(message)s")
    worker_main(int(sys.argv[1]), int(sys.argv[2]))
