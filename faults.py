"""Faults injected into a running broker, for users' failover tests (``odradek.testing``).

A :class:`Faults` object belongs to each broker (``Broker.faults``). With nothing set it is
inert, and the hot paths pay one check of a falsy value:

* **network partition** -- ``partitioned`` holds broker ids this broker no longer replicates
  with: its replica fetcher sends no Fetch to a partitioned leader, and as a leader it drops
  (leaves unanswered, as a lost packet) replica fetches from a partitioned follower. Nothing
  else is cut: both brokers stay registered with the controller and serve clients, so the
  follower leaves the ISR after ``replica.lag.time.max.ms``, as in a split between brokers.
* **slow disk** -- every segment write and fsync of a log in this broker's log dirs first
  sleeps ``slow_disk_ms``; the sleep happens in the worker thread that writes (produced and
  replicated appends go to worker threads while any disk is slow). The few writes made on the
  event loop itself (coordinators' records) are not slowed: nothing may block the loop.

In-process brokers are changed directly (:meth:`Faults.update`). A broker in another process
follows a JSON file named by the Odradek-only config key ``odradek.faults.file``
(``{"version": 3, "partitioned": [2], "slow_disk_ms": 50}``): it polls the file's mtime every
100 ms and, after applying it, writes ``<file>.state`` with the version applied and the
counters, which is how ``odradek.testing`` knows a fault is in force and reads the counters.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: how often a broker looks at its faults file's mtime
POLL_INTERVAL_S = 0.1

#: log dir (str) -> the Faults of the broker owning it, for the dirs whose disk is slow. Empty
#: unless a slow disk is set anywhere in this process: the log store's one check.
SLOW_DISKS: dict[str, Faults] = {}


class Faults:
    """The faults in force on one broker, and counters showing they took effect."""

    def __init__(self, log_dirs: Iterable[str | Path] = ()) -> None:
        #: this broker's log dirs (the slow disk applies to them)
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        #: broker ids this broker does not replicate with
        self.partitioned: frozenset[int] = frozenset()
        self.slow_disk_ms = 0.0
        #: the version of the faults file last applied (0: none)
        self.version = 0
        #: replica fetches this broker (as leader) dropped, from partitioned followers
        self.dropped_fetches = 0
        #: fetcher rounds this broker (as follower) skipped, to partitioned leaders
        self.skipped_fetches = 0
        #: writes and fsyncs that waited for the slow disk
        self.disk_waits = 0
        self._lock = threading.Lock()

    def update(self, *, partitioned: Iterable[int] | None = None, slow_disk_ms: float | None = None) -> None:
        """Set the faults (None: keep that one as it is)."""
        if partitioned is not None:
            self.partitioned = frozenset(int(b) for b in partitioned)
        if slow_disk_ms is not None:
            self.slow_disk_ms = max(0.0, float(slow_disk_ms))
            for d in self.log_dirs:
                if self.slow_disk_ms:
                    SLOW_DISKS[d] = self
                elif SLOW_DISKS.get(d) is self:
                    del SLOW_DISKS[d]
        log.info("Injected faults now: partitioned from %s, slow disk %s ms", sorted(self.partitioned) or "none",
                 self.slow_disk_ms or "off")

    def clear(self) -> None:
        """No fault any more."""
        self.update(partitioned=(), slow_disk_ms=0)

    def counters(self) -> dict[str, int]:
        """What the faults did so far."""
        return {"dropped_fetches": self.dropped_fetches, "skipped_fetches": self.skipped_fetches,
                "disk_waits": self.disk_waits}

    def disk_wait(self) -> None:
        """Sleep for the slow disk (called in the worker thread that writes or fsyncs)."""
        delay = self.slow_disk_ms
        if delay:
            with self._lock:
                self.disk_waits += 1
            time.sleep(delay / 1000)

    # ------------------------------------------------------------------ the faults file

    def apply_file(self, path: Path) -> bool:
        """Read the faults file and apply it; False if it is missing or unreadable (kept as it is)."""
        try:
            spec = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        self.update(partitioned=spec.get("partitioned", ()), slow_disk_ms=spec.get("slow_disk_ms", 0))
        self.version = int(spec.get("version", 0))
        return True

    def write_state(self, path: Path) -> None:
        """``<faults file>.state``: the version applied and the counters (written atomically)."""
        state = state_path(path)
        tmp = state.with_name(state.name + ".tmp")
        tmp.write_text(json.dumps({"version": self.version, **self.counters()}))
        os.replace(tmp, state)

    async def follow_file(self, path: Path) -> None:
        """Apply the file whenever its mtime changes, and keep its state file current (a task;
        the file work runs in a worker thread)."""
        import trio  # noqa: PLC0415 - the object itself is used without Trio too

        marks: list[Any] = [None, None]  # the mtime applied, the state written
        while True:
            await trio.to_thread.run_sync(self._poll_file, path, marks)
            await trio.sleep(POLL_INTERVAL_S)

    def _poll_file(self, path: Path, marks: list[Any]) -> None:
        try:
            mtime: Any = path.stat().st_mtime_ns
        except OSError:
            mtime = None
        if mtime is not None and mtime != marks[0] and self.apply_file(path):
            marks[0] = mtime
        now = (self.version, *self.counters().values())
        if now != marks[1]:
            try:
                self.write_state(path)
                marks[1] = now
            except OSError:
                log.warning("Cannot write the state of the faults file %s", path)


def state_path(path: Path) -> Path:
    """Where a broker following the faults file `path` reports what it applied."""
    return path.with_name(path.name + ".state")


def disk_wait(log_dir: Path) -> None:
    """The slow-disk wait for a log in `log_dir`, if its broker has one (only called while
    SLOW_DISKS is not empty)."""
    faults = SLOW_DISKS.get(os.path.abspath(log_dir))
    if faults is not None and not _on_event_loop():
        faults.disk_wait()


def _on_event_loop() -> bool:
    """True in a thread running Trio: the few writes made there (coordinator records) are not
    slowed, so that a slow disk never blocks the loop."""
    trio = sys.modules.get("trio")
    return trio is not None and trio.lowlevel.in_trio_run()
