"""A broker of a cluster names its failed log dir in its heartbeats; the controller then moves the
leadership of the replicas in that dir to another in-sync replica and takes the broker out of their
ISR (Kafka's handleDirectoriesOffline), so clients keep producing through the new leaders."""

from __future__ import annotations

import time

from odradek.testing import running_cluster
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class


def _metadata(conn: BrokerConnection, topic: str) -> dict[int, tuple[int, int, list[int]]]:
    M = request_class(3)
    r = conn.send(3, M(topics=[M.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False), 12)
    return {p.partition_index: (p.error_code, p.leader_id, sorted(p.isr_nodes)) for t in r.topics for p in t.partitions}


def _wait(check, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_failed_dir_in_a_heartbeat_moves_leadership(tmp_path) -> None:
    with running_cluster(brokers=2, **{"replica.high.watermark.checkpoint.interval.ms": "100"}) as cluster:
        controller, broker = cluster.brokers
        conn = BrokerConnection(controller.host, controller.port)
        try:
            C = request_class(19)
            created = conn.send(19, C(topics=[C.CreatableTopic(name="od", num_partitions=4, replication_factor=2)],
                                      timeout_ms=30000))
            assert [t.error_code for t in created.topics] == [0]
            _wait(lambda: (m := _metadata(conn, "od")) and all(isr == [1, 2] for _c, _l, isr in m.values()),
                  "every replica in sync")
            assert any(leader == 2 for _c, leader, _i in _metadata(conn, "od").values())
            (broker.log_dir / "replication-offset-checkpoint.tmp").mkdir()
            _wait(lambda: broker.broker.log_manager.offline_partitions, "broker 2's dir taken offline")
            moved = _wait(lambda: (m := _metadata(conn, "od")) and all(
                (code, leader, isr) == (0, 1, [1]) for code, leader, isr in m.values()) and m,
                "leadership moved off the failed dir")
            assert len(moved) == 4
            image = controller.broker.metadata_store.image
            assert image.brokers[2].fenced is False  # only its dir failed, the broker stays registered
        finally:
            conn.close()
            (broker.log_dir / "replication-offset-checkpoint.tmp").rmdir()
