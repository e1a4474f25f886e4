"""Follower truncation (Kafka's UnifiedLog.truncateTo / truncateFullyAndStartAt): a truncated log
is the log that only ever had the kept batches, file for file."""

from __future__ import annotations

from pathlib import Path

from logstore_testutil import make_batch

from odradek.logstore import LogConfig, PartitionLog

PROPS = {"index.interval.bytes": "300", "segment.bytes": "6000"}


def _batches() -> list[tuple[int, bytes]]:
    # (leader epoch, batch): three epochs, timestamps going up
    return [(0 if i < 12 else 1 if i < 20 else 3, bytes(make_batch(3, value_size=250, ts=1_700_000_000_000 + i * 10)))
            for i in range(30)]


def _build(dir_: Path, batches: list[tuple[int, bytes]]) -> PartitionLog:
    lg = PartitionLog.open(dir_, LogConfig.from_props(PROPS), "t", 0)
    epoch = -1
    for e, b in batches:
        if e != epoch:
            lg.become_leader(e)
            epoch = e
        lg.append_as_leader(bytearray(b), e, 0)
    return lg


def _files(dir_: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dir_.iterdir())
            if p.suffix in (".log", ".index", ".timeindex") or p.name == "leader-epoch-checkpoint"}


def test_truncate_to_an_earlier_segment_gives_the_log_of_the_kept_batches(tmp_path: Path) -> None:
    batches = _batches()
    lg = _build(tmp_path / "t-0", batches)
    assert len(lg.segments) >= 4
    keep = 14  # inside epoch 1, segments later than it go
    offset = keep * 3
    assert lg.truncate_to(offset)
    assert lg.log_end_offset == offset and lg.high_watermark <= offset
    assert lg.leader_epoch_cache.latest_epoch == 1
    # the log goes on from there
    lg.append_as_leader(bytearray(batches[keep][1]), 1, 0)
    lg.close()
    ref = _build(tmp_path / "ref" / "t-0", batches[: keep + 1])
    ref.close()
    assert _files(tmp_path / "t-0") == _files(ref.dir)
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_truncate_past_the_end_changes_nothing(tmp_path: Path) -> None:
    lg = _build(tmp_path / "t-0", _batches()[:5])
    assert not lg.truncate_to(15)
    assert lg.log_end_offset == 15
    lg.close()


def test_truncate_fully_and_start_at_a_later_offset(tmp_path: Path) -> None:
    batches = _batches()
    lg = _build(tmp_path / "t-0", batches[:10])
    lg.truncate_fully_and_start_at(500)
    assert (lg.log_start_offset, lg.log_end_offset) == (500, 500)
    assert [s.base_offset for s in lg.segments] == [500]
    assert lg.leader_epoch_cache.entries == []
    lg.become_leader(7)
    info = lg.append_as_leader(bytearray(batches[0][1]), 7, 0)
    assert info.first_offset == 500
    lg.close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log")
    assert names == ["00000000000000000500.log"]
    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props(PROPS), "t", 0, log_start_offset=500)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 503)
    reopened.close()
