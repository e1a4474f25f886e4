"""Issue #26, must show 4 with several members, and an empty share group across a restart.

Three share-group members (raw clients with fixed member ids, so nothing needs masking) join a
2-partition topic one by one on a live Kafka 4.4.0 and on Odradek; then the first one leaves.
After each step ``kafka-share-groups.sh --describe --members`` (and ``--verbose``) must print the
same on both brokers: the same partitions for the same members, which is Kafka's simple assignor
down to its hash-table orders. Then every member leaves, both brokers restart, and the empty
group must be described the same (ShareGroupDescribe, ``--describe --state``, ``--describe``
with its offsets): Odradek used to lose an empty share group at its first retention check.

The assignment depends on the topic id's hash (which a broker picks at random), so both brokers
get eight candidate topics and the test uses the first name whose two ids lead Odradek's
assignor (test_share_groups_assignor.py checks it against Kafka's own) to the same assignments
for this script; the brokers' outputs are then compared as they are.
"""

from __future__ import annotations

import time
from typing import Any

from kafka_oracle import KAFKA_4_4, require_tool, run_java_tool
from test_share_groups_state import SHARE_TOOL, ShareMember, create_topic, describe, produce

from odradek.group_coordinator.share import ShareGroup
from odradek.logstore.java_hash import string_hash
from odradek.tools.client import KafkaClient

GROUP = "crew"
WORKERS = ["worker-1", "worker-2", "worker-3"]
CANDIDATES = [f"jobs-{i}" for i in range(8)]
PARTITIONS = 2
#: both brokers check retention every 2 s, so a restarted broker has run its check when described
OVERRIDES = {"offsets.retention.check.interval.ms": "2000"}


def _bucket(member_id: str) -> int:
    h = string_hash(member_id) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 15


class _Topics:
    config = None
    broker = None

    def __init__(self, topic: str, topic_id: Any) -> None:
        self.topic, self.topic_id = topic, topic_id

    def monotonic(self) -> float:
        return 0.0

    def topic_partition_count(self, name: str) -> int | None:
        return PARTITIONS if name == self.topic else None

    def _topic_id(self, name: str) -> Any:
        return self.topic_id if name == self.topic else None


def _predict(topic: str, topic_id: Any) -> list[dict[str, list[int]]]:
    """The members' targets after each step of the script, by Odradek's assignor."""
    coord = _Topics(topic, topic_id)
    group = ShareGroup("g")
    group.initialized = {topic: set(range(PARTITIONS))}
    epochs: dict[str, int] = {}
    out = []

    def beat(member: str, epoch: int, topics: list[str] | None) -> None:
        r = group.heartbeat(coord, member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics,
                            client_id=member, client_host="/127.0.0.1", topic_partitions=coord.topic_partition_count)
        epochs[member] = r.member_epoch

    for worker in WORKERS:
        beat(worker, 0, [topic])
        out.append({m: sorted(p for ps in t.values() for p in ps) for m, t in group.target.items()})
    beat(WORKERS[0], -1, None)
    beat(WORKERS[1], epochs[WORKERS[1]], None)
    out.append({m: sorted(p for ps in t.values() for p in ps) for m, t in group.target.items()})
    return out


def _topic_ids(bootstrap: str) -> dict[str, Any]:
    with KafkaClient(bootstrap) as client:
        for name in CANDIDATES:
            create_topic(client, name, PARTITIONS)
        return {name: client.topic(name, wait_s=10).topic_id for name in CANDIDATES}


def _tool(bootstrap: str, *args: str) -> list[str]:
    proc = run_java_tool(SHARE_TOOL, ["--bootstrap-server", bootstrap, *args], version=KAFKA_4_4)
    return [" ".join(line.split()) for line in (proc.stdout + proc.stderr).splitlines()
            if line.strip() and "WARN" not in line and "SLF4J" not in line]


