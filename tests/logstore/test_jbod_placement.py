"""Where new partitions go across several log dirs (Kafka 4.4's LogManager.nextLogDirs, issue #23).

The expected placement of the workload below is what a Kafka 4.4.0 broker with the same three
log dirs did (compat-tests/test_jbod_44.py compares the two live).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.logstore.config import LogConfig
from odradek.logstore.manager import LogManager


def _create(mgr: LogManager, topic: str, count: int) -> dict[int, Path]:
    dirs = mgr.dirs_for_new_logs(topic, list(range(count)))
    topic_id = uuid.uuid4().bytes
    for index in range(count):
        mgr.add_log(mgr.open_new_log(topic, index, topic_id, LogConfig(), dirs[index]))
    return dirs


def test_the_workload_lands_where_kafka_put_it(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in ("a", "b", "c")]
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    for topic, count in (("p1", 1), ("p2", 2), ("p5", 5), ("q1", 1), ("p4", 4), ("q3", 3)):
        _create(mgr, topic, count)
    where = {d.name: sorted((lg.topic, lg.partition) for lg in mgr.all_logs() if lg.dir.parent == d) for d in dirs}
    assert where == {
        "a": [("p1", 0), ("p4", 0), ("p4", 3), ("p5", 1), ("p5", 4), ("q3", 0)],
        "b": [("p2", 1), ("p4", 2), ("p5", 0), ("p5", 3), ("q3", 2)],
        "c": [("p2", 0), ("p4", 1), ("p5", 2), ("q1", 0), ("q3", 1)],
    }
    mgr.shutdown()


def test_ties_go_to_the_dir_named_first_and_existing_logs_stay(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in ("z", "y", "x")]  # log.dirs order, not name order
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    assert _create(mgr, "t", 1) == {0: dirs[0]}
    assert mgr.dir_for_new_log() == dirs[1]
    # partitions 0 exists: only 1 and 2 are placed (in the HashMap order of t-1, t-2)
    placed = mgr.dirs_for_new_logs("t", [0, 1, 2])
    assert placed[0] == dirs[0] and sorted(map(str, (placed[1], placed[2]))) == sorted(map(str, dirs[1:]))
    mgr.shutdown()


def test_a_failed_dir_gets_nothing(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in ("a", "b", "c")]
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    _create(mgr, "t", 3)
    (dirs[1] / "replication-offset-checkpoint.tmp").mkdir()
    mgr.checkpoint_high_watermarks()
    assert set(mgr.dirs_for_new_logs("u", list(range(4))).values()) == {dirs[0], dirs[2]}
    mgr.shutdown()
