"""The coordinator writes its state to __consumer_offsets and loads it back after a restart;
tombstones delete; offsets of empty groups expire after offsets.retention.minutes."""

from __future__ import annotations

import pytest
from groups_testutil import CONSUMER_OFFSETS, FakeBroker, join_kwargs, run_with_coordinator

from odradek.group_coordinator import records as rec
from odradek.group_coordinator.classic import GroupError, GroupState
from odradek.wire.errors import ErrorCode as E
from odradek.wire.records import iter_batches


def _all_records(broker: FakeBroker):
    out = []
    for (topic, _), plog in sorted(broker.logs.items()):
        if topic != CONSUMER_OFFSETS:
            continue
        data = b"".join(p.read_bytes() for p in sorted(plog.dir.glob("*.log")))
        for batch in iter_batches(data):
            for r in batch.records():
                out.append((batch.header(), rec.decode_record(bytes(r.key), None if r.value is None else bytes(r.value))))
    return out


async def _stable_group(c, group_id="g"):
    first = await c.join_group(**join_kwargs(group_id=group_id))
    joined = await c.join_group(**join_kwargs(group_id=group_id, member_id=first.member_id))
    await c.sync_group(group_id=group_id, generation_id=joined.generation_id, member_id=joined.member_id,
                       group_instance_id=None, protocol_type=None, protocol_name=None,
                       assignments={joined.member_id: b"assignment"})
    return joined


@pytest.mark.parametrize("fmt", ["3.9", "4.1"])
def test_group_and_offsets_are_reloaded_after_a_restart(tmp_path, fmt):
    broker = FakeBroker(tmp_path, **{"group.coordinator.record.format": fmt})
    broker.metadata.create_topic("t", 2, {})
    state = {}

    async def before(c):
        joined = await _stable_group(c)
        state["member"] = joined.member_id
        c.commit_offsets("g", [("t", 0, 10, 3, "m0", -1), ("t", 1, 20, -1, "", -1)])
        c.commit_offsets("g", [("t", 0, 11, 3, "m1", -1)])
        c.commit_offsets("simple", [("t", 1, 5, -1, "", -1)])

    run_with_coordinator(broker, before)
    topic = broker.metadata.get(CONSUMER_OFFSETS)
    assert topic.configs == {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
    assert topic.partitions == 3
    records = _all_records(broker)
    kinds = [type(r).__name__ for _, r in records]
    # Kafka 4.1 also commits a new group to the log at once (an empty GroupMetadata record)
    assert kinds.count("GroupMetadataRecord") == (1 if fmt == "3.9" else 2)
    assert kinds.count("OffsetCommitRecord") == 4
    for header, r in records:
        expected_sequence = 0 if isinstance(r, rec.OffsetCommitRecord) or fmt == "4.1" else -1
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, expected_sequence)
        assert header.attributes == 0
        if isinstance(r, rec.OffsetCommitRecord):
            assert r.value_version == (3 if fmt == "3.9" else 4)
    if fmt == "4.1":
        first = next(r for _, r in records if isinstance(r, rec.GroupMetadataRecord))
        assert (first.value.protocol_type, first.value.generation, first.value.members) == ("", 0, [])

    again = broker.restarted()

    async def after(c):
        group = c.groups["g"]
        assert group.state is GroupState.STABLE and group.generation_id == 1
        assert list(group.members) == [state["member"]]
        member = group.members[state["member"]]
        assert member.assignment == b"assignment" and member.client_host == "/127.0.0.1"
        assert group.protocol_name == "range" and group.leader_id == state["member"]
        offsets = c.fetch_offsets("g", None)
        assert {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in offsets.items()} == {
            ("t", 0): (11, 3, "m1"), ("t", 1): (20, -1, "")}
        assert c.fetch_offsets("simple", None)[("t", 1)].offset == 5
        assert c.groups["simple"].state is GroupState.EMPTY
        # the loaded member still heartbeats at its generation
        assert c.heartbeat("g", 1, state["member"], None) == E.NONE

    run_with_coordinator(again, after)


def test_deleted_group_and_offsets_stay_deleted_after_restart(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 1, {})

    async def before(c):
        c.commit_offsets("gone", [("t", 0, 10, -1, "", -1)])
        c.commit_offsets("kept", [("t", 0, 7, -1, "", -1)])
        c.validate_offset_commit("gone", -1, "", None, 8)
        assert c.delete_groups(["gone"]) == {"gone": E.NONE}
        c.commit_offsets("partly", [("t", 0, 1, -1, "", -1)])
        c.validate_offset_commit("partly", -1, "", None, 8)
        assert c.delete_offsets("partly", [("t", 0)]) == {("t", 0): E.NONE}

    run_with_coordinator(broker, before)

    async def after(c):
        assert "gone" not in c.groups and c.fetch_offsets("gone", None) == {}
        assert c.fetch_offsets("kept", None)[("t", 0)].offset == 7
        assert c.fetch_offsets("partly", None) == {}

    run_with_coordinator(broker.restarted(), after)


