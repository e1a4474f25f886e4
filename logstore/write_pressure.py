"""Whether the disk is pushing back on segment writes, so that appends should leave the event loop.

A buffered ``pwrite`` usually just copies into the page cache. It waits when ext4's writeback is
allocating blocks of the same file (the append blocks on the inode's ``i_data_sem``) or when the
kernel throttles writers because dirty pages piled up, for 10-100 ms at a time (perf sched, 1 GiB
produced at 300 MB/s onto a disk with dirty data). Both come in bursts: one write that had to wait
predicts the next ones, so for a while after it the produce path does its writes in a worker
thread (``PartitionLog.prepare_append``), and the event loop keeps serving everything else.
"""

from __future__ import annotations

import logging
import resource
import time

log = logging.getLogger(__name__)

# a write that took this long and slept (a voluntary context switch) was made to wait. Waits of
# 1-3 ms are common (journal commits) and do not last; handing writes to threads for them cost
# throughput and brought back GIL waits on the loop (measured: a benchmark run at a 1 ms threshold)
BLOCKED_WRITE_S = 0.005
# how long after such a write appends stay off the event loop
PRESSURE_WINDOW_S = 10.0

_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)
_pressure_until = 0.0


def write_started() -> tuple[float, int]:
    """What `write_finished` compares with: the clock and the thread's voluntary switches."""
    switches = resource.getrusage(_RUSAGE_THREAD).ru_nvcsw if _RUSAGE_THREAD is not None else 0
    return time.perf_counter(), switches


def write_finished(started: tuple[float, int]) -> None:
    """Note a write that had to wait: it took over BLOCKED_WRITE_S and the thread slept in it (not
    merely preempted; without per-thread usage, the time alone counts)."""
    global _pressure_until
    now = time.perf_counter()
    if now - started[0] <= BLOCKED_WRITE_S:
        return
    if _RUSAGE_THREAD is None or resource.getrusage(_RUSAGE_THREAD).ru_nvcsw != started[1]:
        if now >= _pressure_until:
            log.info("A segment write waited %.1f ms for the disk; produce writes go to worker threads "
                     "for the next %.0f s", (now - started[0]) * 1000, PRESSURE_WINDOW_S)
        _pressure_until = now + PRESSURE_WINDOW_S


def under_pressure() -> bool:
    """True while appends should be written from a worker thread."""
    return time.perf_counter() < _pressure_until


def reset() -> None:
    """Forget earlier pressure (tests)."""
    global _pressure_until
    _pressure_until = 0.0
