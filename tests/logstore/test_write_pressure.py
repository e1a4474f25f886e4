"""logstore.write_pressure: a segment write that had to wait makes the next appends leave the loop."""

from __future__ import annotations

import time

import pytest

from odradek.logstore import faults, write_pressure
from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog, PendingAppend
from odradek.wire.records import SimpleRecord, build_batch


@pytest.fixture(autouse=True)
def _no_pressure():
    write_pressure.reset()
    yield
    write_pressure.reset()


def _batch() -> bytearray:
    return bytearray(build_batch([SimpleRecord(b"v" * 100, timestamp=int(time.time() * 1000))]))


def _log(tmp_path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", LogConfig())


def test_a_write_that_slept_is_pressure_and_a_fast_or_busy_one_is_not(tmp_path, monkeypatch):
    plog = _log(tmp_path)
    real_pwrite = faults.pwrite
    plog.append_as_leader(_batch())
    assert not write_pressure.under_pressure()

    def busy_pwrite(fd, data, position):  # 20 ms on the CPU: preempted or slow, not made to wait
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(faults, "pwrite", busy_pwrite)
    plog.append_as_leader(_batch())
    assert not write_pressure.under_pressure()

    def waiting_pwrite(fd, data, position):  # what a write blocked on the inode or writeback does
        time.sleep(0.02)
        return real_pwrite(fd, data, position)

    def short_wait_pwrite(fd, data, position):  # a journal commit's 1-3 ms: not worth threads
        time.sleep(0.002)
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(faults, "pwrite", short_wait_pwrite)
    plog.append_as_leader(_batch())
    assert not write_pressure.under_pressure()
    monkeypatch.setattr(faults, "pwrite", waiting_pwrite)
    plog.append_as_leader(_batch())
    assert write_pressure.under_pressure()
    monkeypatch.setattr(write_pressure, "PRESSURE_WINDOW_S", 0.0)
    plog.append_as_leader(_batch())  # a new waiting write with no window: over at once
    assert not write_pressure.under_pressure()
    plog.close()


def test_a_prepared_append_is_invisible_until_finished_and_settled_by_the_next(tmp_path):
    """prepare_append places the batch; readers see the log as it was until finish(); another
    append first settles (writes and finishes) the pending one, so offsets stay in order."""
    plog = _log(tmp_path)
    plog.append_as_leader(_batch())
    pending = plog.prepare_append(_batch())
    assert isinstance(pending, PendingAppend)
    assert plog.log_end_offset == 1 and plog.high_watermark == 1
    assert plog.segments[-1].size == len(_batch())
    pending.write()  # what the worker thread does: the file only
    assert plog.log_end_offset == 1
    info = pending.finish()
    assert (info.first_offset, plog.log_end_offset) == (1, 2)
    second = plog.prepare_append(_batch())
    third = plog.append_as_leader(_batch())  # settles `second` first
    assert second.finish().first_offset == 2 and third.first_offset == 3
    data = plog.read(0, 1 << 20)
    assert plog.log_end_offset == 4 and sum(s.size for s in data.slices) == 4 * len(_batch())
    plog.close()


def test_a_failed_threaded_write_is_reported_and_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    plog = _log(tmp_path)
    plog.append_as_leader(_batch())

    def failing_pwrite(fd, data, position):
        raise OSError(28, "No space left on device")

    pending = plog.prepare_append(_batch())
    monkeypatch.setattr(faults, "pwrite", failing_pwrite)
    pending.write()
    monkeypatch.undo()
    with pytest.raises(Exception, match="No space left"):
        pending.finish()
    assert plog.log_end_offset == 1 and plog.segments[-1].size == len(_batch())
    assert plog.append_as_leader(_batch()).first_offset == 1
    plog.close()


def test_a_pending_append_is_accounted_for_once_when_a_thread_settles_it_too(tmp_path, monkeypatch):
    """Deleting a topic closes its logs in a worker thread, which settles a pending append while
    the produce path finishes it on the loop: the log must count it once."""
    import threading

    plog = _log(tmp_path)
    pending = plog.prepare_append(_batch())
    real_pwrite = faults.pwrite
    release = threading.Event()

    def held_pwrite(fd, data, position):
        assert release.wait(10)
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(faults, "pwrite", held_pwrite)
    real_finish = plog._finish_append

    def slow_finish(p):  # widen the window in which a second caller could account for it too
        time.sleep(0.05)
        real_finish(p)

    monkeypatch.setattr(plog, "_finish_append", slow_finish)
    writer = threading.Thread(target=pending.write)
    settler = threading.Thread(target=plog.settle)
    writer.start()
    settler.start()
    time.sleep(0.05)
    release.set()
    info = pending.finish()
    writer.join(10)
    settler.join(10)
    assert info.first_offset == 0 and plog.log_end_offset == 1 and plog.unflushed_messages == 1
    assert plog.segments[-1].size == len(_batch())
    assert plog.append_as_leader(_batch()).first_offset == 1
    plog.close()
