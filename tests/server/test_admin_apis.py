"""The controller and replica admin APIs a single node answers: ElectLeaders, partition
reassignments, DescribeQuorum, Add/RemoveRaftVoter, UnregisterBroker, ListConfigResources and
AlterReplicaLogDirs. Expected answers are Kafka 4.4.0's for one node (compat-tests/
test_admin_apis_44.py asks both brokers the same questions)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.handlers import replica_log_dirs
from odradek.testing import RunningBroker, running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class
from odradek.wire.records import SimpleRecord, build_batch, iter_batches

TOPIC = "admin-apis"
ELECT, ALTER_REASSIGN, LIST_REASSIGN, QUORUM = 43, 45, 46, 55
ALTER_LOG_DIRS, UNREGISTER, LIST_CONFIG_RESOURCES, ADD_VOTER, REMOVE_VOTER = 34, 64, 74, 80, 81
NOT_NEEDED = "Leader election not needed for topic partition."


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[RunningBroker, BrokerConnection]]:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            cls = request_class(19)
            created = conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=2,
                                                                   replication_factor=1)], timeout_ms=30000))
            assert [t.error_code for t in created.topics] == [0]
            yield running, conn
        finally:
            conn.close()


def results(response) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    return [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
            for t in response.replica_election_results]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_is_never_needed(node, version: int) -> None:
    _, conn = node
    E = request_class(ELECT)
    for election_type in ((0, 1) if version >= 1 else (0,)):
        response = conn.send(ELECT, E(election_type=election_type, timeout_ms=5000, topic_partitions=[
            E.TopicPartitions(topic=TOPIC, partitions=[0, 1, 5]), E.TopicPartitions(topic="nope", partitions=[0])]),
            version)
        assert response.error_code == 0
        assert results(response) == [
            (TOPIC, [(0, 84, NOT_NEEDED), (1, 84, NOT_NEEDED), (5, 3, f"No such partition as {TOPIC}-5")]),
            ("nope", [(0, 3, "No such topic as nope")]),
        ]


def test_elect_leaders_for_every_partition_lists_topics_without_partitions(node) -> None:
    running, conn = node
    E = request_class(ELECT)
    response = conn.send(ELECT, E(election_type=0, timeout_ms=5000, topic_partitions=None), 2)
    names = sorted(running.broker.metadata.topics)
    assert TOPIC in names
    assert sorted(results(response)) == [(name, []) for name in names]


def test_elect_leaders_refuses_an_unknown_election_type(node) -> None:
    _, conn = node
    E = request_class(ELECT)
    response = conn.send(ELECT, E(election_type=7, timeout_ms=5000,
                                  topic_partitions=[E.TopicPartitions(topic=TOPIC, partitions=[0])]), 2)
    assert response.error_code == 42
    assert results(response) == [(TOPIC, [(0, 42, "Unknown election type 7")])]


def reassign(conn: BrokerConnection, version: int, topics: list[tuple[str, list[tuple[int, list[int] | None]]]],
             **fields) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    A = request_class(ALTER_REASSIGN)
    response = conn.send(ALTER_REASSIGN, A(timeout_ms=5000, topics=[
        A.ReassignableTopic(name=name, partitions=[A.ReassignablePartition(partition_index=i, replicas=replicas)
                                                   for i, replicas in parts]) for name, parts in topics], **fields),
        version)
    assert (response.error_code, response.error_message) == (0, None)
    return [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in response.responses]


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments(node, version: int) -> None:
    running, conn = node
    store = running.broker.metadata_store
    end, epoch = store.log.log_end_offset, running.broker.partition_log(TOPIC, 0).leader_epoch
    unregistered = "The manual partition assignment includes broker 2, but no such broker is registered."
    assert reassign(conn, version, [
        (TOPIC, [(0, [1]), (1, None), (9, [1])]),
        ("nope", [(0, [1])]),
    ]) == [
        (TOPIC, [(0, 0, None), (1, 85, None), (9, 3, f"Unable to find partition {TOPIC}:9.")]),
        ("nope", [(0, 3, "Unable to find a topic named nope.")]),
    ]
    assert reassign(conn, version, [(TOPIC, [(0, [2]), (1, [1, 2, 3])])]) == [
        (TOPIC, [(0, 39, unregistered), (1, 39, unregistered)])]
    assert reassign(conn, version, [(TOPIC, [(0, [1, 1]), (1, [])])]) == [(TOPIC, [
        (0, 39, "The manual partition assignment includes the broker 1 more than once."),
        (1, 39, "The manual partition assignment includes an empty replica list.")])]
    # the target is the current assignment: Kafka's controller records nothing, elects nobody
    assert store.log.log_end_offset == end
    assert running.broker.partition_log(TOPIC, 0).leader_epoch == epoch


def test_alter_partition_reassignments_echoes_the_replication_factor_flag(node) -> None:
    _, conn = node
    A = request_class(ALTER_REASSIGN)
    response = conn.send(ALTER_REASSIGN, A(timeout_ms=5000, allow_replication_factor_change=False, topics=[
        A.ReassignableTopic(name=TOPIC, partitions=[A.ReassignablePartition(partition_index=0, replicas=[1])])]), 1)
    assert response.allow_replication_factor_change is False
    assert response.responses[0].partitions[0].error_code == 0


def test_list_partition_reassignments_is_empty(node) -> None:
    _, conn = node
    L = request_class(LIST_REASSIGN)
    for topics in (None, [L.ListPartitionReassignmentsTopics(name=TOPIC, partition_indexes=[0, 7]),
                          L.ListPartitionReassignmentsTopics(name="nope", partition_indexes=[0])]):
        response = conn.send(LIST_REASSIGN, L(timeout_ms=5000, topics=topics), 0)
        assert (response.error_code, response.error_message, response.topics) == (0, None, [])


def describe_quorum(conn: BrokerConnection, version: int, topics=None):
    Q = request_class(QUORUM)
    if topics is None:
        topics = [("__cluster_metadata", [0])]
    return conn.send(QUORUM, Q(topics=[Q.TopicData(topic_name=name, partitions=[
        Q.PartitionData(partition_index=i) for i in parts]) for name, parts in topics]), version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_shows_the_single_voter(node, version: int) -> None:
    running, conn = node
    store = running.broker.metadata_store
    response = describe_quorum(conn, version)
    assert response.error_code == 0
    [topic] = response.topics
    [p] = topic.partitions
    assert (topic.topic_name, p.partition_index, p.error_code) == ("__cluster_metadata", 0, 0)
    assert (p.leader_id, p.leader_epoch) == (1, store.epoch)
    end = store.log.log_end_offset
    assert p.high_watermark == end
    [voter] = p.current_voters
    assert (voter.replica_id, voter.replica_directory_id, voter.log_end_offset) == (1, Uuid.ZERO, end)
    if version == 0:
        assert (voter.last_fetch_timestamp, voter.last_caught_up_timestamp) == (-1, -1)
    else:
        assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp > 0
    assert p.observers == []
    if version >= 2:
        [n] = response.nodes
        assert n.node_id == 1
        assert [(lst.name, lst.host, lst.port) for lst in n.listeners] == [("PLAINTEXT", running.host, running.port)]
    else:
        assert response.nodes == []


def test_describe_quorum_of_another_partition(node) -> None:
    _, conn = node
    for topics in ([("other", [0])], [("__cluster_metadata", [1])], [("__cluster_metadata", [0, 0])]):
        response = describe_quorum(conn, 2, topics)
        got = [(t.topic_name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
               for t in response.topics]
        assert got == [(name, [(i, 3, "This server does not host this topic-partition.") for i in parts])
                       for name, parts in topics]
    assert describe_quorum(conn, 2, []).topics == []


def test_raft_voter_changes_are_refused_for_a_static_voter_set(node) -> None:
    running, conn = node
    AV, RV = request_class(ADD_VOTER), request_class(REMOVE_VOTER)
    directory = Uuid(bytes(range(16)))
    controller = [AV.Listener(name="CONTROLLER", host="127.0.0.1", port=1234)]

    def add(**fields) -> tuple[int, str | None]:
        r = conn.send(ADD_VOTER, AV(timeout_ms=1000, **{"voter_id": 2, **fields}), 1)
        return r.error_code, r.error_message

    def remove(**fields) -> tuple[int, str | None]:
        r = conn.send(REMOVE_VOTER, RV(**fields), 0)
        return r.error_code, r.error_message

    cluster = running.broker.cluster_id
    assert add(cluster_id="wrong") == (104, f'The given id "wrong" doesn\'t match the cluster id "{cluster}"')
    assert add(cluster_id=None) == (42, "Add voter request didn't include a valid voter")
    assert add(cluster_id=cluster, voter_directory_id=directory) == (
        42, "Add voter request didn't include the endpoint (Endpoints(endpoints={})) for the default listener "
            "ListenerName(CONTROLLER)")
    for voter in (1, 2):
        assert add(cluster_id=None, voter_id=voter, voter_directory_id=directory, listeners=controller) == (
            35, "Cluster doesn't support adding voter because the kraft.version feature is 0")
    assert remove(cluster_id="wrong", voter_id=1)[0] == 104
    assert remove(cluster_id=None, voter_id=1) == (42, "Remove voter request didn't include a valid voter")
    assert remove(cluster_id=cluster, voter_id=1, voter_directory_id=directory) == (
        35, "Cluster doesn't support removing voter because the kraft.version feature is 0")


def test_unregister_broker(node) -> None:
    _, conn = node
    U = request_class(UNREGISTER)
    r = conn.send(UNREGISTER, U(broker_id=2), 0)
    assert (r.error_code, r.error_message) == (102, "Broker ID 2 is not currently registered")


def test_list_config_resources(node) -> None:
    running, conn = node
    L = request_class(LIST_CONFIG_RESOURCES)

    def listed(version: int, types: list[int]) -> tuple[int, list[tuple[str, int]]]:
        r = conn.send(LIST_CONFIG_RESOURCES, L(resource_types=types), version)
        return r.error_code, [(c.resource_name, c.resource_type) for c in r.config_resources]

    topics = [(name, 2) for name in running.broker.metadata.topics]
    assert listed(0, []) == (0, [])  # v0 was ListClientMetricsResources
    assert listed(1, []) == (0, [("1", 8), ("1", 4), *topics])
    assert listed(1, [2]) == (0, topics)
    assert listed(1, [4, 16, 32]) == (0, [("1", 4)])
    assert listed(1, [2, 99]) == (35, [])


def alter_log_dirs(conn: BrokerConnection, dirs: list[tuple[str, str, list[int]]], version: int = 2) -> dict:
    A = request_class(ALTER_LOG_DIRS)
    response = conn.send(ALTER_LOG_DIRS, A(dirs=[
        A.AlterReplicaLogDir(path=path, topics=[A.AlterReplicaLogDirTopic(name=name, partitions=parts)])
        for path, name, parts in dirs]), version)
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_in_one_dir(node, version: int) -> None:
    running, conn = node
    here = os.path.abspath(running.log_dir)
    long_topic = "x" * 220
    assert alter_log_dirs(conn, [
        (here, TOPIC, [0, 9]),
        (here, "nope", [0]),
        ("/nonexistent/dir", TOPIC, [1]),
        ("relative", "nope2", [3]),  # the dir is checked before the partition
        (here, long_topic, [0]),  # "<topic>-0.<32 hex>-future" would pass 255 bytes
    ], version) == {
        (TOPIC, 0): 0, (TOPIC, 9): 3, ("nope", 0): 3, (TOPIC, 1): 57, ("nope2", 3): 57, (long_topic, 0): 17,
    }
    # the path as it is: a trailing slash is another (unknown) dir, as in Kafka
    assert alter_log_dirs(conn, [(here + "/", TOPIC, [0])]) == {(TOPIC, 0): 57}


def produce(conn: BrokerConnection, partition: int, count: int, start: int = 0) -> list[int]:
    """`count` one-record batches of ~1 KiB to TOPIC; their offsets."""
    P = request_class(0)
    offsets = []
    for i in range(start, start + count):
        batch = build_batch([SimpleRecord(value=f"v{i:06d}".encode() + b"x" * 1000, key=str(i).encode())])
        r = conn.send(0, P(acks=-1, timeout_ms=10000, topic_data=[P.TopicProduceData(name=TOPIC, partition_data=[
            P.PartitionProduceData(index=partition, records=batch)])]), 9)
        [part] = r.responses[0].partition_responses
        assert part.error_code == 0, part
        offsets.append(part.base_offset)
    return offsets


def batches_in(log_dir: Path) -> list[bytes]:
    out = []
    for segment in sorted(log_dir.glob("*.log")):
        data = segment.read_bytes()
        out += [bytes(data[b.position:b.position + b.size_in_bytes]) for b in iter_batches(data)]
    return out


def test_alter_replica_log_dirs_moves_a_replica_live(tmp_path, monkeypatch) -> None:
    # small steps, so the copy takes several of them while producing goes on
    monkeypatch.setattr(replica_log_dirs, "COPY_CHUNK", 16 * 1024)
    monkeypatch.setattr(replica_log_dirs, "FINAL_BYTES", 4 * 1024)
    real_step = replica_log_dirs._copy_step

    def slow_step(*args):
        time.sleep(0.01)  # a slow disk: produce requests get in between the copy steps
        return real_step(*args)

    monkeypatch.setattr(replica_log_dirs, "_copy_step", slow_step)
    dirs = [tmp_path / "a", tmp_path / "b"]
    with running_broker(log_dir=dirs[0], **{"log.dirs": ",".join(map(str, dirs))}) as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            cls = request_class(19)
            conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)],
                              timeout_ms=30000))
            broker = running.broker
            source = broker.partition_log(TOPIC, 0).dir.parent
            target = next(d for d in dirs if d != source)
            offsets = produce(conn, 0, 300)
            assert alter_log_dirs(conn, [(str(target), TOPIC, [0])]) == {(TOPIC, 0): 0}
            # the future log exists once the request is answered, as in Kafka
            assert [p.name for p in target.iterdir() if p.name.endswith("-future")]
            # asking again for the same dir while the move is under way: NONE, nothing new
            assert alter_log_dirs(conn, [(str(target), TOPIC, [0])]) == {(TOPIC, 0): 0}
            deadline = time.monotonic() + 30
            while broker.partition_log(TOPIC, 0).dir.parent != target:
                assert time.monotonic() < deadline, "the move did not finish"
                offsets += produce(conn, 0, 5, start=len(offsets))
                time.sleep(0.02)  # a steady load the copy can overtake, as Kafka's future log must
            during = len(offsets)
            offsets += produce(conn, 0, 10, start=len(offsets))
            assert offsets == list(range(len(offsets)))  # nothing lost, nothing doubled
            moved = broker.partition_log(TOPIC, 0)
            assert moved.dir == target / f"{TOPIC}-0" and moved.log_end_offset == len(offsets)
            assert not (source / f"{TOPIC}-0").exists()
            assert not [p for d in dirs for p in d.iterdir() if p.name.endswith("-future")]
            [old] = [p for p in source.iterdir() if p.name.startswith(f"{TOPIC}-0.") and p.name.endswith("-delete")]
            # the batches were copied as they were: the old log is a prefix of the new one
            old_batches, new_batches = batches_in(old), batches_in(moved.dir)
            assert len(old_batches) >= 300 and new_batches[:len(old_batches)] == old_batches
            assert len(new_batches) == len(offsets) and len(old_batches) <= during
            assert during > 300  # some were produced while the copy went on
            # the metadata names the new dir's id, as Kafka's controller records it after the
            # broker's AssignReplicasToDirs (which follows the swap)
            store = broker.metadata_store
            while store.partition_states(TOPIC)[0].directories != [store.directory_ids[target]]:
                assert time.monotonic() < deadline, "the new directory was not recorded"
                time.sleep(0.05)
            # and the other partition stayed where it was
            assert broker.partition_log(TOPIC, 1).dir.parent == target
        finally:
            conn.close()


def test_alter_replica_log_dirs_back_to_the_current_dir_cancels(tmp_path, monkeypatch) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    gate = threading.Event()
    real_step = replica_log_dirs._copy_step

    def slow_step(*args):
        gate.wait(10)  # hold the copy until the cancellation is in
        return real_step(*args)

    monkeypatch.setattr(replica_log_dirs, "_copy_step", slow_step)
    monkeypatch.setattr(replica_log_dirs, "FINAL_BYTES", 1024)
    with running_broker(log_dir=dirs[0], **{"log.dirs": ",".join(map(str, dirs))}) as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            cls = request_class(19)
            conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                              timeout_ms=30000))
            broker = running.broker
            source = broker.partition_log(TOPIC, 0).dir.parent
            target = next(d for d in dirs if d != source)
            produce(conn, 0, 50)
            assert alter_log_dirs(conn, [(str(target), TOPIC, [0])]) == {(TOPIC, 0): 0}
            # DescribeLogDirs shows the future log in the target dir, 50 records behind (the copy is held)
            D = request_class(35)
            described = conn.send(35, D(topics=[D.DescribableLogDirTopic(topic=TOPIC, partitions=[0])]), 4)
            assert {Path(r.log_dir): [(p.partition_index, p.is_future_key, p.offset_lag) for t in r.topics
                                      for p in t.partitions] for r in described.results} == {
                source.resolve(): [(0, False, 0)], target.resolve(): [(0, True, 50)]}
            assert alter_log_dirs(conn, [(str(source), TOPIC, [0])]) == {(TOPIC, 0): 0}
            gate.set()
            deadline = time.monotonic() + 10
            while [p for p in target.iterdir() if p.name.endswith("-future")]:
                assert time.monotonic() < deadline, "the future log was not dropped"
                time.sleep(0.05)
            assert broker.partition_log(TOPIC, 0).dir.parent == source
            assert produce(conn, 0, 1, start=50) == [50]
        finally:
            conn.close()


def test_broker_throttles_are_set_and_deleted_other_broker_configs_stay_fixed(node) -> None:
    # kafka-reassign-partitions.sh --throttle sets these, --verify/--cancel clears them on every broker
    _, conn = node
    IAC = request_class(44)

    def alter(op: int, value: str | None, names: tuple[str, ...] = (
            "leader.replication.throttled.rate", "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second")) -> tuple[int, str | None]:
        r = conn.send(44, IAC(resources=[IAC.AlterConfigsResource(resource_type=4, resource_name="1", configs=[
            IAC.AlterableConfig(name=name, config_operation=op, value=value)
            for name in names])], validate_only=False), 1)
        [result] = r.responses
        return result.error_code, result.error_message

    assert alter(1, None) == (0, None)  # DELETE of what is not set
    assert alter(0, "1000") == (0, None)  # SET
    assert alter(1, None) == (0, None)  # DELETE
    assert alter(0, "100", ("num.io.threads",))[0] == 42  # not a dynamic config here: INVALID_REQUEST


def test_describe_quorum_names_the_static_voter_endpoint() -> None:
    # Kafka's static voter set comes from controller.quorum.voters, under the first controller listener name
    with running_broker(**{"controller.quorum.voters": "1@127.0.0.1:19093",
                           "controller.listener.names": "CONTROLLER"}) as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            [n] = describe_quorum(conn, 2).nodes
        finally:
            conn.close()
    assert (n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) == (1, [("CONTROLLER", "127.0.0.1", 19093)])


def test_a_dynamic_quorum_is_read_from_its_control_records(tmp_path) -> None:
    # what `kafka-storage.sh format --standalone` leaves in the metadata log: kraft.version 1 and
    # the voter with its directory id and CONTROLLER endpoint (later records win)
    from odradek.handlers.quorum import Quorum, _read_quorum
    from odradek.kraft.log import MetadataLog
    from odradek.kraft.records import encode_control_value, new_record
    from odradek.wire.records import ControlRecordType, control_record_key

    directory = Uuid(bytes(range(1, 17)))
    voters = new_record("VotersRecord", version=0)
    voters.voters = [type(voters).Voter(voter_id=1, voter_directory_id=directory, endpoints=[
        type(voters).Endpoint(name="CONTROLLER", host="127.0.0.1", port=9093)])]

    def control(ctype: ControlRecordType, message) -> SimpleRecord:
        return SimpleRecord(key=control_record_key(ctype), value=encode_control_value(int(ctype), message))

    md = MetadataLog.open(tmp_path)
    try:
        assert _read_quorum(md) == Quorum(0)
        for offset, version in ((0, 0), (1, 1)):
            batch = bytearray(build_batch([control(ControlRecordType.KRAFT_VERSION,
                                                   new_record("KRaftVersionRecord", k_raft_version=version))],
                                          base_offset=offset, partition_leader_epoch=1, is_control=True))
            md.plog.append_as_coordinator(batch, 1)
        assert _read_quorum(md) == Quorum(1)  # kraft.version 1 without a voter set yet
        md.plog.append_as_coordinator(bytearray(build_batch([control(ControlRecordType.KRAFT_VOTERS, voters)],
                                                            base_offset=2, partition_leader_epoch=1,
                                                            is_control=True)), 1)
        assert _read_quorum(md) == Quorum(1, ((1, directory, (("CONTROLLER", "127.0.0.1", 9093),)),))
    finally:
        md.close()


def test_a_move_under_way_at_shutdown_resumes_after_the_restart(tmp_path, monkeypatch) -> None:
    # as Kafka does: a clean stop keeps the future log, and the move carries on after a restart
    dirs = [tmp_path / "a", tmp_path / "b"]
    gate = threading.Event()
    real_step = replica_log_dirs._copy_step

    def held_step(*args):
        gate.wait(10)
        return real_step(*args)

    monkeypatch.setattr(replica_log_dirs, "_copy_step", held_step)
    monkeypatch.setattr(replica_log_dirs, "FINAL_BYTES", 1024)
    with running_broker(log_dir=dirs[0], **{"log.dirs": ",".join(map(str, dirs))}) as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            cls = request_class(19)
            conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                              timeout_ms=30000))
            source = running.broker.partition_log(TOPIC, 0).dir.parent
            target = next(d for d in dirs if d != source)
            produce(conn, 0, 50)
            assert alter_log_dirs(conn, [(str(target), TOPIC, [0])]) == {(TOPIC, 0): 0}
            assert [p for p in target.iterdir() if p.name.endswith("-future")]
        finally:
            conn.close()
    # stopped mid-move: the future log is still there
    assert [p for p in target.iterdir() if p.name.endswith("-future")]
    monkeypatch.setattr(replica_log_dirs, "_copy_step", real_step)
    with running_broker(log_dir=dirs[0], **{"log.dirs": ",".join(map(str, dirs))}) as running:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            plog = running.broker.partition_log(TOPIC, 0)
            if plog is not None and plog.dir.parent == target and \
                    not [p for d in dirs for p in d.iterdir() if p.name.endswith("-future")]:
                break
            time.sleep(0.05)
        plog = running.broker.partition_log(TOPIC, 0)
        assert plog.dir.parent == target and plog.log_end_offset == 50
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith("-future")]


def test_two_requests_for_one_move_make_one_future_log(tmp_path, monkeypatch) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    gate = threading.Event()
    real_open, real_step = replica_log_dirs._open_future_log, replica_log_dirs._copy_step

    def slow_open(*args):
        time.sleep(0.3)  # the second request arrives while the first creates the future log
        return real_open(*args)

    def held_step(*args):
        gate.wait(10)
        return real_step(*args)

    monkeypatch.setattr(replica_log_dirs, "_open_future_log", slow_open)
    monkeypatch.setattr(replica_log_dirs, "_copy_step", held_step)
    monkeypatch.setattr(replica_log_dirs, "FINAL_BYTES", 1024)
    with running_broker(log_dir=dirs[0], **{"log.dirs": ",".join(map(str, dirs))}) as running:
        conns = [BrokerConnection(running.host, running.port) for _ in range(2)]
        try:
            cls = request_class(19)
            conns[0].send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                                  timeout_ms=30000))
            source = running.broker.partition_log(TOPIC, 0).dir.parent
            target = next(d for d in dirs if d != source)
            produce(conns[0], 0, 50)
            answers: list[dict] = []
            threads = [threading.Thread(target=lambda c=c: answers.append(alter_log_dirs(c, [(str(target), TOPIC, [0])])))
                       for c in conns]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            assert answers == [{(TOPIC, 0): 0}] * 2
            assert len([p for p in target.iterdir() if p.name.endswith("-future")]) == 1
            gate.set()
            deadline = time.monotonic() + 10
            while running.broker.partition_log(TOPIC, 0).dir.parent != target:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            gate.set()
            for c in conns:
                c.close()


def test_copied_batches_keep_offsets_gaps_producers_and_append_times(tmp_path) -> None:
    # what a compacted log (offset gaps), idempotent producers and LogAppendTime topics leave:
    # the future log must hold the very same batches at the very same offsets
    from odradek.logstore.config import LogConfig
    from odradek.logstore.partition_log import PartitionLog

    def rec(i: int) -> SimpleRecord:
        return SimpleRecord(value=b"v%d" % i, key=b"k%d" % i, timestamp=1_700_000_000_000 + i)

    batches = [
        build_batch([rec(0), rec(1)], base_offset=0, partition_leader_epoch=0, producer_id=7, producer_epoch=0,
                    base_sequence=0),
        # offsets 2..9 were compacted away
        build_batch([rec(10)], base_offset=10, partition_leader_epoch=3, producer_id=7, producer_epoch=0,
                    base_sequence=5),
        build_batch([rec(11), rec(12)], base_offset=11, partition_leader_epoch=3, log_append_time=1_800_000_000_000),
    ]
    future = PartitionLog.open(tmp_path / "t-0.0123456789abcdef0123456789abcdef-future", LogConfig(), "t", 0)
    try:
        data = b"".join(batches)
        assert replica_log_dirs.append_copied(future, data + data[:30]) == len(data)  # a torn tail is left
        assert future.log_end_offset == 13
        assert batches_in(future.dir) == batches
        assert future.leader_epoch_cache.entries == [(0, 0), (3, 10)]
        assert future.producer_state.producers[7].last_seq == 5
        with pytest.raises(replica_log_dirs._MoveAborted):
            replica_log_dirs.append_copied(future, batches[1])  # below the end: never appended twice
    finally:
        future.close()
