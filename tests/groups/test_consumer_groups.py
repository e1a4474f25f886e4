"""KIP-848: server-side assignors and the reconciliation of consumer group members."""

from __future__ import annotations

import pytest
from groups_testutil import run_with_coordinator

from odradek.group_coordinator.assignors import range_assign, uniform_assign
from odradek.group_coordinator.classic import GroupError
from odradek.group_coordinator.consumer import ConsumerGroup
from odradek.wire.errors import ErrorCode as E


def test_uniform_assignor_balances_and_sticks():
    subs = {"a": {"t"}, "b": {"t"}}
    first = uniform_assign(subs, {"t": 6})
    assert sorted(len(first[m]["t"]) for m in first) == [3, 3]
    assert first["a"]["t"] | first["b"]["t"] == set(range(6))
    second = uniform_assign({**subs, "c": {"t"}}, {"t": 6}, first)
    assert sorted(len(second[m].get("t", ())) for m in second) == [2, 2, 2]
    # each old member keeps two of its three partitions
    assert len(second["a"]["t"] & first["a"]["t"]) == 2 and len(second["b"]["t"] & first["b"]["t"]) == 2


def test_uniform_assignor_respects_subscriptions():
    got = uniform_assign({"a": {"x"}, "b": {"x", "y"}}, {"x": 2, "y": 2})
    assert "y" not in got["a"]
    assert sum(len(ps) for m in got.values() for ps in m.values()) == 4


