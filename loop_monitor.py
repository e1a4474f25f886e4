"""Event-loop stall monitor: how long each Trio task step holds the (only) event loop.

A Python broker serves every connection from one thread, so a task step that runs for 20 ms
delays every other connection by 20 ms. This module measures that directly with a Trio
instrument (``before_task_step`` / ``after_task_step``) and, as a second view, the lateness of a
watchdog task that asks to wake up every 10 ms (what a ready task waits for the loop).

It is off unless the environment variable ``ODRADEK_LOOP_MONITOR`` names a file. Then
``start_from_env`` installs the instrument and a reporter task that appends one JSON line per
second to that file::

    {"t": 1763798400.1, "steps": 51234, "max_ms": 1.9, "max_task": "...", "max_cpu_ms": 1.7,
     "max_cpu_task": "...", "lag_max_ms": 2.3, "hist": {"0": 50100, "1": 1000, ...}}

``max_cpu_ms`` is the longest step in thread CPU time: on a shared machine the OS can
deschedule the broker mid-step, which lengthens the wall-clock figure without the code being
slow. ``max_held_ms`` is the longest time a step kept the loop from serving anything for a reason
of the broker's own: a step during which the thread never waited (no voluntary context switch:
no disk read, lock or GIL wait, sleep) counts its CPU time, the rest of its wall-clock time being
the OS or the hypervisor running something else; a step that waited counts its wall-clock time
less the time the thread was ready to run again but queued for a CPU (the kernel's schedstat
``run_delay``: after a wait ends, the OS may run other processes first, which is the machine
being busy, not the broker blocking). ``hist`` counts task steps by (wall-clock) duration in buckets of :data:`BUCKET_MS` (key = bucket index,
the last bucket also holds everything longer). ``slow`` lists (up to :data:`MAX_SLOW_PER_REPORT` a
second) the steps that took more than :data:`SLOW_STEP_MS` of CPU, each with its task and, for a
connection task, the request it was handling (``label``, set by the server with :func:`set_label`),
and ``gc_slow`` the collections longer than that. ``benchmarks/runner.py`` merges the lines of a
workload's time window into a max and a p99 (:func:`summarize`).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import trio

ENV_VAR = "ODRADEK_LOOP_MONITOR"
#: Width of one histogram bucket (ms); fine enough for a 5 ms stall budget.
BUCKET_MS = 0.1
#: Buckets 0..MAX_BUCKET-1 are exact, MAX_BUCKET collects everything >= MAX_BUCKET * BUCKET_MS.
MAX_BUCKET = 1000
_WATCHDOG_PERIOD_S = 0.01
_REPORT_PERIOD_S = 1.0
#: Steps (CPU time) and GC pauses longer than this are listed one by one (issue #12's budget).
SLOW_STEP_MS = 5.0
MAX_SLOW_PER_REPORT = 50

#: True while a monitor is installed; the server labels its connection tasks only then.
ENABLED = False
# What each labelled task is doing (e.g. "Fetch v13"); read when one of its steps is slow.
_labels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


#: The label of a connection waiting for its next request.
IDLE_LABEL = "receive"
# What the running step is reported as: the task's label when the step started, replaced by the
# first request label set during the step (a step that handles a whole request and then goes
# back to IDLE_LABEL counts as that request).
_step_label = [""]


def set_label(label: str) -> None:
    """Name what the current task is doing (shown with its slow steps). Call only if ENABLED."""
    _labels[trio.lowlevel.current_task()] = label
    if label != IDLE_LABEL:
        _step_label[0] = label


def _voluntary_switches() -> int:
    """Times this thread gave up the CPU to wait for something (getrusage ru_nvcsw)."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


