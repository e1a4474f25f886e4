"""A streams group's `__consumer_offsets` records as Kafka 4.4.0 writes them (issue #23).

The same StreamsGroupHeartbeats (KIP-1071) go to a live Kafka 4.4.0 and to Odradek: a first
member joins a new group (group epoch 2, as Kafka 4.4 starts a group at epoch 1), a second
member joins, tasks move, the second member leaves. Both logs are decoded with Kafka's own
DumpLogSegments --offsets-decoder and the records compared in order, with times blanked and
member epochs, types and epochs of the epoch records kept. Each epoch record's metadata hash is
checked against Kafka's algorithm (group_coordinator/metadata_hash.py) over that broker's topic ids.

Both brokers run with no initial rebalance delay and assignment interval 0, so each heartbeat
that moves the group epoch computes its target at once, whatever the machine's speed.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kafka_oracle import KAFKA_4_4, group_records
from test_groups_oracle import FIND, RETRIABLE, RawClient

from odradek.group_coordinator import metadata_hash
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class

pytestmark = pytest.mark.oracle

CONFIGS = {
    "offsets.topic.num.partitions": "1",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.min.assignment.interval.ms": "0",
    "group.streams.assignment.interval.ms": "0",
}
HEARTBEAT = 88
GROUP = "app"


def _scenario(bootstrap: str) -> list[tuple[str, Any]]:
    """The heartbeats of the run; returns what each answered (error, member epoch, active tasks)."""
    c = RawClient(bootstrap)
    Create = request_class(19)
    Hb = request_class(HEARTBEAT)
    r = c.call(19, 7, timeout_ms=30000, topics=[Create.CreatableTopic(name="in", num_partitions=2,
                                                                      replication_factor=1)])
    assert r.topics[0].error_code == 0, r
    deadline = time.monotonic() + 60
    while c.call(FIND, 4, key_type=0, coordinator_keys=[GROUP]).coordinators[0].error_code in RETRIABLE:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(1.5)  # Kafka's group coordinator sees new topics a moment after they are created
    topology = Hb.Topology(epoch=0, subtopologies=[Hb.Subtopology(
        subtopology_id="0", source_topics=["in"], source_topic_regex=[], state_changelog_topics=[],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])
    owned: dict[str, list[int]] = {}
    out: list[tuple[str, Any]] = []

    def hb(label: str, member: str, epoch: int) -> int:
        first = epoch == 0
        mine = owned.get(member, [])
        tasks = [Hb.TaskIds(subtopology_id="0", partitions=mine)] if mine else []
        r = c.call(HEARTBEAT, 0, group_id=GROUP, member_id=member, member_epoch=epoch,
                   endpoint_information_epoch=0, instance_id=None, rack_id=None,
                   rebalance_timeout_ms=30000 if first else -1, topology=topology if first else None,
                   active_tasks=tasks, standby_tasks=[], warmup_tasks=[],
                   process_id=f"process-{member}" if first else None, user_endpoint=None,
                   client_tags=[] if first else None, task_offsets=None, task_end_offsets=None,
                   shutdown_application=False)
        if r.active_tasks is not None:
            owned[member] = sorted(p for t in r.active_tasks for p in t.partitions)
        out.append((label, (r.error_code, r.member_epoch, owned.get(member))))
        return r.member_epoch

    e1 = hb("first member joins", "m1", 0)
    e1 = hb("first member heartbeats", "m1", e1)
    e2 = hb("second member joins", "m2", 0)
    e1 = hb("first member after the join", "m1", e1)
    e2 = hb("second member after the revocation", "m2", e2)
    e1 = hb("first member again", "m1", e1)
    hb("second member leaves", "m2", -1)
    hb("first member after the leave", "m1", e1)
    c.close()
    return out


def _records(broker) -> list[dict]:
    return group_records(broker.log_dirs[0], {GROUP}, version=KAFKA_4_4)


def _topics(broker) -> dict[str, tuple[Uuid, int]]:
    c = RawClient(broker.bootstrap)
    try:
        return {t.name: (t.topic_id, len(t.partitions)) for t in c.call(3, 12, topics=None).topics}
    finally:
        c.close()


def _normalized(records: list[dict], topics: dict[str, tuple[Uuid, int]]) -> list[tuple]:
    """Times blanked; each nonzero metadata hash checked against the hash of the input topic."""
    expected = metadata_hash.group_hash({"in": metadata_hash.topic_hash(topics["in"][0].bytes, "in", 2)})
    out = []

    def blank(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: ("TS" if k in ("timestamp", "assignmentTimestamp") else blank(v)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [blank(x) for x in obj]
        return obj

    for r in records:
        kind, key, value = r["key"]["type"], r["key"]["data"], r["value"]
        data = value["data"] if value is not None else None
        if kind == "17" and data is not None:
            assert data.get("metadataHash", 0) == expected, data
            data = {**data, "metadataHash": "H"}
        if kind == "20" and data is not None:
            assert data.get("assignmentTimestamp", 0) > 1_600_000_000_000, data
        out.append((kind, blank(key), None if value is None else (value["version"], blank(data))))
    return out


def test_streams_group_records_are_kafka_44s(kafka_broker_factory, odradek_broker_factory):
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=CONFIGS)
    k_answers = _scenario(kafka.bootstrap)
    k_topics = _topics(kafka)
    time.sleep(0.5)
    k_raw = _records(kafka)
    kafka.stop()
    odradek = odradek_broker_factory(overrides=CONFIGS)
    o_answers = _scenario(odradek.bootstrap)
    o_topics = _topics(odradek)
    o_raw = _records(odradek)
    print("KAFKA", json.dumps(k_answers), *k_raw, sep="\n")  # shown with -s, to see a difference whole
    print("ODRADEK", json.dumps(o_answers), *o_raw, sep="\n")
    k_records = _normalized(k_raw, k_topics)
    o_records = _normalized(o_raw, o_topics)
    assert o_answers == k_answers
    # Kafka 4.4 starts a streams group at epoch 1: its first member gets epoch 2
    assert k_answers[0][1][1] == 2
    differences = [(i, k, o) for i, (k, o) in enumerate(zip(k_records, o_records, strict=False)) if k != o]
    assert len(o_records) == len(k_records) and not differences, differences[:5]
