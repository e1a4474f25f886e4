"""Future logs (`<topic>-<p>.<uuid>-future`, a replica moving between log dirs) across a restart."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from logstore_testutil import make_batch  # type: ignore[import-not-found]

from odradek.logstore.config import LogConfig
from odradek.logstore.manager import LogManager


def test_a_future_log_is_loaded_apart_and_kept_by_a_clean_shutdown(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    lg = mgr.create_log("t", 0, uuid.uuid4())
    for i in range(3):
        lg.append_as_leader(make_batch(1, ts=1_700_000_000_000 + i))
    mgr.shutdown()
    future = dirs[1] / f"t-0.{uuid.uuid4().hex}-future"
    shutil.copytree(dirs[0] / "t-0", future)

    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    assert set(mgr.logs) == {("t", 0)} and mgr.get_log("t", 0).dir == dirs[0] / "t-0"
    assert set(mgr.future_logs) == {("t", 0)}
    loaded = mgr.future_logs[("t", 0)]
    assert loaded.dir == future and loaded.log_end_offset == 3
    assert mgr.log_counts_by_dir() == {dirs[0]: 1, dirs[1]: 0}
    mgr.shutdown()
    assert future.is_dir() and loaded.closed  # kept for the move to resume
