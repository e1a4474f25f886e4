"""Kafka 4.4's consumer group epochs and records: a new group starts at epoch 1 (its first bump
gives 2), target assignments at most once per group.consumer.assignment.interval.ms, the
metadata hash of the epoch record, and the member record's explicit null classic metadata."""

from __future__ import annotations

from groups_testutil import run_with_coordinator

from odradek.group_coordinator import metadata_hash
from odradek.group_coordinator import records as rec
from odradek.group_coordinator.consumer import ConsumerGroup, ConsumerMember, desired_records
from odradek.wire.errors import ErrorCode as E
from odradek.wire.primitives import Uuid


class _Topics:
    def __init__(self, counts):
        self.counts = counts

    def __call__(self, name):
        return self.counts.get(name)


def _beat(c, member, epoch, topics=None, owned=None):
    return c.consumer_group_heartbeat(
        group_id="cg", api_version=1, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=5000, subscribed_topic_names=topics, subscribed_topic_regex=None,
        server_assignor=None, owned=owned, client_id="c", client_host="/h")


def test_metadata_hash_is_kafkas():
    # seen in a live Kafka 4.4.0's __consumer_offsets: a group subscribed to "t1" (2 partitions)
    topic_id = Uuid.from_base64("fsONI3kVQCe6Fz3wZ0YiNw").bytes
    topic = metadata_hash.topic_hash(topic_id, "t1", 2)
    assert metadata_hash.group_hash({"t1": topic}) == 7788307317659033396
    assert metadata_hash.group_hash({}) == 0


def test_first_member_gets_epoch_2_and_an_empty_subscription_does_not_bump():
    async def scenario(c):
        c.topic_partition_count = _Topics({"t": 2})
        first = _beat(c, "A", 0, topics=["t"])
        assert first.error == E.NONE and first.member_epoch == 2
        group = c.groups["cg"]
        assert group.group_epoch == group.assignment_epoch == 2
        # a member that subscribes to nothing changes no subscription: no bump, Kafka 4.4's rule
        idle = _beat(c, "B", 0, topics=[])
        assert idle.member_epoch == 2 and group.group_epoch == 2

    run_with_coordinator(None, scenario)


def test_target_assignment_waits_for_the_assignment_interval():
    clock = {"ms": 1_000_000}

    async def scenario(c):
        c._clock_ms = lambda: clock["ms"]
        c.topic_partition_count = _Topics({"t": 2})
        assert _beat(c, "A", 0, topics=["t"]).assignment == {"t": {0, 1}}
        group = c.groups["cg"]
        clock["ms"] += 500
        b = _beat(c, "B", 0, topics=["t"])
        # the group epoch moves on; the target stays at epoch 2 until 1000 ms after the last one
        assert b.member_epoch == 2 and b.assignment == {} and group.state_name() == "Assigning"
        assert group.group_epoch == 3 and group.assignment_epoch == 2
        assert _beat(c, "A", 2, owned={"t": {0, 1}}).member_epoch == 2
        clock["ms"] += 500
        a = _beat(c, "A", 2, owned={"t": {0, 1}})
        assert group.assignment_epoch == 3 and group.assignment_timestamp == clock["ms"]
        assert a.member_epoch == 2 and len(a.assignment["t"]) == 1  # revoking one partition first

    run_with_coordinator(None, scenario)


def test_member_record_writes_the_null_classic_metadata_as_kafka():
    group = ConsumerGroup("g")
    group.members["m"] = ConsumerMember(member_id="m", client_id="c", client_host="/h", subscribed_topic_names=["t"])
    records = desired_records(group, lambda name: None)
    key = rec.consumer_group_key(rec.CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION, group_id="g", member_id="m")
    value = records[key]
    # ... subscribedTopicRegex "" (compact length 1), then one tagged field: tag 0, size 1, null (0)
    assert value[-4:] == b"\x01\x00\x01\x00"
    decoded = rec.decode_record(key, value).value
    assert decoded.classic_member_metadata is None and decoded.subscribed_topic_regex == ""
    # a group whose epoch was never bumped writes no epoch record (Kafka 4.4's regex-only join)
    assert not any(k[:2] == b"\x00\x03" for k in records)


def test_a_group_without_an_epoch_record_is_reloaded(tmp_path):
    """A member whose regex matches nothing: Kafka 4.4 writes its subscription, its current
    assignment and the resolved (empty) regex, but no epoch record; the group still comes back."""
    from groups_testutil import FakeBroker

    broker = FakeBroker(tmp_path)

    def beat(c, epoch):
        return c.consumer_group_heartbeat(
            group_id="rx", api_version=1, member_id="m", member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=5000, subscribed_topic_names=None, subscribed_topic_regex="nothing-.*",
            server_assignor=None, owned={}, client_id="c", client_host="/h")

    async def before(c):
        assert beat(c, 0).member_epoch == 1
        group = c.groups["rx"]
        assert group.resolved["nothing-.*"].topics == set() and group.group_epoch == 1 and not group.epoch_written
        assert not any(k[:2] == b"\x00\x03" for k in group.persisted)

    run_with_coordinator(broker, before)

    async def after(c):
        group = c.groups["rx"]
        assert isinstance(group, ConsumerGroup) and set(group.members) == {"m"}
        assert group.group_epoch == 1 and "nothing-.*" in group.resolved
        assert beat(c, 1).error == E.NONE

    run_with_coordinator(broker.restarted(), after)
