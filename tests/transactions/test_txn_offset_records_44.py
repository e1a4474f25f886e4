"""Transactional offset commits (TxnOffsetCommit) are written in the group coordinator's record
format: with Kafka 4.4's (the default) OffsetCommitValue version 4 carrying the committed topic's
id, as Kafka 4.4 writes them; with 3.9's, version 3 without it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "groups"))

from groups_testutil import CONSUMER_OFFSETS, FakeBroker, run_with_coordinator  # noqa: E402

from odradek.group_coordinator import records as rec  # noqa: E402
from odradek.txn_coordinator.group_offsets import GroupOffsets  # noqa: E402
from odradek.wire.errors import ErrorCode  # noqa: E402
from odradek.wire.records import iter_batches  # noqa: E402


def _offset_values(broker) -> list[tuple[str, int, int, object]]:
    """(topic, value version, offset, topic id) of every offset commit in __consumer_offsets."""
    out = []
    for (topic, _), plog in sorted(broker.logs.items()):
        if topic != CONSUMER_OFFSETS:
            continue
        for seg in sorted(plog.dir.glob("*.log")):
            for batch in iter_batches(seg.read_bytes()):
                for r in batch.records():
                    found = rec.decode_record(bytes(r.key), None if r.value is None else bytes(r.value))
                    if isinstance(found, rec.OffsetCommitRecord) and found.value is not None:
                        version = int.from_bytes(bytes(r.value)[:2], "big")
                        out.append((found.topic, version, found.value.offset, found.value.topic_id))
    return out


def _commit(tmp_path, **overrides):
    broker = FakeBroker(tmp_path, **overrides)
    topic = broker.metadata.create_topic("t", 2, {})

    async def run(c):
        offsets = GroupOffsets(broker)
        code = offsets.append_pending("g", 7, 0, [("t", 1, 42, 3, "meta"), ("gone", 0, 5, -1, None)], c.now_ms())
        assert code == ErrorCode.NONE

    run_with_coordinator(broker, run)
    return topic, _offset_values(broker)


def test_kafka_44_format_writes_the_topic_id(tmp_path):
    topic, values = _commit(tmp_path)
    # a topic the broker does not know gets no id (Kafka: the zero id, the tagged field's default)
    zero = rec.OffsetCommitValue().topic_id
    assert {v[0]: v[1:] for v in values} == {"t": (4, 42, topic.topic_id), "gone": (4, 5, zero)}
    assert topic.topic_id != zero


def test_kafka_39_format_keeps_version_3(tmp_path):
    _, values = _commit(tmp_path, **{"group.coordinator.record.format": "3.9"})
    assert {(t, v) for t, v, _, _ in values} == {("t", 3), ("gone", 3)}
