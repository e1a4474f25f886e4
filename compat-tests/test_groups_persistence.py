"""Group state and committed offsets survive a broker restart, and what the coordinator writes to
``__consumer_offsets`` has the shape of real Kafka's records (issue #5, must-shows 2 and 3).
"""

from __future__ import annotations

import json
from pathlib import Path

from test_groups_helpers import GROUP_BROKER_OVERRIDES, produce

from odradek.group_coordinator import records as rec
from odradek.wire.records import iter_batches

W5 = Path("/work/shared/fixtures/kafka-corpus/W5")


def _consume(bootstrap: str, group: str, topic: str, count: int, **kwargs) -> list:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, heartbeat_interval_ms=300, **kwargs,
    )
    got: list = []
    try:
        while len(got) < count:
            batch = consumer.poll(timeout_ms=5000, max_records=count - len(got))
            assert batch, f"no records after {len(got)}"
            got.extend(m for msgs in batch.values() for m in msgs)
        consumer.commit()
        committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
    finally:
        consumer.close()
    return got, committed


def test_offsets_and_group_survive_a_restart(odradek_broker_factory):
    from kafka import KafkaAdminClient, TopicPartition

    broker = odradek_broker_factory(overrides=GROUP_BROKER_OVERRIDES)
    topic, group = "restart-topic", "restart-group"
    produce(broker.bootstrap, topic, [f"a-{i}".encode() for i in range(60)])
    first, committed_before = _consume(broker.bootstrap, group, topic, 30)
    assert len(first) == 30

    broker.stop()  # SIGTERM, clean shutdown
    broker.start()  # same log dir

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp: o.offset for tp, o in offsets.items()} == {
            tp: o for tp, o in committed_before.items() if o is not None}
        assert set(offsets) == {TopicPartition(topic, p) for p in range(6)}
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["group_state"] == "Empty"
        assert listed[group]["protocol_type"] == "consumer"
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Empty"
        assert described["protocol_type"] == "consumer"
    finally:
        admin.close()

    rest, _ = _consume(broker.bootstrap, group, topic, 30)
    seen = {m.value for m in first} | {m.value for m in rest}
    assert len(rest) == 30 and len(seen) == 60, "the consumer resumed from its committed offsets"


def test_w5_workload_writes_records_shaped_like_kafkas(odradek_broker_factory):
    """Replay W5 (kafka-python group, 10 commits with metadata meta-<n>) and compare the offsets
    partition with the real Kafka 3.9 one: same batches, keys and value layouts, byte for byte
    except offsets, timestamps, member ids and what depends on them."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    workload = json.loads((W5 / "workload.json").read_text())
    client = workload["client"]
    # W5 was written by Kafka 3.9: ask for its record layout
    broker = odradek_broker_factory(overrides={"group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
                                               "group.coordinator.record.format": "3.9"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(600):
        producer.send("w5-group", f"value-{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        "w5-group", bootstrap_servers=broker.bootstrap, group_id=client["group_id"],
        client_id=client["client_id"], auto_offset_reset="earliest", enable_auto_commit=False,
        max_poll_records=client["max_poll_records"],
    )
    # Commit the offsets the W5 consumer committed (its poll sizes depended on its fetches).
    targets = [_offset_value(W5 / "logdir-clean" / "__consumer_offsets-11", i) for i in range(10)]
    commits = 0
    position = 0
    while commits < len(targets):
        batch = consumer.poll(timeout_ms=5000)
        assert batch
        for tp, msgs in batch.items():
            position = msgs[-1].offset + 1
            while commits < len(targets) and targets[commits] <= position:
                consumer.commit({tp: OffsetAndMetadata(targets[commits], f"meta-{commits}", -1)})
                commits += 1
    consumer.close()
    broker.stop()

    partition = rec.partition_for(client["group_id"], 50)
    assert partition == 11
    ours = _records(broker.log_dirs[0] / f"__consumer_offsets-{partition}")
    real = _records(W5 / "logdir-clean" / "__consumer_offsets-11")
    assert [r["kind"] for r in ours] == [r["kind"] for r in real]
    for mine, theirs in zip(ours, real, strict=True):
        assert mine["header"] == theirs["header"]
        assert mine["key"] == theirs["key"]
        assert mine["value_version"] == theirs["value_version"]
        assert mine["batch_size"] == theirs["batch_size"]
        if mine["kind"] == "offset":
            assert mine["metadata"] == theirs["metadata"]
            assert mine["offset"] == theirs["offset"]
            assert mine["value_size"] == theirs["value_size"]
            assert mine["batch_size"] == theirs["batch_size"]
        else:
            assert mine["generation"] == theirs["generation"]
            assert mine["protocol"] == theirs["protocol"]
            assert mine["members"] == theirs["members"]


def _offset_value(partition_dir: Path, n: int) -> int:
    """The n-th committed offset in a real offsets partition."""
    found = [r for r in _records(partition_dir) if r["kind"] == "offset"]
    return found[n]["offset"]


def _records(partition_dir: Path) -> list[dict]:
    out = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for batch in iter_batches(data):
            h = batch.header()
            header = (h.magic, h.attributes, h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
            for record in batch.records():
                key = bytes(record.key)
                value = None if record.value is None else bytes(record.value)
                decoded = rec.decode_record(key, value)
                item = {"header": header, "key": key, "batch_size": h.size_in_bytes,
                        "value_version": getattr(decoded, "value_version", None)}
                if isinstance(decoded, rec.OffsetCommitRecord):
                    item.update(kind="offset", metadata=decoded.value.metadata, value_size=len(value),
                                offset=decoded.value.offset)
                else:
                    v = decoded.value
                    item.update(kind="group", generation=v.generation, protocol=v.protocol,
                                members=[(m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout,
                                          bytes(m.subscription), bytes(m.assignment)) for m in v.members])
                out.append(item)
    return out
