"""Oracle (issue #23): the quorum APIs on a dynamic single-voter quorum (kraft.version 1).

Kafka 4.x's quickstart formats with ``kafka-storage.sh format --standalone``: the metadata log
then holds a KRaftVersion record (1) and a VotersRecord with the voter's directory id and
CONTROLLER endpoint. A Kafka 4.4.0 node formatted so answers DescribeQuorum, AddRaftVoter and
RemoveRaftVoter; then Odradek, started on the same directory with the same listeners, must
answer the same (apart from the leader epoch, which each restart bumps, the metadata log's
length and the times), and kafka-metadata-quorum.sh must print the same.
"""

from __future__ import annotations

import re

from kafka_oracle import CLUSTER_ID, BrokerStartError, KafkaBroker, require_tool, run_java_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class

KAFKA = "4.4.0"


class StandaloneKafka(KafkaBroker):
    """Kafka formatted with --standalone: controller.quorum.bootstrap.servers, no static voters."""

    def properties(self) -> dict[str, str]:
        props = super().properties()
        props.pop("controller.quorum.voters")
        props["controller.quorum.bootstrap.servers"] = f"{self.host}:{self.controller_port}"
        return props

    def _prepare(self) -> None:
        self._write_properties()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        if all((d / "meta.properties").is_file() for d in self.log_dirs):
            return
        proc = run_java_tool("kafka.tools.StorageTool",
                             ["format", "-t", CLUSTER_ID, "-c", str(self.properties_file), "--standalone"],
                             version=self.version)
        if proc.returncode != 0:
            raise BrokerStartError(f"StorageTool format --standalone failed:\n{proc.stdout}\n{proc.stderr}")


def _answers(bootstrap: str) -> list[tuple[str, object]]:
    host, port = bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    out: list[tuple[str, object]] = []
    try:
        Q, AV, RV = request_class(55), request_class(80), request_class(81)
        topics = [Q.TopicData(topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]
        voter_dir = None
        for version in (0, 1, 2):
            r = conn.send(55, Q(topics=topics), version)
            [p] = r.topics[0].partitions
            [v] = p.current_voters
            assert p.high_watermark == v.log_end_offset > 0 and p.leader_epoch >= 1
            voter_dir = v.replica_directory_id
            out.append((f"DescribeQuorum v{version}", (
                r.error_code, p.error_code, p.leader_id, v.replica_id, v.replica_directory_id, p.observers,
                [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in r.nodes])))
        assert voter_dir != Uuid.ZERO  # a dynamic voter has its directory id
        other = Uuid(bytes(range(16)))
        controller = [AV.Listener(name="CONTROLLER", host="127.0.0.1", port=1)]
        for voter_id, directory in ((1, other), (1, voter_dir), (2, other)):
            r = conn.send(80, AV(cluster_id=None, timeout_ms=2000, voter_id=voter_id, voter_directory_id=directory,
                                 listeners=controller), 1)
            out.append((f"AddRaftVoter {voter_id}", (r.error_code, r.error_message)))
        for voter_id, directory in ((1, other), (2, other), (1, voter_dir)):
            r = conn.send(81, RV(cluster_id=None, voter_id=voter_id, voter_directory_id=directory), 0)
            out.append((f"RemoveRaftVoter {voter_id}", (r.error_code, r.error_message)))
    finally:
        conn.close()
    return out


def _quorum_tool(bootstrap: str) -> list[str]:
    lines = []
    for what in ("--status", "--replication"):
        proc = run_java_tool("org.apache.kafka.tools.MetadataQuorumCommand",
                             ["--bootstrap-server", bootstrap, "describe", what], version=KAFKA)
        assert proc.returncode == 0, proc.stderr
        text = re.sub(r"(HighWatermark|LeaderEpoch):(\s+)\d+", r"\1:\2<n>", proc.stdout)
        text = re.sub(r"^(\d+)\s+(\S+)\s+\d+\s+(\d+)\s+\d+\s+\d+\s+(\w+)\s*$", r"\1 \2 <offset> \3 <time> <time> \4",
                      text, flags=re.MULTILINE)
        lines += text.splitlines()
    return lines


def test_a_dynamic_single_voter_quorum_answers_as_in_kafka(broker_factory, tmp_path) -> None:
    require_tool(f"kafka-{KAFKA}")
    standalone = StandaloneKafka(tmp_path / "kafka", version=KAFKA)
    broker_factory.brokers.append(standalone)  # torn down with the others
    standalone.start()
    theirs = _answers(standalone.bootstrap)
    their_tool = _quorum_tool(standalone.bootstrap)
    standalone.stop()
    # Odradek on Kafka's directory, with Kafka's listeners
    props = standalone.properties()
    odradek = broker_factory("odradek", port=standalone.port, overrides={
        "listeners": props["listeners"], "listener.security.protocol.map": props["listener.security.protocol.map"],
        "controller.listener.names": "CONTROLLER", "log.dirs": props["log.dirs"], "node.id": "1"})
    ours = _answers(odradek.bootstrap)
    assert [name for name, _ in ours] == [name for name, _ in theirs]
    for (name, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, name
    assert _quorum_tool(odradek.bootstrap) == their_tool  # the same cluster id: the same directory
    assert any('"directoryId": "' in line for line in their_tool)
