"""A failed log dir's partitions are offline in the metadata (single node), as Kafka's controller
records it: leader -1 with a new leader epoch, the node out of the ISR (ELR), the dir gone from the
broker's registration; Metadata answers LEADER_NOT_AVAILABLE with the node among the offline
replicas, while the other dirs' partitions keep their leader. A restart (dir repaired) leads them again."""

from __future__ import annotations

import time
from pathlib import Path

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class


def _metadata(conn: BrokerConnection, topic: str) -> dict[int, tuple]:
    M = request_class(3)
    r = conn.send(3, M(topics=[M.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False), 12)
    return {p.partition_index: (p.error_code, p.leader_id, p.leader_epoch, list(p.isr_nodes), list(p.offline_replicas))
            for t in r.topics for p in t.partitions}


def test_a_failed_dir_takes_its_partitions_offline_in_the_metadata(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in "abc"]
    settings = {"log.dirs": ",".join(map(str, dirs)), "replica.high.watermark.checkpoint.interval.ms": "100"}
    with running_broker(settings, log_dir=dirs[0]) as node:
        conn = BrokerConnection(node.host, node.port)
        try:
            C = request_class(19)
            created = conn.send(19, C(topics=[C.CreatableTopic(name="jf", num_partitions=6, replication_factor=1)],
                                      timeout_ms=30000))
            assert [t.error_code for t in created.topics] == [0]
            manager = node.broker.log_manager
            deadline = time.monotonic() + 30
            while any(("jf", p) not in manager.logs for p in range(6)):  # CreateTopics answers first
                assert time.monotonic() < deadline
                time.sleep(0.05)
            in_c = {p for p in range(6) if manager.log_dir_of(("jf", p)).path == dirs[2]}
            assert in_c
            before = _metadata(conn, "jf")
            (dirs[2] / "replication-offset-checkpoint.tmp").mkdir()
            while not manager.offline_partitions:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            after = _metadata(conn, "jf")
            for p, (code, leader, epoch, isr, offline) in after.items():
                if p in in_c:
                    assert (code, leader, epoch, isr, offline) == (5, -1, before[p][2] + 1, [], [1])
                else:
                    assert (code, leader, epoch, isr, offline) == before[p]
            store = node.broker.metadata_store
            assert len(store.image.brokers[1].log_dirs) == 2
        finally:
            conn.close()
            (dirs[2] / "replication-offset-checkpoint.tmp").rmdir()
    with running_broker(settings, log_dir=dirs[0]) as node:
        conn = BrokerConnection(node.host, node.port)
        try:
            again = _metadata(conn, "jf")
            assert all(code == 0 and leader == 1 and offline == [] for code, leader, _e, _i, offline in again.values())
        finally:
            conn.close()
