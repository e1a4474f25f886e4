"""Group admin APIs with kafka-python's admin client (ListGroups with state/type filters,
DescribeGroups, OffsetDelete, DeleteGroups) and static membership with librdkafka."""

from __future__ import annotations

import pytest
from test_groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    ConfluentConsumer,
    produce,
    wait_for,
)


@pytest.fixture(scope="module")
def broker(odradek_broker_factory_module):
    return odradek_broker_factory_module


@pytest.fixture(scope="module")
def odradek_broker_factory_module(_module_factory):
    return _module_factory("odradek", overrides=GROUP_BROKER_OVERRIDES)


def test_list_describe_delete_offsets_and_groups(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import CommitFailedError, GroupIdNotFoundError, NonEmptyGroupError
    from kafka.structs import OffsetAndMetadata

    bootstrap = broker.bootstrap
    produce(bootstrap, "admin-a", [b"x"] * 6)
    produce(bootstrap, "admin-b", [b"y"] * 6)
    # Commits without a generation (simple consumers) create Empty groups with offsets; the
    # second group later gets a member that subscribes to admin-a only.
    for group, tp in (("admin-simple", TopicPartition("admin-b", 0)), ("admin-live", TopicPartition("admin-b", 1))):
        simple = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        simple.commit({tp: OffsetAndMetadata(3, "m", -1)})
        simple.close()
    # librdkafka as the live member: a kafka-python member here stalls after its leader rejoin in
    # about 1 run of 5 on Odradek (never on Kafka 4.1.1 in 10 runs) with neither SyncGroup nor
    # heartbeats sent; under investigation (see the session note), kept out of this admin test
    member = ConfluentConsumer("admin-member", bootstrap, "admin-live", "admin-a", "range")
    member.start()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: len(member.assignment) == 6, 30, "the live group to be stable")
        # now that it has a member, a commit without a generation is refused
        outsider = KafkaConsumer(bootstrap_servers=bootstrap, group_id="admin-live", enable_auto_commit=False)
        with pytest.raises(CommitFailedError, match="UnknownMemberId"):
            outsider.commit({TopicPartition("admin-b", 1): OffsetAndMetadata(4, "", -1)})
        outsider.close()

        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert groups["admin-live"]["group_state"] == "Stable"
        assert groups["admin-simple"]["group_state"] == "Empty"
        assert groups["admin-simple"]["protocol_type"] == ""
        stable = {g["group_id"] for g in admin.list_groups(states_filter=["stable"])}
        assert "admin-live" in stable and "admin-simple" not in stable
        classic = {g["group_id"] for g in admin.list_groups(types_filter=["classic"])}
        assert {"admin-live", "admin-simple"} <= classic

        described = admin.describe_groups(["admin-live", "admin-missing"])
        live = described["admin-live"]
        assert live["group_state"] == "Stable" and live["protocol_data"] == "range"
        assert len(live["members"]) == 1
        assert live["members"][0]["client_host"] == "/127.0.0.1"
        assert described["admin-missing"]["error"] is not None  # v6: GROUP_ID_NOT_FOUND

        result = admin.delete_group_offsets("admin-live", [TopicPartition("admin-b", 1), TopicPartition("admin-a", 0)])
        assert result[TopicPartition("admin-b", 1)].__name__ == "NoError"
        assert result[TopicPartition("admin-a", 0)].__name__ == "GroupSubscribedToTopicError"

        deleted = admin.delete_groups(["admin-simple", "admin-live", "admin-missing"])
        assert deleted == {"admin-simple": "OK", "admin-live": NonEmptyGroupError.__name__,
                           "admin-missing": GroupIdNotFoundError.__name__}
        assert "admin-simple" not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
        member.stop()


def test_static_member_restarts_without_a_rebalance(broker):
    bootstrap = broker.bootstrap
    produce(bootstrap, "static-topic", [b"s"] * 6)

    def make(name):
        consumer = ConfluentConsumer(name, bootstrap, "static-group", "static-topic", "range")
        consumer.extra_conf = {"group.instance.id": name}
        return consumer

    from kafka import KafkaAdminClient

    first, second = make("static-1"), make("static-2")
    for c in (first, second):
        c.start()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: len(first.assignment) == 3 and len(second.assignment) == 3, 30, "two static members")
        described = admin.describe_groups(["static-group"])["static-group"]
        assert sorted(m["group_instance_id"] for m in described["members"]) == ["static-1", "static-2"]
        old_member_id = next(m["member_id"] for m in described["members"] if m["group_instance_id"] == "static-1")
        owned = set(first.assignment)
        # with group.initial.rebalance.delay.ms=0 the first generation may hold one member: the
        # other member's history counts from here
        seen, kept = len(second.history), set(second.assignment)
        # a static member does not leave on close; its replacement takes over the same identity
        first.stop()
        first = make("static-1")
        first.start()
        wait_for(lambda: first.assignment == owned, 30, "the restarted static member to get its partitions back")
        described = admin.describe_groups(["static-group"])["static-group"]
        new_member_id = next(m["member_id"] for m in described["members"] if m["group_instance_id"] == "static-1")
        assert new_member_id != old_member_id
        # the other member never saw a rebalance: one assignment, never revoked
        assert second.history[seen:] == [] and second.assignment == kept
    finally:
        admin.close()
        first.stop()
        second.stop()
