"""Odradek beside a live Kafka 4.4.0 (issue #23): ApiVersions keys, ranges and features, and the
answers of the versions Kafka 4.4 added to APIs Odradek serves.

* The recorded reference (tools/kafka_reference.py, from which docs/protocol.md is generated) is
  what a live default Kafka 4.4.0 node advertises.
* Odradek advertises the same, except where tools/kafka_reference.DIFFERENCES gives the reason
  (shown in docs/protocol.md); its features are Kafka's.
* The same requests get the same answers from both (topic ids, paths and epochs aside):
  ListOffsets v11, OffsetCommit/OffsetFetch v10 and TxnOffsetCommit v6 by topic id, DeleteGroups v3,
  DescribeLogDirs v5, ApiVersions v5's cluster/node check and its UNSUPPORTED_VERSION reply.
"""

from __future__ import annotations

import re
import socket
import time
from typing import Any

import pytest
from kafka_oracle import CLUSTER_ID, KafkaBroker, recv_frame

from odradek.logstore.metadata_files import MetaProperties
from odradek.tools import kafka_reference as ref
from odradek.tools.client import BrokerConnection, KafkaClient
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import API_NAMES, decode_response, encode_request, request_class
from odradek.wire.records import SimpleRecord, build_batch

pytestmark = pytest.mark.oracle

API_VERSIONS = 18
UNKNOWN_ID = Uuid.from_base64("AAAAAAAAAAAAAAAAAAAAAQ")


@pytest.fixture(scope="module")
def kafka44(_module_factory) -> KafkaBroker:
    return _module_factory("kafka", version=ref.KAFKA_VERSION)


def _send(broker, key: int, version: int, **fields) -> Any:
    conn = BrokerConnection(broker.host, broker.port)
    try:
        return conn.send(key, request_class(key)(**fields), version)
    finally:
        conn.close()


def _api_versions(broker, version: int, **fields) -> Any:
    if version >= 3:
        fields.setdefault("client_software_name", "odradek-compat")
        fields.setdefault("client_software_version", "1")
    return _send(broker, API_VERSIONS, version, **fields)


def _features(r: Any) -> tuple[list, list]:
    return ([(f.name, f.min_version, f.max_version) for f in r.supported_features],
            [(f.name, f.max_version_level) for f in r.finalized_features if f.min_version_level == f.max_version_level])


def _same_features(ours: tuple[list, list], kafka: tuple[list, list]) -> None:
    """The same features in the same order; a finalized level may differ only where documented."""
    assert ours[0] == kafka[0]
    assert [name for name, _ in ours[1]] == [name for name, _ in kafka[1]]
    undocumented = [(name, level, theirs) for (name, level), (_, theirs) in zip(ours[1], kafka[1], strict=True)
                    if level != theirs and name not in ref.FEATURE_DIFFERENCES]
    assert not undocumented, "missing from tools/kafka_reference.FEATURE_DIFFERENCES"


def test_the_reference_is_what_kafka_44_advertises(kafka44) -> None:
    r = _api_versions(kafka44, 5)
    assert r.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys} == ref.API_VERSIONS
    assert _features(r) == (ref.SUPPORTED_FEATURES, ref.FINALIZED_FEATURES)


def test_odradek_differs_from_kafka_44_only_where_documented(kafka44, odradek_broker) -> None:
    kafka, ours = _api_versions(kafka44, 5), _api_versions(odradek_broker, 5)
    k = {a.api_key: (a.min_version, a.max_version) for a in kafka.api_keys}
    o = {a.api_key: (a.min_version, a.max_version) for a in ours.api_keys}
    undocumented = [f"{key} {API_NAMES.get(key)}: Kafka {k.get(key)}, Odradek {o.get(key)}"
                    for key in sorted(set(k) | set(o)) if k.get(key) != o.get(key) and key not in ref.DIFFERENCES]
    assert not undocumented, "differences missing from tools/kafka_reference.DIFFERENCES:\n" + "\n".join(undocumented)
    for version in (3, 4, 5):
        _same_features(_features(_api_versions(odradek_broker, version)), _features(_api_versions(kafka44, version)))
    assert ours.finalized_features_epoch > 0 and kafka.finalized_features_epoch > 0


# ------------------------------------------------------------------ same requests, same answers