def _settle(members: list[ShareMember], seconds: float = 2.5) -> None:
    """Heartbeat every member for a while: the 1 s assignment interval passes and each member
    takes its new target."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in members:
            m.heartbeat()
        time.sleep(0.4)


def _coordinator_masked(lines: list[str]) -> list[str]:
    # GROUP COORDINATOR (ID) STATE ...: the coordinator's address and id differ between brokers
    out = []
    for line in lines:
        words = line.split()
        if words and words[0] == GROUP and len(words) > 2:
            words[1:3] = ["*", "*"]
        out.append(" ".join(words))
    return out


def _script(broker: Any, topic: str) -> list[tuple[str, Any]]:
    """Members join one by one, the first leaves, all leave, the broker restarts."""
    seen: list[tuple[str, Any]] = []
    clients = {w: KafkaClient(broker.bootstrap, client_id=w) for w in WORKERS}
    try:
        members = []
        for i, worker in enumerate(WORKERS):
            member = ShareMember(clients[worker], GROUP, topic)
            member.member_id = worker
            time.sleep(1.1)  # past the assignment interval: the join computes a new target at once
            if i == 0:
                member.join(PARTITIONS)  # waits for the partitions' share state to be initialized
                produce(clients[worker], topic, [f"job-{n}" for n in range(6)])
            else:
                member.heartbeat()
            members.append(member)
            _settle(members)
            seen.append((f"{i + 1} members", _tool(broker.bootstrap, "--describe", "--group", GROUP, "--members")))
        seen.append(("verbose", _tool(broker.bootstrap, "--describe", "--group", GROUP, "--members", "--verbose")))
        members[0].leave()
        time.sleep(1.1)
        _settle(members[1:])
        seen.append(("after one left", _tool(broker.bootstrap, "--describe", "--group", GROUP, "--members",
                                             "--verbose")))
        for m in members[1:]:
            m.leave()
    finally:
        for c in clients.values():
            c.close()
    time.sleep(1)
    seen.append(("empty", _coordinator_masked(
        _tool(broker.bootstrap, "--describe", "--group", GROUP, "--state", "--verbose"))))
    broker.stop()
    broker.start()
    time.sleep(5)  # the restarted broker loads its groups and runs its retention check (2 s)
    deadline = time.monotonic() + 60
    with KafkaClient(broker.bootstrap) as client:
        while True:
            described = describe(client, GROUP, topic)
            groups = described["describe"]["groups"]
            if groups and groups[0]["error_code"] not in (14, 15, 16) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    seen.append(("described after restart", described["describe"]))
    seen.append(("state after restart", _coordinator_masked(
        _tool(broker.bootstrap, "--describe", "--group", GROUP, "--state", "--verbose"))))
    seen.append(("offsets after restart", _tool(broker.bootstrap, "--describe", "--group", GROUP)))
    seen.append(("list after restart", _tool(broker.bootstrap, "--list")))
    return seen


def test_describe_members_and_an_empty_group_after_restart_as_on_kafka(kafka_broker_factory, odradek_broker_factory):
    require_tool(f"kafka-{KAFKA_4_4}")
    # member ids in separate buckets of Kafka's member table: their order is the bucket order,
    # whichever heartbeat computes an assignment
    assert len({_bucket(w) for w in WORKERS}) == len(WORKERS)
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=OVERRIDES)
    odradek = odradek_broker_factory(overrides=OVERRIDES)
    k_ids, o_ids = _topic_ids(kafka.bootstrap), _topic_ids(odradek.bootstrap)
    topic = next((n for n in CANDIDATES if _predict(n, k_ids[n]) == _predict(n, o_ids[n])), None)
    assert topic is not None, "no candidate topic has the same assignments on both brokers"
    k_seen = _script(kafka, topic)
    kafka.stop()
    o_seen = _script(odradek, topic)
    odradek.stop()
    for k, o in zip(k_seen, o_seen, strict=True):
        assert o == k, (o, k)
    by_step = dict(k_seen)
    # the three members share two partitions: one of them holds both
    counts = sorted(line.split()[4] for line in by_step["3 members"] if line.startswith(GROUP))
    assert counts == ["1", "1", "2"], by_step["3 members"]
    assert by_step["described after restart"]["groups"][0]["group_state"] == "Empty"
