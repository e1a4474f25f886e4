"""Odradek's KRaft broker side against real Apache Kafka 4.4.0 controllers (issue #24, first part).

The metadata-log observer (`kraft.observer`) and the broker lifecycle (`kraft.broker_lifecycle`)
run in this test's process against a real Kafka 4.4.0 controller over real sockets, next to a
real Kafka 4.4.0 broker in the same cluster that checks every step:

1. Odradek registers, is unfenced by Kafka's controller (the Java broker's DescribeCluster lists
   it unfenced), shuts down in a controlled way, and its copy of `__cluster_metadata-0` holds the
   same batches at the same offsets as the Java broker's copy (byte for byte), with the same
   leader-epoch-checkpoint and quorum-state.
2. A controller whose log starts past 0 (snapshots and retention) makes a new broker load a
   snapshot with FetchSnapshot: Odradek stores the bytes the leader served, read-only as Kafka's
   FileRawSnapshotWriter leaves them, the same as a Java broker joining at the same time where
   both fetched the same snapshot, and its image has every topic.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import trio
from kafka.admin import KafkaAdminClient, NewTopic
from kafka_cluster import KafkaNode, Quorum
from kafka_oracle import CLUSTER_ID, require_tool

from odradek.cluster_metadata import random_uuid
from odradek.kraft.broker_lifecycle import BrokerLifecycleManager
from odradek.kraft.image import MetadataImage
from odradek.kraft.log import MetadataLog
from odradek.kraft.observer import MetadataObserver, parse_voters
from odradek.kraft.store import supported_feature_ranges
from odradek.wire.records import iter_batches

pytestmark = pytest.mark.oracle
MD = "__cluster_metadata-0"


class ObserverNode:
    """The observer and lifecycle manager of one Odradek broker, on its own metadata log dir."""

    def __init__(self, dir_: Path, quorum: Quorum, node_id: int) -> None:
        self.log = MetadataLog.open(dir_)
        self.image = MetadataImage()
        self.snapshots_loaded: list[int] = []
        self.observer = MetadataObserver(
            self.log, node_id=node_id, cluster_id=CLUSTER_ID, directory_id=random_uuid(),
            quorum=parse_voters(quorum.voters_config.split(",")), client_id=f"raft-client-{node_id}",
            on_commit=self._commit, on_snapshot=self._snapshot)
        self.lifecycle = BrokerLifecycleManager(
            node_id=node_id, cluster_id=CLUSTER_ID, incarnation_id=random_uuid(),
            listeners=[("PLAINTEXT", "127.0.0.1", 19092 + node_id, "PLAINTEXT")],
            features=supported_feature_ranges(), log_dirs=[random_uuid()], rack=None, previous_broker_epoch=-1,
            controller=lambda: self.observer._leader_address,  # noqa: SLF001 - the quorum leader it follows
            metadata_offset=lambda: self.observer.applied_offset - 1,
            caught_up=self.observer.caught_up.is_set, heartbeat_interval_s=0.5)

    def _commit(self, records, _offset) -> None:
        for rec in records:
            self.image.replay(rec)

    def _snapshot(self, records, offset) -> None:
        self.image = MetadataImage()
        for rec in records:
            self.image.replay(rec)
        self.snapshots_loaded.append(offset)

    def run_until_unfenced_then(self, check, timeout: float = 60.0) -> bool:
        """Run until unfenced, call `check()` (in a thread: it may block), then shut down in a
        controlled way; returns whether the controller granted the shutdown."""
        granted = False

        async def main() -> None:
            nonlocal granted
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.observer.run)
                nursery.start_soon(self.lifecycle.run)
                with trio.fail_after(timeout):
                    await self.lifecycle.unfenced.wait()
                await trio.to_thread.run_sync(check)
                granted = await self.lifecycle.controlled_shutdown(30)
                nursery.cancel_scope.cancel()

        try:
            trio.run(main)
        finally:
            self.log.close()
        return granted


def _batches(path: Path) -> list[tuple[int, bytes]]:
    out = []
    for seg in sorted(path.glob("*.log")):
        out += [(b.header().base_offset, bytes(b._mv)) for b in iter_batches(seg.read_bytes())]  # noqa: SLF001
    return out


@pytest.fixture
def cluster(tmp_path):
    require_tool("kafka-4.4.0")
    nodes: list[KafkaNode] = []

    def make(quorum: Quorum, node_id: int, roles, **overrides) -> KafkaNode:
        node = KafkaNode(tmp_path / f"node{node_id}", quorum, node_id, roles=roles, overrides=overrides)
        nodes.append(node)
        node.start()
        return node

    yield make
    for node in reversed(nodes):
        node.stop()


def _describe(bootstrap: str) -> dict[int, bool]:
    """broker id -> fenced, from DescribeCluster on that one broker (the in-process observer
    registers a listener nobody serves, so a client that picks any broker would fail)."""
    from odradek.tools.client import BrokerConnection  # noqa: PLC0415
    from odradek.wire.protocol import request_class  # noqa: PLC0415

    host, port = bootstrap.split(":")
    conn = BrokerConnection(host, int(port))
    try:
        resp = conn.send(60, request_class(60)(include_cluster_authorized_operations=False,
                                               include_fenced_brokers=True, endpoint_type=1))
    finally:
        conn.close()
    return {b.broker_id: b.is_fenced for b in resp.brokers}


def test_odradek_observer_registers_is_unfenced_and_copies_the_metadata_log(cluster, tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO)
    quorum = Quorum()
    cluster(quorum, 1, ("controller",))
    java = cluster(quorum, 2, ("broker",))
    admin = KafkaAdminClient(bootstrap_servers=java.bootstrap)
    admin.create_topics([NewTopic("before", 3, 1)])
    admin.close()
    node = ObserverNode(tmp_path / "odradek3", quorum, 3)
    seen: dict[int, bool] = {}

    def check() -> None:
        deadline = time.time() + 20
        while time.time() < deadline:
            seen.update(_describe(java.bootstrap))
            if seen.get(3) is False:
                return
            time.sleep(0.2)

    assert node.run_until_unfenced_then(check)
    assert seen == {2: False, 3: False}
    assert {t.name for t in node.image.topics_by_id.values()} == {"before"}
    assert {2, 3} <= set(node.image.brokers)
    time.sleep(1.0)  # the Java broker fetches what the controller wrote about the shutdown
    java.stop()
    ours = _batches(tmp_path / "odradek3" / MD)
    theirs = _batches(java.log_dir / MD)
    assert len(ours) >= 5  # leader change, bootstrap, registrations, the topic, the shutdown
    assert theirs[: len(ours)] == ours
    for name in ("leader-epoch-checkpoint", "quorum-state"):
        assert (tmp_path / "odradek3" / MD / name).read_bytes() == (java.log_dir / MD / name).read_bytes()


#: A controller that snapshots on every change and drops what its snapshots cover.
SNAPSHOTTING = {"internal.metadata.log.segment.bytes": "1048576", "metadata.log.segment.ms": "300",
                "metadata.log.max.record.bytes.between.snapshots": "1",
                "metadata.log.max.snapshot.interval.ms": "300",
                "metadata.max.retention.ms": "300", "metadata.max.retention.bytes": "1",
                "log.retention.check.interval.ms": "300", "log.initial.task.delay.ms": "300",
                "internal.metadata.delete.delay.millis": "0"}


def test_odradek_loads_a_snapshot_as_a_java_broker_stores_it(cluster, tmp_path) -> None:
    quorum = Quorum()
    controller = cluster(quorum, 1, ("controller",), **SNAPSHOTTING)
    java = cluster(quorum, 2, ("broker",))
    admin = KafkaAdminClient(bootstrap_servers=java.bootstrap)
    topics = 8
    for i in range(topics):
        admin.create_topics([NewTopic(f"snap-{i}", 2, 1, topic_configs={"retention.ms": str(1000 + i)})])
        time.sleep(0.4)
    admin.close()
    time.sleep(2)  # the controller snapshots and moves its log start offset past 0
    # a Java broker and Odradek join now: both must load the controller's newest snapshot
    late_java = cluster(quorum, 4, ("broker",))
    node = ObserverNode(tmp_path / "odradek3", quorum, 3)
    served: dict[str, bytes] = {}
    original = node._snapshot

    def loaded(records, offset) -> None:
        # the leader's own file of the snapshot just fetched, before its retention may drop it
        for p in (controller.log_dir / MD).glob(f"{offset:020d}-*.checkpoint"):
            served[p.name] = p.read_bytes()
        original(records, offset)

    node.observer.on_snapshot = loaded
    assert node.run_until_unfenced_then(lambda: None)
    assert node.snapshots_loaded, "no snapshot was fetched"
    assert {t.name for t in node.image.topics_by_id.values()} == {f"snap-{i}" for i in range(topics)}
    ours = {p.name: p for p in (tmp_path / "odradek3" / MD).glob("*.checkpoint")}
    assert ours and served and set(served) <= set(ours)
    for name, data in served.items():
        assert ours[name].read_bytes() == data
    theirs = {p.name: p for p in (late_java.log_dir / MD).glob("*.checkpoint")}
    assert theirs, "the Java broker fetched no snapshot either"
    for p in list(ours.values()) + list(theirs.values()):
        assert p.stat().st_mode & 0o777 == 0o400
    for name in set(ours) & set(theirs):
        assert ours[name].read_bytes() == theirs[name].read_bytes()
