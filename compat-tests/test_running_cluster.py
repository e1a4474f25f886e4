"""`odradek.testing.running_cluster`: several in-process Odradek brokers in one KRaft cluster
(issue #24, must-show 5). The docs example runs as written; real clients see every broker."""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import running_cluster

DOCS = Path(__file__).resolve().parents[1] / "docs" / "testing-fixture.md"


def test_the_docs_example_runs() -> None:
    text = DOCS.read_text()
    block = re.search(r"<!-- example: running_cluster -->\n```python\n(.*?)```", text, re.S)
    assert block is not None
    exec(compile(block.group(1), str(DOCS), "exec"), {})  # noqa: S102 - our own docs example


def test_every_broker_is_registered_and_a_group_spans_them() -> None:
    with running_cluster(brokers=3) as cluster:
        assert [b.broker.node_id for b in cluster.brokers] == [1, 2, 3]
        for broker in cluster.brokers:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            meta = admin.list_topics(timeout=10)
            assert set(meta.brokers) == {1, 2, 3}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("spread", 3, 1)])["spread"].result(30)
        errors: list[object] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True})
        for i in range(90):
            producer.produce("spread", value=f"v{i}".encode(), partition=i % 3,
                             on_delivery=lambda e, _m: e and errors.append(e))
        assert producer.flush(30) == 0 and errors == []
        consumer = Consumer({"bootstrap.servers": cluster.controller.bootstrap_servers, "group.id": "spread-group",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["spread"])
        got = []
        idle = 0
        while len(got) < 90 and idle < 40:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                idle += 1
                continue
            got.append(msg.value())
        consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(90))
        # each broker keeps only the partitions the controller placed on it
        hosted = {b.broker.node_id: sorted(p.partition for p in b.broker.log_manager.all_logs() if p.topic == "spread")
                  for b in cluster.brokers}
        assert sorted(sum(hosted.values(), [])) == [0, 1, 2]
