"""Consumer groups with real clients: a group of three (kafka-python and confluent-kafka) over six
partitions, members leaving and joining, exactly-once consumption with commits, for the eager
range assignor and for incremental cooperative-sticky rebalancing (issue #5, must-show 1).
"""

from __future__ import annotations

from collections import Counter

import pytest
from test_groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    ConfluentConsumer,
    KafkaPythonConsumer,
    ThreadedConsumer,
    produce,
    wait_for,
)

PARTITIONS = set(range(6))


def _settled(consumers: list[ThreadedConsumer]) -> bool:
    """Every partition owned by exactly one live consumer."""
    owned = [p for c in consumers for p in c.assignment]
    return len(owned) == 6 and set(owned) == PARTITIONS


def _consumed(consumers: list[ThreadedConsumer]) -> Counter:
    counts: Counter = Counter()
    for c in consumers:
        with c.lock:
            counts.update(v for _, _, v in c.records)
    return counts


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_group_of_three_rebalances_and_consumes_exactly_once(odradek_broker_factory, assignor):
    broker = odradek_broker_factory(overrides=GROUP_BROKER_OVERRIDES)
    bootstrap = broker.bootstrap
    topic = f"grp-{assignor}"
    group = f"group-{assignor}"
    produce(bootstrap, topic, [f"warmup-{i}".encode() for i in range(6)])

    members: list[ThreadedConsumer] = [
        KafkaPythonConsumer("kp-1", bootstrap, group, topic, assignor),
        ConfluentConsumer("ck-1", bootstrap, group, topic, assignor),
        KafkaPythonConsumer("kp-2", bootstrap, group, topic, assignor),
    ]
    everyone = list(members)
    try:
        for m in members:
            m.start()
        # (with group.initial.rebalance.delay.ms=0 the first generations may hold fewer members)
        wait_for(lambda: _settled(members) and all(len(m.assignment) == 2 for m in members), 30,
                 "a group of three to share six partitions two by two")

        expected: Counter = Counter(f"warmup-{i}".encode() for i in range(6))
        for phase, change in enumerate(["leave", "join", None]):
            values = [f"{phase}-{i}".encode() for i in range(60)]
            produce(bootstrap, topic, values)
            expected.update(values)
            wait_for(lambda: _consumed(everyone) == expected, 30, f"phase {phase} records consumed")
            if change == "leave":
                leaving = members.pop(1)  # the librdkafka member leaves (LeaveGroup)
                leaving.stop()
            elif change == "join":
                joining = ConfluentConsumer("ck-2", bootstrap, group, topic, assignor)
                members.append(joining)
                everyone.append(joining)
                joining.start()
            if change is not None:
                # settled = six partitions owned once, and by every member (a joiner has some)
                wait_for(lambda: _settled(members) and all(m.assignment for m in members), 30,
                         f"the group to settle after a {change}")
        counts = _consumed(everyone)
        assert counts == expected
        assert all(n == 1 for n in counts.values())
    finally:
        for m in members:
            if m.is_alive():
                m.stop()
