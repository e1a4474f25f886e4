"""A follower's fetched batches and a leadership change of the same partition (Kafka's
partitionMapLock): once `remove`/`follow` return, no batch of the old leader's lands in the log."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from odradek.cluster.partition import Partition
from odradek.cluster.replica_fetcher import Followed, ReplicaFetcherManager
from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog
from odradek.wire.protocol import response_class
from odradek.wire.records import SimpleRecord, build_batch

PartitionData = response_class(1).PartitionData
KEY = ("t", 0)


def _batches(base: int, count: int, epoch: int) -> bytes:
    return b"".join(build_batch([SimpleRecord(b"k", b"v%d" % i, [], 1_700_000_000_000)], base_offset=base + i,
                                partition_leader_epoch=epoch) for i in range(count))


def _answer(high_watermark: int) -> object:
    return PartitionData(partition_index=0, high_watermark=high_watermark, log_start_offset=0)


class _SlowAppends:
    """Holds the log's follower appends at a gate, so the test can change leadership mid-response."""

    def __init__(self, plog: PartitionLog) -> None:
        self.inner = plog.append_as_follower
        self.started = threading.Event()
        self.gate = threading.Event()
        plog.append_as_follower = self  # type: ignore[method-assign]

    def __call__(self, batch):  # noqa: ANN001, ANN204
        self.started.set()
        self.gate.wait(5)
        return self.inner(batch)


def _following(tmp_path: Path) -> tuple[ReplicaFetcherManager, PartitionLog, Followed]:
    """Broker 3 following partition t-0 (a real log) from leader 2 in epoch 2."""
    part = Partition("t", 0, uuid.uuid4())
    plog = part.log = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props({}), "t", 0)
    fetchers = ReplicaFetcherManager(3, lambda: 1, lambda _n: None)
    fetchers.follow(KEY, part, 2, 2)
    return fetchers, plog, fetchers.followed[KEY]


def test_becoming_leader_waits_out_the_old_leaders_append(tmp_path: Path) -> None:
    fetchers, plog, f = _following(tmp_path)
    slow = _SlowAppends(plog)
    appender = threading.Thread(target=fetchers._append_all, args=([(f, _batches(0, 4, 2), _answer(4))],))  # noqa: SLF001
    appender.start()
    assert slow.started.wait(5)
    removed = threading.Event()

    def make_leader() -> None:
        fetchers.remove(KEY)  # as ReplicaManager.apply does before becoming the leader
        removed.set()
        plog.become_leader(3)

    leader = threading.Thread(target=make_leader)
    leader.start()
    assert not removed.wait(0.3), "the partition left the fetcher while its batches were being appended"
    slow.gate.set()
    appender.join(5)
    leader.join(5)
    # the whole response went in before the new epoch started, and the epoch starts at its end
    assert plog.log_end_offset == 4
    assert plog.leader_epoch_cache.entries == [(2, 0), (3, 4)]
    plog.close()


def test_batches_fetched_in_an_older_epoch_are_dropped(tmp_path: Path) -> None:
    fetchers, plog, old = _following(tmp_path)
    part = old.part
    fetchers._append_all([(old, _batches(0, 2, 2), _answer(2))])  # noqa: SLF001
    fetchers.follow(KEY, part, 5, 3)  # a new leader while a fetch of the old one was out
    fetchers._append_all([(old, _batches(2, 3, 2), _answer(5))])  # noqa: SLF001
    assert plog.log_end_offset == 2
    fetchers.remove(KEY)
    fetchers._append_all([(fetchers.followed.get(KEY, old), _batches(2, 1, 2), _answer(3))])  # noqa: SLF001
    assert plog.log_end_offset == 2
    assert plog.leader_epoch_cache.entries == [(2, 0)]
    plog.close()
