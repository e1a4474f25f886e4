"""A share group's `__consumer_offsets` records as Kafka 4.4.0 writes them.

The same ShareGroupHeartbeats go to a live Kafka 4.4.0 and to Odradek; both logs are decoded with
Kafka's own DumpLogSegments --offsets-decoder and the share group records (key versions 10-15)
compared in order, topic ids named and timestamps blanked. The cases: a member joins a new group
(group epoch 2: Kafka 4.4 starts a group at epoch 1 with its target at epoch 1, time 0), its
partition's share state is initialized (an initializing record, then an initialized one) and
then assigned, a second member joins, one leaves, a third joins and leaves before any target
includes it, and a member subscribes to a topic that does not exist yet and keeps heartbeating
once it is created. Each epoch record's metadata hash is checked against Kafka's algorithm
(group_coordinator/metadata_hash.py) over that broker's own topic ids.

Topics have one partition: a shared partition goes to every member whatever the topic id's
hash, so the targets do not depend on the ids each broker picks (test_share_groups_assignor.py
compares the assignor itself). Steps that compute a target wait out the 1 s assignment interval.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from kafka_oracle import KAFKA_4_4, group_records
from test_share_groups_state import FIND_COORDINATOR, HEARTBEAT, create_topic

from odradek.group_coordinator import metadata_hash
from odradek.tools.client import KafkaClient
from odradek.wire.protocol import request_class

pytestmark = pytest.mark.oracle

GROUPS = {"sg", "sn"}
CONFIGS = {"offsets.topic.num.partitions": "1"}
INTERVAL_S = 1.2  # past group.share.assignment.interval.ms (1 s)


def _scenario(bootstrap: str) -> list[tuple[str, Any]]:
    """The heartbeats of the cases; returns what each answered (error, member epoch, assignment)."""
    out: list[tuple[str, Any]] = []
    with KafkaClient(bootstrap, client_id="records") as client:
        create_topic(client, "s1", 1)
        cls = request_class(HEARTBEAT)

        def hb(label: str | None, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
            deadline = time.monotonic() + 60
            while True:
                r = client.send(HEARTBEAT, cls(group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                                               subscribed_topic_names=topics))
                if r.error_code not in (14, 15, 16) or time.monotonic() > deadline:
                    break
                client.send(FIND_COORDINATOR, request_class(FIND_COORDINATOR)(key=group, key_type=0))
                time.sleep(0.3)
            assignment = None if r.assignment is None else sorted(
                p for tp in r.assignment.topic_partitions for p in tp.partitions)
            if label is not None:
                out.append((label, (r.error_code, r.member_epoch, assignment)))
            return r

        def until_assigned(label: str, group: str, member: str, epoch: int) -> int:
            """Heartbeat until the member holds a partition (its share state is initialized by
            then, and a target including it computed)."""
            deadline = time.monotonic() + 60
            while True:
                r = hb(None, group, member, epoch)
                epoch = r.member_epoch
                if r.assignment is not None and r.assignment.topic_partitions:
                    out.append((label, (r.error_code, r.member_epoch)))
                    return epoch
                assert time.monotonic() < deadline, "never assigned"
                time.sleep(0.5)

        e1 = hb("first member joins", "sg", "m1", 0, ["s1"]).member_epoch
        time.sleep(INTERVAL_S)
        e1 = until_assigned("first member assigned once initialized", "sg", "m1", e1)
        time.sleep(INTERVAL_S)
        e2 = hb("second member joins", "sg", "m2", 0, ["s1"]).member_epoch
        e1 = hb("first member after the join", "sg", "m1", e1).member_epoch
        hb("second member heartbeats", "sg", "m2", e2)
        time.sleep(INTERVAL_S)
        hb("second member leaves", "sg", "m2", -1)
        time.sleep(INTERVAL_S)
        hb("first member after the leave", "sg", "m1", e1)
        # within the interval: a bump but no target, so the leave tombstones a target never written
        e3 = hb("third member joins", "sg", "m3", 0, ["s1"]).member_epoch
        hb("third member leaves", "sg", "m3", -1)
        assert e3 > 0
        en = hb("member of a topic still to come", "sn", "n1", 0, ["later"]).member_epoch
        time.sleep(INTERVAL_S)
        en = hb("its heartbeat", "sn", "n1", en).member_epoch
        create_topic(client, "later", 1)
        time.sleep(2.0)  # Kafka's group coordinator sees a new topic a moment after it is created
        until_assigned("after the topic is created", "sn", "n1", en)
    return out


def _records(broker) -> list[dict]:
    return group_records(broker.log_dirs[0], GROUPS, version=KAFKA_4_4)


def _topics(bootstrap: str) -> dict[str, tuple[Any, int]]:
    with KafkaClient(bootstrap) as client:
        return {name: (client.topic(name).topic_id, 1) for name in ("s1", "later")}


def _normalized(records: list[dict], topics: dict[str, tuple[Any, int]]) -> list[tuple]:
    """Topic ids named, timestamps blanked; each nonzero metadata hash checked against the hash
    of the topics the group subscribes to at that point."""
    by_id = {str(tid): name for name, (tid, _) in topics.items()}
    subscribed: dict[str, dict[str, set[str]]] = {}  # group -> member -> topics
    out = []

    def blank(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: ("TS" if k == "assignmentTimestamp" else
                        by_id.get(v, v) if k == "topicId" else blank(v)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [blank(x) for x in obj]
        return obj

    for r in records:
        kind, key, value = r["key"]["type"], r["key"]["data"], r["value"]
        group = key["groupId"]
        data = value["data"] if value is not None else None
        if kind == "10":
            members = subscribed.setdefault(group, {})
            if data is None:
                members.pop(key["memberId"], None)
            else:
                members[key["memberId"]] = set(data["subscribedTopicNames"])
        if kind == "11" and data is not None:
            wanted = set().union(*subscribed.get(group, {}).values())
            # "later" is in the hash only once it exists
            candidates = [metadata_hash.group_hash({
                t: metadata_hash.topic_hash(topics[t][0].bytes, t, topics[t][1]) for t in some if t in topics})
                for some in (wanted, wanted - {"later"})]
            assert data.get("metadataHash", 0) in candidates, (group, data, wanted)
            data = {**data, "metadataHash": "H" if data.get("metadataHash", 0) else 0}
        out.append((kind, blank(key), None if value is None else (value["version"], blank(data))))
    return out


def test_share_group_records_are_kafka_44s(kafka_broker_factory, odradek_broker_factory):
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=CONFIGS)
    k_answers = _scenario(kafka.bootstrap)
    k_topics = _topics(kafka.bootstrap)
    time.sleep(0.5)
    k_records = _normalized(_records(kafka), k_topics)
    kafka.stop()
    odradek = odradek_broker_factory(overrides=CONFIGS)
    o_answers = _scenario(odradek.bootstrap)
    o_topics = _topics(odradek.bootstrap)
    time.sleep(0.5)
    o_records = _normalized(_records(odradek), o_topics)
    assert o_answers == k_answers
    # the first member's epoch is 2 on both, and so is the group's first epoch record
    assert k_answers[0][1][1] == 2 and ("11", {"groupId": "sg"}, ("0", {"epoch": 2, "metadataHash": "H"})) in k_records
    differences = [(i, k, o) for i, (k, o) in enumerate(zip(k_records, o_records, strict=False)) if k != o]
    side_by_side = "\n".join(f"{i}: kafka {k}\n{i}: odradek {o}" for i, (k, o) in enumerate(
        itertools.zip_longest(k_records, o_records)))
    assert len(o_records) == len(k_records) and not differences, side_by_side