class RunDelay:
    """Nanoseconds this thread has spent runnable but waiting for a CPU (schedstat's run_delay).

    Reads ``/proc/self/task/<tid>/schedstat`` through a descriptor opened once (about 1 us a
    read); 0 always where the kernel does not keep it (no CONFIG_SCHED_INFO, not Linux)."""

    def __init__(self) -> None:
        self._fd = -1
        try:
            self._fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
            self()
        except (OSError, ValueError, IndexError):
            self.close()

    def __call__(self) -> int:
        if self._fd < 0:
            return 0
        return int(os.pread(self._fd, 64, 0).split()[1])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class StepTimer(trio.abc.Instrument):
    """Times every task step; counts (duration -> bucket) and remembers the longest one."""

    def __init__(self) -> None:
        # Installed from inside a running task: its first after_task_step has no before.
        self._started = time.perf_counter()
        self._cpu_started = time.thread_time()
        self._waits_started = _voluntary_switches()
        self._run_delay = RunDelay()
        self._queued_started = self._run_delay()
        self.reset()

    def reset(self) -> None:
        self.hist: dict[int, int] = {}
        self.steps = 0
        self.max_s = 0.0
        self.max_task = ""
        self.max_cpu_s = 0.0
        self.max_cpu_task = ""
        self.max_held_s = 0.0
        self.max_held_task = ""
        self.slow: list[dict] = []

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        _step_label[0] = _labels.get(task, "")
        self._waits_started = _voluntary_switches()
        self._queued_started = self._run_delay()
        self._cpu_started = time.thread_time()
        self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        elapsed = time.perf_counter() - self._started
        # CPU time of the step too: on a busy machine the OS may deschedule the broker in the
        # middle of a step, which makes the wall-clock step long without the code being slow.
        cpu = time.thread_time() - self._cpu_started
        waits = _voluntary_switches() - self._waits_started
        if waits:
            queued = (self._run_delay() - self._queued_started) / 1e9
            held = max(cpu, elapsed - queued)
        else:
            queued = 0.0
            held = cpu
        if cpu > self.max_cpu_s:
            self.max_cpu_s = cpu
            self.max_cpu_task = task.name
        if held > self.max_held_s:
            self.max_held_s = held
            self.max_held_task = task.name
        if max(cpu, held) * 1000 > SLOW_STEP_MS and len(self.slow) < MAX_SLOW_PER_REPORT:
            self.slow.append({"task": task.name, "label": _step_label[0], "ms": round(elapsed * 1000, 3),
                              "cpu_ms": round(cpu * 1000, 3), "held_ms": round(held * 1000, 3), "waits": waits,
                              "queued_ms": round(queued * 1000, 3)})
        bucket = int(elapsed * (1000 / BUCKET_MS))
        if bucket > MAX_BUCKET:
            bucket = MAX_BUCKET
        hist = self.hist
        hist[bucket] = hist.get(bucket, 0) + 1
        self.steps += 1
        if elapsed > self.max_s:
            self.max_s = elapsed
            self.max_task = task.name


class GcTimer:
    """Times the cyclic garbage collector's pauses (gc.callbacks): they stop the loop too."""

    def __init__(self) -> None:
        self._started = 0.0
        self._cpu_started = 0.0
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.max_s = 0.0
        self.max_generation = -1
        self.total_s = 0.0
        self.max_cpu_s = 0.0
        self.slow: list[dict] = []

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._cpu_started = time.thread_time()
            self._started = time.perf_counter()
            return
        elapsed = time.perf_counter() - self._started
        cpu = time.thread_time() - self._cpu_started  # wall minus what the OS gave to others
        if cpu > self.max_cpu_s:
            self.max_cpu_s = cpu
        self.count += 1
        self.total_s += elapsed
        if elapsed > self.max_s:
            self.max_s = elapsed
            self.max_generation = info.get("generation", -1)
        if elapsed * 1000 > SLOW_STEP_MS and len(self.slow) < MAX_SLOW_PER_REPORT:
            self.slow.append({"ms": round(elapsed * 1000, 3), "cpu_ms": round(cpu * 1000, 3),
                              "generation": info.get("generation", -1),
                              "collected": info.get("collected", 0)})


async def _watchdog(state: dict[str, float]) -> None:
    """Sleep 10 ms at a time (cheap: ~100 wake-ups a second) and record how much later than asked the loop woke us."""
    while True:
        asked = time.perf_counter()
        await trio.sleep(_WATCHDOG_PERIOD_S)
        lag = time.perf_counter() - asked - _WATCHDOG_PERIOD_S
        if lag > state["lag_max"]:
            state["lag_max"] = lag


async def _reporter(timer: StepTimer, state: dict[str, float], path: Path, gc_timer: GcTimer) -> None:
    # Appending a short line once a second is cheap enough to do on the loop itself.
    with path.open("a", buffering=1) as out:
        while True:
            await trio.sleep(_REPORT_PERIOD_S)
            line = {
                "t": time.time(),
                "steps": timer.steps,
                "max_ms": round(timer.max_s * 1000, 3),
                "max_task": timer.max_task,
                "max_cpu_ms": round(timer.max_cpu_s * 1000, 3),
                "max_cpu_task": timer.max_cpu_task,
                "max_held_ms": round(timer.max_held_s * 1000, 3),
                "max_held_task": timer.max_held_task,
                "lag_max_ms": round(state["lag_max"] * 1000, 3),
                "gc_count": gc_timer.count,
                "gc_max_ms": round(gc_timer.max_s * 1000, 3),
                "gc_max_cpu_ms": round(gc_timer.max_cpu_s * 1000, 3),
                "gc_max_generation": gc_timer.max_generation,
                "gc_total_ms": round(gc_timer.total_s * 1000, 3),
                "hist": {str(k): v for k, v in sorted(timer.hist.items())},
                "slow": timer.slow,
                "gc_slow": gc_timer.slow,
            }
            timer.reset()
            gc_timer.reset()
            state["lag_max"] = 0.0
            out.write(json.dumps(line) + "\n")


