"""The versions Kafka 4.4 added to APIs Odradek already served, with 4.4's behaviour:
ListOffsets v11 (KIP-1023 earliest pending upload), DescribeLogDirs v5 (cordoned dirs),
DeleteGroups v3 (per-group error message)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker, running_broker
from odradek.tools.client import BrokerConnection, KafkaClient
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import API_KEYS, request_class
from odradek.wire.records import SimpleRecord, build_batch

LIST_OFFSETS, DESCRIBE_LOG_DIRS, DELETE_GROUPS = API_KEYS["ListOffsets"], API_KEYS["DescribeLogDirs"], 42


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with running_broker() as running:
        client = KafkaClient(running.bootstrap_servers)
        try:
            info = client.topic("t", auto_create=True)
            batch = build_batch([SimpleRecord(key=b"k", value=b"v", timestamp=1_700_000_000_000)] * 3)
            client.produce("t", {0: batch}, leaders={p: i.leader for p, i in info.partitions.items()})
        finally:
            client.close()
        yield running


def _send(broker: RunningBroker, key: int, version: int, **fields):
    conn = BrokerConnection(broker.host, broker.port)
    try:
        return conn.send(key, request_class(key)(**fields), version)
    finally:
        conn.close()


def _list_offsets(broker: RunningBroker, version: int, timestamp: int):
    cls = request_class(LIST_OFFSETS)
    r = _send(broker, LIST_OFFSETS, version, replica_id=-1, topics=[cls.ListOffsetsTopic(
        name="t", partitions=[cls.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                       timestamp=timestamp)])])
    p = r.topics[0].partitions[0]
    return p.error_code, p.timestamp, p.offset, p.leader_epoch


def test_list_offsets_v11_earliest_pending_upload(broker: RunningBroker) -> None:
    # no tiered storage: nothing pends upload, so no offset (Kafka's UnifiedLog answer)
    assert _list_offsets(broker, 11, -6) == (0, -1, -1, -1)
    assert _list_offsets(broker, 11, -2) == (0, -1, 0, 0)
    assert _list_offsets(broker, 11, -1) == (0, -1, 3, 0)
    assert _list_offsets(broker, 11, 1_600_000_000_000) == (0, 1_700_000_000_000, 0, 0)


def test_describe_log_dirs_v5_says_whether_a_dir_is_cordoned(broker: RunningBroker) -> None:
    r = _send(broker, DESCRIBE_LOG_DIRS, 5, topics=None)
    assert r.error_code == 0 and len(r.results) == 1
    d = r.results[0]
    assert d.log_dir == str(broker.log_dir.resolve()) and d.is_cordoned is False
    assert d.total_bytes > 0 and [t.name for t in d.topics] == ["t"]


def test_delete_groups_v3_has_the_error_message(broker: RunningBroker) -> None:
    r = _send(broker, DELETE_GROUPS, 3, groups_names=["no-such-group"])
    [result] = r.results
    # Kafka 4.4's group coordinator sets ErrorMessage only for a streams group's failed topology
    # clean-up (GROUP_DELETION_FAILED); a missing group gets the code alone
    assert (result.group_id, result.error_code, result.error_message) == ("no-such-group", 69, None)


def _topic_id(broker: RunningBroker):
    client = KafkaClient(broker.bootstrap_servers)
    try:
        return client.topic("t").topic_id
    finally:
        client.close()


UNKNOWN_ID = Uuid.from_base64("AAAAAAAAAAAAAAAAAAAAAQ")


def _fetch_v10(broker: RunningBroker, group: str, topics: list | None) -> list:
    F = request_class(9)
    r = _send(broker, 9, 10, require_stable=False, groups=[F.OffsetFetchRequestGroup(
        group_id=group, member_id=None, member_epoch=-1,
        topics=None if topics is None else [F.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=parts)
                                            for tid, parts in topics])])
    [g] = r.groups
    assert g.error_code == 0
    return [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in g.topics]


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker: RunningBroker) -> None:
    tid = _topic_id(broker)
    C = request_class(8)
    r = _send(broker, 8, 10, group_id="g44", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
              topics=[C.OffsetCommitRequestTopic(topic_id=UNKNOWN_ID, partitions=[
                          C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)]),
                      C.OffsetCommitRequestTopic(topic_id=tid, partitions=[
                          C.OffsetCommitRequestPartition(partition_index=0, committed_offset=2),
                          C.OffsetCommitRequestPartition(partition_index=7, committed_offset=2)])])
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
        (UNKNOWN_ID, [(0, 100)]),  # UNKNOWN_TOPIC_ID
        (tid, [(7, 3), (0, 0)])]  # KafkaApis answers the unknown partition before the coordinator's results
    assert _fetch_v10(broker, "g44", [(tid, [0, 1]), (UNKNOWN_ID, [0])]) == [
        (tid, [(0, 2, 0), (1, -1, 0)]), (UNKNOWN_ID, [(0, -1, 100)])]
    assert _fetch_v10(broker, "g44", None) == [(tid, [(0, 2, 0)])]


def test_txn_offset_commit_v6_names_topics_by_id(broker: RunningBroker) -> None:
    tid = _topic_id(broker)
    init = _send(broker, 22, 5, transactional_id="tx44", transaction_timeout_ms=30_000, producer_id=-1,
                 producer_epoch=-1)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    assert _send(broker, 25, 4, transactional_id="tx44", producer_id=pid, producer_epoch=epoch,
                 group_id="gtx").error_code == 0
    T = request_class(28)

    def commit(version: int, group: str, member_epoch: int, topics: list):
        r = _send(broker, 28, version, transactional_id="tx44", group_id=group, producer_id=pid, producer_epoch=epoch,
                  generation_id_or_member_epoch=member_epoch, member_id="", group_instance_id=None, topics=[
                      T.TxnOffsetCommitRequestTopic(**ref, partitions=[
                          T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3)])
                      for ref in topics])
        return [((t.topic_id if version >= 6 else t.name), [p.error_code for p in t.partitions]) for t in r.topics]

    # KafkaApis answers the unknown id first, then merges in the coordinator's results
    assert commit(6, "gtx", -1, [{"topic_id": tid}, {"topic_id": UNKNOWN_ID}]) == [(UNKNOWN_ID, [100]), (tid, [0])]
    # KIP-1319: a member epoch for a group that does not exist is GROUP_ID_NOT_FOUND from v6
    assert commit(6, "no-group", 5, [{"topic_id": tid}]) == [(tid, [69])]
    assert commit(5, "no-group", 5, [{"name": "t"}]) == [("t", [22])]  # ILLEGAL_GENERATION before
    assert _send(broker, 26, 4, transactional_id="tx44", producer_id=pid, producer_epoch=epoch,
                 committed=True).error_code == 0
    assert _fetch_v10(broker, "gtx", [(tid, [0])]) == [(tid, [(0, 3, 0)])]
