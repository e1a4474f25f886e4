"""A consumer group's `__consumer_offsets` records as Kafka 4.4.0 writes them (issue #23).

The same KIP-848 heartbeats go to a live Kafka 4.4.0 and to Odradek; both logs are decoded with
Kafka's own DumpLogSegments --offsets-decoder and the records compared in order, with topic ids
named, timestamps and regex versions blanked. The cases: one member joining a new group (group
epoch 2, Kafka 4.4's rule), a second member, a subscription change, a member leaving, a regex
subscription (resolved after the heartbeat, with its own records) and a topic created after the
group subscribed to it. Each epoch record's metadata hash is also checked against Kafka's
algorithm (group_coordinator/metadata_hash.py) over that broker's own topic ids.

Both brokers run with group.consumer.assignment.interval.ms=15000 (Kafka's largest): a group's
first target is computed at once and no other within the test, so what each heartbeat sees does
not depend on the machine's speed (tests/groups/test_consumer_epochs_44.py covers the interval).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka_oracle import KAFKA_4_4, group_records
from test_groups_oracle import FIND, RETRIABLE, RawClient

from odradek.group_coordinator import metadata_hash
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class

pytestmark = pytest.mark.oracle

CONFIGS = {"offsets.topic.num.partitions": "1", "group.consumer.assignment.interval.ms": "15000"}


def _scenario(bootstrap: str) -> list[tuple[str, Any]]:
    """The heartbeats of the cases; returns what each answered (error, member epoch, assignment)."""
    c = RawClient(bootstrap)
    Create = request_class(19)

    def create(name: str, partitions: int) -> None:
        r = c.call(19, 7, timeout_ms=30000, topics=[Create.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1)])
        assert r.topics[0].error_code == 0, r

    for name, partitions in (("t1", 2), ("t2", 2), ("rx1", 1)):
        create(name, partitions)
    deadline = time.monotonic() + 60
    while c.call(FIND, 4, key_type=0, coordinator_keys=["g"]).coordinators[0].error_code in RETRIABLE:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(1.5)  # Kafka's group coordinator sees new topics a moment after they are created
    names: dict[Any, str] = {}
    out: list[tuple[str, Any]] = []

    def hb(label: str, group: str, member: str, epoch: int, topics: list[str] | None = None,
           regex: str | None = None, first: bool = False) -> int:
        r = c.call(68, 1, group_id=group, member_id=member, member_epoch=epoch,
                   rebalance_timeout_ms=30000 if first else -1, subscribed_topic_names=topics,
                   subscribed_topic_regex=regex, topic_partitions=[] if first else None)
        assignment = None if r.assignment is None else sorted(
            (names.get(tp.topic_id, "?"), p) for tp in r.assignment.topic_partitions for p in tp.partitions)
        out.append((label, (r.error_code, r.member_epoch, assignment)))
        return r.member_epoch

    def learn_names() -> None:
        for t in c.call(3, 12, topics=None).topics:
            names[t.topic_id] = t.name

    learn_names()
    e1 = hb("first member joins", "g", "m1", 0, ["t1"], first=True)
    e1 = hb("first member heartbeats", "g", "m1", e1)
    hb("second member joins", "g", "m2", 0, ["t1"], first=True)
    e1 = hb("first member after the join", "g", "m1", e1)
    e1 = hb("subscription change", "g", "m1", e1, ["t1", "t2"])
    hb("second member leaves", "g", "m2", -1)
    er = hb("regex member joins", "gr", "r1", 0, regex="rx.*", first=True)
    time.sleep(1.0)  # the regex is resolved after the heartbeat
    hb("regex member after the resolution", "gr", "r1", er)
    el = hb("member of a topic still to come", "gl", "l1", 0, ["later"], first=True)
    create("later", 1)
    time.sleep(2.0)
    learn_names()
    hb("after the topic is created", "gl", "l1", el)
    c.close()
    return out


def _records(broker) -> list[dict]:
    return group_records(broker.log_dirs[0], {"g", "gr", "gl"}, version=KAFKA_4_4)


def _topics(broker) -> dict[str, tuple[Uuid, int]]:
    c = RawClient(broker.bootstrap)
    try:
        return {t.name: (t.topic_id, len(t.partitions)) for t in c.call(3, 12, topics=None).topics}
    finally:
        c.close()


def _normalized(records: list[dict], topics: dict[str, tuple[Uuid, int]]) -> list[tuple]:
    """Topic ids named, times and regex versions blanked; each nonzero metadata hash checked
    against the hash of the topics the group subscribes to at that point."""
    by_id = {str(tid): name for name, (tid, _) in topics.items()}
    subscribed: dict[str, dict[str, set[str]]] = {}  # group -> member -> topics
    regexes: dict[str, dict[str, set[str]]] = {}  # group -> regex -> topics
    out = []

    def blank(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: ("TS" if k in ("timestamp", "assignmentTimestamp") else
                        by_id.get(v, v) if k == "topicId" else blank(v)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [blank(x) for x in obj]
        return obj

    for r in records:
        kind, key, value = r["key"]["type"], r["key"]["data"], r["value"]
        group = key["groupId"]
        data = value["data"] if value is not None else None
        if kind == "5":
            members = subscribed.setdefault(group, {})
            if data is None:
                members.pop(key["memberId"], None)
            else:
                members[key["memberId"]] = set(data["subscribedTopicNames"]) | {"regex:" + data["subscribedTopicRegex"]}
        if kind == "16":
            if data is None:
                regexes.setdefault(group, {}).pop(key["regularExpression"], None)
            else:
                regexes.setdefault(group, {})[key["regularExpression"]] = set(data["topics"])
                data = {**data, "version": "V"}
        if kind == "3" and data is not None:
            wanted: set[str] = set()
            for topics_ in subscribed.get(group, {}).values():
                for t in topics_:
                    wanted |= regexes.get(group, {}).get(t[6:], set()) if t.startswith("regex:") else {t}
            # "later" is in the hash only once it exists
            candidates = [metadata_hash.group_hash({
                t: metadata_hash.topic_hash(topics[t][0].bytes, t, topics[t][1]) for t in some if t in topics})
                for some in (wanted, wanted - {"later"})]
            assert data.get("metadataHash", 0) in candidates, (group, data, wanted)
            data = {**data, "metadataHash": "H" if data.get("metadataHash", 0) else 0}
        out.append((kind, blank(key), None if value is None else (value["version"], blank(data))))
    return out


def test_consumer_group_records_are_kafka_44s(kafka_broker_factory, odradek_broker_factory):
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=CONFIGS)
    k_answers = _scenario(kafka.bootstrap)
    k_topics = _topics(kafka)
    time.sleep(0.5)
    k_records = _normalized(_records(kafka), k_topics)
    kafka.stop()
    odradek = odradek_broker_factory(overrides={**CONFIGS, "group.initial.rebalance.delay.ms": "0"})
    o_answers = _scenario(odradek.bootstrap)
    o_topics = _topics(odradek)
    o_records = _normalized(_records(odradek), o_topics)
    assert o_answers == k_answers
    # the first member's epoch is 2 on both, and so is its first epoch record
    assert k_answers[0][1][1] == 2 and ("3", {"groupId": "g"}, ("0", {"epoch": 2, "metadataHash": "H"})) in k_records
    differences = [(i, k, o) for i, (k, o) in enumerate(zip(k_records, o_records, strict=False)) if k != o]
    assert len(o_records) == len(k_records) and not differences, differences[:5]
