"""Oracle (issue #23): the controller and replica admin APIs against Kafka 4.4.0, three ways.

* kafka-python 3.0.11's own integration tests for elections, replica log dirs, reassignments,
  the metadata quorum and config resources (from its sdist) pass against Odradek, and against
  Kafka 4.4.0 with the same harness;
* the same raw requests (ElectLeaders, Alter/ListPartitionReassignments, DescribeQuorum,
  Add/RemoveRaftVoter, UnregisterBroker, ListConfigResources, AlterReplicaLogDirs) get the same
  answers from both, apart from what differs between any two clusters (ids, ports, paths,
  offsets of the metadata log, times);
* Kafka 4.4.0's kafka-leader-election.sh, kafka-reassign-partitions.sh (--generate, --execute,
  --verify, --cancel, --list) and kafka-metadata-quorum.sh (describe --status/--replication)
  print the same against both, with the same differences masked.

Both brokers are single combined nodes with node id 1 and a static voter set on a CONTROLLER
listener (Odradek serves everything on every listener, so its CONTROLLER listener is real).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from kafka_oracle import BrokerProcess, free_port, in_ci, require_tool, run_java_tool
from kafka_python_suite import SuiteMissing, suite_dir
from kafka_python_suite import run as run_suite

from odradek.tools.client import BrokerConnection
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class

KAFKA = "4.4.0"
KAFKA_PYTHON = "3.0.11"
TOPIC = "admin44"

# kafka-python's tests of what issue #23 added (their names in test/integration/test_admin_integration.py)
KAFKA_PYTHON_TESTS = (
    "test_elect_leaders", "test_describe_log_dirs", "test_alter_replica_log_dirs", "test_describe_metadata_quorum",
    "test_alter_partition_reassignments", "test_list_partition_reassignments", "test_list_config_resources",
)


@pytest.fixture(scope="module")
def brokers(_module_factory) -> dict[str, BrokerProcess]:
    require_tool(f"kafka-{KAFKA}")
    kafka = _module_factory("kafka", version=KAFKA)
    port, controller = free_port(), free_port()
    odradek = _module_factory("odradek", port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
    })
    for broker in (kafka, odradek):
        with connect(broker) as conn:
            cls = request_class(19)
            created = conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)],
                                        timeout_ms=30000))
            assert [t.error_code for t in created.topics] == [0], created
    return {"kafka": kafka, "odradek": odradek}


class connect:  # noqa: N801 - used as a context manager, like open()
    def __init__(self, broker: BrokerProcess) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.conn = BrokerConnection(host, int(port))

    def __enter__(self) -> BrokerConnection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


# ------------------------------------------------------------------ kafka-python's own tests


@pytest.fixture(scope="module")
def kafka_python_suite() -> Path:
    try:
        return suite_dir(KAFKA_PYTHON)
    except SuiteMissing as exc:
        message = f"ORACLE TOOL MISSING: kafka-python {KAFKA_PYTHON} sdist: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_kafka_python_admin_integration_tests_pass(brokers, kafka_python_suite: Path, kind: str) -> None:
    proc = run_suite(kafka_python_suite, brokers[kind].bootstrap, KAFKA,
                     ["test/integration/test_admin_integration.py", "-k", " or ".join(KAFKA_PYTHON_TESTS)])
    outcomes = {name: outcome for outcome, name in re.findall(
        r"^(PASSED|FAILED|ERROR|SKIPPED)\S* test/integration/test_admin_integration\.py::(\w+)", proc.stdout,
        re.MULTILINE)}
    assert outcomes == dict.fromkeys(KAFKA_PYTHON_TESTS, "PASSED"), proc.stdout[-6000:]
    assert proc.returncode == 0, proc.stdout[-6000:]


# ------------------------------------------------------------------ the same requests, the same answers


def _topic(name: str) -> str:
    # kafka-python's tests (run first, against both) name their topics <test name>_<10 random letters>
    return re.sub(r"_[A-Za-z]{10}$", "_<random>", name)


def _scenario(broker: BrokerProcess) -> list[tuple[str, object]]:
    """Requests with their normalized answers (what may differ between two clusters masked)."""
    out: list[tuple[str, object]] = []
    with connect(broker) as conn:
        cluster = conn.send(60, request_class(60)(), 0).cluster_id

        def masked(text: str | None) -> str | None:
            return None if text is None else text.replace(cluster, "<cluster-id>")

        E = request_class(43)
        for version, election_type in ((0, 0), (1, 1), (2, 0), (2, 1)):
            r = conn.send(43, E(election_type=election_type, timeout_ms=5000, topic_partitions=[
                E.TopicPartitions(topic=TOPIC, partitions=[0, 1, 5]), E.TopicPartitions(topic="nope", partitions=[0])]),
                version)
            out.append((f"ElectLeaders v{version} type {election_type}", (r.error_code, [
                (t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
                for t in r.replica_election_results])))
        r = conn.send(43, E(election_type=0, timeout_ms=5000, topic_partitions=None), 2)
        # every topic, in the controller's hash order
        out.append(("ElectLeaders all", (r.error_code, sorted(
            (_topic(t.topic), [(p.partition_id, p.error_code) for p in t.partition_result])
            for t in r.replica_election_results))))
        r = conn.send(43, E(election_type=9, timeout_ms=5000, topic_partitions=None), 2)
        out.append(("ElectLeaders unknown type", (r.error_code, r.replica_election_results)))

        A = request_class(45)
        P = A.ReassignablePartition
        for version in (0, 1):
            for replicas in ([1], None, [2], [1, 2], [1, 1], []):
                r = conn.send(45, A(timeout_ms=5000, allow_replication_factor_change=version == 0, topics=[
                    A.ReassignableTopic(name=TOPIC, partitions=[P(partition_index=0, replicas=replicas),
                                                                P(partition_index=7, replicas=replicas)]),
                    A.ReassignableTopic(name="nope", partitions=[P(partition_index=0, replicas=replicas)])]), version)
                out.append((f"AlterPartitionReassignments v{version} {replicas}", (
                    r.error_code, r.error_message, r.allow_replication_factor_change,
                    [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                     for t in r.responses])))
        L = request_class(46)
        for topics in (None, [L.ListPartitionReassignmentsTopics(name=TOPIC, partition_indexes=[0, 7]),
                              L.ListPartitionReassignmentsTopics(name="nope", partition_indexes=[1])]):
            r = conn.send(46, L(timeout_ms=5000, topics=topics), 0)
            out.append(("ListPartitionReassignments", (r.error_code, r.error_message, r.topics)))

        Q = request_class(55)
        for version in (0, 1, 2):
            r = conn.send(55, Q(topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[
                Q.PartitionData(partition_index=0)])]), version)
            [t] = r.topics
            [p] = t.partitions
            [v] = p.current_voters
            # the metadata log's length and the times differ; their relations do not
            assert p.high_watermark == v.log_end_offset > 0
            assert (v.last_fetch_timestamp == v.last_caught_up_timestamp) and (v.last_fetch_timestamp > 0) == (version > 0)
            out.append((f"DescribeQuorum v{version}", (
                r.error_code, r.error_message, t.topic_name, p.partition_index, p.error_code, p.error_message,
                p.leader_id, p.leader_epoch, v.replica_id, v.replica_directory_id, p.observers,
                [(n.node_id, [(lst.name, lst.host) for lst in n.listeners]) for n in r.nodes])))
        for topics in ([("other", [0])], [("__cluster_metadata", [1])], [("__cluster_metadata", [0, 0])], []):
            r = conn.send(55, Q(topics=[Q.TopicData(topic_name=name, partitions=[Q.PartitionData(partition_index=i)
                                                                                for i in parts])
                                        for name, parts in topics]), 2)
            out.append(("DescribeQuorum other", r))

        AV, RV = request_class(80), request_class(81)
        directory = Uuid(bytes(range(16)))
        controller = [AV.Listener(name="CONTROLLER", host="127.0.0.1", port=1234)]
        for fields in ({"cluster_id": "wrong"}, {"cluster_id": None}, {"cluster_id": cluster, "voter_directory_id": directory},
                       {"cluster_id": None, "voter_directory_id": directory, "listeners": controller},
                       {"cluster_id": None, "voter_id": 1, "voter_directory_id": directory, "listeners": controller}):
            for version in (0, 1):
                r = conn.send(80, AV(timeout_ms=1000, **{"voter_id": 2, **fields}), version)
                out.append((f"AddRaftVoter v{version} {sorted(fields)}", (r.error_code, masked(r.error_message))))
        for fields in ({"cluster_id": "wrong", "voter_id": 1}, {"cluster_id": None, "voter_id": 1},
                       {"cluster_id": None, "voter_id": 1, "voter_directory_id": directory},
                       {"cluster_id": cluster, "voter_id": 5, "voter_directory_id": directory}):
            r = conn.send(81, RV(**fields), 0)
            out.append((f"RemoveRaftVoter {sorted(fields)}", (r.error_code, masked(r.error_message))))
        # not the node's own id: Kafka then unregisters itself and leads nothing until restarted
        r = conn.send(64, request_class(64)(broker_id=2), 0)
        out.append(("UnregisterBroker 2", (r.error_code, r.error_message)))

        LC = request_class(74)
        for version, types in ((0, []), (1, [2]), (1, [4]), (1, [8]), (1, [16, 32]), (1, [2, 99])):
            r = conn.send(74, LC(resource_types=types), version)
            out.append((f"ListConfigResources v{version} {types}", (
                r.error_code, sorted((_topic(c.resource_name), c.resource_type) for c in r.config_resources))))

        here = os.path.abspath(broker.log_dirs[0])
        AR = request_class(34)
        for version in (1, 2):
            r = conn.send(34, AR(dirs=[
                AR.AlterReplicaLogDir(path=here, topics=[AR.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0, 9]),
                                                         AR.AlterReplicaLogDirTopic(name="nope", partitions=[0]),
                                                         AR.AlterReplicaLogDirTopic(name="x" * 220, partitions=[0])]),
                AR.AlterReplicaLogDir(path="/nonexistent/dir", topics=[AR.AlterReplicaLogDirTopic(name=TOPIC,
                                                                                                 partitions=[1])]),
                AR.AlterReplicaLogDir(path="relative", topics=[AR.AlterReplicaLogDirTopic(name="nope2", partitions=[3])]),
                AR.AlterReplicaLogDir(path=here + "/", topics=[AR.AlterReplicaLogDirTopic(name="nope3", partitions=[0])]),
            ]), version)
            out.append((f"AlterReplicaLogDirs v{version}", sorted(
                (t.topic_name, p.partition_index, p.error_code) for t in r.results for p in t.partitions)))
    return out


def test_same_answers_as_kafka(brokers) -> None:
    theirs = _scenario(brokers["kafka"])
    ours = _scenario(brokers["odradek"])
    assert [name for name, _ in ours] == [name for name, _ in theirs]
    for (name, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, name


# ------------------------------------------------------------------ Kafka's own tools


def _tool(main_class: str, *args: str) -> tuple[int, str, str]:
    proc = run_java_tool(main_class, list(args), version=KAFKA)
    # the tools' own lines, without log4j's start-up noise
    err = "\n".join(line for line in proc.stderr.splitlines() if "log4j" not in line.lower() and "SLF4J" not in line)
    return proc.returncode, proc.stdout, err


def _tool_runs(broker: BrokerProcess, workdir: Path) -> list[tuple[str, tuple[int, str, str]]]:
    b = ["--bootstrap-server", broker.bootstrap]
    log_dir = os.path.abspath(broker.log_dirs[0])
    with connect(broker) as conn:
        cluster = conn.send(60, request_class(60)(), 0).cluster_id
    workdir.mkdir(parents=True, exist_ok=True)

    def masked(text: str) -> str:
        text = text.replace(cluster, "<cluster-id>").replace(log_dir, "<log-dir>").replace(str(workdir), "<work>")
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)
        text = re.sub(r"(HighWatermark:\s+)\d+", r"\1<offset>", text)
        # --replication rows: NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status
        return re.sub(r"^(\d+)\s+(\S+)\s+\d+\s+(\d+)\s+\d+\s+\d+\s+(\w+)\s*$", r"\1 \2 <offset> \3 <time> <time> \4",
                      text, flags=re.MULTILINE)

    runs: list[tuple[str, tuple[int, str, str]]] = []

    def run(label: str, main_class: str, *args: str) -> None:
        code, out, err = _tool(main_class, *b, *args)
        runs.append((label, (code, masked(out), masked(err))))

    election = "org.apache.kafka.tools.LeaderElectionCommand"
    run("elect all", election, "--election-type", "PREFERRED", "--all-topic-partitions")
    run("elect one unclean", election, "--election-type", "UNCLEAN", "--topic", TOPIC, "--partition", "0")
    run("elect unknown", election, "--election-type", "PREFERRED", "--topic", "nope", "--partition", "0")

    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    (workdir / "move.json").write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    run("generate", reassign, "--generate", "--topics-to-move-json-file", str(workdir / "move.json"), "--broker-list", "1")
    # partition 0 also names its (current) log dir: the tool sends AlterReplicaLogDirs for it
    plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [log_dir]},
                                         {"topic": TOPIC, "partition": 1, "replicas": [1]}]}
    (workdir / "plan.json").write_text(json.dumps(plan))
    for action in ("--execute", "--verify", "--cancel"):
        run(action, reassign, action, "--reassignment-json-file", str(workdir / "plan.json"))
    run("list", reassign, "--list")
    (workdir / "bad.json").write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [2]}]}))
    run("execute to an unknown broker", reassign, "--execute", "--reassignment-json-file", str(workdir / "bad.json"))

    quorum = "org.apache.kafka.tools.MetadataQuorumCommand"
    run("quorum status", quorum, "describe", "--status")
    run("quorum replication", quorum, "describe", "--replication")
    return runs


def test_kafka_tools_print_the_same(brokers, tmp_path: Path) -> None:
    theirs = _tool_runs(brokers["kafka"], tmp_path / "kafka")
    ours = _tool_runs(brokers["odradek"], tmp_path / "odradek")
    assert [label for label, _ in ours] == [label for label, _ in theirs]
    for (label, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, label
    # what was compared says something: the answers Kafka's tools print for one node
    printed = dict(theirs)
    assert "Valid replica already elected for partitions admin44-0" in printed["elect one unclean"][1]
    assert printed["elect unknown"][0] == 1 and "No such topic as nope" in printed["elect unknown"][1]
    assert "Reassignment of partition admin44-0 is completed." in printed["--verify"][1]
    assert "None of the specified partition reassignments are active." in printed["--cancel"][1]
    assert "Unknown broker id 2" in printed["execute to an unknown broker"][1]
    assert '"endpoints": ["CONTROLLER://127.0.0.1:<port>"]' in printed["quorum status"][1]
