"""Issue #26, must show 3: the same scripted share-group sequence against a live Kafka 4.4.0 and
Odradek leaves the same ``__share_group_state`` records (timestamps aside), and the member sees
the same acquisitions, ShareGroupDescribe and DescribeShareGroupOffsets answers.

One member (a raw client on Odradek's wire layer, so every acquisition and acknowledgement is
exactly what the script says) joins a share group, acquires records with
ShareAcquireMode=record_limit and acknowledges them with ACCEPT, RELEASE, REJECT and RENEW;
a record released until ``share.delivery.count.limit`` is archived. Both brokers take a snapshot
every three updates (``share.coordinator.snapshot.update.records.per.snapshot=3``), so the
snapshot cadence is compared too. :func:`state_records` decodes what the share coordinator wrote,
in log order. The helpers here are also used by test_share_groups.py.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from kafka_oracle import KAFKA_4_4, require_tool, run_java_tool

from odradek.share_coordinator import records as rec
from odradek.tools.client import KafkaClient
from odradek.wire.records import SimpleRecord, build_batch, iter_batches

TOPIC = "scripted"
GROUP = "scripted-group"
HEARTBEAT, SHARE_FETCH, SHARE_ACK, INCREMENTAL_ALTER_CONFIGS, CREATE_TOPICS = 76, 78, 79, 44, 19
FIND_COORDINATOR, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 10, 77, 90
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
RECORD_LIMIT = 1  # ShareAcquireMode


class ShareMember:
    """One share-group member speaking ShareGroupHeartbeat / ShareFetch / ShareAcknowledge."""

    def __init__(self, client: KafkaClient, group: str, topic: str) -> None:
        self.client = client
        self.group = group
        self.topic = topic
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.session_epoch = 0
        self.topic_id: Any = None
        self.assigned: list[int] = []
        #: (member epoch, assigned partitions or None) of every heartbeat answer
        self.heartbeats: list[tuple[int, list[int] | None]] = []

    def heartbeat(self) -> Any:
        from odradek.wire.protocol import request_class

        cls = request_class(HEARTBEAT)
        deadline = time.monotonic() + 30
        while True:
            r = self.client.send(HEARTBEAT, cls(group_id=self.group, member_id=self.member_id,
                                                member_epoch=self.epoch, rack_id=None,
                                                subscribed_topic_names=[self.topic] if self.epoch == 0 else None))
            # the group coordinator (and __consumer_offsets) may still be coming up
            if r.error_code not in (14, 15, 16) or time.monotonic() > deadline:
                break
            self.client.send(FIND_COORDINATOR, request_class(FIND_COORDINATOR)(key=self.group, key_type=0))
            time.sleep(0.3)
        assert r.error_code == 0, (r.error_code, r.error_message)
        self.epoch = r.member_epoch
        self.heartbeats.append((r.member_epoch, None if r.assignment is None else sorted(
            p for t in r.assignment.topic_partitions for p in t.partitions)))
        if r.assignment is not None:
            self.assigned = [p for t in r.assignment.topic_partitions for p in t.partitions]
            if r.assignment.topic_partitions:
                self.topic_id = r.assignment.topic_partitions[0].topic_id
        return r

    def join(self, partitions: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.assigned) < partitions:
            assert time.monotonic() < deadline, "no assignment"
            self.heartbeat()
            if len(self.assigned) < partitions:
                time.sleep(0.3)

    def fetch(self, partition: int, max_records: int, acks: list[tuple[int, int, list[int]]] = (),
              wait_ms: int = 2000) -> list[tuple[int, int, int]]:
        """ShareFetch; (first, last, delivery count) acquired."""
        from odradek.wire.protocol import request_class

        cls = request_class(SHARE_FETCH)
        body = cls(group_id=self.group, member_id=self.member_id, share_session_epoch=self.session_epoch,
                   max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
                   batch_size=max_records, share_acquire_mode=RECORD_LIMIT,
                   topics=[cls.FetchTopic(topic_id=self.topic_id, partitions=[cls.FetchPartition(
                       partition_index=partition, acknowledgement_batches=[
                           cls.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                           for f, la, t in acks])])],
                   forgotten_topics_data=[])
        r = self.client.send(SHARE_FETCH, body)
        assert r.error_code == 0, (r.error_code, r.error_message)
        self.session_epoch += 1
        out = []
        for t in r.responses:
            for p in t.partitions:
                assert p.error_code == 0, (p.error_code, p.error_message)
                assert p.acknowledge_error_code == 0, p.acknowledge_error_code
                out.extend((a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records)
        return out

    def acknowledge(self, partition: int, acks: list[tuple[int, int, list[int]]]) -> int:
        from odradek.wire.protocol import request_class

        cls = request_class(SHARE_ACK)
        body = cls(group_id=self.group, member_id=self.member_id, share_session_epoch=self.session_epoch,
                   is_renew_ack=any(RENEW in t for _, _, t in acks),
                   topics=[cls.AcknowledgeTopic(topic_id=self.topic_id, partitions=[cls.AcknowledgePartition(
                       partition_index=partition, acknowledgement_batches=[
                           cls.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                           for f, la, t in acks])])])
        r = self.client.send(SHARE_ACK, body)
        assert r.error_code == 0, (r.error_code, r.error_message)
        self.session_epoch += 1
        return r.responses[0].partitions[0].error_code

    def leave(self) -> None:
        from odradek.wire.protocol import request_class

        cls = request_class(HEARTBEAT)
        self.client.send(HEARTBEAT, cls(group_id=self.group, member_id=self.member_id, member_epoch=-1,
                                        rack_id=None, subscribed_topic_names=None))


def group_configs(client: KafkaClient, group: str, configs: dict[str, str]) -> None:
    from odradek.wire.protocol import request_class

    cls = request_class(INCREMENTAL_ALTER_CONFIGS)
    r = client.send(INCREMENTAL_ALTER_CONFIGS, cls(resources=[cls.AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[
            cls.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])],
        validate_only=False))
    for res in r.responses:
        assert res.error_code == 0, (res.error_code, res.error_message)


def produce(client: KafkaClient, topic: str, values: list[str]) -> None:
    info = client.topic(topic, auto_create=False, wait_s=10)
    batch = build_batch([SimpleRecord(key=None, value=v.encode(), headers=(), timestamp=int(time.time() * 1000))
                         for v in values])
    client.produce(topic, {0: bytes(batch)}, leaders={p: i.leader for p, i in info.partitions.items()})


def create_topic(client: KafkaClient, topic: str, partitions: int = 1) -> None:
    from odradek.wire.protocol import request_class

    cls = request_class(CREATE_TOPICS)
    r = client.send(CREATE_TOPICS, cls(topics=[cls.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30000, validate_only=False))
    assert r.topics[0].error_code == 0, r.topics[0]
    client.topic(topic, wait_s=10)


def _plain(obj: Any, mask: tuple[str, ...] = ()) -> Any:
    """A wire message as nested lists/dicts, fields named in `mask` replaced by '*'."""
    if isinstance(obj, list):
        return [_plain(o, mask) for o in obj]
    fields = getattr(obj, "_fields", None)
    if fields is None:
        return str(obj) if hasattr(obj, "to_base64") else obj
    return {f: "*" if f in mask else _plain(getattr(obj, f), mask) for f in fields}


def describe(client: KafkaClient, group: str, topic: str) -> dict[str, Any]:
    """ShareGroupDescribe and DescribeShareGroupOffsets of the group, ids and times masked."""
    from odradek.wire.protocol import request_class

    d = request_class(SHARE_GROUP_DESCRIBE)
    described = client.send(SHARE_GROUP_DESCRIBE, d(group_ids=[group], include_authorized_operations=False))
    o = request_class(DESCRIBE_SHARE_GROUP_OFFSETS)
    offsets = client.send(DESCRIBE_SHARE_GROUP_OFFSETS, o(groups=[o.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=[o.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])]))
    mask = ("member_id", "topic_id", "client_host", "throttle_time_ms", "client_id")
    return {"describe": _plain(described, mask), "offsets": _plain(offsets, mask)}


SHARE_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"  # kafka-share-groups.sh


def members_table(bootstrap: str) -> list[str]:
    """Kafka's kafka-share-groups.sh --describe --members, the member id column masked."""
    proc = run_java_tool(SHARE_TOOL, ["--bootstrap-server", bootstrap, "--describe", "--group", GROUP, "--members"],
                         version=KAFKA_4_4)
    out = []
    for line in (proc.stdout + proc.stderr).splitlines():
        words = line.split()
        if not words or "WARN" in line or "SLF4J" in line:
            continue
        if words[0] != "GROUP" and len(words) > 1:
            words[1] = "*"
        out.append(" ".join(words))
    return out


