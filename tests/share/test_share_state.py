"""The share coordinator's records (ShareSnapshot/ShareUpdate) and share groups' heartbeat."""

from __future__ import annotations

import os

from odradek.group_coordinator import share as sg
from odradek.group_coordinator.classic import GroupError
from odradek.share_coordinator import records as rec
from odradek.share_coordinator.coordinator import ShareCoordinator
from odradek.wire.errors import ErrorCode
from odradek.wire.primitives import Uuid

TID = Uuid(bytes(range(16)))


def test_snapshot_and_update_records_round_trip():
    state = rec.ShareState(snapshot_epoch=2, state_epoch=1, leader_epoch=3, start_offset=10,
                           delivery_complete_count=4, create_timestamp=5, write_timestamp=6,
                           batches=[(10, 12, 0, 2), (13, 13, 4, 5)])
    key, value = rec.snapshot_record("g", TID, 1, state)
    version, k, v = rec.decode(key, value)
    assert version == rec.SNAPSHOT_KEY_VERSION and (k.group_id, k.topic_id, k.partition) == ("g", TID, 1)
    assert (v.snapshot_epoch, v.state_epoch, v.start_offset, v.delivery_complete_count) == (2, 1, 10, 4)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches] == \
        state.batches
    key, value = rec.update_record("g", TID, 1, state, [(11, 11, 2, 2)])
    version, k, v = rec.decode(key, value)
    assert version == rec.UPDATE_KEY_VERSION and v.start_offset == 10 and len(v.state_batches) == 1
    # key version 0 / 1 in front, then the key schema (Kafka's coordinator record layout)
    assert key[:2] == b"\x00\x01" and value[:2] == b"\x00\x00"


def test_combine_and_coordinator_key():
    assert rec.combine([(0, 9, 0, 1)], [(3, 4, 2, 1)], 2) == [(2, 2, 0, 1), (3, 4, 2, 1), (5, 9, 0, 1)]
    assert rec.coordinator_key("g", TID, 3) == f"g:{TID.to_base64()}:3"
    assert 0 <= rec.partition_for(rec.coordinator_key("g", TID, 3), 50) < 50


def test_coordinator_writes_as_kafka_44s_share_coordinator_in_memory():
    c = ShareCoordinator(None)
    c.initialize("g", TID, 0, 0, -1)
    assert c.read("g", TID, 0, 0).leader_epoch == 0  # the initializing snapshot's epoch: nothing written
    c.write("g", TID, 0, 0, 0, 5, [(5, 6, 0, 1)])
    c.write("g", TID, 0, 0, 0, 6, [(6, 6, 2, 1)])
    state = c.read("g", TID, 0)
    assert state.start_offset == 6 and state.batches == [(6, 6, 2, 1)] and state.updates_since_snapshot == 2
    c.write("g", TID, 0, 0, 0, 4, [])  # an older start offset does not move it back
    assert c.read("g", TID, 0).start_offset == 6
    c.read("g", TID, 0, 3)  # a new leader epoch is recorded by the read
    assert c.read("g", TID, 0).leader_epoch == 3
    for bad, code in (((-1, 3), ErrorCode.INVALID_REQUEST), ((0, -1), ErrorCode.INVALID_REQUEST),
                      ((0, 2), ErrorCode.FENCED_LEADER_EPOCH)):
        try:
            c.write("g", TID, 0, bad[0], bad[1], 7, [])
        except Exception as exc:
            assert exc.code == code, (bad, exc.code)
        else:
            raise AssertionError(f"{bad} was accepted")
    try:
        c.write("g", TID, 1, 0, 0, 7, [])
    except Exception as exc:
        assert exc.code == ErrorCode.INVALID_REQUEST  # never initialized
    else:
        raise AssertionError("a write to an uninitialized share-partition was accepted")


def test_a_snapshot_follows_every_n_updates():
    c = ShareCoordinator(None)
    c.cfg = lambda key: 3 if key.endswith("per.snapshot") else 50  # type: ignore[method-assign]
    c.initialize("g", TID, 0, 0, -1)
    epochs = []
    for i in range(8):
        c.write("g", TID, 0, 0, 0, i, [(i, i, 2, 1)])
        state = c.read("g", TID, 0)
        epochs.append((state.snapshot_epoch, state.updates_since_snapshot))
    # three updates after each snapshot, then a snapshot (Kafka's snapshotUpdateCount >= N)
    assert epochs == [(0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0)]


class _Coord:
    """What ShareGroup.heartbeat asks of the group coordinator."""

    config = None

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def topic_partition_count(self, topic: str) -> int | None:
        return {"t": 2}.get(topic)

    def _topic_id(self, topic: str) -> Uuid | None:
        return {"t": Uuid(bytes(range(16)))}.get(topic)


