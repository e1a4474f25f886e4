"""Share groups' epochs and records as Kafka 4.4 writes them (compat-tests/test_share_groups_records_44.py
compares them with a live Kafka 4.4.0): a new group is at epoch 1 with its target at epoch 1 /
time 0, the epoch and target metadata records come only from a bump or a computed target, the
epoch record carries the metadata hash, and partitions being initialized are recorded."""

from __future__ import annotations

from odradek.group_coordinator import metadata_hash
from odradek.group_coordinator import share as sg
from odradek.wire.primitives import Uuid

T_ID = Uuid(bytes(range(16)))


class _Coord:
    """What ShareGroup.heartbeat asks of the group coordinator, with a settable clock."""

    config = None
    broker = None

    def __init__(self) -> None:
        self.ms = 1_000_000
        self.topics = {"t": (T_ID, 2)}

    def monotonic(self) -> float:
        return self.ms / 1000

    def now_ms(self) -> int:
        return self.ms

    def topic_partition_count(self, topic: str) -> int | None:
        found = self.topics.get(topic)
        return found[1] if found else None

    def _topic_id(self, topic: str) -> Uuid | None:
        found = self.topics.get(topic)
        return found[0] if found else None


def _hb(group, coord, member, epoch, topics=None):
    return group.heartbeat(coord, member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics,
                           client_id="c", client_host="/127.0.0.1", topic_partitions=coord.topic_partition_count)


def _written(group, coord) -> list[tuple[int, object]]:
    """The records a persist would append now (key version, decoded value or None), then marks
    them written."""
    desired = sg.desired_records(group, coord._topic_id)
    out = []
    for k, v in sg.changes(group, desired):
        version, _key, value = sg.decode(k, v)
        out.append((version, value))
    group.persisted = desired
    group.removed_keys.clear()
    return out


def _hash(coord, *names: str) -> int:
    return metadata_hash.group_hash({n: metadata_hash.topic_hash(coord.topics[n][0].bytes, n, coord.topics[n][1])
                                     for n in names})


def test_a_new_group_is_at_epoch_one_and_its_first_join_writes_epoch_two_with_the_hash():
    coord = _Coord()
    group = sg.ShareGroup("g")
    assert (group.group_epoch, group.assignment_epoch, group.assignment_timestamp_ms) == (1, 1, 0)
    assert _written(group, coord) == []  # nothing in the log before the first bump
    r = _hb(group, coord, "a", 0, ["t"])
    assert r.member_epoch == 2
    records = _written(group, coord)
    assert [v for v, _ in records] == [sg.MEMBER_METADATA, sg.GROUP_METADATA, sg.TARGET_ASSIGNMENT_MEMBER,
                                       sg.TARGET_ASSIGNMENT_METADATA, sg.CURRENT_MEMBER_ASSIGNMENT,
                                       sg.STATE_PARTITION_METADATA]
    epoch, meta, state = records[1][1], records[3][1], records[5][1]
    assert (epoch.epoch, epoch.metadata_hash) == (2, _hash(coord, "t")) and epoch.metadata_hash != 0
    assert (meta.assignment_epoch, meta.assignment_timestamp) == (2, coord.ms)
    # the heartbeat that asks for the partitions' share state records them as initializing
    assert [(i.topic_name, list(i.partitions)) for i in state.initializing_topics] == [("t", [0, 1])]
    assert list(state.initialized_topics) == []
    # the end of the initialization is a record of its own
    group.initializing = {}
    group.mark_initialized("t", {0, 1})
    (version, state), = _written(group, coord)
    assert version == sg.STATE_PARTITION_METADATA and list(state.initializing_topics) == []
    assert [(i.topic_name, list(i.partitions)) for i in state.initialized_topics] == [("t", [0, 1])]
    # a heartbeat with nothing new writes nothing, not even after the assignment interval
    coord.ms += 500
    _hb(group, coord, "a", 2)  # initialized partitions wait to be assigned: a bump, no target yet
    assert [(v, getattr(x, "epoch", None)) for v, x in _written(group, coord)] == [(sg.GROUP_METADATA, 3)]
    coord.ms += 600
    assert _hb(group, coord, "a", 2).member_epoch == 3
    assert [v for v, _ in _written(group, coord)] == [sg.TARGET_ASSIGNMENT_MEMBER, sg.TARGET_ASSIGNMENT_METADATA,
                                                      sg.CURRENT_MEMBER_ASSIGNMENT]
    coord.ms += 5000
    _hb(group, coord, "a", 3)
    assert _written(group, coord) == []


