"""Retention through the LogManager: which logs it touches, the check/apply split, Kafka's rule order,
DeleteRecords' start offset, pending deletes, config changes applied to live logs."""

from __future__ import annotations

import time
from pathlib import Path

from odradek.logstore import LogConfig, LogManager, PartitionLog
from odradek.wire.records import SimpleRecord, build_batch

TOPIC_ID = bytes(range(1, 17))
T0 = 1_700_000_000_000


def append(lg: PartitionLog, n: int, ts: int, size: int = 300) -> None:
    recs = [SimpleRecord(b"x" * size, b"k", (), ts + i) for i in range(n)]
    lg.append_as_leader(bytearray(build_batch(recs)), 0, ts)


def manager(tmp_path: Path, **props: str) -> tuple[LogManager, PartitionLog]:
    cfg = LogConfig.from_props({"segment.bytes": "1000", **props})
    mgr = LogManager([tmp_path], LogConfig())
    mgr.startup()
    lg = mgr.create_log("r", 0, TOPIC_ID, cfg)
    lg.become_leader(0)
    return mgr, lg


def test_retention_ms_deletes_whole_expired_segments_and_checkpoints_start(tmp_path: Path) -> None:
    mgr, lg = manager(tmp_path, **{"retention.ms": "1000", "file.delete.delay.ms": "200"})
    for i in range(8):
        append(lg, 2, T0 + i * 1000)
    segs = len(lg.segments)
    assert segs > 3
    calls: list[str] = []
    mgr.run_exclusive = lambda fn, *a: (calls.append(fn.__name__), fn(*a))[1]
    # nothing expired yet: the check alone runs, nothing is handed to the exclusive runner
    assert not lg.retention_due(T0 + 500)
    assert mgr.cleanup_logs(T0 + 500) == 0 and calls == []
    deleted = mgr.cleanup_logs(T0 + 5500)
    assert deleted > 0 and calls == ["run"]
    assert all(s.largest_timestamp >= T0 + 4500 for s in lg.segments[:-1])
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    # files wait for file.delete.delay.ms as .deleted
    assert list(lg.dir.glob("*.log.deleted"))
    mgr.delete_pending_dirs()
    assert list(lg.dir.glob("*.log.deleted"))
    time.sleep(0.25)
    mgr.delete_pending_dirs()
    assert not list(lg.dir.glob("*.deleted"))
    # Kafka checkpoints a start offset only when it is past the first segment's base
    mgr.checkpoint_log_start_offsets()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    lg.delete_records_before(lg.log_start_offset + 1, delete_segments=False)
    mgr.checkpoint_log_start_offsets()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == f"0\n1\nr 0 {lg.log_start_offset}\n"
    mgr.shutdown()


def test_expired_active_segment_is_rolled_then_deleted(tmp_path: Path) -> None:
    mgr, lg = manager(tmp_path, **{"retention.ms": "1000", "file.delete.delay.ms": "0", "segment.bytes": "100000"})
    append(lg, 3, T0)
    assert len(lg.segments) == 1
    assert mgr.cleanup_logs(T0 + 5000) == 1
    assert [s.base_offset for s in lg.segments] == [3] and lg.log_start_offset == 3 == lg.log_end_offset
    # an empty active segment is never deleted
    assert mgr.cleanup_logs(T0 + 10**9) == 0
    mgr.shutdown()


def test_retention_bytes_and_compacted_logs_are_left_alone(tmp_path: Path) -> None:
    mgr, lg = manager(tmp_path, **{"retention.bytes": "1500", "file.delete.delay.ms": "0"})
    compact = mgr.create_log("c", 0, TOPIC_ID, LogConfig.from_props(
        {"segment.bytes": "1000", "cleanup.policy": "compact", "retention.ms": "1"}))
    compact.become_leader(0)
    for i in range(8):
        append(lg, 2, T0 + i)
        append(compact, 2, T0 + i)
    n_compact = len(compact.segments)
    mgr.cleanup_logs(T0 + 10**9)
    assert lg.size_in_bytes() - lg.active_segment.size <= 1500
    assert len(compact.segments) == n_compact
    mgr.shutdown()


def test_delete_records_only_moves_the_start_then_retention_drops_segments(tmp_path: Path) -> None:
    mgr, lg = manager(tmp_path, **{"file.delete.delay.ms": "0"})
    for i in range(8):
        append(lg, 2, T0 + i)
    bases = [s.base_offset for s in lg.segments]
    assert lg.delete_records_before(bases[3] + 1, delete_segments=False) == bases[3] + 1
    assert [s.base_offset for s in lg.segments] == bases  # Kafka deletes them at the next check
    assert lg.retention_due(T0)
    mgr.cleanup_logs(T0)
    assert lg.segments[0].base_offset == bases[3] and lg.log_start_offset == bases[3] + 1
    mgr.shutdown()


def test_topic_config_change_applies_to_live_logs(tmp_path: Path) -> None:
    mgr, lg = manager(tmp_path, **{"segment.bytes": "100000"})
    append(lg, 2, T0)
    new = LogConfig.from_props({"segment.bytes": "700", "retention.ms": "10"})
    mgr.update_topic_config("r", new)
    assert lg.config is new and lg.active_segment.config is new
    append(lg, 2, T0 + 1)  # rolls: the active segment is over the new segment.bytes
    assert len(lg.segments) == 2
    assert mgr.cleanup_logs(T0 + 10**6) >= 1
    mgr.shutdown()
