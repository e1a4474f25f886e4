"""Every version of every group API through the real dispatcher: requests encoded as a client
would, responses decoded, the classic flow (join, sync, heartbeat, commit, fetch, describe, list,
leave, delete) at each JoinGroup version, and the KIP-848 APIs."""

from __future__ import annotations

import pytest
from groups_testutil import FakeBroker, call, consumer_subscription, run_with_coordinator

from odradek.handlers.registry import load_handlers
from odradek.wire.errors import ErrorCode as E
from odradek.wire.protocol import (
    request_class,
    supported_versions,
)

load_handlers()




JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, FIND, DESCRIBE, LIST, DELETE = 11, 14, 12, 13, 8, 9, 10, 15, 16, 42


@pytest.mark.parametrize("version", range(supported_versions(JOIN)[0], supported_versions(JOIN)[1] + 1))
def test_classic_flow_at_every_version(tmp_path, version):
    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 2, {})
    Join = request_class(JOIN)
    Sync = request_class(SYNC)
    Leave = request_class(LEAVE)
    Commit = request_class(COMMIT)
    Fetch = request_class(FETCH)

    async def scenario(c):
        # first use: __consumer_offsets is made and the client is told to retry, as Kafka does
        first = await call(broker, FIND, min(version, 6), key="g", key_type=0, coordinator_keys=["g"])
        if min(version, 6) >= 4:
            assert [(x.error_code, x.node_id, x.error_message) for x in first.coordinators] == [
                (E.COORDINATOR_NOT_AVAILABLE, -1, "")]
        else:
            assert (first.error_code, first.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
        assert broker.metadata.get("__consumer_offsets") is not None
        found = await call(broker, FIND, min(version, 6), key="g", key_type=0, coordinator_keys=["g"])
        if min(version, 6) >= 4:
            assert found.coordinators[0].error_code == 0 and found.coordinators[0].port == 9092
        else:
            assert found.error_code == 0 and found.node_id == 1
        protocols = [Join.JoinGroupRequestProtocol(name="range", metadata=consumer_subscription("t"))]
        join = dict(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                    protocol_type="consumer", protocols=protocols)
        joined = await call(broker, JOIN, version, **join)
        if version >= 4:
            assert joined.error_code == E.MEMBER_ID_REQUIRED
            joined = await call(broker, JOIN, version, **{**join, "member_id": joined.member_id})
        assert joined.error_code == 0 and joined.generation_id == 1 and joined.leader == joined.member_id
        member = joined.member_id
        sv = min(version, 5)
        synced = await call(broker, SYNC, sv, group_id="g", generation_id=1, member_id=member,
                            protocol_type="consumer", protocol_name="range",
                            assignments=[Sync.SyncGroupRequestAssignment(member_id=member, assignment=b"A")])
        assert synced.error_code == 0 and synced.assignment == b"A"
        beat = await call(broker, HEARTBEAT, min(version, 4), group_id="g", generation_id=1, member_id=member)
        assert beat.error_code == 0
        cv = min(version + 2, 9)  # v10 names topics by id (tests/server/test_kafka44_versions.py)
        committed = await call(broker, COMMIT, cv, group_id="g", generation_id_or_member_epoch=1, member_id=member,
                               retention_time_ms=-1, topics=[Commit.OffsetCommitRequestTopic(name="t", partitions=[
                                   Commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                       committed_leader_epoch=2, committed_metadata="m"),
                                   Commit.OffsetCommitRequestPartition(partition_index=9, committed_offset=1)])])
        # Kafka's order: the unknown partition as it is met, then the coordinator's results
        codes = [(p.partition_index, p.error_code) for p in committed.topics[0].partitions]
        assert codes == [(9, E.UNKNOWN_TOPIC_OR_PARTITION), (0, 0)]
        fv = min(version, supported_versions(FETCH)[1])
        if fv >= 8:
            fetched = await call(broker, FETCH, fv, groups=[Fetch.OffsetFetchRequestGroup(group_id="g", topics=[
                Fetch.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])])])
            parts = fetched.groups[0].topics[0].partitions
        else:
            fetched = await call(broker, FETCH, fv, group_id="g", topics=[
                Fetch.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])])
            parts = fetched.topics[0].partitions
        assert [(p.committed_offset, p.metadata) for p in parts] == [(5, "m"), (-1, "")]
        if fv >= 5:
            assert parts[0].committed_leader_epoch == 2
        described = await call(broker, DESCRIBE, min(version, 6), groups=["g"])
        group = described.groups[0]
        assert (group.group_state, group.protocol_data, group.members[0].member_assignment) == ("Stable", "range", b"A")
        listed = await call(broker, LIST, min(version, 5), states_filter=["Stable"] if version >= 4 else [])
        assert [g.group_id for g in listed.groups] == ["g"]
        lv = min(version, 5)
        if lv >= 3:
            left = await call(broker, LEAVE, lv, group_id="g", members=[Leave.MemberIdentity(member_id=member)])
            assert left.error_code == 0 and left.members[0].error_code == 0
        else:
            left = await call(broker, LEAVE, lv, group_id="g", member_id=member)
            assert left.error_code == 0
        deleted = await call(broker, DELETE, min(version, 2), groups_names=["g", "nope"])
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", 0), ("nope", E.GROUP_ID_NOT_FOUND)]

    run_with_coordinator(broker, scenario)


