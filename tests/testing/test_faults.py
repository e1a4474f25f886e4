"""odradek.faults: the object a broker's hooks read, the file a broker process follows, and the
slow disk applied in worker threads only."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import trio

from odradek import faults
from odradek.faults import Faults, state_path
from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog
from odradek.wire.records import SimpleRecord, build_batch


def test_an_unset_faults_object_is_inert(tmp_path: Path) -> None:
    f = Faults([tmp_path])
    assert not f.partitioned and not f.slow_disk_ms
    assert str(tmp_path) not in faults.SLOW_DISKS
    assert f.counters() == {"dropped_fetches": 0, "skipped_fetches": 0, "disk_waits": 0}


def test_a_slow_disk_registers_the_brokers_log_dirs_until_cleared(tmp_path: Path) -> None:
    a, b = Faults([tmp_path / "a"]), Faults([tmp_path / "b"])
    a.update(slow_disk_ms=1)
    try:
        assert faults.SLOW_DISKS[str(tmp_path / "a")] is a and str(tmp_path / "b") not in faults.SLOW_DISKS
        faults.disk_wait(tmp_path / "a")
        faults.disk_wait(tmp_path / "b")  # another broker's disk is not slow
        assert (a.disk_waits, b.disk_waits) == (1, 0)
    finally:
        a.clear()
    assert not faults.SLOW_DISKS


def test_the_file_is_applied_and_its_state_written(tmp_path: Path) -> None:
    path = tmp_path / "node2.faults.json"
    f = Faults([tmp_path / "logs"])
    assert not f.apply_file(path)  # missing: nothing changes
    path.write_text(json.dumps({"version": 4, "partitioned": [1, 3], "slow_disk_ms": 0}))
    assert f.apply_file(path)
    assert (f.partitioned, f.version) == (frozenset({1, 3}), 4)
    f.dropped_fetches = 7
    f.write_state(path)
    assert json.loads(state_path(path).read_text()) == {"version": 4, "dropped_fetches": 7, "skipped_fetches": 0,
                                                        "disk_waits": 0}


def test_a_broker_process_follows_the_file_as_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    f = Faults([tmp_path / "logs"])

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(f.follow_file, path)
            path.write_text(json.dumps({"version": 1, "partitioned": [2]}))
            with trio.fail_after(5):
                while f.version != 1:
                    await trio.sleep(0.02)
            assert f.partitioned == {2}
            path.write_text(json.dumps({"version": 2, "partitioned": []}))
            stamp = time.time_ns() + 10_000_000
            os.utime(path, ns=(stamp, stamp))
            with trio.fail_after(5):
                while json.loads(state_path(path).read_text() if state_path(path).exists() else "{}").get(
                        "version") != 2:
                    await trio.sleep(0.02)
            assert not f.partitioned
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_slow_disk_waits_in_worker_threads_never_on_the_event_loop(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    plog = PartitionLog.open(log_dir / "t-0", LogConfig(), "t", 0)
    f = Faults([log_dir])
    f.update(slow_disk_ms=1)
    try:
        plog.append_as_leader(bytearray(build_batch([SimpleRecord(b"x", None, (), 1)])))  # a plain thread: slowed
        assert f.disk_waits == 1

        async def on_loop() -> None:
            plog.append_as_leader(bytearray(build_batch([SimpleRecord(b"y", None, (), 1)])))  # on a Trio loop: not slowed
            await trio.to_thread.run_sync(plog.flush)  # an fsync in a worker thread: slowed

        thread = threading.Thread(target=trio.run, args=(on_loop,))
        thread.start()
        thread.join()
        assert f.disk_waits == 2
    finally:
        f.clear()
        plog.close()
