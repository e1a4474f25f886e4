"""Kafka 4.4's epochs and epoch records for streams groups: a group starts at epoch 1 (its first
member gets epoch 2), one heartbeat bumps the epoch at most once whatever moved, the epoch record
carries the metadata hash and the assignment settings, the target's record its time, and each
active task the epoch it was given at; all of it comes back after a restart."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "groups"))

from groups_testutil import FakeBroker, run_with_coordinator  # noqa: E402
from test_streams_groups import APP, CHANGELOG, REPARTITION, beat, heartbeat, join  # noqa: E402

from odradek.group_coordinator import metadata_hash  # noqa: E402
from odradek.group_coordinator import streams as sg  # noqa: E402
from odradek.group_coordinator import streams_records as sr  # noqa: E402

NO_WAIT = {"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"}


def _expected_hash(broker, names) -> int:
    return metadata_hash.group_hash({n: metadata_hash.topic_hash(broker.metadata.get(n).topic_id.bytes, n,
                                                                  broker.metadata.get(n).partitions) for n in names})


def _total(tasks: sg.TasksTuple) -> int:
    return sum(len(ps) for ps in tasks.active.values())


def test_a_new_group_starts_at_epoch_one_and_its_first_member_gets_two(tmp_path):
    broker = FakeBroker(tmp_path, **NO_WAIT)
    for name in ("in", REPARTITION, CHANGELOG):
        broker.metadata.create_topic(name, 2, {})

    async def run(c):
        assert (sg.StreamsGroup(APP).group_epoch, sg.StreamsGroup(APP).target_epoch) == (1, 1)
        r = heartbeat(c, join("a", "pa"))
        group = c.groups[APP]
        assert (r.member_epoch, group.group_epoch, group.target_epoch) == (2, 2, 2)
        assert group.metadata_hash == _expected_hash(broker, ("in", REPARTITION, CHANGELOG)) != 0
        assert group.last_assignment_configs == {"num.standby.replicas": "0"}
        assert 0 < group.assignment_timestamp_ms <= c.now_ms()
        records = sr.desired_records(group)
        meta_key = sr.key(sr.GROUP_METADATA, group_id=APP)
        _, _, meta = sr.decode(meta_key, records[meta_key])
        assert (meta.epoch, meta.metadata_hash, meta.validated_topology_epoch) == (2, group.metadata_hash, 0)
        assert [(x.key, x.value) for x in meta.last_assignment_configs] == [("num.standby.replicas", "0")]
        # nothing moved: a heartbeat does not bump
        r = heartbeat(c, beat("a", 2, r.tasks))
        assert group.group_epoch == 2

    run_with_coordinator(broker, run)


def test_one_heartbeat_bumps_the_epoch_once(tmp_path):
    broker = FakeBroker(tmp_path, **NO_WAIT)
    broker.metadata.create_topic("in", 2, {})

    async def run(c):
        first = heartbeat(c, join("a", "pa"))
        group = c.groups[APP]
        assert group.group_epoch == 2 and group.validated_topology_epoch == -1  # internal topics missing
        assert group.metadata_hash == _expected_hash(broker, ("in",))
        for name, info in first.to_create.items():
            broker.metadata.create_topic(name, info.partitions, info.configs)
        # the topology gets configured, validated and the hash changes: still one bump
        heartbeat(c, beat("a", first.member_epoch, sg.TasksTuple()))
        assert group.group_epoch == 3 and group.validated_topology_epoch == 0
        assert group.metadata_hash == _expected_hash(broker, ("in", REPARTITION, CHANGELOG))

    run_with_coordinator(broker, run)


def test_active_tasks_keep_the_epoch_they_were_given_at_through_a_restart(tmp_path):
    broker = FakeBroker(tmp_path, **NO_WAIT)
    for name in ("in", REPARTITION, CHANGELOG):
        broker.metadata.create_topic(name, 2, {})
    seen = {}

    async def run(c):
        a = heartbeat(c, join("a", "pa"))
        group = c.groups[APP]
        assert set(group.members["a"].active_epochs.values()) == {2} and _total(a.tasks) == 4
        owned = a.tasks.copy()
        b = heartbeat(c, join("b", "pb"))
        a = heartbeat(c, beat("a", 2, owned))  # a revokes half: kept and revoked tasks keep epoch 2
        a_member = group.members["a"]
        assert a_member.state == sg.UNREVOKED_TASKS
        assert set(a_member.active_epochs.values()) == {2} and len(a_member.active_epochs) == 4
        a = heartbeat(c, beat("a", 2, a.tasks))
        assert len(a_member.active_epochs) == 2
        heartbeat(c, beat("b", b.member_epoch, sg.TasksTuple()))
        heartbeat(c, beat("b", -1))
        a = heartbeat(c, beat("a", a.member_epoch, a.tasks))
        assert a.member_epoch == group.group_epoch == 4 and _total(a.tasks) == 4
        # what a kept stays at 2, what it got back after b left is at 4
        assert sorted(a_member.active_epochs.values()) == [2, 2, 4, 4]
        seen.update(epochs=dict(a_member.active_epochs), hash=group.metadata_hash,
                    ts=group.assignment_timestamp_ms, configs=dict(group.last_assignment_configs))

    run_with_coordinator(broker, run)

    async def reload(c):
        group = c.groups[APP]
        assert group.members["a"].active_epochs == seen["epochs"]
        assert (group.metadata_hash, group.assignment_timestamp_ms, group.last_assignment_configs) == (
            seen["hash"], seen["ts"], seen["configs"])

    run_with_coordinator(broker.restarted(), reload)


def test_the_assignment_interval_runs_from_the_stored_time_after_a_restart(tmp_path):
    broker = FakeBroker(tmp_path, **{"group.streams.initial.rebalance.delay.ms": "0",
                                     "group.streams.assignment.interval.ms": "60000"})
    for name in ("in", REPARTITION, CHANGELOG):
        broker.metadata.create_topic(name, 2, {})

    async def run(c):
        assert heartbeat(c, join("a", "pa")).member_epoch == 2  # the first target is computed at once

    run_with_coordinator(broker, run)

    async def reload(c):
        joined = heartbeat(c, join("b", "pb"))
        assert joined.status == [(sg.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment "
                                                         "interval.")]
        assert c.groups[APP].target_epoch == 2

    run_with_coordinator(broker.restarted(), reload)