def test_a_join_within_the_interval_bumps_without_a_target_and_the_last_leave_closes_it():
    coord = _Coord()
    group = sg.ShareGroup("g")
    _hb(group, coord, "a", 0, ["t"])
    _written(group, coord)
    coord.ms += 100
    b = _hb(group, coord, "b", 0, ["t"])
    assert (b.member_epoch, group.group_epoch, group.assignment_epoch) == (2, 3, 2)
    # no target record for b and no target metadata until a target is computed
    assert [v for v, _ in _written(group, coord)] == [sg.MEMBER_METADATA, sg.GROUP_METADATA,
                                                      sg.CURRENT_MEMBER_ASSIGNMENT]
    _hb(group, coord, "b", -1)
    records = _written(group, coord)
    # as Kafka's fencing: three tombstones, the target's too though b never had a target record
    assert records[:3] == [(sg.CURRENT_MEMBER_ASSIGNMENT, None), (sg.TARGET_ASSIGNMENT_MEMBER, None),
                           (sg.MEMBER_METADATA, None)]
    assert [v for v, _ in records[3:]] == [sg.GROUP_METADATA]
    assert records[3][1].epoch == 4 and records[3][1].metadata_hash == _hash(coord, "t")
    _hb(group, coord, "a", -1)
    records = _written(group, coord)
    assert [v for v, _ in records] == [sg.CURRENT_MEMBER_ASSIGNMENT, sg.TARGET_ASSIGNMENT_MEMBER,
                                       sg.MEMBER_METADATA, sg.GROUP_METADATA, sg.TARGET_ASSIGNMENT_METADATA]
    assert (records[3][1].epoch, records[3][1].metadata_hash) == (5, 0)
    assert (records[4][1].assignment_epoch, records[4][1].assignment_timestamp) == (5, 0)


def test_a_subscribed_topic_created_later_changes_the_hash_and_bumps():
    coord = _Coord()
    group = sg.ShareGroup("g")
    assert _hb(group, coord, "a", 0, ["later"]).member_epoch == 2
    epoch = [x for v, x in _written(group, coord) if v == sg.GROUP_METADATA][0]
    assert (epoch.epoch, epoch.metadata_hash) == (2, 0)
    coord.ms += 2000
    _hb(group, coord, "a", 2)
    assert _written(group, coord) == []
    coord.topics["later"] = (Uuid(bytes(range(16, 32))), 1)
    assert _hb(group, coord, "a", 2).member_epoch == 3
    epoch = [x for v, x in _written(group, coord) if v == sg.GROUP_METADATA][0]
    assert (epoch.epoch, epoch.metadata_hash) == (3, _hash(coord, "later"))


def test_the_epoch_rule_survives_a_reload():
    coord = _Coord()
    group = sg.ShareGroup("g")
    _hb(group, coord, "a", 0, ["t"])
    desired = sg.desired_records(group, coord._topic_id)
    found: dict = {}
    raw: dict = {}
    for k, v in desired.items():
        assert sg.collect(found, raw, k, v)
    again = sg.group_from_records("g", found["g"], {T_ID: "t"}.get, 1e9)
    again.persisted = raw["g"]
    assert (again.group_epoch, again.assignment_epoch, again.metadata_hash) == (2, 2, _hash(coord, "t"))
    assert again.epoch_written and again.target_meta_written
    # the initialization the log says was under way is asked again
    assert again.initializing == {"t": {0, 1}} == again.initializing_recorded
    coord.ms += 100
    _hb(again, coord, "a", 2)
    assert _written(again, coord) == []