def run_script(bootstrap: str) -> list[Any]:
    """The scripted sequence; returns what the member saw (for comparing both brokers). The
    delivery limit is the brokers' (``group.share.delivery.count.limit=2``), not a group config:
    Kafka 4.4 starts a share group that already has group configs at another group epoch, which
    is not what this compares."""
    seen: list[Any] = []
    with KafkaClient(bootstrap) as client:
        create_topic(client, TOPIC)
        member = ShareMember(client, GROUP, TOPIC)
        member.join(1)
        # the share-partition starts at the end of the (empty) log: share.auto.offset.reset=latest
        seen.append(f"first fetch -> {member.fetch(0, 6, wait_ms=100)}")
        time.sleep(1)
        produce(client, TOPIC, [f"a-{i}" for i in range(10)])
        produce(client, TOPIC, [f"b-{i}" for i in range(10)])
        steps = [
            ("fetch", 6, []),
            ("ack", [(0, 1, [ACCEPT]), (2, 2, [RELEASE]), (3, 3, [REJECT]), (4, 5, [RENEW])]),
            ("ack", [(4, 4, [ACCEPT]), (5, 5, [RELEASE])]),
            ("fetch", 4, []),  # 2 and 5 again (delivery count 2), then 6, 7
            ("fetch", 5, [(2, 2, [RELEASE]), (5, 5, [ACCEPT]), (6, 7, [ACCEPT])]),  # 2 archived at the limit
            ("ack", [(8, 9, [ACCEPT, REJECT]), (10, 12, [RELEASE])]),
            ("fetch", 20, []),
            ("ack", [(10, 19, [ACCEPT])]),
        ]
        for step in steps:
            if step[0] == "fetch":
                got = member.fetch(0, step[1], step[2])
                seen.append(f"fetch {step[1]} -> {got}")
            else:
                code = member.acknowledge(0, step[1])
                seen.append(f"ack {step[1]} -> {code}")
            time.sleep(0.3)
        # how many heartbeats pass before the partition is initialized depends on timing: the
        # epochs and assignments each new answer brought are compared
        changes = [hb for hb in member.heartbeats if hb[1] is not None]
        seen.append(("heartbeats", [hb for i, hb in enumerate(changes) if i == 0 or hb != changes[i - 1]]))
        seen.append(("while a member", describe(client, GROUP, TOPIC)))
        seen.append(("kafka-share-groups.sh --describe --members", members_table(bootstrap)))
        member.leave()
        seen.append(("after it left", describe(client, GROUP, TOPIC)))
    return seen


