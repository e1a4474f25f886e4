"""The classic group state machine: KIP-394 joins, generations, sync, heartbeats, leaving, session
expiry, static membership, protocol selection and offset-commit validation."""

from __future__ import annotations

import pytest
import trio
from groups_testutil import consumer_subscription, join_kwargs, run_with_coordinator

from odradek.group_coordinator.classic import ClassicGroup, ClassicMember, GroupError, GroupState
from odradek.wire.errors import ErrorCode as E


async def _join_new(coordinator, **kwargs):
    """KIP-394 two-step join of a new dynamic member; returns the JoinResult."""
    first = await coordinator.join_group(**join_kwargs(**kwargs))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith(kwargs.get("client_id", "client") + "-")
    return await coordinator.join_group(**join_kwargs(member_id=first.member_id, **kwargs))


def test_single_member_joins_syncs_and_is_stable():
    async def scenario(c):
        joined = await _join_new(c)
        assert joined.error == E.NONE and joined.generation_id == 1
        assert joined.leader == joined.member_id and joined.protocol_name == "range"
        assert [m for m, _, _ in joined.members] == [joined.member_id]
        group = c.groups["g"]
        assert group.state is GroupState.COMPLETING_REBALANCE
        synced = await c.sync_group(group_id="g", generation_id=1, member_id=joined.member_id,
                                    group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                    assignments={joined.member_id: b"A"})
        assert synced.error == E.NONE and synced.assignment == b"A"
        assert group.state is GroupState.STABLE
        assert c.heartbeat("g", 1, joined.member_id, None) == E.NONE
        assert c.heartbeat("g", 0, joined.member_id, None) == E.ILLEGAL_GENERATION
        assert c.heartbeat("g", 1, "nobody", None) == E.UNKNOWN_MEMBER_ID
        assert c.heartbeat("other", 1, joined.member_id, None) == E.UNKNOWN_MEMBER_ID

    run_with_coordinator(None, scenario)


def test_two_members_join_together_and_follower_waits_for_leader_sync():
    async def scenario(c):
        results = {}

        async def join(name):
            results[name] = await _join_new(c, client_id=name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, "a")
            nursery.start_soon(join, "b")
        a, b = results["a"], results["b"]
        assert a.generation_id == b.generation_id == 1
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        assert len(leader.members) == 2 and follower.members == []
        synced = {}

        async def sync(result, assignments):
            synced[result.member_id] = await c.sync_group(
                group_id="g", generation_id=1, member_id=result.member_id, group_instance_id=None,
                protocol_type=None, protocol_name=None, assignments=assignments)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sync, follower, {})
            await trio.sleep(1)  # the follower parks until the leader's assignment arrives
            assert follower.member_id not in synced
            nursery.start_soon(sync, leader, {leader.member_id: b"L", follower.member_id: b"F"})
        assert synced[leader.member_id].assignment == b"L"
        assert synced[follower.member_id].assignment == b"F"

    run_with_coordinator(None, scenario)


def test_rebalance_on_new_member_and_leave_and_empty_generation():
    async def scenario(c):
        a = await _join_new(c, client_id="a")
        await c.sync_group(group_id="g", generation_id=1, member_id=a.member_id, group_instance_id=None,
                           protocol_type=None, protocol_name=None, assignments={})
        results = {}

        async def join_b():
            results["b"] = await _join_new(c, client_id="b")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join_b)
            await trio.sleep(0.1)
            # the existing member hears about the rebalance through its heartbeat, then rejoins
            assert c.heartbeat("g", 1, a.member_id, None) == E.REBALANCE_IN_PROGRESS
            results["a"] = await c.join_group(**join_kwargs(member_id=a.member_id, client_id="a"))
        assert results["a"].generation_id == results["b"].generation_id == 2
        top, codes = c.leave_group("g", [(results["b"].member_id, None), ("ghost", None)])
        assert top == E.NONE and codes == [E.NONE, E.UNKNOWN_MEMBER_ID]
        group = c.groups["g"]
        assert group.state is GroupState.PREPARING_REBALANCE
        assert c.leave_group("g", [(a.member_id, None)]) == (E.NONE, [E.NONE])
        assert group.state is GroupState.EMPTY and group.generation_id == 3
        assert group.protocol_name is None and group.leader_id is None and group.protocol_type == "consumer"
        # an unknown group: each member is unknown, the request itself is fine (Kafka 4.x)
        assert c.leave_group("nope", [("x", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])

    run_with_coordinator(None, scenario)


def test_session_timeout_removes_a_silent_member():
    async def scenario(c):
        results = {}

        async def join(name):
            results[name] = await _join_new(c, client_id=name, session_timeout_ms=500)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, "a")
            nursery.start_soon(join, "b")
        a, b = results["a"], results["b"]
        leader = a if a.leader == a.member_id else b
        await c.sync_group(group_id="g", generation_id=1, member_id=leader.member_id, group_instance_id=None,
                           protocol_type=None, protocol_name=None, assignments={})
        # only `a` heartbeats; `b` falls silent
        start = trio.current_time()
        while trio.current_time() - start < 0.45:
            assert c.heartbeat("g", 1, a.member_id, None) == E.NONE
            await trio.sleep(0.1)
        assert b.member_id in c.groups["g"].members
        await trio.sleep(0.2)
        assert b.member_id not in c.groups["g"].members
        assert c.heartbeat("g", 1, a.member_id, None) == E.REBALANCE_IN_PROGRESS
        rejoined = await c.join_group(**join_kwargs(member_id=a.member_id, client_id="a", session_timeout_ms=500))
        assert rejoined.generation_id == 2 and rejoined.leader == a.member_id

    run_with_coordinator(None, scenario)


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    async def scenario(c):
        results = {}

        async def join(name):
            results[name] = await _join_new(c, client_id=name, rebalance_timeout_ms=3000)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, "a")
            nursery.start_soon(join, "b")
        a, b = results["a"], results["b"]
        t0 = trio.current_time()
        # `a` rejoins with new metadata (forces a rebalance); `b` only heartbeats, never rejoins
        async with trio.open_nursery() as nursery:
            async def keep_b_alive():
                while "a2" not in results:
                    c.heartbeat("g", 1, b.member_id, None)
                    await trio.sleep(0.2)

            nursery.start_soon(keep_b_alive)
            results["a2"] = await c.join_group(**join_kwargs(
                member_id=a.member_id, client_id="a", rebalance_timeout_ms=3000,
                protocols=[("range", consumer_subscription("t", "u"))]))
            results["took"] = trio.current_time() - t0
        assert results["took"] == pytest.approx(3.0, abs=0.05)
        assert results["a2"].generation_id == 2
        assert list(c.groups["g"].members) == [a.member_id]

    run_with_coordinator(None, scenario)