def test_find_coordinator_batches_keys_and_knows_no_transaction_coordinator(tmp_path):
    broker = FakeBroker(tmp_path)

    async def scenario(c):
        # every key of the request that made __consumer_offsets is told to retry
        first = await call(broker, FIND, 4, key_type=0, coordinator_keys=["a", "b"])
        assert [(x.key, x.error_code) for x in first.coordinators] == [("a", 15), ("b", 15)]
        found = await call(broker, FIND, 4, key_type=0, coordinator_keys=["a", "b"])
        assert [(x.key, x.error_code, x.node_id) for x in found.coordinators] == [("a", 0, 1), ("b", 0, 1)]
        assert {x.error_message for x in found.coordinators} == {""}  # v4+ carries no message
        txn = await call(broker, FIND, 4, key_type=1, coordinator_keys=["tx"])
        assert txn.coordinators[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        old = await call(broker, FIND, 1, key="tx", key_type=1)
        assert old.error_code == E.COORDINATOR_NOT_AVAILABLE and old.node_id == -1
        assert broker.metadata.get("__consumer_offsets") is not None

    run_with_coordinator(broker, scenario)


def test_offset_delete_and_kip848_apis(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 2, {})
    Delete = request_class(47)
    Hb = request_class(68)

    async def scenario(c):
        c.commit_offsets("simple", [("t", 0, 1, -1, "", -1)])
        c.validate_offset_commit("simple", -1, "", None, 8)
        deleted = await call(broker, 47, 0, group_id="simple", topics=[Delete.OffsetDeleteRequestTopic(
            name="t", partitions=[Delete.OffsetDeleteRequestPartition(partition_index=0)])])
        assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
        missing = await call(broker, 47, 0, group_id="nope", topics=[])
        assert missing.error_code == E.GROUP_ID_NOT_FOUND
        for version in (0, 1):
            group = f"cg{version}"
            first = await call(broker, 68, version, group_id=group, member_id="" if version == 0 else "m1",
                               member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["t"],
                               server_assignor="range", topic_partitions=[])
            assert first.error_code == 0 and first.member_epoch == 2 and first.member_id
            assert sorted(first.assignment.topic_partitions[0].partitions) == [0, 1]
            again = await call(broker, 68, version, group_id=group, member_id=first.member_id, member_epoch=2,
                               rebalance_timeout_ms=-1, topic_partitions=[Hb.TopicPartitions(
                                   topic_id=broker.metadata.get("t").topic_id, partitions=[0, 1])])
            assert again.error_code == 0 and again.assignment is None
            described = await call(broker, 69, version, group_ids=[group, "simple"])
            by_id = {g.group_id: g for g in described.groups}  # answered in Kafka's partition order
            ok, wrong = by_id[group], by_id["simple"]
            assert ok.group_state == "Stable" and ok.assignor_name == "range"
            assert ok.members[0].assignment.topic_partitions[0].topic_name == "t"
            assert wrong.error_code == E.GROUP_ID_NOT_FOUND
            fenced = await call(broker, 68, version, group_id=group, member_id=first.member_id, member_epoch=9,
                                rebalance_timeout_ms=-1)
            assert fenced.error_code == E.FENCED_MEMBER_EPOCH
        listed = await call(broker, 16, 5, types_filter=["consumer"])
        assert sorted(g.group_id for g in listed.groups) == ["cg0", "cg1"]

    run_with_coordinator(broker, scenario)
