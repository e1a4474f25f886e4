"""Online migration of a consumer group between the classic and the consumer protocols (Kafka 4.4's
``group.consumer.migration.policy``): upgrade on the first consumer-protocol member, classic
members answered by the consumer group, downgrade when the last consumer-protocol member leaves."""

from __future__ import annotations

import pytest
import trio
from groups_testutil import CONSUMER_OFFSETS, FakeBroker, run_with_coordinator

from odradek.group_coordinator import records as rec
from odradek.group_coordinator.classic import ClassicGroup, GroupState, parse_assignment
from odradek.group_coordinator.consumer import ConsumerGroup
from odradek.wire.errors import ErrorCode as E
from odradek.wire.records import iter_batches
from odradek.wire.schema import codec, message_class


def subscription(topics, owned=None, version=1) -> bytes:
    cls = message_class("ConsumerProtocolSubscription")
    owned_list = [cls.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in (owned or {}).items()]
    return version.to_bytes(2, "big") + codec("ConsumerProtocolSubscription", version).encode_bytes(
        cls(topics=list(topics), user_data=None, owned_partitions=owned_list, generation_id=-1, rack_id=None))


def assignment(partitions: dict[str, list[int]], version=1) -> bytes:
    cls = message_class("ConsumerProtocolAssignment")
    return version.to_bytes(2, "big") + codec("ConsumerProtocolAssignment", version).encode_bytes(
        cls(assigned_partitions=[cls.TopicPartition(topic=t, partitions=ps) for t, ps in partitions.items()],
            user_data=None))


def _join(c, member_id="", client="classic", owned=None, **kw):
    args = dict(group_id="g", member_id=member_id, group_instance_id=None, client_id=client, client_host="/h",
                session_timeout_ms=10_000, rebalance_timeout_ms=20_000, protocol_type="consumer",
                protocols=[("range", subscription(["t"], owned)), ("cooperative-sticky", subscription(["t"], owned))],
                require_known_member_id=True)
    args.update(kw)
    return c.join_group(**args)


async def _classic_member(c, client):
    first = await _join(c, client=client)
    assert first.error == E.MEMBER_ID_REQUIRED
    return first.member_id


async def _stable_classic_group(c, clients=("a", "b")):
    """A Stable classic group of eager (range) members over t (4 partitions); returns member ids."""
    ids = [await _classic_member(c, x) for x in clients]
    results = {}
    async with trio.open_nursery() as n:
        for mid, x in zip(ids, clients, strict=True):
            async def go(mid=mid, x=x):
                results[mid] = await _join(c, member_id=mid, client=x)
            n.start_soon(go)
    leader = next(r for r in results.values() if r.leader == r.member_id)
    plan = {mid: assignment({"t": [0, 1]} if i == 0 else {"t": [2, 3]}) for i, mid in enumerate(ids)}
    async with trio.open_nursery() as n:
        for mid in ids:
            async def sync(mid=mid):
                await c.sync_group(group_id="g", generation_id=leader.generation_id, member_id=mid,
                                   group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                   assignments=plan if mid == leader.member_id else {})
            n.start_soon(sync)
    assert c.groups["g"].state is GroupState.STABLE
    return ids, leader.generation_id


def _beat(c, member, epoch, owned=None, topics=None):
    return c.consumer_group_heartbeat(
        group_id="g", api_version=1, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=20_000 if epoch == 0 else -1, subscribed_topic_names=topics,
        subscribed_topic_regex=None, server_assignor=None, owned=owned, client_id="new", client_host="/h")


def _records(broker):
    out = []
    for (topic, _), plog in sorted(broker.logs.items()):
        if topic != CONSUMER_OFFSETS:
            continue
        data = b"".join(p.read_bytes() for p in sorted(plog.dir.glob("*.log")))
        for batch in iter_batches(data):
            out.append([rec.decode_record(bytes(r.key), None if r.value is None else bytes(r.value))
                        for r in batch.records()])
    return out


def _kinds(batch):
    return [(type(r).__name__, getattr(r, "key_version", None), r.value is None) for r in batch]