def test_range_assignor_gives_contiguous_ranges_first_members_get_more():
    got = range_assign({"b": {"t"}, "a": {"t"}, "c": {"t"}}, {"t": 7})
    assert got == {"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}, "c": {"t": {5, 6}}}


#: compute each new target assignment at once (Kafka 4.4 waits group.consumer.assignment.interval.ms)
NO_INTERVAL = {"group.consumer.assignment.interval.ms": 0}


class _Topics:
    def __init__(self, counts):
        self.counts = counts

    def __call__(self, name):
        return self.counts.get(name)


def test_second_member_only_gets_partitions_after_the_first_revokes_them():
    async def scenario(c):
        c.topic_partition_count = _Topics({"t": 4})
        hb = c.consumer_group_heartbeat

        def beat(member, epoch, owned=None, topics=None):
            return hb(group_id="cg", api_version=1, member_id=member, member_epoch=epoch, instance_id=None,
                      rack_id=None, rebalance_timeout_ms=5000, subscribed_topic_names=topics,
                      subscribed_topic_regex=None, server_assignor=None, owned=owned, client_id="c",
                      client_host="/h")

        a = beat("A", 0, topics=["t"])
        # Kafka 4.4: a new group is at epoch 1, its first bump gives 2
        assert a.error == E.NONE and a.member_epoch == 2 and a.assignment == {"t": {0, 1, 2, 3}}
        b = beat("B", 0, topics=["t"])
        assert b.member_epoch == 3 and b.assignment == {}  # everything is still owned by A
        group = c.groups["cg"]
        assert isinstance(group, ConsumerGroup) and group.state_name() == "Reconciling"
        a = beat("A", 2, owned={"t": {0, 1, 2, 3}})
        assert a.member_epoch == 2 and a.assignment == {"t": {0, 1}}  # revoke first, epoch stays
        a = beat("A", 2, owned={"t": {0, 1}})  # revocation acknowledged
        assert a.member_epoch == 3
        b = beat("B", 3, owned={})
        assert b.assignment == {"t": {2, 3}} and group.state_name() == "Stable"
        assert beat("B", 7).error == E.FENCED_MEMBER_EPOCH
        assert beat("Z", 3).error == E.UNKNOWN_MEMBER_ID
        left = beat("A", -1)
        assert left.member_epoch == -1 and "A" not in group.members
        b = beat("B", 3, owned={"t": {2, 3}})
        assert b.member_epoch == 4 and b.assignment == {"t": {0, 1, 2, 3}}

    run_with_coordinator(None, scenario, **NO_INTERVAL)


def test_consumer_group_session_expiry_moves_partitions():
    async def scenario(c):
        import trio

        c.topic_partition_count = _Topics({"t": 2})

        def beat(member, epoch, owned=None, topics=None):
            return c.consumer_group_heartbeat(
                group_id="cg", api_version=1, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                rebalance_timeout_ms=5000, subscribed_topic_names=topics, subscribed_topic_regex=None,
                server_assignor="range", owned=owned, client_id="c", client_host="/h")

        beat("A", 0, topics=["t"])
        beat("B", 0, topics=["t"])
        group = c.groups["cg"]
        assert group.assignor_name == "range"
        await trio.sleep(46)  # the default group.consumer.session.timeout.ms is 45 s
        assert group.members == {}

    run_with_coordinator(None, scenario)


def test_consumer_group_state_is_written_and_reloaded(tmp_path):
    from groups_testutil import CONSUMER_OFFSETS, FakeBroker

    from odradek.group_coordinator import records as rec
    from odradek.wire.records import iter_batches

    broker = FakeBroker(tmp_path, **NO_INTERVAL)
    broker.metadata.create_topic("t", 4, {})
    state = {}

    def beat(c, member, epoch, owned=None, topics=None):
        return c.consumer_group_heartbeat(
            group_id="cg", api_version=1, member_id=member, member_epoch=epoch, instance_id=None, rack_id="r1",
            rebalance_timeout_ms=5000, subscribed_topic_names=topics, subscribed_topic_regex=None,
            server_assignor=None, owned=owned, client_id="client", client_host="/10.0.0.1")

    async def before(c):
        beat(c, "A", 0, topics=["t"])
        beat(c, "B", 0, topics=["t"])
        beat(c, "A", 2, owned={"t": {0, 1, 2, 3}})  # revoke half
        beat(c, "A", 2, owned={"t": {0, 1}})
        b = beat(c, "B", 3, owned={})
        assert b.assignment == {"t": {2, 3}}
        state["b_epoch"] = b.member_epoch
        c.commit_offsets("cg", [("t", 2, 9, -1, "", -1)])

    run_with_coordinator(broker, before)
    kinds = []
    for (topic, _), plog in sorted(broker.logs.items()):
        if topic == CONSUMER_OFFSETS:
            for seg in sorted(plog.dir.glob("*.log")):
                for batch in iter_batches(seg.read_bytes()):
                    for r in batch.records():
                        kinds.append(int.from_bytes(bytes(r.key)[:2], "big"))
    assert {3, 5, 6, 7, 8} <= set(kinds) and 1 in kinds

    async def after(c):
        group = c.groups["cg"]
        assert isinstance(group, ConsumerGroup)
        assert group.group_epoch == group.assignment_epoch == 3
        assert group.members["B"].assigned == {"t": {2, 3}} and group.members["A"].assigned == {"t": {0, 1}}
        assert group.members["A"].rack_id == "r1" and group.members["A"].client_host == "/10.0.0.1"
        # the assignment epochs (Kafka 4.4's AssignmentEpochs) come back too
        assert group.members["A"].epochs == {("t", 0): 2, ("t", 1): 2}
        assert group.members["B"].epochs == {("t", 2): 3, ("t", 3): 3}
        assert group.state_name() == "Stable"
        # the member carries on with its epoch after the restart
        again = beat(c, "B", state["b_epoch"], owned={"t": {2, 3}})
        assert again.error == E.NONE and again.member_epoch == state["b_epoch"]
        assert c.fetch_offsets("cg", [("t", 2)])[("t", 2)].offset == 9
        # leaving empties the group, and deleting it removes every record
        beat(c, "A", -1)
        beat(c, "B", -1)
        assert c.delete_groups(["cg"]) == {"cg": E.NONE}

    again = broker.restarted()
    run_with_coordinator(again, after)

    async def gone(c):
        assert "cg" not in c.groups
        assert c.fetch_offsets("cg", None) == {}

    run_with_coordinator(again.restarted(), gone)
    assert rec.CONSUMER_GROUP_METADATA_KEY_VERSION == 3


def test_regex_subscription_matches_topics_and_picks_up_new_ones(tmp_path):
    from groups_testutil import FakeBroker

    broker = FakeBroker(tmp_path, **NO_INTERVAL)
    broker.metadata.create_topic("orders-eu", 2, {})
    broker.metadata.create_topic("payments", 2, {})

    def beat(c, epoch, regex=None, owned=None):
        return c.consumer_group_heartbeat(
            group_id="rx", api_version=1, member_id="m", member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=5000 if epoch == 0 else -1, subscribed_topic_names=None,
            subscribed_topic_regex=regex, server_assignor=None, owned=owned, client_id="c", client_host="/h")

    async def scenario(c):
        assert beat(c, 0, regex="orders-(").error == E.INVALID_REGULAR_EXPRESSION
        # Kafka 4.4 resolves a new regex after the heartbeat: the member joins at epoch 1 with
        # nothing, the resolution bumps the group to 2, the next heartbeat gets the partitions
        first = beat(c, 0, regex="orders-.*")
        assert first.error == E.NONE and first.member_epoch == 1 and first.assignment == {}
        group = c.groups["rx"]
        assert group.group_epoch == 2 and group.resolved["orders-.*"].topics == {"orders-eu"}
        second = beat(c, 1, owned={})
        assert second.member_epoch == 2 and second.assignment == {"orders-eu": {0, 1}}
        broker.metadata.create_topic("orders-us", 1, {})
        # a new topic is looked for at most every 10 s
        assert beat(c, 2, owned={"orders-eu": {0, 1}}).member_epoch == 2
        c._clock_ms = lambda: group.resolved["orders-.*"].timestamp + 10_001
        beat(c, 2, owned={"orders-eu": {0, 1}})
        again = beat(c, 2, owned={"orders-eu": {0, 1}})
        assert again.member_epoch == 3
        assert again.assignment == {"orders-eu": {0, 1}, "orders-us": {0}}
        assert group.subscribed_topic_names() == {"orders-eu", "orders-us"}

    run_with_coordinator(broker, scenario)


def test_transactional_commit_of_a_consumer_protocol_member():
    """Kafka's ConsumerGroup.validateOffsetCommit with isTransactional: TxnOffsetCommit v3-v5 from a
    KIP-848 member is accepted (only plain OffsetCommit must be v9+); a wrong epoch is
    ILLEGAL_GENERATION before TxnOffsetCommit v6; a memberless old-version commit passes."""
    async def scenario(c):
        c.topic_partition_count = _Topics({"t": 2})
        joined = c.consumer_group_heartbeat(
            group_id="cg", api_version=1, member_id="A", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=5000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
            server_assignor=None, owned=None, client_id="c", client_host="/h")
        epoch = joined.member_epoch

        def code(generation, member, version, transactional, instance=None):
            try:
                c.validate_offset_commit("cg", generation, member, instance, version, transactional=transactional)
            except GroupError as exc:
                return exc.code
            return E.NONE

        for version in (3, 4, 5):
            assert code(epoch, "A", version, True) == E.NONE
            assert code(epoch + 1, "A", version, True) == E.ILLEGAL_GENERATION
            assert code(epoch, "B", version, True) == E.UNKNOWN_MEMBER_ID
        assert code(epoch + 1, "A", 6, True) == E.STALE_MEMBER_EPOCH
        assert code(-1, "", 0, True) == E.NONE  # TxnOffsetCommit v0-2 carries no member
        # plain OffsetCommit keeps its rules
        assert code(epoch, "A", 8, False) == E.UNSUPPORTED_VERSION
        assert code(epoch, "A", 9, False) == E.NONE
        assert code(epoch + 1, "A", 9, False) == E.STALE_MEMBER_EPOCH
        assert code(-1, "", 9, False) == E.UNKNOWN_MEMBER_ID
        # a group that does not exist: ILLEGAL_GENERATION for a generation before TxnOffsetCommit v6
        with pytest.raises(GroupError) as err:
            c.validate_offset_commit("none", 1, "A", None, 5, transactional=True)
        assert err.value.code == E.ILLEGAL_GENERATION

    run_with_coordinator(None, scenario)


def test_commit_with_an_older_member_epoch_for_partitions_held_since_then():
    """Kafka 4.4 accepts an offset commit whose member epoch is older than the member's when each
    partition has been assigned to it since that epoch or before (AssignmentEpochs); otherwise
    STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for TxnOffsetCommit before v6."""
    async def scenario(c):
        c.topic_partition_count = _Topics({"t": 4})

        def beat(member, epoch, owned=None, topics=None):
            return c.consumer_group_heartbeat(
                group_id="cg", api_version=1, member_id=member, member_epoch=epoch, instance_id=None,
                rack_id=None, rebalance_timeout_ms=5000, subscribed_topic_names=topics,
                subscribed_topic_regex=None, server_assignor=None, owned=owned, client_id="c", client_host="/h")

        def code(member, epoch, partitions, transactional=False, version=9):
            try:
                c.validate_offset_commit("cg", epoch, member, None, version, transactional=transactional,
                                         partitions=[("t", p) for p in partitions])
            except GroupError as exc:
                return exc.code
            return E.NONE

        beat("A", 0, topics=["t"])                   # A: epoch 2, t-0..3 since epoch 2
        beat("B", 0, topics=["t"])                   # group epoch 3
        beat("A", 2, owned={"t": {0, 1, 2, 3}})      # A revokes t-2, t-3 (still epoch 2)
        assert code("A", 2, [2, 3]) == E.NONE        # pending revocation: still A's to commit
        assert beat("A", 2, owned={"t": {0, 1}}).member_epoch == 3
        assert beat("B", 3, owned={}).assignment == {"t": {2, 3}}
        assert code("A", 2, [0, 1]) == E.NONE        # held since epoch 2
        assert code("A", 2, [0, 2]) == E.STALE_MEMBER_EPOCH  # t-2 went to B
        assert code("B", 2, [2]) == E.STALE_MEMBER_EPOCH     # B has held t-2 since epoch 3
        assert code("B", 3, [2]) == E.NONE
        assert code("A", 4, [0]) == E.STALE_MEMBER_EPOCH     # newer than the member's
        assert code("A", 2, [0], transactional=True, version=4) == E.NONE
        assert code("A", 2, [2], transactional=True, version=4) == E.ILLEGAL_GENERATION
        assert code("A", 2, [0], version=9) == E.NONE
        # without the partitions (a caller that cannot say) an older epoch is refused
        with pytest.raises(GroupError):
            c.validate_offset_commit("cg", 2, "A", None, 9)

    run_with_coordinator(None, scenario, **NO_INTERVAL)


def test_offset_fetch_checks_any_member_or_epoch_given():
    """Kafka's ConsumerGroup.validateOffsetFetch skips its checks only when the request names
    neither a member nor an epoch."""
    async def scenario(c):
        c.topic_partition_count = _Topics({"t": 1})
        joined = c.consumer_group_heartbeat(
            group_id="cg", api_version=1, member_id="A", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=5000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
            server_assignor=None, owned=None, client_id="c", client_host="/h")

        def code(member_id, epoch):
            try:
                c.validate_offset_fetch("cg", member_id, epoch)
            except GroupError as exc:
                return exc.code
            return E.NONE

        assert code(None, -1) == E.NONE
        assert code("A", joined.member_epoch) == E.NONE
        assert code("A", -1) == E.STALE_MEMBER_EPOCH
        assert code(None, joined.member_epoch) == E.UNKNOWN_MEMBER_ID
        assert code("B", joined.member_epoch) == E.UNKNOWN_MEMBER_ID

    run_with_coordinator(None, scenario)