def test_static_member_rejoin_fences_the_old_instance_without_a_rebalance():
    async def scenario(c):
        joined = await c.join_group(**join_kwargs(group_instance_id="inst-1"))
        assert joined.error == E.NONE and joined.member_id.startswith("inst-1-")
        await c.sync_group(group_id="g", generation_id=1, member_id=joined.member_id, group_instance_id="inst-1",
                           protocol_type=None, protocol_name=None, assignments={joined.member_id: b"X"})
        again = await c.join_group(**join_kwargs(group_instance_id="inst-1"))
        assert again.error == E.NONE and again.member_id != joined.member_id
        assert again.generation_id == 1 and again.skip_assignment  # the leader keeps its assignment
        assert c.groups["g"].state is GroupState.STABLE
        assert c.heartbeat("g", 1, joined.member_id, "inst-1") == E.FENCED_INSTANCE_ID
        assert c.heartbeat("g", 1, again.member_id, "inst-1") == E.NONE
        assert c.leave_group("g", [(joined.member_id, "inst-1")])[1] == [E.FENCED_INSTANCE_ID]
        synced = await c.sync_group(group_id="g", generation_id=1, member_id=again.member_id,
                                    group_instance_id="inst-1", protocol_type=None, protocol_name=None,
                                    assignments={})
        assert synced.assignment == b"X"

    run_with_coordinator(None, scenario)


def test_join_validation_errors():
    async def scenario(c):
        assert (await c.join_group(**join_kwargs(group_id=""))).error == E.INVALID_GROUP_ID
        assert (await c.join_group(**join_kwargs(session_timeout_ms=10))).error == E.INVALID_SESSION_TIMEOUT
        assert (await c.join_group(**join_kwargs(member_id="unknown"))).error == E.UNKNOWN_MEMBER_ID
        joined = await _join_new(c)
        other = await c.join_group(**join_kwargs(protocol_type="connect", require_known_member_id=False))
        assert other.error == E.INCONSISTENT_GROUP_PROTOCOL
        other = await c.join_group(**join_kwargs(protocols=[("roundrobin", b"")], require_known_member_id=False))
        assert other.error == E.INCONSISTENT_GROUP_PROTOCOL
        sync = await c.sync_group(group_id="g", generation_id=1, member_id=joined.member_id, group_instance_id=None,
                                  protocol_type="consumer", protocol_name="roundrobin", assignments={})
        assert sync.error == E.INCONSISTENT_GROUP_PROTOCOL

    run_with_coordinator(None, scenario)