def test_upgrade_member_by_member_and_downgrade_back(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 4, {})
    targets = {}

    async def scenario(c):
        (a, b), generation = await _stable_classic_group(c)
        # a consumer-protocol member joins the classic group: the group is upgraded
        new = _beat(c, "N", 0, topics=["t"])
        assert new.error == E.NONE
        group = c.groups["g"]
        assert isinstance(group, ConsumerGroup)
        assert group.group_epoch == generation + 1 and new.member_epoch == generation + 1
        assert {m: group.members[m].classic is not None for m in group.members} == {a: True, b: True, "N": False}
        assert group.members[a].assigned == {"t": {0, 1}} and group.members[a].member_epoch == generation
        assert new.assignment == {}  # everything is still held by the classic members
        # the classic members are told to rejoin; their commits with the old generation still pass
        assert c.heartbeat("g", generation, a, None) == E.REBALANCE_IN_PROGRESS
        c.validate_offset_commit("g", generation, a, None, 8)
        assert c.heartbeat("g", generation + 5, a, None) == E.ILLEGAL_GENERATION
        # eager members revoked everything before rejoining: straight to the new epoch
        for member in (a, b):
            joined = await _join(c, member_id=member)
            assert joined.error == E.NONE and joined.leader == "" and joined.members == []
            assert joined.generation_id == generation + 1 and joined.protocol_name == "range"
            synced = await c.sync_group(group_id="g", generation_id=joined.generation_id, member_id=member,
                                        group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                        assignments={})
            assert synced.error == E.NONE
            assert parse_assignment(synced.assignment) == {
                t: sorted(ps) for t, ps in group.members[member].assigned.items()}
            assert c.heartbeat("g", generation + 1, member, None) == E.NONE
        new = _beat(c, "N", generation + 1, owned={})
        held = [p for m in group.members.values() for ps in m.assigned.values() for p in ps]
        assert sorted(held) == [0, 1, 2, 3] and group.state_name() == "Stable"
        # a classic member's protocols must fit the group
        other = await _join(c, member_id="x", protocols=[("roundrobin", subscription(["t"]))])
        assert other.error == E.INCONSISTENT_GROUP_PROTOCOL
        # the last consumer-protocol member leaves: back to a classic group, rebalancing
        targets.update({m: {t: sorted(ps) for t, ps in group.target[m].items() if ps} for m in (a, b)})
        left = _beat(c, "N", -1)
        assert left.error == E.NONE and left.member_epoch == -1
        classic = c.groups["g"]
        assert isinstance(classic, ClassicGroup) and set(classic.members) == {a, b}
        assert classic.generation_id == group.group_epoch and classic.protocol_name == "range"
        assert classic.state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat("g", classic.generation_id, a, None) == E.REBALANCE_IN_PROGRESS

    run_with_coordinator(broker, scenario)
    batches = _records(broker)
    upgrade = next(b for b in batches if any(type(r).__name__ == "GroupMetadataRecord" and r.value is None for r in b))
    # Kafka's order: the classic group's tombstone, the converted group (subscriptions, epoch,
    # targets, target epoch, current assignments), then the joining member's changes
    kinds = _kinds(upgrade)
    assert kinds[0] == ("GroupMetadataRecord", None, True)
    assert [k[1] for k in kinds[1:9]] == [5, 5, 3, 7, 7, 6, 8, 8]
    subscription_value = upgrade[1].value
    assert subscription_value.classic_member_metadata is not None
    assert subscription_value.classic_member_metadata.session_timeout_ms == 10_000
    downgrade = batches[-1]
    kinds = _kinds(downgrade)
    assert kinds[-1][0] == "GroupMetadataRecord" and kinds[-1][2] is False
    assert [k[1] for k in kinds[:-1]] == [8, 8, 8, 7, 7, 7, 6, 5, 5, 5, 4, 3]
    assert all(k[2] for k in kinds[:-1])
    # the classic group's members carry their target assignments of the consumer group
    members = downgrade[-1].value.members
    assert {m.member_id: parse_assignment(bytes(m.assignment)) for m in members} == targets