def _cluster_id(broker) -> str:
    if isinstance(broker, KafkaBroker):
        return CLUSTER_ID
    return MetaProperties.read(broker.log_dirs[0]).cluster_id


def _too_new_api_versions(broker) -> list:
    frame = b"".join(bytes(p) for p in encode_request(5, 9, request_class(API_VERSIONS)(
        client_software_name="a", client_software_version="1"), client_id="t", api_key=API_VERSIONS))
    frame = frame[:6] + (6).to_bytes(2, "big") + frame[8:]  # v6 does not exist yet
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        sock.sendall(frame)
        _, r = decode_response(recv_frame(sock), API_VERSIONS, 0)
    return [r.error_code, [(k.api_key, k.min_version, k.max_version) for k in r.api_keys]]


def _retry(call, ok=lambda r: r.error_code == 0, seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        r = call()
        if ok(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def _scenario(broker) -> dict[str, Any]:
    """Requests of the new versions against one broker; the answers with topic ids as names."""
    client = KafkaClient(broker.bootstrap)
    try:
        info = client.topic("t44", auto_create=True)
        client.produce("t44", {0: build_batch([SimpleRecord(key=b"k", value=b"v", timestamp=1_700_000_000_000 + i)
                                               for i in range(3)])},
                       leaders={p: i.leader for p, i in info.partitions.items()})
    finally:
        client.close()
    tid = info.topic_id
    names = {tid: "t44", UNKNOWN_ID: "unknown"}
    out: dict[str, Any] = {}

    LO = request_class(2)
    out["list_offsets"] = []
    for ts in (-6, -5, -4, -3, -2, -1, 1_700_000_000_001):
        p = _send(broker, 2, 11, replica_id=-1, topics=[LO.ListOffsetsTopic(name="t44", partitions=[
            LO.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])]).topics[0].partitions[0]
        out["list_offsets"].append((ts, p.error_code, p.timestamp, p.offset, p.leader_epoch))

    d = _send(broker, 35, 5, topics=None)
    out["describe_log_dirs"] = (d.error_code, [(r.error_code, r.is_cordoned, r.total_bytes > 0) for r in d.results])

    # Kafka creates __consumer_offsets on the first FindCoordinator and loads it a moment later
    groups = ["no-such-group", "g44", "gtx", "no-group"]
    _retry(lambda: _send(broker, 10, 4, key_type=0, coordinator_keys=groups),
           ok=lambda r: all(c.error_code == 0 for c in r.coordinators))
    g = _retry(lambda: _send(broker, 42, 3, groups_names=["no-such-group"]),
               ok=lambda r: r.results[0].error_code not in (14, 15, 16)).results
    out["delete_groups"] = [(r.group_id, r.error_code, r.error_message) for r in g]

    C = request_class(8)
    commit = _retry(lambda: _send(
        broker, 8, 10, group_id="g44", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[C.OffsetCommitRequestTopic(topic_id=UNKNOWN_ID, partitions=[
                    C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)]),
                C.OffsetCommitRequestTopic(topic_id=tid, partitions=[
                    C.OffsetCommitRequestPartition(partition_index=0, committed_offset=2),
                    C.OffsetCommitRequestPartition(partition_index=7, committed_offset=2)])]),
        ok=lambda r: all(p.error_code not in (14, 15, 16) for t in r.topics for p in t.partitions))
    out["offset_commit_v10"] = [(names.get(t.topic_id), [(p.partition_index, p.error_code) for p in t.partitions])
                                for t in commit.topics]

    F = request_class(9)

    def fetch(group: str, topics: list | None) -> list:
        r = _send(broker, 9, 10, require_stable=True, groups=[F.OffsetFetchRequestGroup(
            group_id=group, member_id=None, member_epoch=-1,
            topics=None if topics is None else [F.OffsetFetchRequestTopics(topic_id=i, partition_indexes=p)
                                                for i, p in topics])])
        return [(grp.error_code, [(names.get(t.topic_id), [
            (p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
            for p in t.partitions]) for t in grp.topics]) for grp in r.groups]

    out["offset_fetch_v10"] = fetch("g44", [(tid, [0, 1]), (UNKNOWN_ID, [0])])
    out["offset_fetch_v10_all"] = fetch("g44", None)

    find = _retry(lambda: _send(broker, 10, 4, key_type=1, coordinator_keys=["tx44"]),
                  ok=lambda r: r.coordinators[0].error_code == 0)
    assert find.coordinators[0].error_code == 0
    init = _retry(lambda: _send(broker, 22, 5, transactional_id="tx44", transaction_timeout_ms=30_000,
                                producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    out["add_offsets"] = _send(broker, 25, 4, transactional_id="tx44", producer_id=pid, producer_epoch=epoch,
                               group_id="gtx").error_code
    T = request_class(28)

    def txn_commit(version: int, group: str, member_epoch: int, topics: list) -> list:
        r = _send(broker, 28, version, transactional_id="tx44", group_id=group, producer_id=pid,
                  producer_epoch=epoch, generation_id_or_member_epoch=member_epoch, member_id="",
                  group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(**topic, partitions=[
                      T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3)]) for topic in topics])
        return [(names.get(t.topic_id) if version >= 6 else t.name, [p.error_code for p in t.partitions])
                for t in r.topics]

    out["txn_offset_commit_v6"] = txn_commit(6, "gtx", -1, [{"topic_id": tid}, {"topic_id": UNKNOWN_ID}])
    out["txn_offset_commit_v6_no_group"] = txn_commit(6, "no-group", 5, [{"topic_id": tid}])
    out["txn_offset_commit_v5_no_group"] = txn_commit(5, "no-group", 5, [{"name": "t44"}])
    out["end_txn"] = _send(broker, 26, 4, transactional_id="tx44", producer_id=pid, producer_epoch=epoch,
                           committed=True).error_code
    # the commit marker reaches __consumer_offsets a little after EndTxn answers
    out["offset_fetch_after_txn"] = _retry(lambda: fetch("gtx", [(tid, [0])]),
                                           ok=lambda r: r == [(0, [("t44", [(0, 3, -1, "", 0)])])], seconds=10)

    cluster = _cluster_id(broker)
    out["api_versions_v5"] = [
        (r.error_code, len(r.api_keys) > 0)
        for r in (_api_versions(broker, 5, cluster_id=cluster, node_id=1),
                  _api_versions(broker, 5, cluster_id=cluster, node_id=99),
                  _api_versions(broker, 5, cluster_id="AAAAAAAAAAAAAAAAAAAAAA", node_id=1),
                  _api_versions(broker, 5, cluster_id=cluster),
                  _api_versions(broker, 5, node_id=1),
                  _api_versions(broker, 4, client_software_name="bad name"))]
    out["api_versions_v6"] = _too_new_api_versions(broker)
    return out


def test_new_versions_answer_as_kafka_44(kafka44, odradek_broker) -> None:
    kafka = _scenario(kafka44)
    ours = _scenario(odradek_broker)
    differing = {k: {"kafka": kafka[k], "odradek": v} for k, v in ours.items() if kafka[k] != v}
    assert not differing


def test_features_of_a_dynamic_quorum_as_kafka_44(broker_factory, tmp_path) -> None:
    # `kafka-storage format --standalone` (Kafka 4.x's quickstart): kraft.version 1 is finalized too
    from test_quorum_standalone_44 import StandaloneKafka

    standalone = StandaloneKafka(tmp_path / "kafka", version=ref.KAFKA_VERSION)
    broker_factory.brokers.append(standalone)  # torn down with the others
    standalone.start()
    theirs = {v: _features(_api_versions(standalone, v)) for v in (3, 4, 5)}
    standalone.stop()
    assert ("kraft.version", 1) in theirs[5][1]
    props = standalone.properties()
    odradek = broker_factory("odradek", port=standalone.port, overrides={
        "listeners": props["listeners"], "listener.security.protocol.map": props["listener.security.protocol.map"],
        "controller.listener.names": "CONTROLLER", "log.dirs": props["log.dirs"], "node.id": "1"})
    for v in (3, 4, 5):
        _same_features(_features(_api_versions(odradek, v)), theirs[v])


# (version, [(feature, level, upgrade type or v0's allow-downgrade)], validate only), in this order
UPDATE_FEATURES_CASES = [
    (1, [("group.version", 1, 1)], True),
    (1, [("transaction.version", 1, 1)], False),
    (1, [("transaction.version", 1, 2)], True),
    (1, [("transaction.version", 1, 2)], False),
    (1, [("transaction.version", 2, 1)], False),
    (1, [("foo.version", 1, 1)], False),
    (1, [("group.version", 5, 1)], False),
    (1, [("metadata.version", 32, 2)], False),
    (1, [("metadata.version", 32, 3)], False),
    (1, [("metadata.version", 34, 1)], False),
    (1, [("metadata.version", 33, 1)], False),
    (1, [("share.version", -1, 2)], False),
    (1, [("streams.version", 1, 4)], False),
    (1, [("streams.version", 2, 2)], False),
    (1, [("group.version", 0, 2), ("foo.version", 1, 1)], False),
    (1, [("share.version", 1, 2), ("streams.version", 0, 2)], False),
    (2, [("share.version", 2, 1)], False),
    (0, [("streams.version", 1, False)], False),
    (0, [("group.version", 0, True)], False),
    (1, [("eligible.leader.replicas.version", 0, 2)], False),
    (1, [("eligible.leader.replicas.version", 1, 1)], False),
    (1, [], False),
]


def _update_features(broker) -> list:
    U = request_class(57)
    out = []
    for version, updates, validate in UPDATE_FEATURES_CASES:
        keys = [U.FeatureUpdateKey(feature=name, max_version_level=level, allow_downgrade=kind) if version == 0
                else U.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)
                for name, level, kind in updates]
        fields = {"timeout_ms": 30000, "feature_updates": keys, **({"validate_only": validate} if version else {})}
        r = _send(broker, 57, version, **fields)
        finalized = _features(_api_versions(broker, 4))[1]
        out.append((version, updates, r.error_code, r.error_message,
                    [(x.feature, x.error_code, x.error_message) for x in r.results], sorted(finalized)))
    return out


def test_update_features_as_kafka_44(kafka_broker_factory, odradek_broker_factory) -> None:
    from odradek.handlers.api_versions import SERVED_FEATURE_LEVELS

    kafka = _update_features(kafka_broker_factory(version=ref.KAFKA_VERSION))
    ours = _update_features(odradek_broker_factory())
    # a level Odradek does not serve yet is reported lower (none now; tools/kafka_reference.FEATURE_DIFFERENCES)
    kafka = [(*row[:5], sorted((n, min(v, SERVED_FEATURE_LEVELS.get(n, v))) for n, v in row[5])) for row in kafka]
    differing = [(k, o) for k, o in zip(kafka, ours, strict=True) if k != o]
    assert not differing


def _feature_tool(broker, *args: str) -> tuple[int, str]:
    from kafka_oracle import run_java_tool

    proc = run_java_tool("org.apache.kafka.tools.FeatureCommand", ["--bootstrap-server", broker.bootstrap, *args],
                         version=ref.KAFKA_VERSION)
    text = re.sub(r"Epoch: \d+", "Epoch: <n>", proc.stdout + proc.stderr)
    return proc.returncode, text


FEATURE_TOOL_RUNS = [
    ("describe",),
    ("upgrade", "--feature", "transaction.version=2", "--dry-run"),
    ("downgrade", "--feature", "streams.version=0"),
    ("describe",),
    ("upgrade", "--feature", "streams.version=1"),
    ("upgrade", "--release-version", "4.4", "--dry-run"),
    ("downgrade", "--metadata", "4.3"),
    ("upgrade", "--feature", "group.version=7"),
    ("version-mapping", "--release-version", "4.2"),
    ("feature-dependencies", "--feature", "eligible.leader.replicas.version=1"),
    ("upgrade", "--release-version", "4.4", "--dry-run"),
    # KIP-853: the static voter set becomes a VotersRecord (kraft.version 1)
    ("upgrade", "--feature", "kraft.version=1"),
    ("downgrade", "--feature", "kraft.version=0"),
    ("describe",),
]


def test_kafka_features_tool_as_with_kafka_44(kafka_broker_factory, odradek_broker_factory) -> None:
    # kafka-features.sh of 4.4.0 against both; the finalized epoch is the metadata log's offset
    kafka = kafka_broker_factory(version=ref.KAFKA_VERSION)
    theirs = [_feature_tool(kafka, *args) for args in FEATURE_TOOL_RUNS]
    odradek = odradek_broker_factory()
    ours = [_feature_tool(odradek, *args) for args in FEATURE_TOOL_RUNS]
    differing = [(args, t, o) for args, t, o in zip(FEATURE_TOOL_RUNS, theirs, ours, strict=True) if t != o]
    assert not differing
