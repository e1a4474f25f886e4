"""The request quota's clock: the loop's time in a task, not the time it waited."""

from __future__ import annotations

import time

import trio

from odradek.quota.task_time import sync_instrument


class _Holder:
    task_times = None


def test_waiting_costs_nothing_and_work_is_counted() -> None:
    charges: list[float] = []

    async def main() -> None:
        holder = _Holder()
        times = sync_instrument(holder, True)
        assert times is not None
        times.charge()
        await trio.sleep(0.3)  # a group join waiting for its rebalance, say
        charges.append(times.charge())
        deadline = time.perf_counter() + 0.05
        while time.perf_counter() < deadline:  # 50 ms of handling
            pass
        await trio.sleep(0)
        charges.append(times.charge())
        assert sync_instrument(holder, False) is None and holder.task_times is None

    trio.run(main)
    assert charges[0] < 0.02
    assert 0.045 < charges[1] < 0.2
