"""Streams groups (KIP-1071) on the coordinator: topology configuration, the task assignor,
revoke-before-assign reconciliation, and the records that bring a group back after a restart."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "groups"))

from groups_testutil import FakeBroker, call, run_with_coordinator  # noqa: E402

from odradek.group_coordinator import streams as sg  # noqa: E402
from odradek.group_coordinator.streams_assignor import AssignmentMember, assign  # noqa: E402
from odradek.wire.errors import ErrorCode as E  # noqa: E402
from odradek.wire.protocol import request_class  # noqa: E402

Req = request_class(88)
APP = "wc"
REPARTITION = f"{APP}-by-word-repartition"
CHANGELOG = f"{APP}-store-changelog"


def topology(epoch: int = 0):
    info = Req.TopicInfo
    return Req.Topology(epoch=epoch, subtopologies=[
        Req.Subtopology(subtopology_id="0", source_topics=["in"], source_topic_regex=[], state_changelog_topics=[],
                        repartition_sink_topics=[REPARTITION], repartition_source_topics=[], copartition_groups=[]),
        Req.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                        state_changelog_topics=[info(name=CHANGELOG, partitions=0, replication_factor=0,
                                                     topic_configs=[Req.KeyValue(key="cleanup.policy",
                                                                                 value="compact")])],
                        repartition_sink_topics=[],
                        repartition_source_topics=[info(name=REPARTITION, partitions=0, replication_factor=0,
                                                        topic_configs=[])],
                        copartition_groups=[]),
    ])


def join(member: str, process: str) -> object:
    return Req(**join_kw(member, process))


def join_kw(member: str, process: str) -> dict:
    return dict(group_id=APP, member_id=member, member_epoch=0, endpoint_information_epoch=0, instance_id=None,
               rack_id=None, rebalance_timeout_ms=30000, topology=topology(), active_tasks=[], standby_tasks=[],
               warmup_tasks=[], process_id=process, user_endpoint=None, client_tags=[], task_offsets=[],
                task_end_offsets=[], shutdown_application=False)


def beat(member: str, epoch: int, owned: sg.TasksTuple | None = None) -> object:
    return Req(**beat_kw(member, epoch, owned))


def beat_kw(member: str, epoch: int, owned: sg.TasksTuple | None = None) -> dict:
    def ids(t):
        return [Req.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(t.items())]

    return dict(group_id=APP, member_id=member, member_epoch=epoch, endpoint_information_epoch=0, instance_id=None,
               rack_id=None, rebalance_timeout_ms=-1, topology=None,
               active_tasks=None if owned is None else ids(owned.active),
               standby_tasks=None if owned is None else ids(owned.standby),
               warmup_tasks=None if owned is None else ids(owned.warmup),
               process_id=None, user_endpoint=None, client_tags=None, task_offsets=None, task_end_offsets=None,
               shutdown_application=False)


def heartbeat(c, request):
    return sg.streams_group_heartbeat(c, request, client_id="client", client_host="/127.0.0.1")


def counts(table):
    return lambda t: table.get(t)


def test_internal_topics_get_the_partitions_of_the_topics_feeding_them():
    t = sg.Topology.from_request(topology())
    missing = sg.configure(t, counts({}))
    assert missing.status == (sg.MISSING_SOURCE_TOPICS, "Source topics in are missing.")
    to_create = sg.configure(t, counts({"in": 4}))
    assert to_create.tasks == {"0": 4, "1": 4}
    assert {n: i.partitions for n, i in to_create.to_create.items()} == {REPARTITION: 4, CHANGELOG: 4}
    assert to_create.to_create[CHANGELOG].configs == {"cleanup.policy": "compact"}
    assert to_create.status[0] == sg.MISSING_INTERNAL_TOPICS
    ready = sg.configure(t, counts({"in": 4, REPARTITION: 4, CHANGELOG: 4}))
    assert ready.ready() and ready.status is None
    wrong = sg.configure(t, counts({"in": 4, REPARTITION: 4, CHANGELOG: 2}))
    assert wrong.status == (sg.INCORRECTLY_PARTITIONED_TOPICS, f"Existing topic {CHANGELOG} has different number "
                                                               "of partitions: expected 4, found 2")


def test_assignor_balances_actives_and_keeps_standbys_off_the_active_process():
    tasks = {"0": 3, "1": 3}
    members = [AssignmentMember("m1", "p1"), AssignmentMember("m2", "p2")]
    out = assign(members, tasks, {"1"}, 1)
    actives = [out[m][0] for m in ("m1", "m2")]
    assert sorted(sum(len(ps) for ps in a.values()) for a in actives) == [3, 3]
    every = sorted((s, p) for a in actives for s, ps in a.items() for p in ps)
    assert every == [(s, p) for s in ("0", "1") for p in range(3)]
    for m in ("m1", "m2"):
        active, standby = out[m]
        assert not set(standby) - {"1"}  # standbys only for the stateful subtopology
        for s, ps in standby.items():
            assert not ps & active.get(s, set())
    assert sum(len(ps) for m in ("m1", "m2") for ps in out[m][1].values()) == 3
    # sticky: what a member runs stays with it when nothing changed
    again = assign([AssignmentMember("m1", "p1", out["m1"][0]), AssignmentMember("m2", "p2", out["m2"][0])],
                   tasks, {"1"}, 1)
    assert again["m1"][0] == out["m1"][0] and again["m2"][0] == out["m2"][0]
    # one member alone gets every active task and no standby (nowhere else to put one)
    alone = assign([AssignmentMember("m1", "p1", out["m1"][0])], tasks, {"1"}, 1)
    assert sum(len(ps) for ps in alone["m1"][0].values()) == 6 and not alone["m1"][1]


def test_tasks_move_only_after_their_owner_revoked_them(tmp_path):
    broker = FakeBroker(tmp_path, **{"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0",
                                     "group.streams.num.standby.replicas": "1"})
    broker.metadata.create_topic("in", 2, {})
    seen = {}

    async def run(c):
        first = heartbeat(c, join("a", "pa"))
        assert first.error == E.NONE
        assert [s for s, _ in first.status] == [sg.MISSING_INTERNAL_TOPICS]
        assert set(first.to_create) == {REPARTITION, CHANGELOG}
        for name, info in first.to_create.items():
            broker.metadata.create_topic(name, info.partitions, info.configs)
        r = heartbeat(c, beat("a", first.member_epoch, sg.TasksTuple()))
        assert r.status == [] and r.tasks is not None
        assert r.tasks.active == {"0": {0, 1}, "1": {0, 1}} and r.tasks.standby == {}
        a_epoch = r.member_epoch
        owned_a = r.tasks.copy()
        joined = heartbeat(c, join("b", "pb"))
        # b waits for what a still runs
        assert joined.tasks is not None and joined.tasks.active == {}
        r = heartbeat(c, beat("a", a_epoch, owned_a))
        assert r.member_epoch == a_epoch  # a must revoke first: it stays in its epoch
        assert r.tasks is not None and sum(len(p) for p in r.tasks.active.values()) == 2
        kept = r.tasks.copy()
        group = c.groups[APP]
        assert group.state_name() == "Reconciling"
        r = heartbeat(c, beat("a", a_epoch, kept))
        assert r.member_epoch == group.target_epoch
        b = heartbeat(c, beat("b", joined.member_epoch, sg.TasksTuple()))
        assert sum(len(p) for p in b.tasks.active.values()) == 2
        assert b.tasks.standby or r.tasks.standby
        b = heartbeat(c, beat("b", b.member_epoch, b.tasks))
        r = heartbeat(c, beat("a", r.member_epoch, r.tasks or kept))
        seen["state"] = group.state_name()
        seen["epochs"] = (group.group_epoch, group.target_epoch)
        stale = heartbeat(c, beat("a", 0 + 1000, kept))
        assert stale.error == E.FENCED_MEMBER_EPOCH

    run_with_coordinator(broker, run)
    assert seen["state"] == "Stable"
    # the group comes back from its records after a restart
    again = broker.restarted()

    async def reload(c):
        group = c.groups[APP]
        assert isinstance(group, sg.StreamsGroup)
        assert (group.group_epoch, group.target_epoch) == seen["epochs"]
        assert set(group.members) == {"a", "b"}
        assert group.topology == sg.Topology.from_request(topology())
        assert c.list_groups() == [(APP, "streams", "Stable", "streams")]

    run_with_coordinator(again, reload)


def test_a_consumer_cannot_join_a_streams_group_and_empty_groups_delete(tmp_path):
    broker = FakeBroker(tmp_path, **{"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"})
    broker.metadata.create_topic("in", 1, {})

    async def run(c):
        r = heartbeat(c, join("a", "pa"))
        assert r.error == E.NONE
        assert c.delete_groups([APP]) == {APP: E.NON_EMPTY_GROUP}
        assert heartbeat(c, beat("a", -1)).member_epoch == -1
        assert c.groups[APP].state_name() == "Empty"
        assert c.delete_groups([APP]) == {APP: E.NONE}
        assert APP not in c.groups

    run_with_coordinator(broker, run)


def test_join_without_a_topology_is_an_invalid_request(tmp_path):
    broker = FakeBroker(tmp_path)

    async def run(c):
        request = join("a", "pa")
        request.topology = None
        r = heartbeat(c, request)
        assert r.error == E.INVALID_REQUEST and r.error_message == "Topology must be non-null when joining."

    run_with_coordinator(broker, run)


def test_heartbeat_and_describe_through_the_dispatcher(tmp_path, monkeypatch):
    """Both versions of StreamsGroupHeartbeat and StreamsGroupDescribe encoded as the client
    encodes them; internal topics created by the handler; ListGroups shows the streams type."""
    from fake_metadata import create_internal_topic_in_place

    from odradek.handlers import streams_groups

    monkeypatch.setattr(streams_groups, "ensure_internal_topic", create_internal_topic_in_place)
    for version in (0, 1):
        broker = FakeBroker(tmp_path / f"v{version}", **{"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"})
        broker.metadata.create_topic("in", 2, {})
        async def run(c, broker=broker, version=version, app=APP):
            body = join_kw("a", "pa")
            r = await call(broker, 88, version, **body)
            assert r.error_code == 0 and r.member_id == "a"
            assert [s.status_code for s in r.status] == [sg.MISSING_INTERNAL_TOPICS]
            assert broker.metadata.get(CHANGELOG).partitions == 2  # made by the handler
            assert broker.metadata.get(REPARTITION).partitions == 2
            body = beat_kw("a", r.member_epoch, sg.TasksTuple())
            r = await call(broker, 88, version, **body)
            assert r.error_code == 0 and r.status == []
            assert sorted((t.subtopology_id, t.partitions) for t in r.active_tasks) == [("0", [0, 1]), ("1", [0, 1])]
            d = await call(broker, 89, version, group_ids=[app, "nope"], include_authorized_operations=False)
            by_id = {g.group_id: g for g in d.groups}
            assert by_id["nope"].error_code == E.GROUP_ID_NOT_FOUND
            g = by_id[app]
            assert g.group_state == "Stable" and [m.member_id for m in g.members] == ["a"]
            assert [s.subtopology_id for s in g.topology.subtopologies] == ["0", "1"]
            assert g.topology.subtopologies[1].state_changelog_topics[0].partitions == 2
            listed = await call(broker, 16, 5, states_filter=[], types_filter=["streams"])
            assert [(x.group_id, x.group_type, x.protocol_type) for x in listed.groups] == [(app, "streams", "streams")]
            unknown = await call(broker, 88, version, **beat_kw("zz", 3, sg.TasksTuple()))
            assert unknown.error_code == E.UNKNOWN_MEMBER_ID

        run_with_coordinator(broker, run)


def test_first_assignment_waits_for_the_initial_delay_then_the_interval(tmp_path):
    import trio

    broker = FakeBroker(tmp_path, **{"group.streams.initial.rebalance.delay.ms": "3000"})
    broker.metadata.create_topic("in", 2, {})
    for name in (REPARTITION, CHANGELOG):
        broker.metadata.create_topic(name, 2, {})

    async def run(c):
        r = heartbeat(c, join("a", "pa"))
        # Kafka: an empty target at epoch 1 while the delay runs
        assert (r.member_epoch, r.tasks, r.status) == (1, sg.TasksTuple(), [
            (sg.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")])
        assert c.groups[APP].state_name() == "Assigning"
        await trio.sleep(3.1)
        r = heartbeat(c, beat("a", 1, sg.TasksTuple()))
        assert r.status == [] and sum(len(p) for p in r.tasks.active.values()) == 4
        joined = heartbeat(c, join("b", "pb"))  # within the assignment interval of the first target
        assert joined.status == [(sg.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment "
                                                         "interval.")]
        await trio.sleep(1.1)
        assert c.groups[APP].target_epoch == c.groups[APP].group_epoch  # the timer computed it

    run_with_coordinator(broker, run)
