"""The time the event loop spent running each task: what ``request_percentage`` counts.

Kafka's request quota counts the time its network and request-handler threads spent on a client's
requests, not the time a request waited (a long poll, a group join waiting for the rebalance).
Odradek handles a connection's requests one after another in the connection's task, so the time
the loop spent running that task between two requests is what its last request cost: reading and
decoding it (Kafka's network-thread time) and handling it. A Trio instrument adds up each task's
steps; it is installed only while a request_percentage quota is set.
"""

from __future__ import annotations

import time

import trio


class TaskTimes(trio.abc.Instrument):
    """Seconds each task has run, and how much of it a request already paid for."""

    def __init__(self) -> None:
        self.totals: dict[trio.lowlevel.Task, float] = {}
        self.paid: dict[trio.lowlevel.Task, float] = {}
        self._step_started = time.perf_counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._step_started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.totals[task] = self.totals.get(task, 0.0) + time.perf_counter() - self._step_started

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.totals.pop(task, None)
        self.paid.pop(task, None)

    def charge(self) -> float:
        """The run time of the current task since its last charge (the step in progress included)."""
        task = trio.lowlevel.current_task()
        total = self.totals.get(task, 0.0) + time.perf_counter() - self._step_started
        spent = total - self.paid.get(task, 0.0)
        self.paid[task] = total
        return max(spent, 0.0)


def sync_instrument(holder: object, wanted: bool) -> TaskTimes | None:
    """Install (or remove) `holder`'s TaskTimes in the running Trio loop; the instrument if installed."""
    times: TaskTimes | None = getattr(holder, "task_times", None)
    if wanted and times is None:
        times = TaskTimes()
        trio.lowlevel.add_instrument(times)
        holder.task_times = times  # type: ignore[attr-defined]
    elif not wanted and times is not None:
        try:
            trio.lowlevel.remove_instrument(times)
        except KeyError:
            pass
        holder.task_times = None  # type: ignore[attr-defined]
        times = None
    return times