def test_a_converted_group_with_classic_members_survives_a_restart(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.metadata.create_topic("t", 4, {})

    async def scenario(c):
        await _stable_classic_group(c)
        assert _beat(c, "N", 0, topics=["t"]).error == E.NONE

    run_with_coordinator(broker, scenario)

    async def after(c):
        group = c.groups["g"]
        assert isinstance(group, ConsumerGroup)
        assert sorted(m.classic is not None for m in group.members.values()) == [False, True, True]
        classic = [m for m in group.members.values() if m.classic is not None]
        assert all(m.classic.protocols[0][0] == "range" for m in classic)

    run_with_coordinator(broker.restarted(), after)


@pytest.mark.parametrize("policy,upgrades", [("disabled", False), ("downgrade", False), ("upgrade", True),
                                             ("BIDIRECTIONAL", True)])
def test_policy_gates_the_upgrade(policy, upgrades):
    async def scenario(c):
        await _stable_classic_group(c)
        result = _beat(c, "N", 0, topics=["t"])
        if upgrades:
            assert result.error == E.NONE and isinstance(c.groups["g"], ConsumerGroup)
        else:
            assert result.error == E.GROUP_ID_NOT_FOUND and isinstance(c.groups["g"], ClassicGroup)

    async def with_topic(c):
        c.topic_partition_count = lambda name: 4 if name == "t" else None
        await scenario(c)

    run_with_coordinator(None, with_topic, **{"group.consumer.migration.policy": policy})


@pytest.mark.parametrize("policy,downgrades", [("upgrade", False), ("bidirectional", True)])
def test_policy_gates_the_downgrade_and_fencing_also_downgrades(policy, downgrades):
    async def scenario(c):
        c.topic_partition_count = lambda name: 4 if name == "t" else None
        (a, b), generation = await _stable_classic_group(c)
        _beat(c, "N", 0, topics=["t"])
        # the consumer-protocol member goes silent: its session expires
        deadline = c.groups["g"].members["N"].session_deadline
        for member in (a, b):  # the classic members keep their sessions alive
            c.groups["g"].members[member].session_deadline = deadline + 100
            c.groups["g"].members[member].join_deadline = None
        await trio.sleep_until(deadline + 0.1)
        group = c.groups["g"]
        if downgrades:
            assert isinstance(group, ClassicGroup) and set(group.members) == {a, b}
        else:
            assert isinstance(group, ConsumerGroup) and set(group.members) == {a, b}

    run_with_coordinator(None, scenario, **{"group.consumer.migration.policy": policy})


def test_classic_member_that_does_not_rejoin_is_fenced_at_its_rebalance_timeout():
    async def scenario(c):
        c.topic_partition_count = lambda name: 4 if name == "t" else None
        (a, b), generation = await _stable_classic_group(c)
        _beat(c, "N", 0, topics=["t"])
        assert c.heartbeat("g", generation, a, None) == E.REBALANCE_IN_PROGRESS
        group = c.groups["g"]
        group.members["N"].session_deadline += 100
        group.members[b].session_deadline += 100
        await trio.sleep(20.5)  # a's rebalance timeout (20 s) runs out before its session (10 s after the beat)
        assert a not in group.members

    run_with_coordinator(None, scenario)


def test_cooperative_member_revokes_before_it_moves_to_the_new_epoch():
    async def scenario(c):
        c.topic_partition_count = lambda name: 4 if name == "t" else None
        (a, b), generation = await _stable_classic_group(c)
        _beat(c, "N", 0, topics=["t"])
        group = c.groups["g"]
        # a still owns its partitions when it rejoins (cooperative): it must revoke first
        joined = await _join(c, member_id=a, owned={"t": [0, 1]})
        member = group.members[a]
        assert joined.generation_id == generation and member.state == "unrevoked_partitions"
        synced = await c.sync_group(group_id="g", generation_id=generation, member_id=a, group_instance_id=None,
                                    protocol_type="consumer", protocol_name="range", assignments={})
        assert synced.error == E.NONE
        kept = parse_assignment(synced.assignment).get("t", [])
        assert set(kept) < {0, 1}
        assert c.heartbeat("g", generation, a, None) == E.REBALANCE_IN_PROGRESS
        joined = await _join(c, member_id=a, owned={"t": kept})
        assert joined.generation_id == generation + 1
        # a SyncGroup naming another protocol than the join answer is refused
        bad = await c.sync_group(group_id="g", generation_id=generation + 1, member_id=a, group_instance_id=None,
                                 protocol_type="consumer", protocol_name="cooperative-sticky", assignments={})
        assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
        # LeaveGroup of a classic member removes it and bumps the epoch (no downgrade on this path)
        epoch = group.group_epoch
        assert c.leave_group("g", [(a, None), ("nobody", None)]) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
        assert a not in group.members and group.group_epoch == epoch + 1
        assert c.leave_group("g", [("N", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])  # not a classic member

    run_with_coordinator(None, scenario)