def test_protocol_selection_is_a_vote_over_common_protocols():
    group = ClassicGroup("g")

    def member(mid, names):
        return ClassicMember(mid, None, "c", "h", 1000, 1000, "consumer", [(n, b"") for n in names])

    group.add_member(member("1", ["roundrobin", "range"]))
    group.add_member(member("2", ["range", "roundrobin"]))
    group.add_member(member("3", ["range", "sticky", "roundrobin"]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_illegal_state_transition_is_refused():
    group = ClassicGroup("g")
    with pytest.raises(RuntimeError):
        group.transition_to(GroupState.STABLE, 0)


def test_offset_commit_validation():
    async def scenario(c):
        # a simple consumer (no generation) creates an empty group by committing
        group = c.validate_offset_commit("simple", -1, "", None, 8)
        assert group.state is GroupState.EMPTY
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("missing", 3, "m", None, 8)
        assert err.value.code == E.ILLEGAL_GENERATION
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("missing", 3, "m", None, 9)
        assert err.value.code == E.GROUP_ID_NOT_FOUND
        joined = await _join_new(c)
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("g", 1, joined.member_id, None, 8)
        assert err.value.code == E.REBALANCE_IN_PROGRESS  # CompletingRebalance
        await c.sync_group(group_id="g", generation_id=1, member_id=joined.member_id, group_instance_id=None,
                           protocol_type=None, protocol_name=None, assignments={})
        c.validate_offset_commit("g", 1, joined.member_id, None, 8)
        for args, code in [((0, joined.member_id), E.ILLEGAL_GENERATION), ((1, "x"), E.UNKNOWN_MEMBER_ID),
                           ((-1, ""), E.UNKNOWN_MEMBER_ID)]:
            with pytest.raises(GroupError) as err:
                c.validate_offset_commit("g", args[0], args[1], None, 8)
            assert err.value.code == code
        c.commit_offsets("g", [("t", 0, 42, 5, "meta", -1)])
        stored = c.fetch_offsets("g", [("t", 0), ("t", 1)])
        assert stored[("t", 0)].offset == 42 and stored[("t", 0)].metadata == "meta"
        assert stored[("t", 1)] is None
        assert c.delete_groups(["g", "simple", "none"]) == {
            "g": E.NON_EMPTY_GROUP, "simple": E.NONE, "none": E.GROUP_ID_NOT_FOUND}

    run_with_coordinator(None, scenario)


def test_replaced_static_leader_before_v9_is_not_told_it_leads():
    async def scenario(c):
        joined = await c.join_group(**join_kwargs(group_instance_id="inst-1"))
        await c.sync_group(group_id="g", generation_id=1, member_id=joined.member_id, group_instance_id="inst-1",
                           protocol_type=None, protocol_name=None, assignments={})
        again = await c.join_group(**join_kwargs(group_instance_id="inst-1", supports_skip_assignment=False))
        assert again.leader == joined.member_id != again.member_id and again.members == []
        assert not again.skip_assignment

    run_with_coordinator(None, scenario)


def test_static_member_that_does_not_rejoin_keeps_its_place():
    async def scenario(c):
        results = {}

        async def join(name, instance):
            results[name] = await c.join_group(**join_kwargs(client_id=name, group_instance_id=instance, session_timeout_ms=5000,
                                                             rebalance_timeout_ms=1000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, "a", "static-a")
            nursery.start_soon(join, "b", None)
        b_first = await c.join_group(**join_kwargs(member_id=results["b"].member_id, client_id="b",
                                                   rebalance_timeout_ms=1000, session_timeout_ms=5000,
                                                   protocols=[("range", consumer_subscription("t", "u"))]))
        # the static member never rejoined: after the rebalance timeout it is still a member
        assert b_first.generation_id >= 2
        assert results["a"].member_id in c.groups["g"].members

    run_with_coordinator(None, scenario)


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout():
    async def scenario(c):
        results = {}

        async def join(name):
            results[name] = await _join_new(c, client_id=name, rebalance_timeout_ms=1000, session_timeout_ms=5000)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, "a")
            nursery.start_soon(join, "b")
        a, b = results["a"], results["b"]
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        await c.sync_group(group_id="g", generation_id=1, member_id=leader.member_id, group_instance_id=None,
                           protocol_type=None, protocol_name=None, assignments={})
        assert c.groups["g"].state is GroupState.STABLE
        # the follower heartbeats but never syncs
        for _ in range(12):
            c.heartbeat("g", 1, follower.member_id, None)
            await trio.sleep(0.1)
        assert follower.member_id not in c.groups["g"].members
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE

    run_with_coordinator(None, scenario)


def test_transactional_offset_commit_validation_of_a_classic_group():
    """Kafka's ClassicGroup.validateOffsetCommit with isTransactional: no REBALANCE_IN_PROGRESS while
    the group completes a rebalance, and memberless commits (TxnOffsetCommit v0-2) to a group
    with members are accepted; the member and generation are still checked when given."""
    async def scenario(c):
        joined = await _join_new(c)
        member = joined.member_id
        # CompletingRebalance: a plain commit must wait, a transactional one may go ahead
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("g", 1, member, None, 8)
        assert err.value.code == E.REBALANCE_IN_PROGRESS
        c.validate_offset_commit("g", 1, member, None, 3, transactional=True)
        c.validate_offset_commit("g", -1, "", None, 0, transactional=True)
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("g", -1, "", None, 8)
        assert err.value.code == E.UNKNOWN_MEMBER_ID
        for args, code in [((0, member), E.ILLEGAL_GENERATION), ((1, "x"), E.UNKNOWN_MEMBER_ID)]:
            with pytest.raises(GroupError) as err:
                c.validate_offset_commit("g", args[0], args[1], None, 3, transactional=True)
            assert err.value.code == code
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("missing", 3, "m", None, 5, transactional=True)
        assert err.value.code == E.ILLEGAL_GENERATION

    run_with_coordinator(None, scenario)
