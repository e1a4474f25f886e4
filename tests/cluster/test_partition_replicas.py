"""The leader's view of its followers (cluster.partition.Partition) on a real partition log: the
high watermark is the least log end of the ISR, followers that caught up join, laggards leave."""

from __future__ import annotations

from pathlib import Path

from odradek.cluster.partition import Partition
from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog
from odradek.wire.primitives import Uuid
from odradek.wire.records import SimpleRecord, build_batch


def _leader(tmp_path: Path, replicas: list[int], isr: list[int]) -> Partition:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), "t", 0)
    plog.replicated = True
    part = Partition("t", 0, Uuid.ZERO, leader=1, leader_epoch=0, partition_epoch=0, replicas=replicas, isr=isr,
                     log=plog)
    plog.become_leader(0)
    part.reset_followers(now=0)
    return part


def _append(part: Partition, n: int) -> None:
    for i in range(n):
        part.log.append_as_leader(bytearray(build_batch([SimpleRecord(value=b"v%d" % i, key=None, timestamp=1)])))


def test_the_high_watermark_waits_for_every_in_sync_follower(tmp_path: Path) -> None:
    part = _leader(tmp_path, [1, 2, 3], [1, 2, 3])
    _append(part, 5)
    assert part.log.high_watermark == 0  # replicated: the appends alone do not move it
    part.update_follower_fetch_state(2, 5, now=10)
    assert part.new_high_watermark() is None  # follower 3 is still at -1
    part.update_follower_fetch_state(3, 3, now=10)
    assert part.new_high_watermark() == 3
    part.log.high_watermark = 3
    part.update_follower_fetch_state(3, 5, now=11)
    assert part.new_high_watermark() == 5
    part.log.close()


def test_a_follower_out_of_the_isr_does_not_hold_the_high_watermark_and_joins_once_caught_up(tmp_path: Path) -> None:
    part = _leader(tmp_path, [1, 2, 3], [1, 2])
    _append(part, 4)
    part.update_follower_fetch_state(2, 4, now=5)
    assert part.new_high_watermark() == 4
    part.log.high_watermark = 4
    part.update_follower_fetch_state(3, 2, now=5)
    assert part.isr_to_expand() == []  # behind the high watermark
    part.update_follower_fetch_state(3, 4, now=6)
    assert part.isr_to_expand() == [3]
    part.pending_isr = [1, 2, 3]
    assert part.isr_to_expand() == []  # one change in flight at a time
    part.log.close()


def test_a_follower_that_stops_catching_up_leaves_the_isr(tmp_path: Path) -> None:
    part = _leader(tmp_path, [1, 2, 3], [1, 2, 3])
    _append(part, 3)
    part.update_follower_fetch_state(2, 3, now=100)
    part.update_follower_fetch_state(3, 3, now=100)
    _append(part, 2)
    part.update_follower_fetch_state(2, 5, now=40_000)
    # follower 3 last reached the log end at 100 ms; 30 s later it is out of sync
    assert part.isr_to_shrink(now=40_000, max_lag_ms=30_000) == [3]
    assert part.isr_to_shrink(now=20_000, max_lag_ms=30_000) == []
    part.log.close()


def test_a_follower_appends_the_leaders_batches_as_they_are(tmp_path: Path) -> None:
    leader = _leader(tmp_path, [1, 2], [1, 2])
    leader.log.become_leader(7)
    _append(leader, 3)
    follower = PartitionLog.open(tmp_path / "f" / "t-0", LogConfig(), "t", 0)
    data = leader.log.read(0, 1 << 20)
    raw = b"".join(__import__("os").pread(s.file.fileno(), s.size, s.position) for s in data.slices)
    from odradek.wire.records import iter_batches

    for batch in iter_batches(raw):
        follower.append_as_follower(batch._mv)  # noqa: SLF001
    assert follower.log_end_offset == 3
    seg = sorted((tmp_path / "f" / "t-0").glob("*.log"))[0].read_bytes()
    assert seg == sorted((tmp_path / "t-0").glob("*.log"))[0].read_bytes()[:len(seg)] and len(seg) == len(raw)
    assert follower.leader_epoch_cache.latest_epoch == 7
    leader.log.close()
    follower.close()


def test_truncating_at_the_log_end_drops_an_empty_epoch_there(tmp_path: Path) -> None:
    """Kafka's truncateTo at or past the log end still truncates the epoch cache: a broker that
    became leader (an epoch at its log end) and appended nothing must not keep that epoch, or its
    fetches as a follower diverge forever."""
    part = _leader(tmp_path, [1, 2], [1, 2])
    _append(part, 2)
    part.log.become_leader(5)  # led in epoch 5 from offset 2, wrote nothing in it
    assert part.log.leader_epoch_cache.entries[-1] == (5, 2)
    assert part.log.truncate_to(2) is False
    assert part.log.leader_epoch_cache.entries == [(0, 0)]
    text = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n1\n0 0\n"
    part.log.close()