def state_records(log_dir: Path) -> list[tuple]:
    """Every ``__share_group_state`` record, partition by partition in log order, without
    timestamps: (partition, kind, key fields, value fields)."""
    out: list[tuple] = []
    for d in sorted(log_dir.glob(f"{rec.SHARE_STATE_TOPIC}-*"), key=lambda p: int(p.name.rsplit("-", 1)[1])):
        part = int(d.name.rsplit("-", 1)[1])
        for seg in sorted(d.glob("*.log")):
            for batch in iter_batches(seg.read_bytes()):
                if batch.is_control:
                    continue
                for r in batch.records():
                    kv, k, v = rec.decode(r.key, r.value)
                    kind = "snapshot" if kv == rec.SNAPSHOT_KEY_VERSION else "update"
                    fields = None
                    if v is not None:
                        fields = {n: getattr(v, n) for n in ("snapshot_epoch", "state_epoch", "leader_epoch",
                                                             "start_offset", "delivery_complete_count")
                                  if hasattr(v, n)}
                        fields["batches"] = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                             for b in v.state_batches]
                    out.append((part, kind, k.group_id, k.partition, fields))
    return out


SNAPSHOT_EVERY = {"share.coordinator.snapshot.update.records.per.snapshot": "3",
                  "group.share.delivery.count.limit": "2"}


def _without_state_partition(records: list[tuple]) -> list[tuple]:
    # the state partition is a hash of "group:topicId:partition": topic ids differ between brokers
    return [r[1:] for r in records]


def test_scripted_sequence_leaves_the_same_share_state_records_as_kafka(kafka_broker_factory,
                                                                        odradek_broker_factory):
    require_tool(f"kafka-{KAFKA_4_4}")
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=SNAPSHOT_EVERY)
    k_seen = run_script(kafka.bootstrap)
    time.sleep(1)
    kafka.stop()
    k_records = state_records(kafka.log_dir)
    odradek = odradek_broker_factory(overrides=SNAPSHOT_EVERY)
    o_seen = run_script(odradek.bootstrap)
    odradek.stop()
    o_records = state_records(odradek.log_dir)
    kinds = [r[1] for r in k_records]
    # the script reaches a snapshot after three updates and archives a record at the delivery limit
    assert kinds.count("snapshot") >= 2 and "update" in kinds, k_records
    assert any((2, 2, 4, 2) in (r[4] or {}).get("batches", []) for r in k_records), k_records
    for k, o in zip(k_seen, o_seen, strict=True):
        assert o == k, (o, k)
    assert _without_state_partition(o_records) == _without_state_partition(k_records), (o_records, k_records)