def _hb(group, coord, member, epoch, topics=None):
    return group.heartbeat(coord, member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics,
                           client_id="c", client_host="/127.0.0.1", topic_partitions=coord.topic_partition_count)


def _initialize(group):
    """What the heartbeat handler does after a heartbeat: the pending partitions get state."""
    for topic, parts in group.initializing.items():
        group.mark_initialized(topic, parts)
    group.initializing = {}


def test_share_group_join_share_and_leave():
    coord = _Coord()
    group = sg.ShareGroup("g")
    a = _hb(group, coord, "a", 0, ["t"])
    # as Kafka 4.4: a new group is at epoch 1, so the join bumps it to 2; nothing is assigned before the partitions' share state is initialized
    assert (a.member_epoch, a.assignment, group.initializing) == (2, {}, {"t": {0, 1}})
    _initialize(group)
    a = _hb(group, coord, "a", 2)  # initialized since the last assignment: a new epoch assigns them
    assert (a.member_epoch, a.assignment) == (3, {"t": {0, 1}})
    b = _hb(group, coord, "b", 0, ["t"])
    assert b.member_epoch == 4 and len(b.assignment["t"]) == 1
    a = _hb(group, coord, "a", 3)
    assert a.member_epoch == 4 and a.assignment["t"] | b.assignment["t"] == {0, 1}
    c = _hb(group, coord, "c", 0, ["t"])  # more members than partitions: partitions are shared
    assert sum(len(p["t"]) for p in (c.assignment,)) == 1
    assert _hb(group, coord, "a", 4).member_epoch == 5  # the previous epoch is still accepted once
    left = _hb(group, coord, "c", -1)
    assert left.member_epoch == -1 and set(group.members) == {"a", "b"}
    try:
        _hb(group, coord, "zz", 5)
    except GroupError as exc:
        assert exc.code == ErrorCode.UNKNOWN_MEMBER_ID
    else:
        raise AssertionError("an unknown member was accepted")
    try:
        _hb(group, coord, "a", 99)
    except GroupError as exc:
        assert exc.code == ErrorCode.FENCED_MEMBER_EPOCH
    else:
        raise AssertionError("a wrong epoch was accepted")


def test_share_group_records_round_trip():
    coord = _Coord()
    group = sg.ShareGroup("g")
    _hb(group, coord, "a", 0, ["t"])
    _initialize(group)
    _hb(group, coord, "a", 2)
    ids = {"t": Uuid(os.urandom(16))}
    desired = sg.desired_records(group, ids.get)
    found: dict = {}
    raw: dict = {}
    for k, v in desired.items():
        assert sg.collect(found, raw, k, v)
    names = {v: k for k, v in ids.items()}
    again = sg.group_from_records("g", found["g"], names.get, 0.0)
    assert (again.group_epoch, again.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert again.members["a"].assigned == {"t": {0, 1}} and again.initialized == {"t": {0, 1}}
    assert [int.from_bytes(k[:2], "big") for k in desired] == [10, 11, 13, 12, 14, 15]


def test_combine_on_ranges_equals_combining_offset_by_offset():
    """Kafka's PersisterStateBatchCombiner: where batches overlap the highest delivery count
    wins, then the highest state; nothing before the start offset."""
    import random

    def by_offset(old, new, start):
        per: dict[int, tuple[int, int]] = {}
        for f, la, s, c in [*old, *new]:
            for o in range(max(f, start), la + 1):
                per[o] = max(per.get(o, (c, s)), (c, s))
        out: list[list[int]] = []
        for o in sorted(per):
            c, s = per[o]
            if out and out[-1][1] == o - 1 and out[-1][2] == s and out[-1][3] == c:
                out[-1][1] = o
            else:
                out.append([o, o, s, c])
        return [tuple(b) for b in out]

    def batches(rng):
        out, o = [], rng.randint(0, 5)
        for _ in range(rng.randint(0, 6)):
            f = o + rng.randint(0, 3)
            la = f + rng.randint(0, 4)
            out.append((f, la, rng.choice([0, 2, 4]), rng.randint(1, 3)))
            o = la + 1
        return out

    rng = random.Random(26)
    for _ in range(2000):
        old, new, start = batches(rng), batches(rng), rng.randint(0, 10)
        if len(old) + len(new) < 2:
            continue  # one batch is returned as it is (only clipped)
        assert rec.combine(old, new, start) == by_offset(old, new, start), (old, new, start)
    # a large window costs ranges, not offsets
    assert rec.combine([(0, 10**9, 2, 1)], [(5, 5, 0, 2)], 0) == [(0, 4, 2, 1), (5, 5, 0, 2), (6, 10**9, 2, 1)]
