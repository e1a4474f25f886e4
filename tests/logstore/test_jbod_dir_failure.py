"""A log dir failing (an I/O error on one of its files) takes only its partitions offline (issue #23, JBOD).

The fault is one root also hits: the high-watermark checkpoint's ``.tmp`` file is a directory, so
opening it for writing fails with EISDIR, as Kafka's CheckpointFile write fails on it.
"""

from __future__ import annotations

import errno
import uuid
from pathlib import Path

import pytest

from odradek.logstore.checkpoints import OffsetCheckpointFile
from odradek.logstore.config import LogConfig
from odradek.logstore.errors import KafkaStorageError
from odradek.logstore.manager import LogManager
from odradek.logstore.metadata_files import read_clean_shutdown_file


def _manager(tmp_path: Path) -> tuple[LogManager, list[Path]]:
    dirs = [tmp_path / n for n in ("a", "b", "c")]
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    return mgr, dirs


def _fail_hw_checkpoint(d: Path) -> None:
    (d / "replication-offset-checkpoint.tmp").mkdir()


def test_an_io_error_on_one_dir_takes_only_its_partitions_offline(tmp_path: Path) -> None:
    mgr, dirs = _manager(tmp_path)
    for p in range(6):
        mgr.create_log("t", p, uuid.uuid4())
    in_dir = {d: sorted(tp for tp, lg in mgr.logs.items() if lg.dir.parent == d) for d in dirs}
    assert all(len(tps) == 2 for tps in in_dir.values())
    _fail_hw_checkpoint(dirs[2])
    mgr.checkpoint_high_watermarks()  # the error is handled, not raised: the other dirs are written
    assert mgr.offline_partitions == set(in_dir[dirs[2]])
    for tp in in_dir[dirs[2]]:
        assert mgr.get_log(*tp) is None
    for d in dirs[:2]:
        assert {tp for tp, _ in mgr.logs.items() if mgr.log_dir_of(tp).path == d} == set(in_dir[d])
        assert set(OffsetCheckpointFile(d / "replication-offset-checkpoint").read()) == set(in_dir[d])
    assert [d.path for d in mgr.online_dirs()] == dirs[:2]
    assert not mgr.is_dir_online(dirs[2]) and mgr.is_dir_online(dirs[0])
    assert not (dirs[2] / ".lock").exists()  # Kafka releases a failed dir's lock
    # the failed dir's files stay as they were
    assert sorted(p.name for p in dirs[2].iterdir() if p.name.startswith("t-")) == \
        sorted(f"t-{p}" for _t, p in in_dir[dirs[2]])


def test_a_failed_dir_gets_no_new_log_and_its_partitions_are_not_recreated(tmp_path: Path) -> None:
    mgr, dirs = _manager(tmp_path)
    mgr.create_log("t", 0, uuid.uuid4())  # placed in a
    _fail_hw_checkpoint(dirs[0])
    mgr.checkpoint_high_watermarks()
    with pytest.raises(KafkaStorageError):
        mgr.create_log("t", 0, uuid.uuid4())
    placed = [mgr.create_log("u", p, uuid.uuid4()).dir.parent for p in range(4)]
    assert dirs[0] not in placed and sorted(placed) == sorted([dirs[1], dirs[2]] * 2)


def test_clean_shutdown_skips_the_failed_dir(tmp_path: Path) -> None:
    mgr, dirs = _manager(tmp_path)
    for p in range(3):
        mgr.create_log("t", p, uuid.uuid4())
    _fail_hw_checkpoint(dirs[1])
    mgr.checkpoint_high_watermarks()
    mgr.checkpoint_recovery_points()
    mgr.shutdown(broker_epoch=5)
    assert read_clean_shutdown_file(dirs[0]) == 5 and read_clean_shutdown_file(dirs[2]) == 5
    assert read_clean_shutdown_file(dirs[1]) is None


def test_every_checkpoint_kind_takes_its_dir_offline(tmp_path: Path) -> None:
    mgr, dirs = _manager(tmp_path)
    for p in range(3):
        mgr.create_log("t", p, uuid.uuid4())
    (dirs[1] / "recovery-point-offset-checkpoint.tmp").mkdir()
    mgr.checkpoint_recovery_points()
    assert [d.path for d in mgr.online_dirs()] == [dirs[0], dirs[2]]
    assert mgr.offline_partitions == {("t", 1)}
    assert mgr.handle_dir_failure(dirs[1]) == []  # once only


def test_a_failed_flush_takes_the_dir_offline(tmp_path: Path) -> None:
    mgr, dirs = _manager(tmp_path)
    for p in range(3):
        mgr.create_log("t", p, uuid.uuid4())
    failing = next(lg for lg in mgr.all_logs() if lg.dir.parent == dirs[1])

    def broken_flush() -> None:
        raise OSError(errno.EIO, "Input/output error")

    failing.flush = broken_flush  # type: ignore[method-assign]
    failing.needs_flush = lambda now_ms=None: True  # type: ignore[method-assign]
    flushed = mgr.flush_dirty_logs()
    assert failing not in flushed
    assert mgr.offline_partitions == {(failing.topic, failing.partition)}
    assert [d.path for d in mgr.online_dirs()] == [dirs[0], dirs[2]]
