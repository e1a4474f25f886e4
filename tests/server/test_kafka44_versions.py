"""The versions Kafka 4.4 added to APIs Odradek already served, with 4.4's behaviour:
ListOffsets v11 (KIP-1023 earliest pending upload), DescribeLogDirs v5 (cordoned dirs),
DeleteGroups v3 (per-group error message)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker, running_broker
from odradek.tools.client import BrokerConnection, KafkaClient
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