def test_offset_delete_refuses_subscribed_topics(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 1, {})
    broker.metadata.create_topic("other", 1, {})

    async def scenario(c):
        await _stable_group(c)
        c.commit_offsets("g", [("t", 0, 1, -1, "", -1), ("other", 0, 2, -1, "", -1)])
        assert c.delete_offsets("g", [("t", 0), ("other", 0)]) == {
            ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}
        with pytest.raises(GroupError) as err:
            c.delete_offsets("nope", [("t", 0)])
        assert err.value.code == E.GROUP_ID_NOT_FOUND

    run_with_coordinator(broker, scenario)


def test_offsets_of_an_empty_group_expire_after_retention(tmp_path):
    broker = FakeBroker(tmp_path, **{"offsets.retention.minutes": "1", "group.coordinator.record.format": "3.9"})
    broker.metadata.create_topic("t", 1, {})
    clock = {"now": 1_000_000}

    async def scenario(c):
        c._clock_ms = lambda: clock["now"]
        c.commit_offsets("idle", [("t", 0, 3, -1, "", -1)])
        c.validate_offset_commit("idle", -1, "", None, 8)
        clock["now"] += 59_000
        assert c.expire_offsets() == 0
        clock["now"] += 2_000
        assert c.expire_offsets() == 1
        assert "idle" not in c.groups

    run_with_coordinator(broker, scenario)
    found = [(h, r) for h, r in _all_records(broker) if r.group == "idle"]
    records = [r for _, r in found]
    assert [type(r).__name__ for r in records] == ["OffsetCommitRecord", "OffsetCommitRecord", "GroupMetadataRecord"]
    assert records[1].value is None and records[2].value is None
    # the commit's batch has baseSequence 0; the expiry tombstones go in one batch with -1, as Kafka 3.9
    assert [h.base_sequence for h, _ in found] == [0, -1, -1]
    assert found[1][0].base_offset == found[2][0].base_offset


def test_transactional_offsets_load_by_their_markers(tmp_path):
    """Offsets of a committed transaction apply, of an aborted one are dropped, of an open one stay
    pending (and make OffsetFetch with require_stable answer UNSTABLE_OFFSET_COMMIT)."""
    from odradek.wire.records import ControlRecordType, SimpleRecord, build_batch, build_end_txn_marker_batch

    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 3, {})

    async def write(c):
        c.ensure_offsets_topic()
        plog = broker.partition_log(CONSUMER_OFFSETS, c.partition_for("txg"))
        for pid, offset in ((7, 10), (8, 20), (9, 30)):
            value = rec.offset_commit_value(offset, -1, "", 1000)
            batch = build_batch([SimpleRecord(value, rec.offset_commit_key("txg", "t", pid - 7), (), 1000)],
                                producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
            plog.append_as_coordinator(bytearray(batch), 0, 1000)
        for pid, marker in ((7, ControlRecordType.COMMIT), (8, ControlRecordType.ABORT)):
            batch = build_end_txn_marker_batch(marker, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                               timestamp=1000)
            plog.append_as_coordinator(bytearray(batch), 0, 1000)

    run_with_coordinator(broker, write)

    async def after(c):
        offsets = c.fetch_offsets("txg", None)
        assert {tp: o.offset for tp, o in offsets.items()} == {("t", 0): 10}
        (key,) = c.pending_transactional
        assert key[0] == 9 and c.pending_transactional[key]["txg"][("t", 2)].offset == 30
        assert c.has_pending_transactional("txg", ("t", 2)) and not c.has_pending_transactional("txg", ("t", 0))

    run_with_coordinator(broker.restarted(), after)


def test_an_empty_consumer_group_without_offsets_is_deleted_by_the_retention_check(tmp_path):
    broker = FakeBroker(tmp_path, **{"offsets.retention.minutes": "1"})
    broker.metadata.create_topic("t", 1, {})
    clock = {"now": 1_000_000}

    async def scenario(c):
        c._clock_ms = lambda: clock["now"]
        args = dict(group_id="cg", api_version=1, member_id="m", instance_id=None, rack_id=None,
                    subscribed_topic_regex=None, server_assignor=None, owned=None, client_id="c", client_host="/h")
        c.consumer_group_heartbeat(member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=["t"], **args)
        c.commit_offsets("cg", [("t", 0, 4, -1, "", -1)])
        c.consumer_group_heartbeat(member_epoch=-1, rebalance_timeout_ms=-1, subscribed_topic_names=None, **args)
        assert c.expire_offsets() == 0  # too young
        clock["now"] += 61_000
        assert c.expire_offsets() == 1
        assert "cg" not in c.groups

    run_with_coordinator(broker, scenario)

    async def after(c):
        assert "cg" not in c.groups and c.fetch_offsets("cg", None) == {}

    run_with_coordinator(broker.restarted(), after)
