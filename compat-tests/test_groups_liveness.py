"""KIP-848 consumer groups with librdkafka, and session expiry of a silent classic member
(issue #5, must-shows 4 and 5).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    ConfluentConsumer,
    KafkaPythonConsumer,
    produce,
    wait_for,
)

HERE = Path(__file__).resolve().parent


def test_consumer_protocol_member_joins_gets_assignment_and_commits(odradek_broker_factory):
    from confluent_kafka import Consumer, TopicPartition

    broker = odradek_broker_factory(overrides={**GROUP_BROKER_OVERRIDES, "group.consumer.heartbeat.interval.ms": "500"})
    bootstrap = broker.bootstrap
    produce(bootstrap, "kip848", [f"v{i}".encode() for i in range(60)])
    first = ConfluentConsumer("kip848-a", bootstrap, "kip848-group", "kip848", None, protocol="consumer")
    second = ConfluentConsumer("kip848-b", bootstrap, "kip848-group", "kip848", None, protocol="consumer")
    try:
        first.start()
        wait_for(lambda: len(first.records) == 60, 30, "the consumer-protocol member to consume everything")
        assert first.assignment == set(range(6))
        second.start()
        wait_for(lambda: first.assignment | second.assignment == set(range(6))
                 and len(first.assignment) == len(second.assignment) == 3, 30,
                 "the uniform assignor to split six partitions three and three")
    finally:
        second.stop()
        first.stop()
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-group"})
    try:
        committed = checker.committed([TopicPartition("kip848", p) for p in range(6)], timeout=10)
    finally:
        checker.close()
    assert sum(tp.offset for tp in committed) == 60


_SILENT_MEMBER = """
import sys, time
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], group_id=sys.argv[3],
                  session_timeout_ms=2000, heartbeat_interval_ms=300, auto_offset_reset="earliest")
while True:
    c.poll(timeout_ms=100)
    print(",".join(str(tp.partition) for tp in sorted(c.assignment())), flush=True)
"""


def test_member_that_stops_heartbeating_is_removed_within_session_timeout(odradek_broker_factory):
    broker = odradek_broker_factory(overrides=GROUP_BROKER_OVERRIDES)
    bootstrap = broker.bootstrap
    produce(bootstrap, "liveness", [b"x"] * 6)
    survivor = KafkaPythonConsumer("survivor", bootstrap, "liveness-group", "liveness", "range",
                                   session_timeout_ms=2000)
    silent = subprocess.Popen(
        [sys.executable, "-c", _SILENT_MEMBER, bootstrap, "liveness", "liveness-group"],
        stdout=subprocess.PIPE, text=True, cwd=HERE,
    )
    try:
        survivor.start()
        assert silent.stdout is not None
        wait_for(lambda: len(survivor.assignment) == 3, 30, "two members sharing six partitions")
        # Freeze the other member: no heartbeats, no LeaveGroup, its socket stays open.
        os.kill(silent.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        took = wait_for(lambda: survivor.assignment == set(range(6)), 20,
                        "the survivor to get the silent member's partitions")
        elapsed = time.monotonic() - stopped
        print(f"partitions of the frozen member reassigned after {elapsed:.2f}s (session timeout 2.0s)")
        # session timeout (2 s) + one heartbeat/rejoin round of the survivor
        assert elapsed < 2.0 + 3.0, f"reassignment took {elapsed:.1f}s"
        assert took > 1.0, "partitions moved before the session could have expired"
    finally:
        silent.kill()
        silent.wait()
        survivor.stop()


def test_consumer_protocol_group_survives_a_broker_restart(odradek_broker_factory):
    from confluent_kafka.admin import AdminClient

    broker = odradek_broker_factory(overrides={**GROUP_BROKER_OVERRIDES, "group.consumer.heartbeat.interval.ms": "500"})
    bootstrap = broker.bootstrap
    produce(bootstrap, "kip848-restart", [f"a{i}".encode() for i in range(30)])
    member = ConfluentConsumer("kip848-r", bootstrap, "kip848-restart-group", "kip848-restart", None,
                               protocol="consumer")
    try:
        member.start()
        wait_for(lambda: len(member.records) == 30, 30, "the first records")
        broker.stop()
        broker.start()
        produce(bootstrap, "kip848-restart", [f"b{i}".encode() for i in range(30)])
        wait_for(lambda: len(member.records) == 60, 60, "the records written after the restart")
        assert len({v for _, _, v in member.records}) == 60, "nothing consumed twice"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups(["kip848-restart-group"])["kip848-restart-group"].result()
        assert str(described.state).lower().endswith("stable")
        assert [m.client_id for m in described.members] == ["kip848-r"]
    finally:
        member.stop()


def test_consumer_protocol_regex_subscription_follows_new_topics(odradek_broker_factory):
    broker = odradek_broker_factory(overrides={**GROUP_BROKER_OVERRIDES, "group.consumer.heartbeat.interval.ms": "500"})
    produce(broker.bootstrap, "rx-a", [b"a"] * 6)
    member = ConfluentConsumer("rx", broker.bootstrap, "rx-group", "^rx-.*", None, protocol="consumer")
    try:
        member.start()
        wait_for(lambda: len(member.records) == 6, 30, "the records of the matching topic")
        produce(broker.bootstrap, "rx-b", [b"b"] * 6)  # a new matching topic joins the subscription
        wait_for(lambda: len(member.records) == 12, 30, "the records of the new matching topic")
    finally:
        member.stop()