def start_from_env(nursery: trio.Nursery) -> bool:
    """Start monitoring in `nursery` when ODRADEK_LOOP_MONITOR is set; True if started."""
    global ENABLED
    target = os.environ.get(ENV_VAR)
    if not target:
        return False
    ENABLED = True
    timer = StepTimer()
    state = {"lag_max": 0.0}
    gc_timer = GcTimer()
    trio.lowlevel.add_instrument(timer)
    gc.callbacks.append(gc_timer)
    nursery.start_soon(_watchdog, state, name="loop_monitor.watchdog")
    nursery.start_soon(_reporter, timer, state, Path(target), gc_timer, name="loop_monitor.reporter")
    return True


def summarize(lines: Iterable[dict], slow_limit: int | None = 50) -> dict[str, Any]:
    """Merge report lines: total steps, max step (ms) and its task, p99/p999 step (ms), max lag,
    GC pauses; ``slow``/``gc_slow``: the longest of the listed slow steps and collections (at most
    `slow_limit` each, None: all), ``slow_count``: how many steps were listed as slow."""
    hist: dict[int, int] = {}
    steps = 0
    max_ms = 0.0
    max_task = ""
    lag = 0.0
    max_cpu_ms = 0.0
    max_cpu_task = ""
    max_held_ms = 0.0
    max_held_task = ""
    gc_max = 0.0
    gc_max_cpu = 0.0
    gc_count = 0
    slow: list[dict] = []
    gc_slow: list[dict] = []
    for line in lines:
        slow.extend(line.get("slow", ()))
        gc_slow.extend(line.get("gc_slow", ()))
        gc_max = max(gc_max, line.get("gc_max_ms", 0.0))
        gc_max_cpu = max(gc_max_cpu, line.get("gc_max_cpu_ms", 0.0))
        gc_count += line.get("gc_count", 0)
        steps += line["steps"]
        if line["max_ms"] > max_ms:
            max_ms, max_task = line["max_ms"], line["max_task"]
        if line.get("max_cpu_ms", 0.0) > max_cpu_ms:
            max_cpu_ms, max_cpu_task = line["max_cpu_ms"], line["max_cpu_task"]
        # lines written before max_held_ms existed: the wall-clock maximum is the safe stand-in
        held = line.get("max_held_ms", line["max_ms"])
        if held > max_held_ms:
            max_held_ms, max_held_task = held, line.get("max_held_task", line["max_task"])
        lag = max(lag, line.get("lag_max_ms", 0.0))
        for k, v in line["hist"].items():
            hist[int(k)] = hist.get(int(k), 0) + v

    def pct(q: float) -> float:
        if not steps:
            return 0.0
        rank = q * steps
        seen = 0
        for bucket in sorted(hist):
            seen += hist[bucket]
            if seen >= rank:
                return round((bucket + 1) * BUCKET_MS, 3)  # upper edge of the bucket
        return max_ms

    return {"steps": steps, "max_ms": max_ms, "max_task": max_task, "p99_ms": pct(0.99),
            "p999_ms": pct(0.999), "lag_max_ms": lag, "max_cpu_ms": max_cpu_ms, "max_cpu_task": max_cpu_task,
            "max_held_ms": max_held_ms, "max_held_task": max_held_task,
            "gc_max_ms": gc_max, "gc_max_cpu_ms": gc_max_cpu, "gc_count": gc_count,
            "slow_count": len(slow),
            "slow": sorted(slow, key=lambda e: -e["cpu_ms"])[:slow_limit],
            "gc_slow": sorted(gc_slow, key=lambda e: -e["ms"])[:slow_limit]}


def read_window(path: Path, start: float, end: float) -> list[dict]:
    """Report lines whose one-second window overlaps [start, end] (wall-clock seconds)."""
    if not path.is_file():
        return []
    out = []
    for raw in path.read_text().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if start <= line["t"] and line["t"] - _REPORT_PERIOD_S <= end:
            out.append(line)
    return out
